"""The RepFlow quick study's differences between ns-3 and this simulator (docs/validation.md,
"The RepFlow study under ns-3"): ns-3's fat-tree driver rerun on committed points with one
mechanism switched to ours, beside the committed ns-3 records and ours. Nothing here is
committed as a result; the printed table is quoted in docs/validation.md.

    LD_LIBRARY_PATH=$NS3/build/lib python3 validation/ns3/candidates.py \\
        --bin $NS3/build/scratch/ns3-dev-repflow-trace-fattree [--profile ns3-2014] \\
        [--points websearch-0.5-seed1 ...] [--schemes tcp]

Variants (ns-3's side; ours unchanged):

- ``committed``: the committed ns-3 records;
- ``abc``: NewReno with appropriate byte counting (RFC 3465, L = 2), as ours grows the window,
  instead of ns-3's one increase per ACK (which, with delayed ACKs, grows the window by half as
  much per round trip).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "validation"))
import refs  # noqa: E402


def figures(f: pd.DataFrame, size: np.ndarray, timeouts: np.ndarray, drops: float) -> dict:
    """refs.figures of one run, FCTs in ms."""
    m = refs.figures(size, f["fct"].to_numpy(float), np.asarray(timeouts), drops)
    return {"short mean (ms)": 1e3 * m["short_mean"], "short p99 (ms)": 1e3 * m["short_p99"],
            "large mean (ms)": 1e3 * m["large_mean"],
            "flows with a timeout": m["flows_with_timeout"], "drops": m["drops"]}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", required=True, help="ns-3's repflow-trace-fattree")
    p.add_argument("--profile", default="ns3-2014")
    p.add_argument("--points", nargs="*", default=["websearch-0.2-seed1", "websearch-0.5-seed1"])
    p.add_argument("--schemes", nargs="*", default=["tcp"])
    a = p.parse_args()
    base = refs.FIXTURES / refs.RQ
    rows = []
    for name in a.points:
        tr = pd.read_csv(base / "traces" / f"{name}.csv.gz")
        size = tr["size"].to_numpy()
        seed = int(name.rsplit("seed", 1)[1])
        for scheme in a.schemes:
            o = pd.read_csv(base / a.profile / f"ours-{scheme}-{name}.csv.gz")
            pts = pd.read_csv(base / a.profile / "ours-points.csv")
            drops = pts[(pts.scheme == scheme) & (pts.point == name)]["drops"].iloc[0]
            # ours counts every RTO, the spurious ones after completion included; ns-3 only
            # data timeouts before completion: compare flows whose timeout delayed them
            rows.append({"point": name, "scheme": scheme, "sim": "ours",
                         **figures(o, size, o["timeouts"].to_numpy(), drops)})  # fmt: skip
            n = pd.read_csv(base / a.profile / "ns3" / f"{scheme}-{name}.csv.gz")
            nf = figures(n, size, n["timeouts"].to_numpy(), n["drops"].sum())
            rows.append({"point": name, "scheme": scheme, "sim": "ns-3 committed", **nf})
            text = refs.ns3_trace_text(tr)
            cmd = refs.ns3_study_cmd(Path(a.bin).resolve(), a.profile, scheme, name, seed,
                                     "out.csv", ("--abc=1",))  # fmt: skip
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / f"{name}.txt").write_text(text)
                subprocess.run(cmd, cwd=tmp, check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # fmt: skip
                f = pd.read_csv(Path(tmp) / "out.csv")
            ff = figures(f, size, f["timeouts"].to_numpy(), f["drops"].sum())
            rows.append({"point": name, "scheme": scheme, "sim": "ns-3 abc", **ff})
            print(pd.DataFrame(rows[-3:]).to_string(index=False), flush=True)
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 250)
    print(df.to_string(index=False, float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    main()
