"""Time ``repflow.simulate`` spends around the Rust run for ~100k flow records.

    python scripts/bench_boundary.py [DURATION] [REPEATS]     # default 35ms, 7

Fat-tree k=8, google-rpc at load 0.5 (about 97,000 flows at 35ms). Per repetition it prints
"rust side" (the core's simulate() call minus the run's own wall_time counter: parsing the
config, building the records' Arrow batch, JSON of counters/summary/config) and "python side"
(turning the records into the DataFrame), then the medians. Timed figures vary with the
machine's load: compare interleaved runs.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from repflow import api


def main() -> None:
    duration = sys.argv[1] if len(sys.argv) > 1 else "35ms"
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    cfg = {"seed": 1, "topology": {"kind": "fat-tree", "k": 8},
           "workload": {"cdf": "google-rpc", "load": 0.5, "duration": duration}}  # fmt: skip
    core = api._core()
    text = json.dumps(api.load_config(cfg))
    rust, python = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = core.simulate(text, None)
        t1 = time.perf_counter()
        flows = api.flows_frame(out["records"])
        t2 = time.perf_counter()
        wall = json.loads(out["counters"])["wall_time"]
        rust.append(t1 - t0 - wall)
        python.append(t2 - t1)
        print(f"flows {len(flows)}  run {wall:.3f} s  rust side {1e3 * rust[-1]:.1f} ms  "
              f"python side {1e3 * python[-1]:.1f} ms", flush=True)  # fmt: skip
    print(f"median: rust side {1e3 * statistics.median(rust):.1f} ms, "
          f"python side {1e3 * statistics.median(python):.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
