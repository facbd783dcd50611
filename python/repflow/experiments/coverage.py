"""The coverage study of the verdicts' intervals (docs/validation.md, "Coverage of the
verdicts' intervals"): does a 95 % interval computed on a quick form's sample cover the value
that many seeds establish, and how wide is it?

For each studied effect a sweep runs one point of a quick study on many seeds
(``experiments/coverage/*.toml``). The value on every seed is the reference. Then, many times,
a sample of the quick form's size (its number of seeds, drawn without replacement) gets an
interval by each candidate method, and the study counts how often it covers the reference and
how wide it is. Candidates:

* ``two-stage`` — the bootstrap the verdicts use: seeds with replacement, then flows within
  each drawn seed (:class:`repflow.experiments.stats.Bootstrap`);
* ``flows`` — flows within each seed only, the seeds fixed;
* ``seeds`` — seeds only (a cluster bootstrap), each seed's flows as they are;
* ``seed-t`` — a Student t interval over the per-seed effects.

Run: ``python -m repflow.experiments.coverage RUNS_DIR --out validation/coverage`` after the
three sweeps (the commands are in docs/validation.md); it writes ``draws.csv`` (every draw's
interval per method) and ``summary.csv`` (coverage and median width per effect and method),
and prints the table. :func:`choose` picks the method from ``summary.csv``.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from repflow.experiments import stats
from repflow.experiments.stats import Sample

#: Candidate interval methods, in the order of the table.
METHODS = ("two-stage", "flows", "seeds", "seed-t")
#: The method the verdicts use (:data:`repflow.experiments.stats.VERDICT_METHOD`).
VERDICT_METHOD = stats.VERDICT_METHOD
#: Coverage every studied effect must reach for a method to be chosen.
MIN_COVERAGE = 0.93


@dataclass(frozen=True)
class Effect:
    """One studied effect: a sweep directory, the series, the metric, the quick form's seeds."""

    name: str
    sweep: str
    a: str
    b: str | None
    metric: str
    seeds: int
    what: str


#: The studied effects (the sweeps of experiments/coverage/).
EFFECTS = (
    Effect("rf1-datamining-ns3-mean", "rf-datamining-ns3", "repflow", "tcp", "short_mean", 3,
           "RF-1's heavy-tailed mean: data mining 0.5 under ns3-2014 (3 s SYN timer), "
           "RepFlow vs TCP, 3 seeds"),
    Effect("rf2-websearch-dc-p99", "rf-websearch-dc", "repflow", "tcp", "short_p99", 3,
           "RF-2's p99 under dc: web search 0.5, RepFlow vs TCP, 3 seeds"),
    Effect("sr1-websearch-ns2-mean", "sr-websearch-ns2", "smartrep", "repflow", "short_mean", 2,
           "SR-1's 2-seed point: web search 0.5 under ns2, SmartRep vs RepFlow, 2 seeds"),
    Effect("rf7-websearch-dc-overhead", "rf-websearch-dc", "repflow", None, "overhead", 3,
           "RF-7's level: RepFlow's replication overhead, web search 0.5 under dc, 3 seeds"),
)  # fmt: skip


#: The kind of effect each studied effect stands for (what a verdict's point is matched with).
KINDS = {
    "rf1-datamining-ns3-mean": "a mean over 3 or more seeds",
    "sr1-websearch-ns2-mean": "a mean over 2 seeds",
    "rf2-websearch-dc-p99": "a percentile",
    "rf7-websearch-dc-overhead": "a level",
}

#: The verdict method's measured coverage per studied effect: (covered, draws), as in
#: validation/coverage/summary.csv (a test checks that they agree). Shipped with the package so
#: that a report can print it beside the verdicts it concerns.
MEASURED: dict[str, tuple[int, int]] = {
    "rf1-datamining-ns3-mean": (186, 200),
    "sr1-websearch-ns2-mean": (44, 200),
    "rf2-websearch-dc-p99": (193, 200),
    "rf7-websearch-dc-overhead": (190, 200),
}


