"""``repflow sim``: run one packet-level simulation, print its summary, write its run directory.

The configuration is built from (later wins): the schema's defaults, ``--config FILE``
(TOML, or the ``run.json`` of an earlier run), the shorthand flags (``--k``, ``--load``, ...;
see :data:`repflow.config_io.FLAGS`) and ``--set key.path=value`` overrides. Everything is
validated before the run starts and before anything is written; ``--out DIR`` is written
atomically once the run is complete.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shlex
import sys
import time
from typing import Any

from repflow import config_io
from repflow.errors import UserError


def register(subparsers: Any) -> None:
    """Adds the ``sim`` command."""
    p = subparsers.add_parser(
        "sim",
        help="run one packet-level simulation",
        description=(
            "Run one packet-level simulation. Values come from the defaults, then --config, "
            "then the flags below, then --set (later wins). Quantities take units: "
            "10ms, 2us, 1Gbps, 100KB; a bare number (10, or 0) is refused, in flags, --set "
            "and files alike. See docs/configuration.md."
        ),
    )
    p.add_argument("--config", metavar="FILE", help="run configuration (TOML, or a run.json)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override any schema field, e.g. --set tcp.max_rto=1s (repeatable)")
    config_io.add_flags(p)
    _complete_choices(p)
    config_io.one_line_errors(p)
    p.add_argument("--out", metavar="DIR",
                   help="write flows.parquet and run.json into DIR (must not exist or be empty)")
    p.add_argument("--force", action="store_true", help="replace a non-empty --out directory")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="run the network's parts (fat-tree pods) on N threads: the same "
                        "results, bit for bit, on every scheme (default 1: the sequential "
                        "engine)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress bar and no summary table")
    p.add_argument("--dump-config", action="store_true",
                   help="print the complete resolved configuration as TOML and exit")
    p.set_defaults(func=run_sim, huge_pages=True)  # fmt: skip


def core_variants(field: str) -> list[str]:
    """Every name the simulator accepts for the enumerated configuration field ``field`` (e.g.
    ``scheme.name``), as its validator lists them — so ``--help`` is never behind the build."""
    from repflow import _core

    section, key = field.split(".")
    try:
        _core.validate_config(json.dumps({section: {key: "\u0000"}}))
    except _core.ConfigError as exc:
        text = str(exc)
        if "expected one of" in text:
            return re.findall(r"`([^`]+)`", text.split("expected one of", 1)[1])
    return []


#: flag → (configuration field, help text before the list of accepted names)
_CHOICE_FLAGS = {
    "--scheme": ("scheme.name", "transport scheme"),
    "--pairs": ("workload.pairs", "host pairs"),
}


def _complete_choices(p: argparse.ArgumentParser) -> None:
    """Lists every accepted name in the help of ``--scheme`` and ``--pairs``."""
    defaults = config_io.flag_defaults()
    for action in p._actions:
        for flag in action.option_strings:
            if flag in _CHOICE_FLAGS:
                field, what = _CHOICE_FLAGS[flag]
                names = core_variants(field)
                if names:
                    action.help = f"{what}: {', '.join(names)} [{field}]"
                    if field in defaults:
                        action.help += f" (default: {defaults[field]})"


def resolve_args(args: argparse.Namespace) -> dict[str, Any]:
    """The validated configuration that ``args`` describe (raises :class:`UserError`)."""
    cfg, origins = config_io.build_config_with_origins(
        args.config, config_io.flag_overrides(args), args.sets, config_io.flag_texts(args)
    )
    return config_io.validate(cfg, flag_hints=True, origins=origins)


class SimProgress:
    """A tqdm progress callback: simulated time during arrivals, flows finished during drain."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.bar: Any = None
        self.phase = ""

    def _open(self, phase: str, total: float, initial: float, unit: str, desc: str) -> None:
        from repflow import progress

        self.close()
        self.phase = phase
        # `initial`: progress made before this bar opened does not count towards its rate.
        # Not a terminal (a log file): plain lines now and then instead of `\r` frames.
        self.bar = progress.bar(total=total, initial=initial, unit=unit, desc=desc,
                                file=sys.stderr, leave=False, dynamic_ncols=True,
                                mininterval=0.25)  # fmt: skip

    def __call__(self, sim_time: float, duration: float, started: int, finished: int,
                 events: int) -> bool:  # fmt: skip
        if not self.enabled:
            return True
        if sim_time < duration:
            if self.phase != "arrivals":
                self._open("arrivals", round(duration * 1e3, 2), round(sim_time * 1e3, 2),
                           "ms", "arrivals (sim ms)")  # fmt: skip
            self.bar.n = min(round(sim_time * 1e3, 2), self.bar.total)
        else:
            if self.phase != "drain":
                self._open("drain", max(started, 1), finished, "flow", "drain (flows done)")
            self.bar.total = max(started, 1)
            self.bar.n = finished
        self.bar.set_postfix(flows=started, done=finished, events=_si(events), refresh=False)
        self.bar.refresh()
        return True

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _si(v: float) -> str:
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.2f}{suffix}"
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.2f}"


