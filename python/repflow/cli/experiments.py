"""``repflow reproduce``, ``repflow sweep`` and ``repflow report``: run experiment specs and
build their reports (see docs/experiments.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from repflow.errors import UserError

QUICK_SPEC = "repflow-paper-quick"
FULL_SPEC = "repflow-paper"


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out", metavar="DIR", help="result directory (default: runs/<experiment name>)"
    )
    p.add_argument(
        "--executor", choices=("local", "ray"), default="local",
        help="local worker processes (default) or Ray",
    )  # fmt: skip
    p.add_argument(
        "--address", metavar="auto|HOST:PORT",
        help="Ray cluster to use (default with --executor ray: a local Ray started on demand)",
    )  # fmt: skip
    p.add_argument(
        "-j", "--jobs", type=int, metavar="N",
        help="simulations at once (default: one per core, or the Ray cluster's CPUs)",
    )  # fmt: skip
    p.add_argument(
        "--retry-failed", action="store_true", help="recompute points whose simulation failed"
    )
    from repflow.cli import DeprecatedStoreTrue

    p.add_argument(
        "-q", "--quiet", "--no-progress", dest="quiet", action=DeprecatedStoreTrue,
        old=("--no-progress",),
        help="no live progress bar (--no-progress: deprecated old name)",
    )  # fmt: skip
    p.add_argument(
        "--skip-unavailable", action="store_true",
        help="run the spec without the schemes this build lacks (default: refuse the sweep)",
    )  # fmt: skip
    p.add_argument(
        "--dry-run", action="store_true",
        help="only show what would be computed and how long it should take",
    )  # fmt: skip


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the ``reproduce``, ``sweep`` and ``report`` commands."""
    p = subparsers.add_parser(
        "reproduce",
        help="run the RepFlow paper's simulation study and build its report",
        description="Runs the RepFlow paper's NS-3 study (Figs. 8–12, Table III) in the "
        "simulator, resuming from whatever the result directory already holds, then builds "
        "figures and a report that compares the results with the papers' claims.",
    )
    p.add_argument(
        "--quick", action="store_true",
        help=f"reduced but faithful version (experiments/{QUICK_SPEC}.toml), minutes not days",
    )  # fmt: skip
    p.add_argument("--spec", metavar="FILE", help="run this spec instead of the paper's")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask before a long run")
    _add_run_options(p)
    p.set_defaults(func=cmd_reproduce)

    s = subparsers.add_parser(
        "sweep",
        help="run an experiment spec (resumable), then build its report",
        description="Runs every grid point of SPEC that the result directory does not hold yet.",
    )
    s.add_argument("spec", metavar="SPEC", help="experiment spec (TOML), e.g. experiments/x.toml")
    s.add_argument("--no-report", action="store_true", help="only compute, build no report")
    _add_run_options(s)
    s.set_defaults(func=cmd_sweep)

    r = subparsers.add_parser(
        "report",
        help="rebuild figures and the report of a stored sweep (simulates nothing)",
    )
    r.add_argument("dir", metavar="DIR", help="result directory of a sweep")
    r.add_argument(
        "-q", "--quiet", action="store_true", help="print no progress, only the result"
    )
    r.set_defaults(func=cmd_report)


def _confirm_long(args: argparse.Namespace):
    from repflow.experiments.units import fmt_seconds

    def ask(plan, expected: float, workers: int) -> bool:  # noqa: ANN001
        todo = len(plan.todo(args.retry_failed))
        basis = (
            "calibrated on the points already stored"
            if plan.calibration != 1.0
            else "from the simulator's measured throughput on a 2-core machine"
        )
        print(
            f"reproduce: {todo} simulations to run on {workers} workers; expected duration "
            f"~{fmt_seconds(expected)} ({basis}). Interrupt at any time: a rerun resumes.",
            file=sys.stderr,
        )
        if args.yes:
            return True
        if not sys.stdin.isatty():
            raise UserError(
                f"the full study takes ~{fmt_seconds(expected)}; rerun with --yes to start it "
                "(or use --quick)"
            )
        answer = input("start? [y/N] ").strip().lower()
        return answer in ("y", "yes")

    return ask