def studied_effect(metric: str, seeds: int) -> str:
    """The studied effect a verdict's point resembles most: by its metric (a percentile, a
    level, a mean) and, for a mean, its seeds."""
    name = metric.split(" ", 1)[0]
    if name in ("short_p50", "short_p99", "short_p999"):
        return "rf2-websearch-dc-p99"
    if name in stats.FCT_MEANS:
        return "sr1-websearch-ns2-mean" if seeds <= 2 else "rf1-datamining-ns3-mean"
    return "rf7-websearch-dc-overhead"


def coverage_note(points: Sequence[object]) -> str:
    """The measured coverage of the verdicts' intervals for the kinds of effect among
    ``points`` where it falls short of :data:`MIN_COVERAGE`; "" when none does."""
    out = []
    for eff in dict.fromkeys(studied_effect(str(getattr(p, "metric", "")),
                                            int(getattr(getattr(p, "interval", None), "seeds", 0)
                                                or 0)) for p in points):  # fmt: skip
        hit, n = MEASURED.get(eff, (0, 0))
        if n and hit / n < MIN_COVERAGE:
            lo, hi = stats.wilson(hit, n)
            out.append(f"the 95 % intervals of {KINDS[eff]} covered the many-seed value in "
                       f"{100 * hit / n:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}] of quick-form "
                       f"draws ({eff}, docs/validation.md)")  # fmt: skip
    return "; ".join(out)


def lowest_coverage(points: Sequence[object]) -> float | None:
    """The lowest measured coverage among the kinds of effect of ``points`` (None: none
    measured)."""
    got = []
    for p in points:
        eff = studied_effect(str(getattr(p, "metric", "")),
                             int(getattr(getattr(p, "interval", None), "seeds", 0) or 0))
        hit, n = MEASURED.get(eff, (0, 0))
        if n:
            got.append(hit / n)
    return min(got) if got else None


def _subset(s: Sample, idx: Sequence[int]) -> Sample:
    out = Sample(mss=s.mss, min_rto=s.min_rto)
    for i in idx:
        out.seeds.append(s.seeds[i])
        out.flows.append(s.flows[i])
    return out


def _value(boot: stats.Bootstrap, e: Effect, sa: Sample, sb: Sample | None, group: object,
           short_max: int) -> tuple[float, np.ndarray]:  # fmt: skip
    if sb is None:
        est, reps = boot.level_replicates(sa, e.metric, short_max, group)
        return est * 100.0, reps * 100.0
    return boot.effect_replicates(sa, sb, e.metric, short_max, stats.reduction, group)


def _per_seed(e: Effect, sa: Sample, sb: Sample | None, short_max: int) -> np.ndarray:
    """The effect on each seed alone."""
    out = []
    one = stats.Bootstrap(resamples=1)
    for i in range(len(sa.seeds)):
        a1 = _subset(sa, [i])
        b1 = _subset(sb, [i]) if sb is not None else None
        out.append(_value(one, e, a1, b1, ("seed", i), short_max)[0])
    return np.asarray(out, dtype=float)


def _t_interval(x: np.ndarray) -> tuple[float, float]:
    from scipy import stats as sps

    x = x[np.isfinite(x)]
    if len(x) < 2:
        return float("-inf"), float("inf")
    half = float(sps.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)))
    return float(x.mean() - half), float(x.mean() + half)


