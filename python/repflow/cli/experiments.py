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
    from repflow.experiments.papers import paper_ids

    p = subparsers.add_parser(
        "reproduce",
        help="run the seed papers' studies under two TCP profiles and build one report",
        description="Runs every study of the chosen seed papers (default: all five) in the "
        "simulator, each under the TCP profile the paper most likely used and under the "
        "data-center profile dc, resuming from whatever the result directory already holds; "
        "then builds each study's figures and report and one report that sets every published "
        "claim's verdict under both profiles side by side.",
    )
    p.add_argument(
        "papers", nargs="*", metavar="PAPER",
        help=f"papers to reproduce (default: all): {', '.join(paper_ids())}",
    )  # fmt: skip
    p.add_argument(
        "--quick", action="store_true",
        help="the studies' reduced but faithful forms: minutes, not days",
    )  # fmt: skip
    p.add_argument(
        "--profiles", choices=("both", "paper", "dc"), default="both",
        help="run each study under the paper's TCP profile, dc, or both (default)",
    )  # fmt: skip
    p.add_argument(
        "--seed-offset", type=int, default=0, metavar="K",
        help="shift every seed of every study by K (K = 100: seeds disjoint from the default "
        "run's; results go to <default dir>-seed+K unless --out is given)",
    )  # fmt: skip
    p.add_argument(
        "--budget", metavar="WORK",
        help="after the first pass, add seeds to the points of open claims until every claim "
        "is decided, cannot be decided at this design, or WORK is spent; WORK is simulation "
        "work in reference core-time (the cost model of --dry-run, the same on every "
        "machine), e.g. 60min; a larger budget on the same directory continues a smaller one "
        "(docs/experiments.md)",
    )  # fmt: skip
    p.add_argument(
        "--budget-wall", metavar="DURATION",
        help="with --budget: start no new round after this much wall time (e.g. 30min); "
        "verdicts then depend on the machine's speed",
    )  # fmt: skip
    p.add_argument("--spec", metavar="FILE", help="run only this spec (one sweep, one report)")
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
    r.add_argument("dir", metavar="DIR",
                   help="result directory of a sweep or of `repflow reproduce`")
    r.add_argument("--out", metavar="OUT", default=None,
                   help="write the rebuilt report (figures, report.html, report.md, "
                        "summary.csv; for a reproduce directory every study's and the "
                        "combined one, in DIR's layout) into OUT, leaving DIR as it is "
                        "(default: rebuild in place)")  # fmt: skip
    r.add_argument(
        "-q", "--quiet", action="store_true", help="print no progress, only the result"
    )
    r.set_defaults(func=cmd_report)


def _confirm_long(args: argparse.Namespace):
    from repflow.units import fmt_seconds

    def ask(plan, expected: float, workers: int) -> bool:  # noqa: ANN001
        todo = len(plan.todo(args.retry_failed))
        basis = {
            "store": "calibrated on the points already stored",
            "probe": f"the cost model × {plan.calibration:.2f}, this machine's speed now",
        }.get(plan.basis, "from the simulator's measured throughput on a 2-core machine")
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
    from repflow.units import fmt_seconds

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
    expected = estimate_wall(todo, workers)
    print(f"expected: ~{fmt_seconds(expected)} on {workers} workers "
          f"({fmt_seconds(total)} of single-core simulation)")  # fmt: skip
    _print_workers_needed(todo, expected)
    return 0


def _print_workers_needed(todo, expected: float) -> None:  # noqa: ANN001
    """For a sweep expected to take more than an hour: how many workers would finish it in
    one hour and in two (for a Ray cluster, `--executor ray --address`)."""
    from repflow.experiments.sweep import workers_for

    if expected <= 3600:
        return
    need = []
    for hours in (1, 2):
        n = workers_for(todo, hours * 3600.0)
        need.append(f"{n} workers for {hours} h" if n else f"no number of workers for {hours} h")
    print(f"at this estimate: {', '.join(need)} (a Ray cluster: --executor ray --address)")


def _thin_line(summary_csv: Path) -> str | None:
    """The warning of a report whose short-flow p99s rest on too few flows (as its Run table
    says), or None."""
    import pandas as pd

    from repflow.experiments.analysis import P99_MIN_FLOWS, thin_p99_rows

    try:
        agg = pd.read_csv(summary_csv)
    except (OSError, ValueError):
        return None
    thin = thin_p99_rows(agg)
    if not len(thin):
        return None
    return (f"⚠ too few flows for a percentile: {len(thin)} of {len(agg)} short-flow p99s rest "
            f"on fewer than {P99_MIN_FLOWS:,} flows (fewest: "
            f"{int(thin['short_p99_flows'].min()):,}; marked ⚠ in the report)")  # fmt: skip