def _run(spec_path: Path, args: argparse.Namespace, confirm=None, report: bool = True) -> int:  # noqa: ANN001
    from repflow.cli.outdir import prepare_out
    from repflow.experiments import build_report, load_spec, run_sweep

    spec = load_spec(spec_path)
    out = Path(args.out) if args.out else Path("runs") / spec.name
    if args.jobs is not None and args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    prepare_out(
        out, command="sweep", owned=lambda d: _same_spec(d, spec.name),
        hint="a sweep resumes only a directory of the same spec: choose another directory",
    )  # fmt: skip
    if args.dry_run:
        return _dry_run(spec, out, args)
    summary = run_sweep(
        spec, out, executor=args.executor, jobs=args.jobs, address=args.address,
        retry_failed=args.retry_failed, progress=not args.quiet, confirm=confirm,
        skip_unavailable=args.skip_unavailable,
    )  # fmt: skip
    print(summary.line(), file=sys.stderr)
    if not report:
        return 0
    rep = build_report(out, progress=_progress(args))
    _print_report(rep)
    return 1 if summary.failed else 0


def _same_spec(d: Path, name: str) -> bool:
    import json

    try:
        return json.loads((d / "sweep.json").read_text(encoding="utf-8")).get("name") == name
    except (OSError, ValueError, AttributeError):
        return False


def _progress(args: argparse.Namespace):
    """A one-line-per-step progress printer on stderr (None with --quiet)."""
    if getattr(args, "quiet", False):
        return None

    def say(msg: str) -> None:
        print(f"report: {msg}", file=sys.stderr, flush=True)

    return say


def _dry_run(spec, out: Path, args: argparse.Namespace) -> int:  # noqa: ANN001
    import os

    from repflow.experiments import Store, plan_sweep
    from repflow.experiments.sweep import estimate_wall
    from repflow.experiments.units import fmt_seconds

    plan = plan_sweep(spec, Store(out))
    todo = plan.todo(args.retry_failed)
    workers = args.jobs or (os.cpu_count() or 1)
    if args.executor == "ray" and not args.jobs:
        workers = 2 if not args.address else workers
    print(f"{spec.name}: {len(plan.points)} points in {out}: {plan.count('done')} stored, "
          f"{plan.count('failed')} failed, {len(todo)} to compute")  # fmt: skip
    for label, why in plan.unavailable.items():
        print(f"  scheme {label}: not in this build ({why})")
    total = sum(p.estimate for p in todo)
    print(f"expected: ~{fmt_seconds(estimate_wall(todo, workers))} on {workers} workers "
          f"({fmt_seconds(total)} of single-core simulation)")  # fmt: skip
    return 0


def _print_report(rep) -> None:  # noqa: ANN001
    print(f"report: {rep.html}")
    print(f"        {rep.markdown}")
    print(f"        {len(rep.figures)} figures in {rep.html.parent / 'figures'}")
    print("claims:")
    for c in rep.claims:
        print(f"  {c.claim.id:6} {c.verdict:15} {c.claim.text}")
        if c.verdict != "not measured":
            print(f"  {'':6} {'':15} measured: {c.measured}")


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``repflow reproduce [--quick]``."""
    from repflow.experiments import find_builtin_spec

    if args.spec:
        path = Path(args.spec)
    else:
        path = find_builtin_spec(QUICK_SPEC if args.quick else FULL_SPEC)
    confirm = None if args.quick else _confirm_long(args)
    return _run(path, args, confirm=confirm)


def cmd_sweep(args: argparse.Namespace) -> int:
    """``repflow sweep SPEC``."""
    return _run(Path(args.spec), args, report=not args.no_report)


def cmd_report(args: argparse.Namespace) -> int:
    """``repflow report DIR``."""
    from repflow.cli.outdir import check_writable
    from repflow.experiments import build_report

    d = Path(args.dir)
    if not d.is_dir():
        raise UserError(f"{d}: no such directory")
    if not (d / "sweep.json").is_file():
        raise UserError(
            f"{d}: not an experiment directory (no sweep.json); run `repflow sweep SPEC --out "
            f"{d}` first"
        )
    check_writable(d, "DIR")
    _print_report(build_report(d, progress=_progress(args)))
    return 0