def study(e: Effect, sa: Sample, sb: Sample | None, draws: int, resamples: int,
          short_max: int = 100_000) -> list[dict[str, object]]:  # fmt: skip
    """Every draw's interval by every method for one effect: rows of ``draws.csv``."""
    if sb is not None:  # the seeds both series finished, in the same order
        both = [x for x in sa.seeds if x in sb.seeds]
        sa = _subset(sa, [sa.seeds.index(x) for x in both])
        sb = _subset(sb, [sb.seeds.index(x) for x in both])
    ref = _value(stats.Bootstrap(resamples=1), e, sa, sb, ("ref",), short_max)[0]
    n = len(sa.seeds)
    rng = np.random.default_rng(int.from_bytes(e.name.encode()[:8], "little"))
    rows: list[dict[str, object]] = []
    boots = {"two-stage": stats.Bootstrap(resamples),
             "flows": stats.Bootstrap(resamples, seed_stage=False),
             "seeds": stats.Bootstrap(resamples, flow_stage=False)}  # fmt: skip
    for d in range(draws):
        idx = sorted(rng.choice(n, e.seeds, replace=False).tolist())
        xa = _subset(sa, idx)
        xb = _subset(sb, idx) if sb is not None else None
        for method in METHODS:
            if method == "seed-t":
                per = _per_seed(e, xa, xb, short_max)
                est = float(np.mean(per))
                lo, hi = _t_interval(per)
            else:
                boot = boots[method]
                est, reps = _value(boot, e, xa, xb, ("cov", d), short_max)
                lo, hi = stats.bounds(reps)
                boot.forget_flow_draws()
            rows.append({"effect": e.name, "method": method, "draw": d,
                         "seeds": " ".join(str(sa.seeds[i]) for i in idx), "estimate": est,
                         "lo": lo, "hi": hi, "reference": ref})  # fmt: skip
    return rows