def _ms(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v * 1e3:.3f}"


def _x(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.2f}"


def format_summary(summary: dict[str, Any], counters: dict[str, Any],
                   peak_memory_bytes: int | None = None, trace: bool = False,
                   huge_pages: bool = False) -> str:  # fmt: skip
    """The human-readable summary table of a run (``trace``: the flows came from a trace, so
    there is no offered load to report; ``huge_pages``: the process's heap asked for huge
    pages)."""
    head = (f"{'flow size':<14}{'count':>8}{'done':>8} | {'FCT ms: mean':>12}{'p50':>10}"
            f"{'p99':>10}{'p99.9':>10} | {'slowdown: mean':>14}{'p50':>8}{'p99':>8}"
            f"{'p99.9':>8}")  # fmt: skip
    from repflow.records import p99_min_flows, thin_bins

    lines = [head, "-" * len(head)]
    thin = dict(thin_bins(summary))
    for b in summary.get("bins", []):
        mark = " ⚠" if b["bin"] in thin else ""
        lines.append(
            f"{b['bin']:<14}{b['count']:>8}{b.get('finished', b['count']):>8} | "
            f"{_ms(b['fct_mean']):>12}{_ms(b['fct_p50']):>10}{_ms(b['fct_p99']):>10}"
            f"{_ms(b['fct_p999']):>10} | {_x(b['slowdown_mean']):>14}{_x(b['slowdown_p50']):>8}"
            f"{_x(b['slowdown_p99']):>8}{_x(b['slowdown_p999']):>8}{mark}"
        )
    if thin:
        lines.append(
            f"⚠ too few flows for a percentile: the p99 and p99.9 of {', '.join(thin)} rest on "
            f"fewer than {p99_min_flows():,} finished flows ({min(thin.values()):,} at fewest; "
            "the top 1 % is ten flows or fewer): run longer or at a higher load "
            "(docs/metrics.md)"
        )
    c = counters
    lines.append("")
    lines.append(
        f"flows {c.get('flows', 0)} (unfinished {summary.get('unfinished', 0)}), "
        f"connections {c.get('connections', 0)}, "
        f"replication overhead {100 * (summary.get('overhead') or 0.0):.2f} % of flow bytes, "
        + (
            "flows replayed from a trace"
            if trace
            else f"offered load {c.get('offered_load', float('nan')):.3f}"
        )
    )
    lines.append(
        f"drops {c.get('drops', 0)} (switch {c.get('switch_drops', 0)}, host "
        f"{c.get('host_drops', 0)}), largest switch queue {c.get('max_switch_queue', 0)} packets"
    )
    lines.append(
        f"events {_si(c.get('events', 0))}, packet-hops {_si(c.get('packet_hops', 0))}, "
        f"simulated {c.get('sim_time', 0.0) * 1e3:.3f} ms in {c.get('wall_time', 0.0):.2f} s wall: "
        f"{_si(c.get('events_per_sec', 0.0))} events/s, "
        f"{_si(c.get('packet_hops_per_sec', 0.0))} packet-hops/s"
    )
    if peak_memory_bytes is not None:
        pages = "heap on huge pages" if huge_pages else "heap on the system's pages"
        lines.append(f"peak memory {peak_memory_bytes / 2**20:.1f} MiB (process max RSS; {pages})")
    return "\n".join(lines)


def run_sim(args: argparse.Namespace) -> int:
    """Handler of ``repflow sim``."""
    from repflow import api

    cfg = resolve_args(args)
    if args.dump_config:
        shown = dict(cfg)
        shown["workload"] = {k: v for k, v in cfg["workload"].items() if k != "cdf_text"}
        sys.stdout.write(config_io.dumps_toml(shown))
        return 0
    out_dir = None
    if args.out:
        from repflow.cli.outdir import check_writable
        from repflow.records import check_out_dir

        out_dir = check_out_dir(args.out, args.force)
        check_writable(out_dir)  # before the simulation, not after it
    progress = SimProgress(enabled=not args.quiet)
    t0 = time.perf_counter()
    try:
        result = api.simulate(cfg, progress, threads=args.threads)
    finally:
        progress.close()
    elapsed = time.perf_counter() - t0
    result.metadata["command"] = shlex.join(["repflow", *sys.argv[1:]]) if sys.argv else ""
    result.metadata["elapsed_seconds"] = elapsed
    result.metadata["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if out_dir is not None:
        try:
            written = result.save(out_dir, force=args.force)
        except OSError as exc:
            raise UserError(f"--out: cannot write '{out_dir}': {exc}") from None
    if not args.quiet:
        trace = bool((cfg.get("workload") or {}).get("trace"))
        print(format_summary(result.summary_record, result.counters,
                             result.metadata.get("peak_memory_bytes"), trace=trace,
                             huge_pages=bool(result.metadata.get("huge_pages"))))  # fmt: skip
        if out_dir is not None:
            print(f"wrote {written}/flows.parquet and run.json")
    return 0
