"""bench-A's flows in this simulator and in htsim, interleaved on one core: wall time of each.

    python3 validation/htsim/bench_a.py TRACE_TCP [--rounds N] [--cpu C]

TRACE_TCP is the htsim driver built by ``validation/htsim/build.sh`` (htsim is not part of this
repository). The flows are bench-A's (``repflow bench``'s scenario, seed 1), written as a trace
both simulators replay: same flows, not the same packets (htsim's RandomQueue drops early, its
TCP has no SACK and a 250 ms minimum RTO). htsim runs with its stock 10 ms timer scan and stops
at 2 s of simulated time; this simulator stops when the last flow ends. Prints, per round, this
simulator's whole process and simulation loop, htsim's whole process, and the ratios.

``--matched`` sets this simulator's TCP to htsim's (``validation/refs.py``'s ``TCP``: IW 10,
ssthresh 100 segments, 250 ms minimum RTO, 3 s handshake timer, no delayed ACKs, no SACK), its
switch queues to 150,000 bytes (htsim's 100 packets of 1,500 B) and its host queues to
unlimited, and also times the ``repflow sim --config`` command (whole process, with and without
``--out``) beside the API; each line then gives every figure's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


WRITE = """
import sys
from pathlib import Path
from bench_a import write_inputs
write_inputs(Path(sys.argv[1]), sys.argv[2] == "1")
"""


def write_inputs(d: Path, matched: bool = False) -> tuple[Path, Path]:
    """bench-A's configuration with its flows as an explicit trace, and the same trace in the
    htsim driver's format (src dst bytes start_ps per line); ``matched``: with htsim's TCP
    settings and byte queues (see the module's doc)."""
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
    if matched:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from refs import TCP

        cfg["tcp"] = dict(TCP)
        cfg["queue"] = {"limit_bytes": "150000B", "host_limit_packets": 0}
        cfg["workload"]["drain"] = "20s"
    config = d / "config.json"
    config.write_text(json.dumps(cfg))
    return config, trace


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace_tcp", type=Path, help="htsim driver (validation/htsim/build.sh)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    p.add_argument("--matched", action="store_true",
                   help="htsim's TCP settings and byte queues; time `repflow sim` too")
    a = p.parse_args()
    if not a.trace_tcp.is_file():
        print(f"error: {a.trace_tcp}: no such driver (build it with validation/htsim/build.sh)",
              file=sys.stderr)  # fmt: skip
        return 2
    pin = ["taskset", "-c", str(a.cpu)]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        # In a child: this process stays small (a child's peak RSS, read from `wait4`, starts
        # from its parent's when the parent forks it).
        subprocess.run([sys.executable, "-c", WRITE, str(d), str(int(a.matched))], check=True,
                       cwd=Path(__file__).resolve().parent)  # fmt: skip
        config, trace = d / "config.json", d / "trace.txt"
        print(f"{len(trace.read_text().splitlines())} flows; pinned to CPU {a.cpu}")
        for r in range(a.rounds):
            out, _, api_rss = timed([*pin, sys.executable, "-c", OURS, str(config)])
            ours = json.loads(out)
            _, htsim, htsim_rss = timed(
                [*pin, str(a.trace_tcp.resolve()), "-k", "8", "-gbps", "10", "-link_us", "1",
                 "-queue_pkts", "100", "-trace", str(trace), "-out", str(d / "htsim.csv"),
                 "-seed", "1", "-scan_us", "10000", "-end_ms", "2000"])  # fmt: skip
            line = (f"round {r + 1}: ours {ours['total']:.2f} s (loop {ours['loop']:.2f} s, "
                    f"{ours['hops']:,} packet-hops, {ours['drops']:,} drops), htsim {htsim:.2f} s: "
                    f"{htsim / ours['total']:.1f}x whole process, {htsim / ours['loop']:.1f}x "
                    f"loop")  # fmt: skip
            if a.matched:
                sim = [*pin, sys.executable, "-m", "repflow", "sim", "--config", str(config),
                       "--quiet"]  # fmt: skip
                _, cli, cli_rss = timed(sim)
                shutil.rmtree(d / "out", ignore_errors=True)
                _, cli_out, out_rss = timed([*sim, "--out", str(d / "out")])
                run = json.loads((d / "out" / "run.json").read_text())
                loop = run["counters"]["wall_time"]
                line += (f"; `repflow sim` {cli:.2f} s ({htsim / cli:.1f}x), with --out "
                         f"{cli_out:.2f} s ({htsim / cli_out:.1f}x; its loop {loop:.2f} s, "
                         f"{100 * (cli_out - loop) / cli_out:.0f} % outside); peak RSS: API "
                         f"{api_rss:.0f} MiB, repflow sim {cli_rss:.0f} MiB, with --out "
                         f"{out_rss:.0f} MiB, htsim {htsim_rss:.0f} MiB")  # fmt: skip
            print(line)
    return 0


def timed(argv: list[str]) -> tuple[str, float, float]:
    """Runs ``argv`` (as a child process); returns its standard output, its wall time and its
    peak RSS in MiB (``wait4``'s resource usage: at least this process's own, which the child
    inherits as a starting point — kept small here)."""
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, argv)
    return out, elapsed, usage.ru_maxrss / 1024


if __name__ == "__main__":
    sys.exit(main())
