"""How much the RepFlow-vs-TCP effect moves when only the paths change, on the same flows
(docs/validation.md, "The RepFlow study under htsim" and "... under ns-3"). Every simulator
here chooses paths at random: htsim draws a path per connection (its ``-seed`` seeds only the
driver's path choices; the queues are DropTail), ns-3's driver and ours hash the five-tuple
with per-switch salts taken from the seed. Each path seed is another realization of the paths
on the committed flows of one point. The two-stage bootstrap of the agreement tests resamples
seeds and flows, not paths: this measures the spread it leaves out. Nothing is committed from
here; the printed tables are quoted in docs/validation.md.

    python3 validation/path_draws.py --sim htsim --bin /tmp/htsim [--profile ns3-2014]
        [--point datamining-0.5] [--path-seeds 1 2 ...]
    python3 validation/path_draws.py --sim ours ...
    LD_LIBRARY_PATH=$NS3/build/lib python3 validation/path_draws.py --sim ns3 \\
        --bin $NS3/build/scratch/ns3-dev-repflow-trace-fattree ...

Ours replays the flows as ``workload.trace`` with ``seed`` = the path seed, which salts the
switches' hashes (path seed N on trace seed N reproduces our committed run exactly).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "validation"))
import refs  # noqa: E402


def _trace(w: str, load: float, trace_seed: int) -> tuple[str, pd.DataFrame]:
    name = f"{w}-{load:g}-seed{trace_seed}"
    return name, pd.read_csv(refs.FIXTURES / refs.RQ / "traces" / f"{name}.csv.gz")


def _short_fcts(fct: np.ndarray, tr: pd.DataFrame, where: str) -> np.ndarray:
    if len(fct) != len(tr):
        raise SystemExit(f"{where}: {len(fct)} flows, its trace has {len(tr)}")
    fct = np.asarray(fct, dtype=float).copy()
    fct[fct < 0] = np.nan
    return fct[tr["size"].to_numpy() <= refs.STUDY_RUNS[refs.RQ]["short_max"]]


def run_htsim(binary: Path, profile: str, w: str, load: float, trace_seed: int, scheme: str,
              path_seed: int) -> np.ndarray:  # fmt: skip
    """htsim's short-flow FCTs with its path draws seeded by ``path_seed``."""
    name, tr = _trace(w, load, trace_seed)
    ours = json.loads((refs.FIXTURES / refs.RQ / profile / f"ours-{scheme}.json").read_text())
    h = refs.rq_htsim_args(ours["tcp"])
    mss = int(ours["tcp"]["mss"])
    pk = np.maximum(np.ceil(tr["size"].to_numpy() / mss), 1).astype(np.int64)
    start = np.round(tr["start"].to_numpy() * 1e12).astype(np.int64)
    rows = zip(tr.src, tr.dst, pk, start, tr["size"], strict=True)
    text = "".join(" ".join(str(int(x)) for x in r) + "\n" for r in rows)
    cmd = refs._driver_cmd(refs.RQ, scheme, name, path_seed, h, ours, binary)  # noqa: SLF001
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / f"{name}.txt").write_text(text)
        subprocess.run(cmd, cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        f = pd.read_csv(Path(tmp) / f"{scheme}-{name}.csv")
    return _short_fcts(f["fct"].to_numpy(), tr, f"htsim {name}")


def run_ns3(binary: Path, profile: str, w: str, load: float, trace_seed: int, scheme: str,
            path_seed: int) -> np.ndarray:  # fmt: skip
    """ns-3's short-flow FCTs with its switches' hashes salted by ``path_seed``."""
    name, tr = _trace(w, load, trace_seed)
    text = refs.ns3_trace_text(tr)
    cmd = refs.ns3_study_cmd(binary, profile, scheme, name, path_seed, "out.csv")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / f"{name}.txt").write_text(text)
        subprocess.run(cmd, cwd=tmp, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)  # fmt: skip
        f = pd.read_csv(Path(tmp) / "out.csv")
    return _short_fcts(f["fct"].to_numpy(), tr, f"ns-3 {name}")


def run_ours(_: Path | None, profile: str, w: str, load: float, trace_seed: int, scheme: str,
             path_seed: int) -> np.ndarray:  # fmt: skip
    """Our short-flow FCTs on the same flows (replayed as ``workload.trace``) with ``seed`` =
    path_seed: the flows stay, the switches' hash salt (and any other draw the seed makes)
    changes."""
    from repflow import api

    name, tr = _trace(w, load, trace_seed)
    cfg = refs.rq_replay_config(profile, w, load, trace_seed, scheme, path_seed)
    f = api.simulate(cfg).flows.sort_values("id").reset_index(drop=True)
    if (f["size"].to_numpy() != tr["size"].to_numpy()).any():
        raise SystemExit(f"{name}: the replayed flows are not the trace's")
    return _short_fcts(f["fct"].to_numpy(), tr, f"ours {name}")


RUNNERS = {"htsim": run_htsim, "ns3": run_ns3, "ours": run_ours}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sim", choices=list(RUNNERS), required=True)
    p.add_argument("--bin", help="htsim: the directory of trace_schemes; ns3: the driver")
    p.add_argument("--profile", default="ns3-2014")
    p.add_argument("--point", default="datamining-0.5")
    p.add_argument("--path-seeds", nargs="*", type=int, default=list(range(1, 11)))
    a = p.parse_args()
    if a.sim != "ours" and not a.bin:
        p.error(f"--bin is needed for --sim {a.sim}")
    w, load_s = a.point.rsplit("-", 1)
    load = float(load_s)
    binary = Path(a.bin).resolve() if a.bin else None
    run = RUNNERS[a.sim]
    rows = []
    for ps in a.path_seeds:
        fcts = {(ts, s): run(binary, a.profile, w, load, ts, s, ps)
                for ts in (1, 2) for s in ("tcp", "repflow")}  # fmt: skip
        row: dict[str, float] = {"path seed": ps}
        eff = []
        for ts in (1, 2):
            m = {s: float(np.nanmean(fcts[(ts, s)])) for s in ("tcp", "repflow")}
            row[f"tcp mean seed{ts} (us)"] = 1e6 * m["tcp"]
            row[f"repflow mean seed{ts} (us)"] = 1e6 * m["repflow"]
            eff.append(100 * (1 - m["repflow"] / m["tcp"]))
        row["mean effect %"] = float(np.mean(eff))  # mean of the two seeds' effects
        p99 = {s: float(np.nanpercentile(np.concatenate([fcts[(1, s)], fcts[(2, s)]]), 99))
               for s in ("tcp", "repflow")}  # fmt: skip
        row["p99 effect %"] = 100 * (1 - p99["repflow"] / p99["tcp"])  # both seeds pooled
        rows.append(row)
        print(row, flush=True)
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 250)
    print(df.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    for col in ("mean effect %", "p99 effect %"):
        e = df[col]
        q1, med, q3 = np.percentile(e, [25, 50, 75])
        print(f"{a.sim} {a.profile} {a.point} {col} over {len(e)} path draws: median "
              f"{med:.1f}, quartiles {q1:.1f} to {q3:.1f}, min {e.min():.1f}, max "
              f"{e.max():.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
