"""Large flows under ``ns3-2014`` against ns-3 on the RepFlow study's web-search subset
(docs/validation.md, "The ns3-2014 large-flow gap, found"): per point, ours (the committed
fixtures) beside ns-3's committed runs, and ours again over several path draws on the same
flows (``seed`` salts the switches' hashes), since the two simulators hash five-tuples with
different salts and a point's large-flow mean moves with the paths. Nothing is committed from
here; the printed tables are quoted in the docs.

    python3 validation/large_flows.py [--path-seeds 1 2 ... 8]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "validation"))
import refs  # noqa: E402

PROFILE = "ns3-2014"


def _large_mean(size: np.ndarray, fct: np.ndarray) -> float:
    done = np.isfinite(fct) & (fct >= 0) & (size > refs.SHORT_MAX)
    return float(np.mean(fct[done])) * 1e3


def ours_over_paths(scheme: str, load: float, seed: int,
                    path_seeds: list[int]) -> list[tuple[float, int]]:  # fmt: skip
    """Our large-flow mean (ms) and drops on the point's flows, per path seed."""
    from repflow import api

    out = []
    for ps in path_seeds:
        r = api.simulate(refs.rq_replay_config(PROFILE, "websearch", load, seed, scheme, ps))
        f = r.flows.sort_values("id")
        out.append((_large_mean(f["size"].to_numpy(), f.fct.to_numpy(float)),
                    int(r.metadata["counters"]["drops"])))  # fmt: skip
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--path-seeds", nargs="*", type=int, default=list(range(1, 9)))
    args = p.parse_args()
    rows = []
    for scheme, load, seed, name, tr, o, n, drops in refs.ns3_2014_websearch_points():
        size = tr["size"].to_numpy()
        draws = ours_over_paths(scheme, load, seed, args.path_seeds)
        lm = [x for x, _ in draws]
        dr = [y for _, y in draws]
        ours = _large_mean(size, o.fct.to_numpy(float))
        nl = _large_mean(n["size"].to_numpy(), n.fct.to_numpy(float))
        rows.append({
            "scheme": scheme, "point": name, "large ours": ours, "large ns-3": nl,
            "large ours, path draws": f"{np.mean(lm):.1f} ({min(lm):.1f}–{max(lm):.1f})",
            "ns-3 inside": min(lm) <= nl <= max(lm),
            "drops ours": int(drops), "drops ns-3": int(n.drops.sum()),
            "drops, path draws": f"{np.mean(dr):.0f} ({min(dr)}–{max(dr)})",
            "ns-3 drops inside": min(dr) <= n.drops.sum() <= max(dr),
            "timeouts ours": int((o.timeouts > 0).sum()),
            "timeouts ns-3": int((n.timeouts > 0).sum()),
            "ratio": ours / nl, "ratio draws": np.mean(lm) / nl,
        })  # fmt: skip
        print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    print(df.drop(columns=["ratio", "ratio draws"]).round(1).to_string(index=False))
    for k in ("ratio", "ratio draws"):
        print(f"large-flow mean ours / ns-3 ({k}): median {df[k].median():.2f} "
              f"[{df[k].min():.2f}, {df[k].max():.2f}], within ±20 %: "
              f"{int((abs(df[k] - 1) <= 0.2).sum())} of {len(df)}")  # fmt: skip
    print(f"ns-3's large-flow mean inside ours' path draws: {int(df['ns-3 inside'].sum())} of "
          f"{len(df)}; its drops: {int(df['ns-3 drops inside'].sum())} of {len(df)}")


if __name__ == "__main__":
    main()