def summarize(rows: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    """Coverage (share of draws whose interval holds the reference, with its Wilson
    interval), median width and the spread of the estimates, per effect and method."""
    out = []
    keys = dict.fromkeys((str(r["effect"]), str(r["method"])) for r in rows)
    for eff, method in keys:
        rs = [r for r in rows if r["effect"] == eff and r["method"] == method]
        lo = np.array([float(r["lo"]) for r in rs])  # type: ignore[arg-type]
        hi = np.array([float(r["hi"]) for r in rs])  # type: ignore[arg-type]
        ref = float(rs[0]["reference"])  # type: ignore[arg-type]
        est = np.array([float(r["estimate"]) for r in rs])  # type: ignore[arg-type]
        hit = int(((lo <= ref) & (ref <= hi)).sum())
        wlo, whi = stats.wilson(hit, len(rs))
        width = hi - lo
        out.append({"effect": eff, "method": method, "draws": len(rs), "covered": hit,
                    "coverage": hit / len(rs), "coverage_lo": wlo, "coverage_hi": whi,
                    "median_width": float(np.median(width[np.isfinite(width)]))
                    if np.isfinite(width).any() else float("inf"),
                    "estimate_p2_5": float(np.percentile(est, 2.5)),
                    "estimate_p97_5": float(np.percentile(est, 97.5)),
                    "reference": ref})  # fmt: skip
    return out


def coverable(summary: Sequence[dict[str, object]], min_coverage: float = MIN_COVERAGE
              ) -> list[str]:  # fmt: skip
    """The studied effects that at least one method covers at ``min_coverage``: the others
    are out of reach of any interval on the quick form's sample (e.g. a mean carried by a
    timeout that most samples do not contain), and the reports print their coverage."""
    effects = list(dict.fromkeys(str(r["effect"]) for r in summary))
    return [e for e in effects
            if any(float(r["coverage"]) >= min_coverage  # type: ignore[arg-type]
                   for r in summary if r["effect"] == e)]  # fmt: skip


def choose(summary: Sequence[dict[str, object]], min_coverage: float = MIN_COVERAGE
           ) -> str | None:  # fmt: skip
    """The narrowest method (by the sum over effects of its median width relative to the
    narrowest method's on that effect) among those covering at least ``min_coverage`` on every
    :func:`coverable` effect; None when no method does."""
    effects = coverable(summary, min_coverage)
    if not effects:
        return None
    ok = []
    for m in METHODS:
        rs = [r for r in summary if r["method"] == m and r["effect"] in effects]
        if len(rs) == len(effects) and all(float(r["coverage"]) >= min_coverage  # type: ignore[arg-type]
                                           for r in rs):  # fmt: skip
            ok.append(m)
    if not ok:
        return None

    def rel(m: str) -> float:
        total = 0.0
        for eff in effects:
            widths = {str(r["method"]): float(r["median_width"])  # type: ignore[arg-type]
                      for r in summary if r["effect"] == eff}
            total += widths[m] / max(min(widths.values()), 1e-12)
        return total

    return min(ok, key=rel)


def read_csv(path: Path) -> list[dict[str, object]]:
    """Rows of a CSV written by this module."""
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _write(path: Path, rows: Sequence[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def table(summary: Sequence[dict[str, object]]) -> str:
    """The study's Markdown table."""
    lines = ["| effect | method | coverage [95 % interval] | median width (points) | "
             "spread of the estimates (2.5–97.5 %) | reference |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in summary:
        lines.append(
            f"| {r['effect']} | {r['method']} | {100 * float(r['coverage']):.1f} % "  # type: ignore[arg-type]
            f"[{100 * float(r['coverage_lo']):.1f}, {100 * float(r['coverage_hi']):.1f}] "  # type: ignore[arg-type]
            f"({r['covered']}/{r['draws']}) | {float(r['median_width']):.2f} | "  # type: ignore[arg-type]
            f"{float(r['estimate_p2_5']):.2f} … {float(r['estimate_p97_5']):.2f} | "  # type: ignore[arg-type]
            f"{float(r['reference']):.2f} |"  # type: ignore[arg-type]
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m repflow.experiments.coverage RUNS --out DIR [--draws N]``."""
    from repflow.experiments import analysis
    from repflow.experiments.store import Store

    ap = argparse.ArgumentParser(prog="python -m repflow.experiments.coverage",
                                 description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("runs", type=Path, help="directory holding the coverage sweeps "
                    "(<runs>/<sweep name>/ for each of experiments/coverage/*.toml)")
    ap.add_argument("--out", type=Path, required=True, help="where draws.csv and summary.csv go")
    ap.add_argument("--draws", type=int, default=200, help="samples drawn per effect (200)")
    ap.add_argument("--resamples", type=int, default=stats.RESAMPLES,
                    help=f"bootstrap replicates per interval ({stats.RESAMPLES})")
    ap.add_argument("--only", action="append", default=[], metavar="EFFECT",
                    help="study only this effect (repeatable); the other effects' rows already "
                    "in OUT/draws.csv are kept")
    args = ap.parse_args(argv)
    rows: list[dict[str, object]] = []
    known = {e.name for e in EFFECTS}
    for name in args.only:
        if name not in known:
            print(f"coverage: --only {name}: not a studied effect ({', '.join(sorted(known))})",
                  file=sys.stderr)
            return 2
    if args.only and (args.out / "draws.csv").is_file():
        rows = [r for r in read_csv(args.out / "draws.csv") if r["effect"] not in args.only]
    for e in EFFECTS:
        if args.only and e.name not in args.only:
            continue
        d = args.runs / e.sweep
        if not d.is_dir():
            print(f"coverage: {d}: no sweep (run experiments/coverage/{e.sweep}.toml)",
                  file=sys.stderr)
            return 2
        loaded = analysis.load_sweep(Store(d))
        key = next((k for k in loaded.samples if k[1] == e.a), None)
        if key is None:
            print(f"coverage: {d}: no series {e.a}", file=sys.stderr)
            return 2
        sa = loaded.samples[key]
        sb = loaded.samples[(key[0], e.b, key[2])] if e.b else None
        print(f"coverage: {e.name}: {len(sa.seeds)} seeds, {args.draws} draws of {e.seeds}",
              file=sys.stderr)
        rows += study(e, sa, sb, args.draws, args.resamples)
    order = {e.name: i for i, e in enumerate(EFFECTS)}
    rows.sort(key=lambda r: (order[str(r["effect"])], int(r["draw"]),  # type: ignore[call-overload]
                             METHODS.index(str(r["method"]))))
    summary = summarize(rows)
    _write(args.out / "draws.csv", rows)
    _write(args.out / "summary.csv", summary)
    print(table(summary))
    print(f"\nchosen (narrowest with coverage ≥ {100 * MIN_COVERAGE:.0f} % on every effect some "
          f"method covers: {', '.join(coverable(summary))}): {choose(summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
