"""bench-A's flows in this simulator and in htsim, interleaved on one core: wall time of each.

    python3 validation/htsim/bench_a.py TRACE_TCP [--rounds N] [--cpu C]

TRACE_TCP is the htsim driver built by ``validation/htsim/build.sh`` (htsim is not part of this
repository). The flows are bench-A's (``repflow bench``'s scenario, seed 1), written as a trace
both simulators replay: same flows, not the same packets (htsim's RandomQueue drops early, its
TCP has no SACK and a 250 ms minimum RTO). htsim runs with its stock 10 ms timer scan and stops
at 2 s of simulated time; this simulator stops when the last flow ends. Prints, per round, this
simulator's whole process and simulation loop, htsim's whole process, and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OURS = """
import json, sys, time
t0 = time.perf_counter()
from repflow.api import simulate
r = simulate(json.load(open(sys.argv[1])))
c = r.counters
print(json.dumps({"loop": c["wall_time"], "hops": c["packet_hops"], "drops": c["drops"],
                  "unfinished": r.unfinished, "total": time.perf_counter() - t0}))
"""


def write_inputs(d: Path) -> tuple[Path, Path]:
    """bench-A's configuration with its flows as an explicit trace, and the same trace in the
    htsim driver's format (src dst bytes start_ps per line)."""
    from repflow.api import simulate
    from repflow.cli.bench import bench_config

    cfg = bench_config(1, None, "bench-A")
    f = simulate(cfg).flows.sort_values("start")
    rows = [
        (int(s), int(t), int(z), round(a * 1e12))
        for s, t, z, a in zip(f.src, f.dst, f["size"], f.start, strict=True)
    ]
    trace = d / "trace.txt"
    trace.write_text("".join(f"{s} {t} {z} {a}\n" for s, t, z, a in rows))
    cfg["workload"] = {"trace": [{"src": s, "dst": t, "size": f"{z}B", "start": f"{a}ps"}
                                 for s, t, z, a in rows]}  # fmt: skip
    config = d / "config.json"
    config.write_text(json.dumps(cfg))
    return config, trace


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace_tcp", type=Path, help="htsim driver (validation/htsim/build.sh)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    a = p.parse_args()
    if not a.trace_tcp.is_file():
        print(f"error: {a.trace_tcp}: no such driver (build it with validation/htsim/build.sh)",
              file=sys.stderr)  # fmt: skip
        return 2
    pin = ["taskset", "-c", str(a.cpu)]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        config, trace = write_inputs(d)
        print(f"{len(trace.read_text().splitlines())} flows; pinned to CPU {a.cpu}")
        for r in range(a.rounds):
            out = subprocess.run([*pin, sys.executable, "-c", OURS, str(config)], check=True,
                                 capture_output=True, text=True).stdout  # fmt: skip
            ours = json.loads(out)
            t0 = time.perf_counter()
            subprocess.run([*pin, str(a.trace_tcp.resolve()), "-k", "8", "-gbps", "10",
                            "-link_us", "1", "-queue_pkts", "100", "-trace", str(trace),
                            "-out", str(d / "htsim.csv"), "-seed", "1", "-scan_us", "10000",
                            "-end_ms", "2000"], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
            htsim = time.perf_counter() - t0
            print(f"round {r + 1}: ours {ours['total']:.2f} s (loop {ours['loop']:.2f} s, "
                  f"{ours['hops']:,} packet-hops, {ours['drops']:,} drops), htsim {htsim:.2f} s: "
                  f"{htsim / ours['total']:.1f}x whole process, {htsim / ours['loop']:.1f}x "
                  f"loop")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
