"""``repflow bench``: the simulator's speed and memory on scenario "bench-A".

bench-A: 8-pod fat-tree (128 hosts), 10 Gb/s links, 1 µs propagation per link, 100-packet
DropTail, TCP NewReno, web-search flow sizes at load 0.5, 50 ms of arrivals then drain.

The simulation runs in a child Python process that imports only the Rust core, so the peak
resident set size it reports (``VmHWM`` of that process) is the simulation's plus a bare
interpreter's (the baseline, also reported). ``--repeat N`` runs it N times, each in a fresh
child, and reports the median run (by packet-hops per second) with the best and every
run's figure: on a shared machine one run's speed varies from minute to minute. Each run
also reports the CPU time it was given and, for a pinned run on Linux, the share of its CPU's
time the hypervisor gave to others ("steal", from ``/proc/stat``): on a virtual machine whose
physical core is shared, wall-clock speed measures the neighbours as much as the simulator.
This is a benchmark, not a test: the figures are printed, never compared to decide success.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from repflow.errors import UserError

#: Reference figure of htsim on bench-A on the project's machine (packet-hops per second).
HTSIM_PACKET_HOPS_PER_SEC = 2.7e6
#: Targets for one core.
TARGET_PACKET_HOPS_PER_SEC = 15e6
TARGET_PEAK_MEMORY_BYTES = 2**30

SCENARIO = "bench-A"

#: Scenarios: name → (fat-tree k, link rate, default arrival period). All: 1 µs per link,
#: 100-packet DropTail, TCP, web search at load 0.5. bench-A is the reference scenario; the
#: others measure how the per-hop cost holds as the network grows (1,024 and 8,192 hosts).
SCENARIOS: dict[str, tuple[int, str, str]] = {
    "bench-A": (8, "10Gbps", "50ms"),
    "k16": (16, "10Gbps", "5ms"),
    "k16-1g": (16, "1Gbps", "20ms"),
    "k32": (32, "10Gbps", "1ms"),
    "k32-1g": (32, "1Gbps", "5ms"),
    "repflow-point": (16, "1Gbps", "500ms"),
}

#: What a scenario changes besides (k, rate, duration). "repflow-point" is one point of the
#: RepFlow paper's study at its scale (experiments/repflow-paper.toml: 2 µs links, initial
#: window 12; web search at load 0.5, TCP): the point whose cost sets the study's duration.
SCENARIO_EXTRA: dict[str, dict[str, Any]] = {
    "repflow-point": {"link_delay": "2us", "tcp": {"init_cwnd": 12}},
}


def describe(scenario: str) -> str:
    """One line saying what a scenario is."""
    k, rate, _ = SCENARIOS[scenario]
    speed = rate.replace("Gbps", " Gb/s")
    extra = SCENARIO_EXTRA.get(scenario, {})
    delay = extra.get("link_delay", "1us")
    iw = extra.get("tcp", {}).get("init_cwnd")
    tcp = "TCP" if iw is None else f"TCP (initial window {iw})"
    return (
        f"{k}-pod fat-tree ({k**3 // 4:,} hosts), {speed}, {delay}/link, 100-packet DropTail, "
        f"{tcp}, web search at load 0.5"
    )


def bench_config(
    seed: int = 1, duration: str | None = None, scenario: str = SCENARIO,
    drain: str | None = None,
) -> dict[str, Any]:
    """The configuration of a scenario (everything not named here is the schema default;
    `drain`: the longest drain after the last arrival, the schema's default if `None`)."""
    k, rate, default_duration = SCENARIOS[scenario]
    extra = SCENARIO_EXTRA.get(scenario, {})
    workload: dict[str, Any] = {"cdf": "websearch", "load": 0.5,
                                "duration": duration or default_duration}
    if drain is not None:
        workload["drain"] = drain
    return {
        "seed": seed,
        "topology": {"kind": "fat-tree", "k": k, "link_rate": rate,
                     "link_delay": extra.get("link_delay", "1us")},
        "queue": {"limit_packets": 100},
        "routing": {"hash": "default"},
        "tcp": dict(extra.get("tcp", {})),
        "workload": workload,
        "scheme": {"name": "tcp"},
    }


def register(subparsers: Any) -> None:
    """Adds the ``bench`` command."""
    p = subparsers.add_parser(
        "bench",
        help="measure simulator speed and memory on scenario bench-A",
        description=(
            "Run scenario bench-A (8-pod fat-tree, 128 hosts, 10 Gb/s, 1 us per link, "
            "100-packet DropTail, TCP, web search at load 0.5, 50 ms of arrivals then drain) "
            "and print flows, events, packet-hops, packet-hops per second, wall time and peak "
            "memory next to the htsim reference and the target."
        ),
    )
    p.add_argument("--scenario", choices=list(SCENARIOS), default=SCENARIO,
                   help="bench-A (k = 8, the reference), or k16 / k32 at 10 Gb/s and -1g at "
                        "1 Gb/s: how the per-hop cost holds with 1,024 and 8,192 hosts; "
                        "repflow-point: one point of the RepFlow paper's study (k = 16, "
                        "1 Gb/s, 0.5 s; about half a minute a run)")
    p.add_argument("--seed", type=int, default=1, help="master seed (default 1)")
    p.add_argument("--duration", default=None, metavar="TIME",
                   help="arrival period (default: the scenario's: 50ms for bench-A, 5ms k16, "
                        "20ms k16-1g, 1ms k32, 5ms k32-1g, 500ms repflow-point)")
    p.add_argument("--drain", default=None, metavar="TIME",
                   help="longest drain after the last arrival (default: until every flow "
                        "ends). 0s measures the loaded network alone: in a drain few large "
                        "flows remain and a hop is cheaper, the more so the larger the network "
                        "(docs/performance.md)")
    p.add_argument("--repeat", type=int, default=3, metavar="N",
                   help="run N times, each in a fresh process, and report the median run "
                        "with the best and every run (default 3: one run's speed moves with "
                        "the machine's load)")
    p.add_argument("--cpu", type=int, default=None, metavar="N",
                   help="pin the measured process to CPU N, so that the scheduler does not "
                        "move it (and its warm caches) between cores (default: the "
                        "highest-numbered CPU this process may use; -1: do not pin)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="run the simulation on N threads (the network's pods split among "
                        "them; same results); the process is then not pinned unless --cpu "
                        "says so (default 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(func=run_bench)  # fmt: skip


def _peak_rss_bytes() -> int:
    """Peak RSS of this process: ``VmHWM`` on Linux (per address space, so it starts afresh
    at ``exec`` — ``getrusage`` max RSS is inherited from the forking parent), else
    ``getrusage``."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


#: Index of the "steal" column among a ``/proc/stat`` CPU line's time counters.
_STEAL = 7


def cpu_ticks(cpu: int) -> list[int] | None:
    """The time counters (user, nice, system, idle, iowait, irq, softirq, steal, ...) of CPU
    `cpu`'s line in ``/proc/stat``, or ``None`` where that file or line is missing."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(f"cpu{cpu} "):
                    return [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        return None
    return None


def steal_share(before: list[int] | None, after: list[int] | None) -> float | None:
    """Share of a CPU's time the hypervisor gave to other guests ("steal") between two
    ``/proc/stat`` readings of it; ``None`` if a reading is missing, has no steal column, or
    no time passed."""
    if before is None or after is None or min(len(before), len(after)) <= _STEAL:
        return None
    delta = [b - a for a, b in zip(before, after, strict=False)]
    # Guest time (columns after steal) is already counted in user and nice.
    total = sum(delta[: _STEAL + 1])
    if total <= 0 or min(delta) < 0:
        return None
    return delta[_STEAL] / total


def _child() -> None:
    """Entry point of the measuring child process: config JSON on stdin, result on stdout."""
    import time

    from repflow import _core, hugepages

    request = json.loads(sys.stdin.read())
    if request.get("cpu") is not None:
        os.sched_setaffinity(0, {request["cpu"]})
    progress = None
    if request.get("progress"):
        from repflow.cli.sim import SimProgress

        progress = SimProgress(enabled=True)
    base = _peak_rss_bytes()
    cpu = request.get("cpu")
    ticks0 = cpu_ticks(cpu) if cpu is not None else None
    c0 = time.process_time()
    t0 = time.perf_counter()
    try:
        out = _core.simulate(json.dumps(request["config"]), progress,
                             int(request.get("threads", 1)))  # fmt: skip
    except _core.ConfigError as exc:
        print(json.dumps({"error": str(exc)}))
        return
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # the core's other errors (unusable input) are one line too
        print(json.dumps({"error": str(exc)}))
        return
    finally:
        if progress is not None:
            progress.close()
    elapsed = time.perf_counter() - t0
    cpu_seconds = time.process_time() - c0
    ticks1 = cpu_ticks(cpu) if cpu is not None else None
    peak = _peak_rss_bytes()
    print(json.dumps({
        "flows": len(out["records"]),
        "counters": json.loads(out["counters"]),
        "summary": json.loads(out["summary"]),
        "call_seconds": elapsed,
        "cpu_seconds": cpu_seconds,
        "steal_share": steal_share(ticks0, ticks1),
        "peak_rss_bytes": peak,
        "baseline_rss_bytes": base,
        "huge_pages": hugepages.active(),
    }))  # fmt: skip


def choose_cpu(requested: int | None) -> int | None:
    """The CPU to pin the measured process to: `requested` if this process may use it,
    by default the highest-numbered one it may use; ``None`` (no pinning) for -1, or by
    default where affinity cannot be set (an explicit CPU there is refused)."""
    if requested == -1:
        return None
    if not hasattr(os, "sched_getaffinity"):
        if requested is None:
            return None
        raise UserError("bench --cpu: this platform cannot pin a process to a CPU (-1: do not pin)")
    allowed = sorted(os.sched_getaffinity(0))
    if requested is None:
        return allowed[-1]
    if requested not in allowed:
        raise UserError(
            f"bench --cpu: CPU {requested} is not one this process may use "
            f"(allowed: {', '.join(map(str, allowed))}; -1: do not pin)"
        )
    return requested


def measure(
    config: dict[str, Any], progress: bool = False, cpu: int | None = None, threads: int = 1
) -> dict[str, Any]:
    """Runs ``config`` in a fresh child process (pinned to `cpu` unless ``None``, on
    ``threads`` threads; its heap on huge pages unless ``REPFLOW_HUGE_PAGES=0``, see
    :mod:`repflow.hugepages`); returns its counters, summary and memory."""
    from repflow import config_io, hugepages

    cfg = config_io.validate(config)
    env = hugepages.child_env()
    proc = subprocess.run(
        [sys.executable, "-c", "from repflow.cli.bench import _child; _child()"],
        input=json.dumps({"config": cfg, "progress": progress, "cpu": cpu, "threads": threads}),
        stdout=subprocess.PIPE, text=True, check=False, env=env,
    )  # fmt: skip
    if proc.returncode != 0:
        if proc.returncode < 0 or proc.returncode == 130:
            raise KeyboardInterrupt
        raise UserError(f"bench: the simulation process failed with exit status {proc.returncode}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if "error" in result:
        raise UserError(result["error"])
    result["config"] = cfg
    return result


def _fmt(v: float, unit: str = "") -> str:
    for div, suffix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(v) >= div:
            return f"{v / div:.2f}{suffix}{unit}"
    return f"{v:.0f} {unit}".rstrip()


def _speed(r: dict[str, Any]) -> tuple[float, int, float]:
    """Wall time (the core's own, else the call's), packet-hops and packet-hops per second
    of one measured run."""
    c = r["counters"]
    wall = float(c.get("wall_time") or r["call_seconds"])
    hops = int(c.get("packet_hops", 0))
    return wall, hops, hops / wall if wall > 0 else float("nan")


def _median(xs: list[float]) -> float:
    """The median (the lower middle value for an even count), as for the reported run."""
    return sorted(xs)[(len(xs) - 1) // 2]


def _cpu_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The rows on CPU time and stolen time (empty where the runs did not measure them)."""
    rows = []
    if report["cpu_time_s"]:
        rows.append(("CPU time", f"{report['cpu_time_s']:.2f} s   (packet-hops per CPU-second "
                     f"{_fmt(report['packet_hops_per_cpu_sec'])}, median of the runs)"))
    steal = [x["steal_share"] for x in report["runs"] if x["steal_share"] is not None]
    if steal:
        shares = ", ".join(f"{100 * x:.0f}" for x in steal)
        note = ("   the machine is shared: wall-clock figures understate the simulator"
                if max(steal) >= 0.05 else "")
        rows.append((f"stolen from CPU {report['cpu']}", f"{shares} % of each run's time{note}"))
    return rows  # fmt: skip


def run_bench(args: argparse.Namespace) -> int:
    """Handler of ``repflow bench``."""
    if args.repeat < 1:
        raise UserError(f"bench --repeat: must be at least 1 run (got {args.repeat})")
    if args.threads < 1:
        raise UserError(f"bench --threads: must be at least 1 thread (got {args.threads})")
    config = bench_config(args.seed, args.duration, args.scenario, args.drain)
    from repflow import config_io

    # checked here, so that an error names the flag (--duration 5: give a unit, e.g. 5ms)
    origins = {key: config_io.Origin("flag", flag, value) for key, flag, value in (
        ("workload.duration", "--duration", args.duration),
        ("workload.drain", "--drain", args.drain)) if value is not None}  # fmt: skip
    config_io.validate(config, origins=origins)
    # Threads need the cores: pinned only where the user says so.
    cpu = choose_cpu(args.cpu) if args.threads == 1 or args.cpu is not None else None
    show_bar = not args.quiet and sys.stderr.isatty()
    results = []
    for i in range(args.repeat):
        if args.repeat > 1 and not args.quiet:
            print(f"{args.scenario} run {i + 1} of {args.repeat}", file=sys.stderr, flush=True)
        results.append(measure(config, progress=show_bar, cpu=cpu, threads=args.threads))
    runs = [_speed(r) for r in results]
    if len({hops for _, hops, _ in runs}) > 1:
        raise UserError(
            "bench: runs of one seed simulated different numbers of packet-hops "
            f"({sorted({hops for _, hops, _ in runs})}): the simulator is not deterministic"
        )
    # The median run (the lower middle one for an even count) gives the figures.
    order = sorted(range(len(runs)), key=lambda i: runs[i][2])
    mid = order[(len(order) - 1) // 2]
    r = results[mid]
    c = r["counters"]
    wall, hops, hops_per_sec = runs[mid]
    per_cpu = [h / res["cpu_seconds"] for (_, h, _), res in zip(runs, results, strict=True)
               if res.get("cpu_seconds")]  # fmt: skip
    report = {
        "scenario": args.scenario,
        "seed": args.seed,
        "repeat": args.repeat,
        "cpu": cpu,
        "threads": args.threads,
        "runs": [
            {"packet_hops_per_sec": hps, "wall_time_s": w,
             "cpu_time_s": res.get("cpu_seconds"), "steal_share": res.get("steal_share"),
             "peak_memory_bytes": res["peak_rss_bytes"]}
            for (w, _, hps), res in zip(runs, results, strict=True)
        ],
        "best_packet_hops_per_sec": max(hps for _, _, hps in runs),
        "duration": r["config"]["workload"]["duration"],
        "drain": r["config"]["workload"].get("drain"),
        "flows": r["flows"],
        "unfinished": r["summary"].get("unfinished"),
        "events": c.get("events"),
        "packet_hops": hops,
        "wall_time_s": wall,
        "cpu_time_s": r.get("cpu_seconds"),
        "steal_share": r.get("steal_share"),
        "packet_hops_per_sec": hops_per_sec,
        "packet_hops_per_cpu_sec": _median(per_cpu) if per_cpu else None,
        "events_per_sec": c.get("events") / wall if wall > 0 else float("nan"),
        "peak_memory_bytes": r["peak_rss_bytes"],
        "baseline_memory_bytes": r["baseline_rss_bytes"],
        "huge_pages": r.get("huge_pages", False),
        "sim_time_s": c.get("sim_time"),
        "drops": c.get("drops"),
        "hosts": SCENARIOS[args.scenario][0] ** 3 // 4,
        "connections": c.get("connections"),
        "memory_per_host_bytes": (r["peak_rss_bytes"] - r["baseline_rss_bytes"])
        / (SCENARIOS[args.scenario][0] ** 3 // 4),
        "memory_per_connection_bytes": (r["peak_rss_bytes"] - r["baseline_rss_bytes"])
        / max(1, c.get("connections") or 0),
        "reference": {"htsim_packet_hops_per_sec": HTSIM_PACKET_HOPS_PER_SEC},
        "target": {"packet_hops_per_sec": TARGET_PACKET_HOPS_PER_SEC,
                   "peak_memory_bytes": TARGET_PEAK_MEMORY_BYTES},
    }  # fmt: skip
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    mib = 2**20
    median_note = f" median of {args.repeat}" if args.repeat > 1 else ""
    print(
        f"{args.scenario}: {describe(args.scenario)}, {report['duration']} of arrivals then "
        f"drain{'' if args.drain is None else ' of at most ' + args.drain}, seed {args.seed}"
    )
    print(f"  runs pinned to CPU {cpu}" if cpu is not None else "  runs not pinned to a CPU")
    print("  heap on huge pages" if report["huge_pages"] else
          "  heap on the system's pages (see REPFLOW_HUGE_PAGES in docs/performance.md)")
    if args.threads > 1:
        print(f"  on {args.threads} threads (the network's pods split among them)")
    rows = [
        ("flows", f"{report['flows']} ({report['unfinished']} unfinished)"),
        ("events", _fmt(report["events"] or 0)),
        ("simulated packet-hops", _fmt(hops)),
        ("simulated time", f"{(report['sim_time_s'] or 0) * 1e3:.2f} ms"),
        ("wall time", f"{wall:.2f} s"),
        ("packet-hops per second", f"{_fmt(hops_per_sec)}{median_note}" + (
            f"   (htsim: {_fmt(HTSIM_PACKET_HOPS_PER_SEC)}, target >= "
            f"{_fmt(TARGET_PACKET_HOPS_PER_SEC)}; {hops_per_sec / HTSIM_PACKET_HOPS_PER_SEC:.2f}x "
            "htsim)" if args.scenario == SCENARIO else "")),
        ("events per second", _fmt(report["events_per_sec"])),
        ("peak memory (RSS)", f"{report['peak_memory_bytes'] / mib:.1f} MiB   (target <= 1024 "
         f"MiB; bare interpreter {report['baseline_memory_bytes'] / mib:.1f} MiB)"),
        ("memory per host", f"{report['memory_per_host_bytes'] / 1024:.1f} KiB   (peak less the "
         f"interpreter, over {report['hosts']:,} hosts; "
         f"{report['memory_per_connection_bytes'] / 1024:.2f} KiB per connection opened)"),
    ]  # fmt: skip
    if args.repeat > 1:
        each = ", ".join(_fmt(x["packet_hops_per_sec"]) for x in report["runs"])
        rows.insert(6, ("  best; every run", f"{_fmt(report['best_packet_hops_per_sec'])}; {each}"))
    at = next(i for i, (name, _) in enumerate(rows) if name == "events per second")
    rows[at:at] = _cpu_rows(report)
    for name, value in rows:
        print(f"  {name:<24}{value}")
    return 0
