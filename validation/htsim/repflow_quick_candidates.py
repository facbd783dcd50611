"""The RepFlow quick study's disagreements with htsim (docs/validation.md, "The RepFlow study
under htsim"): our runs of the disagreeing points with one setting switched to htsim's at a
time, to see which moves our RepFlow-vs-TCP effect to htsim's. Nothing here is committed as
a result; the printed table is quoted in docs/validation.md.

    python3 validation/htsim/repflow_quick_candidates.py [--profile dc] [--points ...]

Variants (our side; htsim's fixtures unchanged):

- ``committed``: the study's settings (100-packet queues counting packets);
- ``bytes``: switch queues of 100 × (mss + header) bytes, as htsim's (an ACK takes 40 B, not
  a packet's slot);
- ``no-delack``: an ACK per segment (``tcp.delayed_ack = false``), as htsim's ``TcpSink``;
- ``bytes+no-delack``: both.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "validation"))
import refs  # noqa: E402


def effect(profile: str, w: str, load: float, variant: str) -> list[dict]:
    from repflow import api
    from repflow.experiments.analysis import point_metrics

    out = []
    pts = [p for p in refs.study_points(refs.RQ, profile)
           if p.labels["workload.cdf"] == w and p.labels["workload.load"] == load
           and p.labels["scheme"] in ("tcp", "repflow")]  # fmt: skip
    by_seed: dict[int, dict[str, dict]] = {}
    for p in pts:
        cfg = p.config
        if variant.startswith("bytes"):
            tcp = api.load_config(cfg)["tcp"]
            cfg.setdefault("queue", {}).pop("limit_packets", None)
            cfg["queue"]["limit_bytes"] = f"{100 * (int(tcp['mss']) + int(tcp['header']))}B"
        if variant.endswith("no-delack"):
            cfg.setdefault("tcp", {})["delayed_ack"] = False
        r = api.simulate(cfg)
        m = point_metrics(r.flows, 100_000)
        m["drops"] = r.metadata["counters"]["drops"]
        m["flows_with_timeout"] = int((r.flows["timeouts"] > 0).sum())
        by_seed.setdefault(p.labels["seed"], {})[p.labels["scheme"]] = m
    for seed, d in sorted(by_seed.items()):
        row = {"workload": w, "load": load, "seed": seed, "variant": variant}
        for m in ("short_mean", "short_p99"):
            row[f"{m} reduction %"] = 100 * (1 - d["repflow"][m] / d["tcp"][m])
        for s in ("tcp", "repflow"):
            row[f"{s} drops"] = d[s]["drops"]
            row[f"{s} flows with timeout"] = d[s]["flows_with_timeout"]
        out.append(row)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--profile", default="dc")
    p.add_argument("--points", nargs="*", default=["websearch-0.2", "datamining-0.5",
                                                    "datamining-0.8"])  # fmt: skip
    p.add_argument("--variants", nargs="*", default=["committed", "bytes"],
                   choices=["committed", "bytes", "no-delack", "bytes+no-delack"])
    a = p.parse_args()
    rows = []
    for pt in a.points:
        w, load = pt.rsplit("-", 1)
        for v in a.variants:
            rows += effect(a.profile, w, float(load), v)
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 250)
    print(df.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    print(df.groupby(["workload", "load", "variant"]).mean(numeric_only=True).drop(
        columns="seed").to_string(float_format=lambda x: f"{x:.1f}"))  # fmt: skip


if __name__ == "__main__":
    main()
