"""The websearch-k8 timeout excess (docs/validation.md): htsim replays the committed trace with
one candidate difference switched at a time, 8 seeds each, and prints drops, flows with a
timeout, SYN timeouts and FCTs beside ours (10 seeds).

    python3 validation/htsim/websearch_k8_candidates.py --bin DIR [--ours]

DIR holds trace_tcp and trace_schemes (validation/htsim/build.sh). Variants (htsim side):

- ``committed``: trace_tcp as the fixtures were made (RandomQueue, FairPriorityQueue hosts,
  1,500-byte packets, the flow's bytes in 1,500-byte packets plus the extra packet htsim's
  ``set_flowsize`` adds);
- ``schemes``: trace_schemes set as trace_tcp (same packets, same queues): the driver change
  alone (it sends no packet beyond the flow's last);
- ``packets``: the flow sent as ours sends it, ceil(size / 1460) packets of 1,500 B;
- ``droptail``: ``packets`` with DropTail switch ports instead of RandomQueue (no early drops);
- ``fifo-hosts``: ``packets`` with FIFO host queues (ACKs not prioritised);
- ``ssthresh-flight``: ``packets`` with ssthresh after a loss from the flight size (ours);
- ``all``: ``packets`` with the three switches together.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "tests" / "fixtures" / "refs" / "websearch-k8" / "trace.txt"
SEEDS = range(1, 9)
BASE = ["-k", "8", "-gbps", "10", "-link_us", "1", "-queue_pkts", "100", "-scan_us", "10",
        "-end_ms", "20000"]  # fmt: skip
TCP = ["-scheme", "tcp", "-pkt", "1500", "-iw", "10", "-ssthresh", "100"]
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "committed": ("htsim", []),
    "schemes": ("htsim+1", TCP + ["-queue", "random", "-hostq", "fairprio"]),
    "packets": ("ours", TCP + ["-queue", "random", "-hostq", "fairprio"]),
    "droptail": ("ours", TCP + ["-queue", "droptail", "-hostq", "fairprio"]),
    "fifo-hosts": ("ours", TCP + ["-queue", "random", "-hostq", "fifo"]),
    "ssthresh-flight": ("ours", TCP + ["-queue", "random", "-hostq", "fairprio",
                                       "-ssthresh_flight"]),
    "all": ("ours", TCP + ["-queue", "droptail", "-hostq", "fifo", "-ssthresh_flight"]),
}  # fmt: skip


def packets(size: int, how: str) -> int:
    """Data packets a flow of ``size`` bytes sends: as trace_tcp's htsim flow (``htsim+1``:
    ceil((size + 1499) / 1500), one more than its bytes need) or as ours (ceil(size / 1460))."""
    return math.ceil((size + 1499) / 1500) if how == "htsim+1" else math.ceil(size / 1460)


def figures(f: pd.DataFrame, size: np.ndarray) -> dict[str, float]:
    fct = f.fct.to_numpy(dtype=float, copy=True)
    fct[fct < 0] = np.nan
    short = size <= 100_000
    return {
        "drops": float(f.drops.sum()),
        "flows_with_timeout": float((f.timeouts > 0).sum()),
        "syn_timeouts": float(f["syn_timeouts"].sum()) if "syn_timeouts" in f else float("nan"),
        "short_mean_ms": 1e3 * float(np.nanmean(fct[short])),
        "large_mean_ms": 1e3 * float(np.nanmean(fct[~short])),
    }


def run(bindir: Path, variant: str, seed: int, rows: list[tuple[int, ...]]) -> dict[str, float]:
    how, extra = VARIANTS[variant]
    size = np.array([r[2] for r in rows])
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        if variant == "committed":
            cmd = [str(bindir / "trace_tcp"), *BASE, "-trace", str(TRACE)]
        else:
            (t / "trace.txt").write_text("".join(f"{a} {b} {packets(z, how)} {s} {z}\n"
                                                 for a, b, z, s in rows))  # fmt: skip
            cmd = [str(bindir / "trace_schemes"), *BASE, *extra, "-trace", str(t / "trace.txt")]
        cmd += ["-out", str(t / "out.csv"), "-seed", str(seed)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return figures(pd.read_csv(t / "out.csv"), size)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", required=True, type=Path)
    p.add_argument("--variants", nargs="*", default=list(VARIANTS))
    p.add_argument("--ours", action="store_true", help="also run ours (10 seeds)")
    a = p.parse_args()
    rows = [tuple(int(x) for x in line.split()) for line in TRACE.read_text().splitlines()
            if line.strip()]  # fmt: skip
    out = []
    for v in a.variants:
        res = pd.DataFrame([run(a.bin, v, s, rows) for s in SEEDS])
        out.append({"variant": v, **{f"{c}": res[c].mean() for c in res.columns},
                    **{f"{c} range": f"{res[c].min():.4g}–{res[c].max():.4g}"
                       for c in ("drops", "flows_with_timeout")}})  # fmt: skip
        print(pd.DataFrame(out[-1:]).to_string(index=False), flush=True)
    if a.ours:
        sys.path.insert(0, str(REPO / "validation"))
        import refs
        from repflow import api

        res = []
        for s in refs.OUR_SEEDS:
            r = api.simulate(refs.our_config("websearch-k8", s))
            f = r.flows.sort_values("id")
            fct = f.fct.to_numpy(dtype=float)
            short = f["size"].to_numpy() <= 100_000
            res.append({"drops": r.metadata["counters"]["drops"],
                        "flows_with_timeout": float((f.timeouts > 0).sum()),
                        "syn_timeouts": float(f.syn_timeouts.sum()),
                        "short_mean_ms": 1e3 * float(np.nanmean(fct[short])),
                        "large_mean_ms": 1e3 * float(np.nanmean(fct[~short]))})  # fmt: skip
        res = pd.DataFrame(res)
        out.append({"variant": "ours (10 seeds)", **{c: res[c].mean() for c in res.columns},
                    **{f"{c} range": f"{res[c].min():.4g}–{res[c].max():.4g}"
                       for c in ("drops", "flows_with_timeout")}})  # fmt: skip
    print(pd.DataFrame(out).to_string(index=False, float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    main()