def _print_report(rep) -> None:  # noqa: ANN001
    print(f"report: {rep.html}")
    print(f"        {rep.markdown}")
    print(f"        {len(rep.figures)} figures in {rep.html.parent / 'figures'}")
    thin = _thin_line(rep.html.parent / "summary.csv")
    if thin:
        print(thin)
    claims = declared_claims(rep)
    if not claims:
        return  # the spec declares no claim scenario: no claims section
    print("claims:")
    for c in claims:
        print(f"  {c.claim.id:6} {c.verdict:15} {c.claim.text}")
        if c.verdict != "not measured":
            print(f"  {'':6} {'':15} measured: {c.measured}")


def declared_claims(rep) -> list:  # noqa: ANN001
    """The claims of the scenarios the report's spec declares (``[experiment] claims``): the
    others belong to other studies and are not this sweep's to print."""
    import json

    try:
        sweep = json.loads((rep.html.parent / "sweep.json").read_text(encoding="utf-8"))
        scenarios = set((sweep.get("spec", {}).get("extra") or {}).get("claims", []))
    except (OSError, ValueError, AttributeError):
        return list(rep.claims)
    return [c for c in rep.claims if c.claim.scenario in scenarios]


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``repflow reproduce [PAPER ...] [--quick] [--profiles both|paper|dc]``."""
    if args.spec:
        if args.papers:
            raise UserError("PAPER and --spec exclude each other: --spec runs one spec")
        if args.seed_offset:
            raise UserError("--seed-offset shifts the papers' studies; with --spec, set the "
                            "seeds in the spec's [grid] seed")  # fmt: skip
        if args.budget is not None:
            raise UserError("--budget spends its work on the papers' claims; it does not "
                            "combine with --spec")  # fmt: skip
        confirm = None if args.quick else _confirm_long(args)
        return _run(Path(args.spec), args, confirm=confirm)
    return _reproduce_papers(args)


def _reproduce_papers(args: argparse.Namespace) -> int:
    import os
    import time

    from repflow.cli.outdir import prepare_out
    from repflow.experiments import Store, plan_sweep, run_sweep
    from repflow.experiments.papers import PAPERS, find_paper
    from repflow.experiments.reproduce import owned, plan_runs, run_all, write_marker
    from repflow.experiments.sweep import estimate_wall
    from repflow.experiments.uptodate import BackgroundReports, current_claims
    from repflow.units import fmt_seconds

    papers = [find_paper(p) for p in dict.fromkeys(args.papers)] if args.papers else list(PAPERS)
    if args.jobs is not None and args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    if args.seed_offset < 0:
        raise UserError(f"--seed-offset must be 0 or more, got {args.seed_offset}")
    default = "runs/reproduce-quick" if args.quick else "runs/reproduce"
    if args.seed_offset:
        default += f"-seed+{args.seed_offset}"
    root = Path(args.out or default)
    prepare_out(
        root, command="reproduce", owned=owned,
        hint="reproduce resumes only a directory it made: choose another directory",
    )  # fmt: skip
    budget_work, wall_limit = _budget_args(args)
    runs = plan_runs(papers, args.quick, args.profiles, root, args.seed_offset)
    bases, old = {}, None
    if budget_work is not None:
        from repflow.experiments import budget as bd

        # a ledger of an earlier budgeted run: its studies start where it left them (their
        # points are stored, their reports up to date), and its rounds are not replayed
        old = bd.Ledger.read(root)
        for r in runs:
            if r.spec is not None:
                r.spec = bd.with_budget(r.spec)
                bases[(r.spec_name, r.profile)] = r.spec
                if old is not None and old.rounds:
                    extra = bd.replayed_extra(old.rounds, r.spec_name, r.profile,
                                              len(bd.base_seeds(r.spec)))  # fmt: skip
                    r.spec = bd.extend_spec(r.spec, extra)
    all_todo, lines = [], []
    for r in runs:
        if r.spec is None:
            lines.append(f"{r.spec_name}: not in this tree ({r.missing})")
            continue
        plan = plan_sweep(r.spec, Store(r.out))
        todo = plan.todo(args.retry_failed)
        if plan.unavailable and not args.skip_unavailable:
            label, why = next(iter(plan.unavailable.items()))
            raise UserError(f"{r.spec_name}: scheme {label!r}: {why}; pass --skip-unavailable "
                            "to run the other schemes without it")  # fmt: skip
        all_todo += todo
        lines.append(f"{r.spec_name} under {r.profile}: {len(plan.points)} points, "
                     f"{plan.count('done')} stored, {len(todo)} to compute")  # fmt: skip
    workers = args.jobs or (os.cpu_count() or 1)
    expected = estimate_wall(all_todo, workers)
    if args.dry_run:
        print("\n".join(lines))
        print(f"expected: ~{fmt_seconds(expected)} on {workers} workers "
              f"({fmt_seconds(sum(p.estimate for p in all_todo))} of single-core simulation)")
        _print_workers_needed(all_todo, expected)
        if budget_work is not None:
            calib = _calibration(runs)
            print(f"then up to {fmt_seconds(budget_work)} of work (reference core-time) on the "
                  f"points of open claims: ~{fmt_seconds(budget_work * calib / workers)} on "
                  f"{workers} workers (the cost model × {calib:.2f}, calibrated on the points "
                  "stored)")  # fmt: skip
        return 0
    if not args.quick:
        print(f"reproduce: {len(runs)} sweeps; expected duration ~{fmt_seconds(expected)} on "
              f"{workers} workers. Interrupt at any time: a rerun resumes.",
              file=sys.stderr)  # fmt: skip
        if not args.yes:
            if not sys.stdin.isatty():
                raise UserError(f"the full studies take ~{fmt_seconds(expected)}; "
                                "rerun with --yes to start them (or use --quick)")  # fmt: skip
            if input("start? [y/N] ").strip().lower() not in ("y", "yes"):
                raise UserError("aborted: nothing was computed")
    write_marker(root, runs, args.quick, args.profiles, args.seed_offset,
                 budget=args.budget if budget_work is not None else None)
    say = _progress(args)
    reports = BackgroundReports(say)

    def sweep(r) -> None:  # noqa: ANN001
        print(f"reproduce: {r.paper.id}: {r.spec_name} under tcp.profile = {r.profile}",
              file=sys.stderr)  # fmt: skip
        summary = run_sweep(
            r.spec, r.out, executor=args.executor, jobs=args.jobs, address=args.address,
            retry_failed=args.retry_failed, progress=not args.quiet,
            skip_unavailable=args.skip_unavailable,
        )  # fmt: skip
        print(summary.line(), file=sys.stderr)
        # Nothing computed and the report current: its verdicts, not a redraw (issue 39).
        claims = None if summary.computed > 0 else current_claims(r.out)
        if claims is not None:
            if say is not None:
                say("up to date (nothing changed since it was built): not redrawn")
            r.claims = claims
        else:  # drawn while the next study computes
            reports.submit(r)

    t_start = time.monotonic()
    md, html_path, rows = run_all(runs, root, quick=args.quick, sweep=sweep, reports=reports)
    if budget_work is not None:
        md, html_path, rows = _spend_budget(runs, root, args, budget_work, wall_limit, t_start,
                                            bases, old)  # fmt: skip
    _print_combined(rows)
    failed = [r for r in runs if r.error]
    for r in failed:
        print(f"reproduce: {r.spec_name} under {r.profile} failed: {r.error}", file=sys.stderr)
    print(f"report: {html_path}\n        {md}")
    return 1 if failed else 0


def _budget_args(args: argparse.Namespace) -> tuple[float | None, float | None]:
    """``--budget`` and ``--budget-wall`` in seconds (None: not given)."""
    from repflow.units import seconds

    def parse(flag: str, text: str | None) -> float | None:
        if text is None:
            return None
        try:
            v = float(seconds(text))
        except ValueError as exc:
            raise UserError(f"{flag}: {exc}; give a duration such as 60min or 1800s") from None
        if v <= 0:
            raise UserError(f"{flag}: must be more than 0, got {text!r}")
        return v

    work = parse("--budget", args.budget)
    wall = parse("--budget-wall", args.budget_wall)
    if wall is not None and work is None:
        raise UserError("--budget-wall limits a --budget run: give --budget too")
    return work, wall


def _spend_budget(runs, root: Path, args: argparse.Namespace, budget_work: float,  # noqa: ANN001
                  wall_limit: float | None, t_start: float, bases: dict,
                  old) -> tuple:  # noqa: ANN001
    """The rounds of ``--budget`` after the first pass, then the final reports; ``old``: the
    ledger of an earlier budgeted run of ``root`` (its studies already carry its extension)."""
    import time

    from repflow.experiments import budget as bd
    from repflow.experiments.executors import make_executor
    from repflow.experiments.report import sweep_claims
    from repflow.experiments.reproduce import record_walls, write_report
    from repflow.experiments.sweep import run_sweep
    from repflow.experiments.uptodate import BackgroundReports, current_claims
    from repflow.progress import bar as progress_bar
    from repflow.units import fmt_seconds

    say = _progress(args)
    studies, by_key = [], {}
    for r in runs:
        if r.spec is None or r.missing or r.error or not r.claims:
            continue
        base = bases.get((r.spec_name, r.profile), r.spec)
        st = bd.Study(r.spec_name, r.profile, base, r.claims)
        studies.append(st)
        by_key[(r.spec_name, r.profile)] = r
    resumed = old is not None and bool(old.rounds)
    ledger = bd.Ledger(budget_work)
    if resumed:
        ledger.rounds, ledger.paths = old.rounds, old.paths
        ledger.spent, ledger.stops = old.spent, old.stops
        for st in studies:
            st.extra = bd.replayed_extra(old.rounds, st.spec_name, st.profile, st.seeds0)
    ledger.first_pass = sum(cost * st.seeds0 for st in studies
                            for _cfg, cost in st.grid.cells.values())  # fmt: skip
    ex = make_executor(args.executor, jobs=args.jobs, address=args.address)
    calib = _calibration(runs)
    print(f"reproduce: budget {fmt_seconds(budget_work)} of work (reference core-time) for the "
          f"points of open claims, at most ~{fmt_seconds(budget_work * calib / ex.workers)} "
          f"on {ex.workers} workers (the cost model × {calib:.2f}, calibrated on the points "
          f"stored); intervals at alpha {bd.ALPHA:g} per look ({bd.LOOKS} looks at most)",
          file=sys.stderr)  # fmt: skip
    bar = progress_bar(total=round(budget_work), unit="work-s", desc="budget",
                       disable=args.quiet, dynamic_ncols=True, file=sys.stderr)  # fmt: skip
    done = [0.0]

    def simulate(st, spec) -> None:  # noqa: ANN001
        r = by_key[(st.spec_name, st.profile)]
        r.spec = spec
        summary = run_sweep(spec, r.out, executor=ex, retry_failed=args.retry_failed,
                            progress=False, skip_unavailable=args.skip_unavailable)  # fmt: skip
        bar.write(f"reproduce: {st.spec_name} under {st.profile}: {summary.line()}",
                  file=sys.stderr)  # fmt: skip

    def evaluate(st, spec) -> list:  # noqa: ANN001
        return sweep_claims(by_key[(st.spec_name, st.profile)].out)

    def progress(spent: float) -> None:
        bar.update(max(0, round(spent) - round(done[0])))
        done[0] = spent

    def out_of_time() -> bool:
        return wall_limit is not None and time.monotonic() - t_start > wall_limit

    try:
        ledger = bd.run(studies, ledger, root, simulate=simulate, evaluate=evaluate,
                        out_of_time=out_of_time, say=lambda m: bar.write(f"budget: {m}",
                                                                          file=sys.stderr),
                        progress=progress, resumed=resumed)  # fmt: skip
    finally:
        bar.close()
        ex.close()
    touched = dict.fromkeys((a.spec_name, a.profile) for rnd in ledger.rounds for a in rnd
                            if a.taken and (a.spec_name, a.profile) in by_key)  # fmt: skip
    reports = BackgroundReports(say)
    try:
        for k in touched:
            r = by_key[k]
            claims = current_claims(r.out)
            if claims is None:  # extended since its report was drawn
                reports.submit(r)
            else:
                r.claims = claims
    finally:
        reports.wait()
    wall = time.monotonic() - t_start
    ledger.wall = wall
    ledger.write(root)
    record_walls(root, runs, wall)
    print(f"reproduce: {bd.summary_line(ledger)}", file=sys.stderr)
    md, h = write_report(root, runs, args.quick, wall)
    from repflow.experiments.reproduce import claim_rows

    return md, h, claim_rows(runs)


def _calibration(runs) -> float:  # noqa: ANN001
    """Measured single-core time of the points the runs have stored over their work in budget
    units (1 when nothing is stored): what one second of work takes on this machine."""
    from repflow.experiments import Store, plan_sweep
    from repflow.experiments.budget import work

    measured = modelled = 0.0
    for r in runs:
        if r.spec is None or r.missing or r.error:
            continue
        try:
            store = Store(r.out)
            plan = plan_sweep(r.spec, store)
        except UserError:
            continue
        for p in plan.points:
            t = store.read_timing(p.key) if p.status == "done" else None
            if t and t.get("wall_seconds"):
                measured += float(t["wall_seconds"])
                modelled += work(p.config)
    return measured / modelled if measured > 0 and modelled > 0 else 1.0


def _print_combined(rows) -> None:  # noqa: ANN001
    """The claims table of the combined report, on the terminal."""
    from repflow.experiments import verdicts as vdx

    def under_dc(r):  # noqa: ANN001, ANN202
        return r.under_paper if r.paper_profile == "dc" else r.under_dc

    for label, pick in (("the papers' profiles", lambda r: r.under_paper), ("dc", under_dc)):
        verdicts = [pick(r).verdict for r in rows if pick(r) is not None]
        if not verdicts:
            print(f"claims under {label}: not run")
            continue
        print(f"claims under {label}: {vdx.headline_line(vdx.headline(verdicts))}")
    print("claims: verdict under the paper's profile / under dc")
    for row in rows:
        vp = row.under_paper.verdict if row.under_paper else "-"
        vd = (row.under_dc.verdict if row.under_dc
              else "(= paper's, dc)" if row.paper_profile == "dc" else "not run")
        print(f"  {row.claim.id:6} {row.paper_profile:9} {vp:33} / {vd:33} {row.claim.text}")


def cmd_sweep(args: argparse.Namespace) -> int:
    """``repflow sweep SPEC``."""
    return _run(Path(args.spec), args, report=not args.no_report)


def _out_of(args: argparse.Namespace, d: Path) -> Path | None:
    """``--out`` of ``repflow report``: None to rebuild in place (also when OUT is DIR)."""
    from repflow.cli.outdir import check_writable

    if args.out is None:
        return None
    out = Path(args.out)
    if out.resolve() == d.resolve():
        return None
    check_writable(out, "--out")
    return out


def cmd_report(args: argparse.Namespace) -> int:
    """``repflow report DIR [--out OUT]``."""
    from repflow.cli.outdir import check_writable
    from repflow.experiments import build_report

    d = Path(args.dir)
    if not d.is_dir():
        raise UserError(f"{d}: no such directory")
    if not (d / "sweep.json").is_file() and (d / "reproduce.json").is_file():
        return _report_combined(d, args)
    if not (d / "sweep.json").is_file():
        raise UserError(
            f"{d}: not an experiment directory (no sweep.json); run `repflow sweep SPEC --out "
            f"{d}` first"
        )
    out = _out_of(args, d)
    if out is None:
        check_writable(d, "DIR")
    from repflow.experiments.uptodate import record

    rep = build_report(d, progress=_progress(args), out=out)
    if out is None:
        record(d, rep.claims)  # the stamp says DIR's own report is current
    _print_report(rep)
    where = "in place" if out is None else f"into {out} (DIR unchanged)"
    print(f"rebuilt {where} from the {rep.points} finished points stored in {d}: report.html, "
          f"report.md, summary.csv and {len(rep.figures)} figures")  # fmt: skip
    return 0


def _report_combined(d: Path, args: argparse.Namespace) -> int:
    """``repflow report ROOT`` of a ``repflow reproduce`` directory: every study's report and
    the combined one, rebuilt from what ROOT holds (nothing is simulated), in place or into
    ``--out``; the studies keep the run's order and recorded wall times."""
    from repflow.cli.outdir import check_writable
    from repflow.experiments.uptodate import rebuild_combined

    out = _out_of(args, d)
    if out is None:
        check_writable(d, "DIR")
    done = rebuild_combined(d, progress=_progress(args), out=out)
    _print_combined(done.rows)
    print(f"report: {done.html}\n        {done.markdown}")
    where = "in place" if out is None else f"into {out} ({d} unchanged)"
    wall = ("the run's wall times as it recorded them" if done.wall is not None
            else "no wall times (this run recorded none: it predates their recording)")
    print(f"rebuilt {where}: {len(done.studies)} study reports and the combined report "
          f"(report.md, report.html, claims.csv, claim_points.csv), in the run's order, with "
          f"{wall}")  # fmt: skip
    return 0
