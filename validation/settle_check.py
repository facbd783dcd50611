"""Checks what "would settle it" predicted for the open claims of a `repflow reproduce` run, by
deciding them again on the pooled records of that run and another one on disjoint seeds (e.g.
`--seed-offset 100`): twice the seeds, twice the flows (docs/experiments.md).

    python validation/settle_check.py runs/reproduce-quick runs/reproduce-quick-seed+100

Prints, per open claim of the first run, its prediction, its verdict on the pooled seeds, and
the verdict of the second run alone. Nothing is simulated.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from repflow.experiments import claims
from repflow.experiments.analysis import aggregate, load_sweep
from repflow.experiments.stats import Sample
from repflow.experiments.store import Store


def _pooled(a: Path, b: Path) -> tuple[pd.DataFrame, dict, list[str], int]:
    la, lb = load_sweep(Store(a)), load_sweep(Store(b))
    points = pd.concat([la.points, lb.points], ignore_index=True)
    la.points = points
    samples: dict = {}
    for k in set(la.samples) | set(lb.samples):
        s = Sample()
        for src in (la.samples.get(k), lb.samples.get(k)):
            if src is None:
                continue
            for seed, f in zip(src.seeds, src.flows, strict=True):
                s.seeds.append(seed)
                s.flows.append(f)
            s.mss, s.min_rto = src.mss or s.mss, src.min_rto or s.min_rto
        s.sort()
        samples[k] = s
    for mine, theirs in ((la.short_fcts, lb.short_fcts), (la.short_slowdowns, lb.short_slowdowns)):
        for k, v in theirs.items():
            mine[k] = np.concatenate([mine.get(k, np.array([])), v])
    la.samples = samples
    spec = la.sweep.get("spec", {})
    scen = list((spec.get("extra") or {}).get("claims", []))
    short_max = int(spec.get("figures", {}).get("short_max_bytes", 100_000))
    return aggregate(points, la), samples, scen, short_max


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("first", type=Path)
    ap.add_argument("second", type=Path)
    args = ap.parse_args(argv)
    with (args.first / "claims.csv").open(newline="", encoding="utf-8") as f:
        first = {(r["claim"], r["profile"]): r for r in csv.DictReader(f)}
    with (args.second / "claims.csv").open(newline="", encoding="utf-8") as f:
        second = {(r["claim"], r["profile"]): r["verdict"] for r in csv.DictReader(f)}
    marker = json.loads((args.first / "reproduce.json").read_text())
    print("| claim | profile | first run | its prediction | second run | both runs' seeds |")
    print("|---|---|---|---|---|---|")
    for run in marker["runs"]:
        opened = [k for k, r in first.items() if k[1] == run["profile"] and r["verdict"] == "open"]
        if not opened:
            continue
        da, db = args.first / run["dir"], args.second / run["dir"]
        if not (da / "sweep.json").is_file() or not (db / "sweep.json").is_file():
            continue
        agg, samples, scen, short_max = _pooled(da, db)
        ev = claims.Evidence(agg, samples, short_max)
        got = {r.claim.id: r for r in claims.evaluate_claims(ev, scen) if r.claim.scenario in scen}
        for cid, prof in opened:
            if cid not in got:
                continue
            reason = first[(cid, prof)]["reason"]
            if "undecidable" in reason:
                pred = "undecidable at this design (a percentile on a timeout plateau)"
            elif "about " in reason:
                pred = reason[reason.find("about "):]
            else:
                pred = reason.split("; ")[-1] if reason else ""
            print(f"| {cid} | `{prof}` | open | {pred} | {second.get((cid, prof), '')} | "
                  f"{got[cid].verdict} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
