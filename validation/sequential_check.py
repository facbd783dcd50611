"""The error rate of `repflow reproduce --budget`'s sequential rule, measured.

A budgeted run looks at an open claim again after doubling its seeds, and stops as soon as an
interval clears the boundary. This script measures how often that procedure decides the wrong
side of a boundary when the truth lies just beside it, with the project's own interval method
(`stats.verdict_bootstrap`, the flows bootstrap of the verdicts) on synthetic data whose
effect is known exactly:

* per seed, 200 short flows per series; FCTs are lognormal (σ = 1) with 3 % of flows waiting a
  200 ms timeout, times a per-seed factor (lognormal, σ = 0.15) shared by both series (the
  seed's arrivals), so seeds differ as in the simulator;
* series a is b scaled by (1 − r): the reduction of the mean FCT is exactly r in population;
* the claim is "a's mean is at least 30 % lower" (boundary c = 30 %); the truth is r = 29 %
  (so "reproduced" is wrong) or r = 31 % (so "not reproduced" is wrong);
* the procedure starts at 3 seeds and doubles up to 48 (5 looks), stopping at the first look
  whose interval lies wholly on one side of c. This is the worst case of the budgeted rule
  (it never gives up early).

Two rules are compared on the same draws: every look at 95 % (naive), and every look at
1 − 0.05/5 = 99 % (what `--budget` does). A single look at 3 seeds and 95 % is the reference.

Run: ``python validation/sequential_check.py [--draws 200] [--out validation/sequential]``
(about 10 minutes on one core for 200 draws). Output: one line per rule and truth with the
error rate, its 95 % Wilson interval and the mean seeds at stopping, and ``summary.csv``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from repflow.experiments import stats

BOUNDARY = 30.0
LOOKS = (3, 6, 12, 24, 48)
FLOWS = 200
TIMEOUT_SHARE = 0.03
RULES = {"naive 95 % per look": 0.05, "budget 99 % per look": 0.05 / len(LOOKS)}


def seed_flows(rng: np.random.Generator, factor: float, scale: float) -> pd.DataFrame:
    """One seed's short flows of one series."""
    fct = np.exp(rng.normal(np.log(1e-3), 1.0, FLOWS))
    timeouts = rng.random(FLOWS) < TIMEOUT_SHARE
    fct = (fct + np.where(timeouts, 0.2, 0.0)) * factor * scale
    return pd.DataFrame({"size": np.full(FLOWS, 10_000), "start": np.arange(FLOWS) * 1e-4,
                         "fct": fct, "timeouts": timeouts.astype(int)})  # fmt: skip


def one_draw(draw: int, truth: float, resamples: int) -> dict[str, tuple[str, int]]:
    """The decision ("reproduced", "smaller" or "open") and seeds at stopping of each rule."""
    rng = np.random.default_rng([draw, int(truth * 10)])
    a, b = stats.Sample(), stats.Sample()
    out: dict[str, tuple[str, int]] = {}
    added = 0
    for n in LOOKS:
        while added < n:
            f = float(np.exp(rng.normal(0.0, 0.15)))
            a.add(added, seed_flows(rng, f, 1.0 - truth / 100.0))
            b.add(added, seed_flows(rng, f, 1.0))
            added += 1
        boot = stats.verdict_bootstrap(resamples, salt=draw)
        _, reps = boot.effect_replicates(a, b, "short_mean", 100_000, stats.reduction)
        for rule, alpha in RULES.items():
            if rule in out:
                continue
            lo, hi = stats.bounds(reps, 1.0 - alpha)
            if lo > BOUNDARY:
                out[rule] = ("reproduced", n)
            elif hi < BOUNDARY:
                out[rule] = ("smaller", n)
        if n == LOOKS[0]:
            lo, hi = stats.bounds(reps, 0.95)
            out["single look, 3 seeds, 95 %"] = (
                "reproduced" if lo > BOUNDARY else "smaller" if hi < BOUNDARY else "open", n)
        if all(r in out for r in RULES):
            break
    for rule in RULES:
        out.setdefault(rule, ("open", LOOKS[-1]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--draws", type=int, default=200, help="draws per truth (200)")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap replicates (1000)")
    ap.add_argument("--out", type=Path, default=Path("validation/sequential"),
                    help="directory of summary.csv")  # fmt: skip
    args = ap.parse_args(argv)
    if args.draws < 1:
        print("sequential_check: --draws must be at least 1", file=sys.stderr)
        return 2
    rows = []
    t0 = time.monotonic()
    for truth, wrong in ((BOUNDARY - 1.0, "reproduced"), (BOUNDARY + 1.0, "smaller")):
        tally: dict[str, list[tuple[str, int]]] = {}
        for d in range(args.draws):
            for rule, res in one_draw(d, truth, args.resamples).items():
                tally.setdefault(rule, []).append(res)
            if (d + 1) % 20 == 0:
                print(f"truth {truth:g} %: {d + 1}/{args.draws} draws, "
                      f"{time.monotonic() - t0:.0f} s", file=sys.stderr)  # fmt: skip
        for rule, res in tally.items():
            n = len(res)
            errors = sum(1 for v, _ in res if v == wrong)
            decided = sum(1 for v, _ in res if v != "open")
            lo, hi = stats.wilson_at(errors, n, 0.95)
            rows.append({"rule": rule, "truth": truth, "wrong_side": wrong, "draws": n,
                         "errors": errors, "error_rate": errors / n, "error_lo": lo,
                         "error_hi": hi, "decided": decided / n,
                         "mean_seeds": float(np.mean([s for _, s in res]))})  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "summary.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in r.items()})
    for r in rows:
        print(f"{r['rule']:28} truth {r['truth']:g} %: wrong side {r['errors']}/{r['draws']} = "
              f"{100 * r['error_rate']:.1f} % [{100 * r['error_lo']:.1f}, "
              f"{100 * r['error_hi']:.1f}], decided {100 * r['decided']:.0f} %, "
              f"mean seeds at stop {r['mean_seeds']:.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
