"""Runs ``repflow serve`` / ``repflow load`` inside a host namespace, lighter and in step.

``python -m repflow.testbed.hostcmd [--ready FILE --go FILE] -- load ARGS...`` behaves exactly
like ``repflow load ARGS...`` (same parser, same code: only the ``net`` command module is
registered, so unrelated commands' imports are skipped — sixteen hosts start much faster on a
small machine). With ``--ready``/``--go`` it parses its arguments and imports everything first,
creates the ready file, and waits for the go file before generating traffic (for ``load``: after
its client is made and, with ``--warm``, its SmartRep paths probed), so every host's open-loop
generator starts within a few milliseconds of the others.

For ``load`` it also writes ``errors.json`` into the run directory: the index and the library's
error text of every flow that did not finish (``repflow load``'s records keep only the
simulator's columns), so the testbed can tell failed flows (e.g. every copy hit the flow
timeout) from flows cut off by the end of the run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

from repflow.errors import UserError


def _parser() -> argparse.ArgumentParser:
    from repflow.cli import Parser

    parser = Parser(prog="repflow")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    importlib.import_module("repflow.cli.net").register(sub)
    return parser


def _record_errors() -> dict[str, list]:
    """Has ``repflow load`` hand us the error of every flow it turns into records: fills the
    returned dict with ``index`` and ``error`` lists (only flows with an error)."""
    import repflow.net as net

    seen: dict[str, list] = {}
    make_records = net.load_records

    def recording(raw, sched, **kw):
        pairs = [(int(i), e) for i, e in zip(raw["index"], raw["error"], strict=True) if e]
        seen["index"] = [i for i, _ in pairs]
        seen["error"] = [e for _, e in pairs]
        return make_records(raw, sched, **kw)

    net.load_records = recording
    return seen


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, rest = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else ([], argv)
    )
    opts = argparse.ArgumentParser(
        prog="python -m repflow.testbed.hostcmd", allow_abbrev=False
    )
    opts.add_argument("--ready", type=Path)
    opts.add_argument("--go", type=Path)
    opts.add_argument("--wait", type=float, default=300.0, help="longest wait for --go, s")
    o = opts.parse_args(own)
    args = _parser().parse_args(rest)

    def barrier() -> None:
        if o.ready is not None:
            o.ready.touch()
        if o.go is not None:
            deadline = time.monotonic() + o.wait
            while not o.go.exists():
                if time.monotonic() > deadline:
                    raise UserError(f"no start signal ({o.go}) within {o.wait:g} s")
                time.sleep(0.005)

    try:
        if args.command == "load":
            # `load` calls it once its client is ready (after a SmartRep warm-up)
            args.before_start = barrier
            errors = _record_errors()
            status = int(args.func(args) or 0)
            if errors:
                out = Path(args.out) / "errors.json"
                out.write_text(json.dumps(errors))
            return status
        barrier()
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"repflow: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
