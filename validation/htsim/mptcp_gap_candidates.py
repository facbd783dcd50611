"""The MPTCP goodput gap on mptcp-permutation-k4 (docs/validation.md, "The MPTCP goodput gap,
separated"): htsim's MPTCP replays the committed permutation with its mechanisms that differ
from ours switched to ours, one or both, 8 seeds each, and prints the compared figures.

    python3 validation/htsim/mptcp_gap_candidates.py --bin DIR [--write-aligned]

DIR holds trace_mptcp (validation/htsim/build.sh). Switches (htsim's side only):
``-ssthresh_flight`` (a subflow's ssthresh after a loss from the flight size, RFC 5681 (4), as
ours, instead of htsim's max(cwnd / 2, 1 packet)) and ``-hostq fifo`` (FIFO host NICs, as ours,
instead of htsim's FairPriorityQueue: ACKs first, subflows round-robin). With
``--write-aligned`` the runs with both switches are written as the diagnostic fixtures
tests/fixtures/refs/mptcp-permutation-k4-aligned/ (with provenance).
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

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "validation"))
import refs  # noqa: E402

NAME = "mptcp-permutation-k4"
ALIGNED = refs.FIXTURES / f"{NAME}-aligned"
VARIANTS = {
    "committed": [],
    "ssthresh-flight": ["-ssthresh_flight"],
    "fifo-hosts": ["-hostq", "fifo"],
    "both": ["-ssthresh_flight", "-hostq", "fifo"],
}
COMMIT = "841d9e7be46bb968eece766aa4b6c044c7799f67"


def command(subflows: int, coupling: str, seed: int, extra: list[str], out: str) -> list[str]:
    return ["trace_mptcp", "-k", str(refs.MPTCP_K), "-gbps", str(refs.MPTCP_NETWORK["gbps"]),
            "-link_us", "1", "-queue_pkts", str(refs.MPTCP_NETWORK["queue_packets"]), "-trace",
            "trace.txt", "-out", out, "-subflows", str(subflows), "-cc", coupling, "-queue",
            "random", "-seed", str(seed), "-scan_us", "10", "-end_ms", "200000",
            *extra]  # fmt: skip


def run(bindir: Path, subflows: int, coupling: str, extra: list[str], keep: Path | None):
    rows, cmds = [], []
    for seed in refs.MPTCP_SCENARIOS[NAME][3]:
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            (t / "trace.txt").write_text((refs.FIXTURES / NAME / "trace.txt").read_text())
            out = f"htsim-{coupling}-n{subflows}-seed{seed}.csv"
            cmd = command(subflows, coupling, seed, extra, out)
            subprocess.run([str(bindir / cmd[0]), *cmd[1:]], cwd=t, check=True,
                           stdout=subprocess.DEVNULL)  # fmt: skip
            cmds.append(" ".join(cmd))
            f = pd.read_csv(t / out)
            if keep is not None:
                (keep / out).write_text((t / out).read_text())
        fct = f.fct.to_numpy(dtype=float, copy=True)
        fct[fct < 0] = np.nan
        rows.append(refs.mptcp_figures((f["size"] // 1500).to_numpy(), fct,
                                       f.timeouts.to_numpy(), f.drops.sum(),
                                       refs.MPTCP_NETWORK["gbps"] * 1e9))  # fmt: skip
    return pd.DataFrame(rows), cmds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", required=True, type=Path)
    p.add_argument("--variants", nargs="*", default=list(VARIANTS))
    p.add_argument("--write-aligned", action="store_true")
    a = p.parse_args()
    runs = refs.MPTCP_SCENARIOS[NAME][2]
    out, cmds = [], []
    if a.write_aligned:
        ALIGNED.mkdir(exist_ok=True)
        (ALIGNED / "trace.txt").write_text((refs.FIXTURES / NAME / "trace.txt").read_text())
    for v in a.variants:
        for subflows, coupling in runs:
            keep = ALIGNED if (a.write_aligned and v == "both") else None
            df, c = run(a.bin, subflows, coupling, VARIANTS[v], keep)
            if keep is not None:
                cmds += c
            out.append({"variant": v, "coupling": coupling, "subflows": subflows,
                        **df.drop(columns=["flows"]).mean().to_dict()})  # fmt: skip
            print(pd.DataFrame(out[-1:]).to_string(index=False), flush=True)
    if a.write_aligned:
        prov = {
            "reference": "htsim (github.com/Broadcom/csg-htsim)",
            "commit": COMMIT,
            "build": "make -C sim; bash validation/htsim/build.sh <checkout> (g++ -O2)",
            "driver": "validation/htsim/trace_mptcp.cpp",
            "purpose": "mptcp-permutation-k4 with htsim's two mechanisms that differ from ours "
                       "aligned to ours, htsim's side only (docs/validation.md, 'The MPTCP "
                       "goodput gap, separated'): a diagnostic reference, not htsim's defaults",
            "commands (run in this directory)": cmds,
            "changed from ../mptcp-permutation-k4": {
                "ssthresh after a loss": "max(flight size / 2, 2 packets) per subflow (RFC 5681 "
                                         "(4), ours) instead of MultipathTcpSrc::deflate_window's "
                                         "max(cwnd / 2, 1 packet): -ssthresh_flight",
                "host queues": "FIFO (htsim Queue, unlimited), as ours, instead of "
                               "FairPriorityQueue: -hostq fifo",
            },
        }  # fmt: skip
        (ALIGNED / "provenance.json").write_text(json.dumps(prov, indent=2, ensure_ascii=False)
                                                 + "\n")  # fmt: skip
    pd.set_option("display.width", 200)
    print(pd.DataFrame(out).to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main()
