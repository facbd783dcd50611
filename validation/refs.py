"""Differential validation against reference simulators: the scenarios, their traces, and
the figures compared (docs/validation.md).

    python3 validation/refs.py traces                      # write the traces (fixtures)
    python3 validation/refs.py htsim --binary PATH         # run htsim's driver on every trace
    python3 validation/refs.py compare                     # our figures beside the fixtures
    python3 validation/refs.py mptcp-traces                # the MPTCP scenario's trace
    python3 validation/refs.py htsim-mptcp --binary PATH   # htsim's MPTCP on it (fixtures)
    python3 validation/refs.py compare-mptcp               # our MPTCP beside htsim's
    python3 validation/refs.py repflow-ours                # our quick RepFlow study + traces
    python3 validation/refs.py htsim-repflow --bin DIR     # htsim's schemes on those traces
    python3 validation/refs.py study-ours mptcp-l-quick    # the same for the MPTCP-L study
    python3 validation/refs.py htsim-study mptcp-l-quick --bin DIR
    python3 validation/refs.py ns3-study --binary PATH     # ns-3 (per-flow ECMP) on those traces
    python3 validation/refs.py compare-repflow             # the effects in both

The reference simulators are built from their public sources outside this repository
(`validation/htsim/build.sh`); only their results are committed, under
`tests/fixtures/refs/<scenario>/`, with `provenance.json`. The CI test
(`tests/python/test_validation.py`) replays every trace in this simulator and checks the
figures against those fixtures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "refs"
SHORT_MAX = 100_000  # bytes: the papers' (0, 100 KB] bin
HTSIM_SEEDS = tuple(range(1, 9))
OUR_SEEDS = tuple(range(1, 11))

#: Our TCP set to what htsim's TcpSrc does (sim/tcp.cpp): 10-packet initial window, slow-start
#: threshold 100 packets, minimum RTO 250 ms, initial RTO 3 s, a SYN exchange first, an ACK per
#: packet, no receive-window cap, NewReno without SACK. Packets are 1,500 bytes on the wire in
#: both (htsim counts them as payload; here 1,460 + 40 B headers: 2.7 % more packets per flow).
TCP = {
    "mss": 1460, "header": 40, "init_cwnd": 10, "initial_ssthresh": 100, "min_rto": "250ms",
    "initial_rto": "3s", "max_window": "none", "handshake": True, "delayed_ack": False,
    "sack": False,
}  # fmt: skip


def _incast() -> list[tuple[int, int, int, int]]:
    """k = 4: ten rounds, 10 ms apart, of 15 senders × 80 KB to host 0, beside two 20 MB flows
    into host 0 from t = 0."""
    flows = [(4, 0, 20_000_000, 0), (8, 0, 20_000_000, 0)]
    for r in range(10):
        t = (r + 1) * 10_000_000_000  # ps
        flows += [(s, 0, 80_000, t) for s in range(1, 16)]
    return flows


def _permutation() -> list[tuple[int, int, int, int]]:
    """k = 4: a random derangement of the 16 hosts, 5 MB each, starts within the first 100 µs."""
    rng = np.random.default_rng(7)
    while True:
        perm = rng.permutation(16)
        if all(perm[i] != i for i in range(16)):
            break
    starts = rng.integers(0, 100_000_000, 16)  # ps
    return [(i, int(perm[i]), 5_000_000, int(starts[i])) for i in range(16)]


def _websearch(duration: str = "10ms") -> list[tuple[int, int, int, int]]:
    """k = 8, 10 Gb/s: the flows this simulator draws for web search at load 0.5 over 10 ms
    (seed 1), as a fixed trace (``duration``: another span of arrivals)."""
    from repflow import api

    r = api.simulate({
        "seed": 1, "topology": {"kind": "fat-tree", "k": 8, "link_rate": "10Gbps",
                                "link_delay": "1us"},
        "workload": {"cdf": "websearch", "load": 0.5, "duration": duration, "drain": "1ms"},
    })  # fmt: skip
    f = r.flows.sort_values("id")
    return [(int(a), int(b), int(s), round(t * 1e12))
            for a, b, s, t in zip(f.src, f.dst, f["size"], f.start, strict=True)]  # fmt: skip


#: name → (fat-tree k, trace builder): the htsim scenarios.
SCENARIOS = {"incast-k4": (4, _incast), "permutation-k4": (4, _permutation),
             "websearch-k8": (8, _websearch)}  # fmt: skip

#: The ns-3 scenario: an incast on a star (one switch, 17 hosts: no ECMP, so both simulators
#: route alike). Each seed's trace jitters the start times by up to 20 µs (uniform), which is
#: what varies between seeds in both simulators.
STAR_HOSTS = 17
NS3_SEEDS = tuple(range(1, 9))


def star_trace(seed: int) -> list[tuple[int, int, int, int]]:
    """Ten rounds, 10 ms apart, of 16 senders × 80 KB into host 0, beside two 20 MB flows from
    hosts 1 and 2; starts jittered by up to 20 µs (seeded)."""
    rng = np.random.default_rng(1000 + seed)
    flows = [(1, 0, 20_000_000, 0), (2, 0, 20_000_000, 0)]
    for r in range(10):
        t = (r + 1) * 10_000_000_000
        flows += [(s, 0, 80_000, t) for s in range(1, STAR_HOSTS)]
    return sorted(((a, b, z, t + int(rng.integers(0, 20_000_000))) for a, b, z, t in flows),
                  key=lambda f: f[3])  # fmt: skip


#: Our TCP set to the ns-3 driver's (validation/ns3/trace-tcp.cc): NewReno with classic
#: recovery, no SACK, IW 10, ssthresh 100 segments, 250 ms minimum RTO, 3 s handshake timer,
#: an ACK per segment; ns-3 adds 2 bytes of PPP header per packet (42 B against 40 here).
NS3_TCP = {**TCP}
NETWORK = {"link_rate": "10Gbps", "link_delay": "1us", "queue_packets": 100}


def read_trace(name: str, file: str = "trace.txt") -> list[tuple[int, int, int, int]]:
    """The committed trace of a scenario: (src, dst, size bytes, start ps) per flow."""
    rows = (FIXTURES / name / file).read_text().split("\n")
    return [tuple(int(x) for x in line.split()) for line in rows if line.strip()]  # type: ignore[misc]


def our_config(name: str, seed: int) -> dict[str, Any]:
    """The configuration that replays scenario ``name`` in this simulator."""
    k, _ = SCENARIOS[name]
    rows = sorted(read_trace(name), key=lambda r: r[3])  # this simulator wants start order
    trace = [{"src": s, "dst": d, "size": f"{z}B", "start": f"{t}ps"} for s, d, z, t in rows]
    return {
        "seed": seed,
        "topology": {"kind": "fat-tree", "k": k, "link_rate": NETWORK["link_rate"],
                     "link_delay": NETWORK["link_delay"]},
        # htsim's queues hold bytes (100 × 1,500 B), so a 40-byte ACK takes 40 bytes of room,
        # not a packet's.
        "queue": {"limit_bytes": f"{NETWORK['queue_packets'] * 1500}B", "host_limit_packets": 0},
        "tcp": dict(TCP),
        "workload": {"trace": trace, "drain": "20s"},
    }  # fmt: skip


def figures(size: np.ndarray, fct: np.ndarray, timeouts: np.ndarray, drops: float) -> dict:
    """The compared figures of one run."""
    done = np.isfinite(fct) & (fct >= 0)
    short = done & (size <= SHORT_MAX)
    large = done & (size > SHORT_MAX)
    return {
        "flows": int(len(size)),
        "unfinished": int((~done).sum()),
        "short_mean": float(np.mean(fct[short])) if short.any() else float("nan"),
        "short_p99": float(np.quantile(fct[short], 0.99)) if short.any() else float("nan"),
        "large_mean": float(np.mean(fct[large])) if large.any() else float("nan"),
        "drops": float(drops),
        "flows_with_timeout": int((timeouts > 0).sum()),
    }


def ours(name: str, seed: int) -> dict:
    """Our figures for one seed (the seed moves ECMP's hash salt, i.e. the paths)."""
    from repflow import api

    r = api.simulate(our_config(name, seed))
    f = r.flows.sort_values("id")
    return figures(f["size"].to_numpy(), f.fct.to_numpy(), f.timeouts.to_numpy(),
                   r.metadata["counters"]["drops"])  # fmt: skip


def star_config(seed: int) -> dict[str, Any]:
    """The configuration that replays the star incast of ``seed`` in this simulator (queues in
    packets, as ns-3's DropTailQueue counts them)."""
    rows = read_trace("incast-star", f"trace-seed{seed}.txt")
    trace = [{"src": s, "dst": d, "size": f"{z}B", "start": f"{t}ps"} for s, d, z, t in rows]
    return {
        "seed": seed,
        "topology": {"kind": "star", "hosts": STAR_HOSTS, "link_rate": NETWORK["link_rate"],
                     "link_delay": NETWORK["link_delay"]},
        "queue": {"limit_packets": NETWORK["queue_packets"], "host_limit_packets": 0},
        "tcp": dict(NS3_TCP),
        "workload": {"trace": trace, "drain": "20s"},
    }  # fmt: skip


def ours_star(seed: int) -> dict:
    """Our figures for one seed of the star incast."""
    from repflow import api

    r = api.simulate(star_config(seed))
    f = r.flows.sort_values("id")
    # ns-3's count (entries into CA_LOSS) leaves out handshake timeouts: compare data timeouts.
    return figures(f["size"].to_numpy(), f.fct.to_numpy(), f.data_timeouts.to_numpy(),
                   r.metadata["counters"]["drops"])  # fmt: skip


def ns3_figures() -> list[dict]:
    """ns-3's figures for the star incast, one per stored seed."""
    out = []
    for seed in NS3_SEEDS:
        f = pd.read_csv(FIXTURES / "incast-star" / f"ns3-seed{seed}.csv")
        out.append(figures(f["size"].to_numpy(), f.fct.to_numpy(), f.timeouts.to_numpy(),
                           f.drops.sum()))  # fmt: skip
    return out


def htsim_figures(name: str) -> list[dict]:
    """The reference's figures, one per stored seed."""
    out = []
    for seed in HTSIM_SEEDS:
        f = pd.read_csv(FIXTURES / name / f"htsim-seed{seed}.csv")
        out.append(figures(f["size"].to_numpy(), f.fct.to_numpy(), f.timeouts.to_numpy(),
                           f.drops.sum()))  # fmt: skip
    return out


#: The MPTCP scenarios (docs/validation.md, "MPTCP against htsim"), k = 4 fat-trees at
#: 100 Mb/s so that flows of few packets last seconds (a 250 ms minimum RTO is then small beside
#: them). Every flow carries MPTCP_PACKETS data packets: 1,500 bytes of data each in htsim,
#: 1,460 + 40 B of headers here, so both send the same packets.
MPTCP_K = 4
MPTCP_PACKETS = 20_000
MPTCP_NETWORK = {"link_rate": "100Mbps", "gbps": 0.1, "link_delay": "1us",
                 "queue_packets": 100}  # fmt: skip


def _mptcp_permutation() -> list[tuple[int, int, int, int]]:
    """k = 4: the derangement of `permutation-k4` (same generator), MPTCP_PACKETS packets of
    1,500 B per flow (htsim's bytes), starts within the first 100 µs."""
    return [(a, b, MPTCP_PACKETS * 1500, t) for a, b, _, t in _permutation()]


def _mptcp_pair() -> list[tuple[int, int, int, int]]:
    """k = 4: two flows into host 1, from its neighbour under the same edge switch (host 0,
    at t = 0) and from host 2 under the other edge switch of the pod (1 µs later). They share
    one port (edge → host 1) and nothing else: no path choice matters."""
    return [(0, 1, MPTCP_PACKETS * 1500, 0), (2, 1, MPTCP_PACKETS * 1500, 1_000_000)]


#: name → (trace builder, htsim switch queue, (subflows, coupling) runs, htsim seeds, our
#: seeds). `mptcp-permutation-k4` is htsim's classic MPTCP experiment (a permutation of long
#: flows) with its default RandomQueue; `mptcp-pair-k4` is a deterministic check of the
#: mechanics (one shared port, DropTail in both simulators, no path randomness).
MPTCP_SCENARIOS = {
    "mptcp-permutation-k4": (_mptcp_permutation, "random",
                             ((1, "lia"), (2, "lia"), (4, "lia"), (8, "lia"), (2, "uncoupled"),
                              (8, "uncoupled")), tuple(range(1, 9)), tuple(range(1, 11))),
    "mptcp-pair-k4": (_mptcp_pair, "droptail",
                      ((1, "lia"), (2, "lia"), (4, "lia"), (8, "lia"), (8, "uncoupled")),
                      (1, 2), (1, 2)),
}  # fmt: skip


def mptcp_config(name: str, subflows: int, coupling: str, seed: int) -> dict[str, Any]:
    """The configuration that replays MPTCP scenario ``name`` in this simulator: `mptcp` with
    all subflows joining at the start (htsim's subflows all open with the flow, each with its
    own SYN), TCP as for the htsim TCP scenarios, switch queues of 100 × 1,500 bytes."""
    rows = sorted(read_trace(name), key=lambda r: r[3])
    trace = [{"src": s, "dst": d, "size": f"{z // 1500 * TCP['mss']}B", "start": f"{t}ps"}
             for s, d, z, t in rows]  # fmt: skip
    return {
        "seed": seed,
        "topology": {"kind": "fat-tree", "k": MPTCP_K, "link_rate": MPTCP_NETWORK["link_rate"],
                     "link_delay": MPTCP_NETWORK["link_delay"]},
        "queue": {"limit_bytes": f"{MPTCP_NETWORK['queue_packets'] * 1500}B",
                  "host_limit_packets": 0},
        "tcp": dict(TCP),
        "scheme": {"name": "mptcp", "subflows": subflows, "coupling": coupling,
                   "join": "start"},
        "workload": {"trace": trace, "drain": "200s"},
    }  # fmt: skip


def mptcp_figures(packets: np.ndarray, fct: np.ndarray, timeouts: np.ndarray, drops: float,
                  rate_bps: float) -> dict:  # fmt: skip
    """The compared MPTCP figures of one run. A flow's goodput is its packets × 1,500 B over
    its FCT, as a fraction of the host link's rate (the same wire bytes in both simulators)."""
    done = np.isfinite(fct) & (fct > 0)
    g = packets[done] * 1500 * 8 / fct[done] / rate_bps
    out = {
        "flows": int(len(fct)),
        "unfinished": int((~done).sum()),
        "goodput_mean": float(np.mean(g)),
        "goodput_p10": float(np.quantile(g, 0.1)),
        "goodput_min": float(np.min(g)),
        "drops": float(drops),
        "timeouts": float(timeouts.sum()),
    }
    if len(fct) == 2:  # the pair: per flow (in start order in both)
        for i in range(2):
            out[f"fct{i}"] = float(fct[i])
            out[f"timeouts{i}"] = float(timeouts[i])
    return out


def ours_mptcp(name: str, subflows: int, coupling: str, seed: int) -> dict:
    """Our MPTCP figures for one seed (the seed moves ECMP's hash salt: every subflow's path)."""
    from repflow import api

    r = api.simulate(mptcp_config(name, subflows, coupling, seed))
    f = r.flows.sort_values("id")
    return mptcp_figures((f["size"] // TCP["mss"]).to_numpy(), f.fct.to_numpy(),
                         f.timeouts.to_numpy(), r.metadata["counters"]["drops"],
                         MPTCP_NETWORK["gbps"] * 1e9)  # fmt: skip


def mptcp_fixture(name: str, subflows: int, coupling: str, seed: int) -> Path:
    """htsim's result file of one run."""
    return FIXTURES / name / f"htsim-{coupling}-n{subflows}-seed{seed}.csv"


def htsim_mptcp_figures(name: str, subflows: int, coupling: str) -> list[dict]:
    """htsim's MPTCP figures, one per stored seed."""
    out = []
    for seed in MPTCP_SCENARIOS[name][3]:
        f = pd.read_csv(mptcp_fixture(name, subflows, coupling, seed))
        fct = f.fct.to_numpy(dtype=float, copy=True)
        fct[fct < 0] = np.nan
        out.append(mptcp_figures((f["size"] // 1500).to_numpy(), fct, f.timeouts.to_numpy(),
                                 f.drops.sum(), MPTCP_NETWORK["gbps"] * 1e9))  # fmt: skip
    return out


def cmd_mptcp_traces(_: argparse.Namespace) -> None:
    for name, (build, *_) in MPTCP_SCENARIOS.items():
        d = FIXTURES / name
        d.mkdir(parents=True, exist_ok=True)
        rows = build()
        (d / "trace.txt").write_text("".join(f"{s} {t} {z} {a}\n" for s, t, z, a in rows))
        print(f"{name}: {len(rows)} flows")


def cmd_htsim_mptcp(args: argparse.Namespace) -> None:
    binary = Path(args.binary).resolve()
    for name, (_, queue, mp_runs, seeds, _) in MPTCP_SCENARIOS.items():
        d = FIXTURES / name
        runs = []
        for subflows, coupling in mp_runs:
            for seed in seeds:
                out = mptcp_fixture(name, subflows, coupling, seed).name
                cmd = [str(binary), "-k", str(MPTCP_K), "-gbps", str(MPTCP_NETWORK["gbps"]),
                       "-link_us", "1", "-queue_pkts", str(MPTCP_NETWORK["queue_packets"]),
                       "-trace", "trace.txt", "-out", out, "-subflows", str(subflows), "-cc",
                       coupling, "-queue", queue, "-seed", str(seed), "-scan_us", "10",
                       "-end_ms", "200000"]  # fmt: skip
                subprocess.run(cmd, cwd=d, check=True, stdout=subprocess.DEVNULL)
                runs.append(" ".join([binary.name, *cmd[1:]]))
            print(f"{name}: htsim {coupling} n={subflows} done")
        qdesc = (
            "htsim RandomQueue (drops 10 % of arrivals in the last 3 packets of the buffer, "
            "every arrival beyond it)"
            if queue == "random"
            else "DropTail (htsim's ECNQueue: its CE marks are ignored by htsim's TcpSrc)"
        )
        prov = {
            "reference": "htsim (github.com/Broadcom/csg-htsim)",
            "commit": args.commit,
            "build": "make -C sim; bash validation/htsim/build.sh <checkout> (g++ -O2)",
            "driver": "validation/htsim/trace_mptcp.cpp",
            "commands (run in this directory)": runs,
            "network": {**MPTCP_NETWORK, "k": MPTCP_K, "queue": f"switches: {qdesc}; hosts: "
                        "FairPriorityQueue (unlimited; ACKs at high priority, data of "
                        "different flows and subflows served round-robin)"},  # fmt: skip
            "flows": f"trace.txt; {MPTCP_PACKETS} packets of 1,500 B each",
            "mptcp": "htsim MultipathTcpSrc: lia = COUPLED_INC (RFC 6356 linked increases), "
                     "uncoupled = UNCOUPLED; N TcpSrc subflows all starting with the flow, "
                     "each with its own SYN; htsim has no data-level sequence space, so the "
                     "driver gives a flow a shared budget of packets (a subflow sends a new "
                     "packet only while the flow's subflows have sent fewer than the flow's "
                     "packets) and the flow completes when every packet sent has been "
                     "acknowledged",
            "tcp": "htsim TcpSrc defaults: IW 10 packets, ssthresh 100 packets, min RTO 250 ms "
                   "(hard-coded), initial RTO 3 s, SYN first, ACK per packet (40 B), "
                   "1,500-byte packets, NewReno-style recovery without SACK; a subflow's window "
                   "halves to at least 1 packet (MultipathTcpSrc::deflate_window); RTO checked "
                   "every 10 µs",
            "paths": "every subflow a uniformly random equal-cost path (with replacement, as "
                     "htsim's own fat-tree MPTCP experiments), its ACKs a random reverse path; "
                     "seeded",
        }  # fmt: skip
        (d / "provenance.json").write_text(json.dumps(prov, indent=2, ensure_ascii=False) + "\n")


def cmd_compare_mptcp(_: argparse.Namespace) -> None:
    for name, (_, _, mp_runs, _, our_seeds) in MPTCP_SCENARIOS.items():
        rows = []
        for subflows, coupling in mp_runs:
            ref = pd.DataFrame(htsim_mptcp_figures(name, subflows, coupling))
            me = pd.DataFrame([ours_mptcp(name, subflows, coupling, s) for s in our_seeds])
            unfinished = int(ref.unfinished.sum() + me.unfinished.sum())
            metrics = [m for m in ref.columns if m not in ("flows", "unfinished")]
            for m in metrics:
                rows.append({"coupling": coupling, "subflows": subflows, "figure": m,
                             "htsim": ref[m].mean(), "htsim min": ref[m].min(),
                             "htsim max": ref[m].max(), "ours": me[m].mean(),
                             "ours min": me[m].min(), "ours max": me[m].max(),
                             "unfinished": unfinished})  # fmt: skip
        print(f"== {name}")
        print(pd.DataFrame(rows).to_string(float_format=lambda x: f"{x:.4g}"))


def cmd_traces(_: argparse.Namespace) -> None:
    for name, (_, build) in SCENARIOS.items():
        d = FIXTURES / name
        d.mkdir(parents=True, exist_ok=True)
        rows = build()
        (d / "trace.txt").write_text("".join(f"{s} {t} {z} {a}\n" for s, t, z, a in rows))
        print(f"{name}: {len(rows)} flows")
    for file, duration in WS_LONG_TRACES.items():
        rows = _websearch(duration)
        (FIXTURES / WS_NS3 / file).write_text("".join(f"{s} {t} {z} {a}\n" for s, t, z, a in rows))
        print(f"{WS_NS3} ({duration}): {len(rows)} flows")


def cmd_htsim(args: argparse.Namespace) -> None:
    binary = Path(args.binary).resolve()
    for name, (k, _) in SCENARIOS.items():
        d = FIXTURES / name
        runs = []
        for seed in HTSIM_SEEDS:
            cmd = [str(binary), "-k", str(k), "-gbps", "10", "-link_us", "1", "-queue_pkts",
                   str(NETWORK["queue_packets"]), "-trace", "trace.txt", "-out",
                   f"htsim-seed{seed}.csv", "-seed", str(seed), "-scan_us", "10",
                   "-end_ms", "20000"]  # fmt: skip
            subprocess.run(cmd, cwd=d, check=True, stdout=subprocess.DEVNULL)
            runs.append(" ".join([binary.name, *cmd[1:]]))
        prov = {
            "reference": "htsim (github.com/Broadcom/csg-htsim)",
            "commit": args.commit,
            "build": "make -C sim; bash validation/htsim/build.sh <checkout> (g++ -O2)",
            "driver": "validation/htsim/trace_tcp.cpp",
            "commands (run in this directory)": runs,
            "network": {**NETWORK, "k": k, "queue": "htsim RandomQueue (drops 10 % of arrivals "
                        "in the last 3 packets of the buffer, every arrival beyond it); hosts: "
                        "FairPriorityQueue"},  # fmt: skip
            "tcp": "htsim TcpSrc defaults: IW 10 packets, ssthresh 100 packets, min RTO 250 ms "
                   "(hard-coded), initial RTO 3 s, SYN first, ACK per packet (40 B), 1,500-byte "
                   "packets, NewReno-style recovery without SACK; RTO checked every 10 µs",
            "paths": "uniformly random equal-cost path per flow (and per ACK stream), seeded",
        }  # fmt: skip
        (d / "provenance.json").write_text(json.dumps(prov, indent=2) + "\n")
        print(f"{name}: htsim done")


def cmd_star_traces(_: argparse.Namespace) -> None:
    d = FIXTURES / "incast-star"
    d.mkdir(parents=True, exist_ok=True)
    for seed in NS3_SEEDS:
        rows = star_trace(seed)
        text = "".join(f"{a} {b} {z} {t}\n" for a, b, z, t in rows)
        (d / f"trace-seed{seed}.txt").write_text(text)
    print(f"incast-star: {len(NS3_SEEDS)} traces")


def cmd_ns3(args: argparse.Namespace) -> None:
    binary = Path(args.binary).resolve()
    d = FIXTURES / "incast-star"
    runs = []
    for seed in NS3_SEEDS:
        cmd = [str(binary), f"--hosts={STAR_HOSTS}", f"--trace=trace-seed{seed}.txt",
               f"--out=ns3-seed{seed}.csv", "--gbps=10", "--linkUs=1",
               f"--queuePkts={NETWORK['queue_packets']}", "--minRtoMs=250",
               f"--seed={seed}"]  # fmt: skip
        subprocess.run(cmd, cwd=d, check=True, stdout=subprocess.DEVNULL)
        runs.append(" ".join([binary.name, *cmd[1:]]))
    prov = {
        "reference": "ns-3 (github.com/nsnam/ns-3-dev-git)",
        "commit": args.commit,
        "build": "bash validation/ns3/build.sh <checkout> (cmake, ninja, release profile)",
        "driver": "validation/ns3/trace-tcp.cc (built as scratch/repflow-trace-tcp.cc)",
        "commands (run in this directory)": runs,
        "network": {**NETWORK, "topology": f"star, {STAR_HOSTS} hosts on one switch",
                    "queue": "DropTailQueue 100 packets at the switch's ports (packet mode), "
                    "100,000 at hosts, traffic-control qdiscs removed"},  # fmt: skip
        "tcp": "TcpNewReno + TcpClassicRecovery, SegmentSize 1460, InitialCwnd 10, "
               "InitialSlowStartThreshold 146000 B, DelAckCount 1, ConnTimeout 3 s, MinRto 250 ms, "
               "ClockGranularity 1 us, no SACK, no timestamps, no limited transmit, 1 GB buffers",
        "timeouts": "entries into CA_LOSS (a handshake timeout is not counted)",
    }  # fmt: skip
    (d / "provenance.json").write_text(json.dumps(prov, indent=2) + "\n")
    print("incast-star: ns-3 done")


def cmd_compare(_: argparse.Namespace) -> None:
    for name in SCENARIOS:
        ref = pd.DataFrame(htsim_figures(name))
        me = pd.DataFrame([ours(name, s) for s in OUR_SEEDS])
        print(f"== {name}")
        print(pd.DataFrame({"htsim mean": ref.mean(), "htsim min": ref.min(),
                            "htsim max": ref.max(), "ours mean": me.mean(), "ours min": me.min(),
                            "ours max": me.max()}).to_string())  # fmt: skip
    if (FIXTURES / "incast-star" / f"ns3-seed{NS3_SEEDS[0]}.csv").is_file():
        ref = pd.DataFrame(ns3_figures())
        me = pd.DataFrame([ours_star(s) for s in NS3_SEEDS])
        print("== incast-star (ns-3)")
        print(pd.DataFrame({"ns3 mean": ref.mean(), "ns3 min": ref.min(), "ns3 max": ref.max(),
                            "ours mean": me.mean(), "ours min": me.min(),
                            "ours max": me.max()}).to_string())  # fmt: skip


# --- websearch-k8 under ns-3 with per-flow ECMP (docs/validation.md, "websearch-k8 under
# ns-3"): the htsim scenario's trace replayed by validation/ns3/trace-fattree.cc, the third
# simulator on the same flows, in two settings.

WS_NS3 = "websearch-k8"
_RTO10_FLAGS = {"mss": 1460, "iw": 10, "ssthreshPkts": 0, "maxWindow": 131_072,
                "windowScaling": 1, "minRtoMs": 10, "connTimeoutMs": 10, "delAckCount": 1,
                "queuePkts": 100}  # fmt: skip
_RTO10_OURS = {"queue": {"limit_packets": 100, "host_limit_packets": 0},
               "tcp": {**TCP, "init_cwnd": 10, "initial_ssthresh": None, "min_rto": "10ms",
                       "initial_rto": "10ms", "max_window": "131072B"}}  # fmt: skip
#: variant → the driver's flags, our configuration's changes from :func:`our_config`, the
#: trace (under tests/fixtures/refs/websearch-k8/), ns-3's seeds (hash salts; a 10 ms run
#: takes 1.5–3 minutes of a core) and ours.
#: ``matched``: the TCP of the htsim comparison (IW 10, ssthresh 100, 250 ms minimum RTO, 3 s
#: SYN timer, no window cap, an ACK per segment) and 150,000-byte switch queues.
#: ``rto10``: an independent ns-3 setting reported on the issue: IW 10, unlimited ssthresh,
#: 10 ms minimum RTO and SYN timer, 128 KiB socket buffers (the window cap), an ACK per segment,
#: 100-packet switch queues (ACKs take a slot).
#: ``rto10-50ms``: the same settings over 50 ms of arrivals (``trace-50ms.txt``, written by
#: ``refs.py traces``), the length of the independent run (a run takes 12–15 minutes of a core).
WS_NS3_VARIANTS: dict[str, dict[str, Any]] = {
    "matched": {"flags": {"mss": 1460, "iw": 10, "ssthreshPkts": 100, "maxWindow": 1 << 30,
                          "windowScaling": 1, "minRtoMs": 250, "connTimeoutMs": 3000,
                          "delAckCount": 1, "queueBytes": 150_000},
                "ours": {}, "trace": "trace.txt", "seeds": (1, 2, 3, 4), "our_seeds": OUR_SEEDS},
    "rto10": {"flags": _RTO10_FLAGS, "ours": _RTO10_OURS, "trace": "trace.txt",
              "seeds": (1, 2, 3, 4), "our_seeds": OUR_SEEDS},
    # Checked against the issue's tolerances (relative to ns-3's mean over its seeds) rather
    # than the seed spread: three 50 ms runs of ns-3 spread too little for that rule.
    "rto10-50ms": {"flags": _RTO10_FLAGS, "ours": _RTO10_OURS, "trace": "trace-50ms.txt",
                   "seeds": (1, 2, 3), "our_seeds": OUR_SEEDS,
                   "tolerance": {"short_mean": 0.15, "short_p99": 0.25, "large_mean": 0.20,
                                 "flows_with_timeout": 0.25, "drops": 0.30}},
}  # fmt: skip
#: Longer spans of websearch-k8's arrivals (file under tests/fixtures/refs/websearch-k8/ →
#: duration), drawn as its trace.txt (seed 1) for the variants that replay them.
WS_LONG_TRACES = {"trace-50ms.txt": "50ms"}


def _ws_trace(variant: str) -> list[tuple[int, int, int, int]]:
    """The variant's flows in start order (ours replays them so)."""
    return sorted(read_trace(WS_NS3, WS_NS3_VARIANTS[variant]["trace"]), key=lambda r: r[3])


def ws_ns3_config(variant: str, seed: int) -> dict[str, Any]:
    """Our configuration of websearch-k8 under ``variant`` (the seed salts the hashes)."""
    cfg = our_config(WS_NS3, seed)
    rows = _ws_trace(variant)
    cfg["workload"]["trace"] = [{"src": a, "dst": b, "size": f"{z}B", "start": f"{t}ps"}
                                for a, b, z, t in rows]  # fmt: skip
    cfg.update(WS_NS3_VARIANTS[variant]["ours"])
    return cfg


def ours_ws_ns3(variant: str, seed: int) -> dict:
    """Our figures for one seed of websearch-k8 under ``variant``; timeouts counted as ns-3
    counts them (data timeouts: ns-3's entries into its loss state leave SYN retries out)."""
    from repflow import api

    r = api.simulate(ws_ns3_config(variant, seed))
    f = r.flows.sort_values("id")
    return figures(f["size"].to_numpy(), f.fct.to_numpy(), f.data_timeouts.to_numpy(),
                   r.metadata["counters"]["drops"])  # fmt: skip


def ns3_ws_figures(variant: str) -> list[dict]:
    """ns-3's figures for websearch-k8 under ``variant``, one per stored seed."""
    out = []
    for seed in WS_NS3_VARIANTS[variant]["seeds"]:
        f = pd.read_csv(FIXTURES / WS_NS3 / "ns3" / f"{variant}-seed{seed}.csv.gz")
        out.append(figures(f["size"].to_numpy(), f.fct.to_numpy(), f.timeouts.to_numpy(),
                           f.drops.sum()))  # fmt: skip
    return out


def cmd_ns3_websearch(args: argparse.Namespace) -> None:
    """Runs ns-3's fat-tree driver on websearch-k8's trace, every variant and seed."""
    import gzip
    import tempfile
    import time

    binary = Path(args.binary).resolve()
    d = FIXTURES / WS_NS3 / "ns3"
    d.mkdir(exist_ok=True)
    runs = []
    for variant in WS_NS3_VARIANTS:
        text = "".join(f"{a} {b} {z} {t}\n" for a, b, z, t in _ws_trace(variant))
        flags = WS_NS3_VARIANTS[variant]["flags"]
        for seed in WS_NS3_VARIANTS[variant]["seeds"]:
            cmd = [str(binary), "--k=8", "--gbps=10", "--linkUs=1", "--trace=trace.txt",
                   f"--out={variant}-seed{seed}.csv", "--scheme=tcp", f"--seed={seed}",
                   "--endS=20", *(f"--{k}={v}" for k, v in flags.items())]  # fmt: skip
            runs.append(" ".join([binary.name, *cmd[1:]]))  # every run, --variants or not
            out = d / f"{variant}-seed{seed}.csv.gz"
            if (args.variants and variant not in args.variants) or (
                out.is_file() and not args.force
            ):
                continue
            t0 = time.monotonic()
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "trace.txt").write_text(text)
                r = subprocess.run(cmd, cwd=tmp, check=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)  # fmt: skip
                with gzip.GzipFile(out, "wb", mtime=0) as g:
                    g.write((Path(tmp) / f"{variant}-seed{seed}.csv").read_bytes())
            print(f"ns-3 {WS_NS3} {variant} seed {seed}: {time.monotonic() - t0:.1f} s; "
                  f"{r.stderr.strip()}", flush=True)  # fmt: skip
    prov = {
        "reference": "ns-3 (github.com/nsnam/ns-3-dev-git)",
        "commit": args.commit,
        "build": "bash validation/ns3/build.sh <checkout> (cmake, ninja, release profile)",
        "driver": "validation/ns3/trace-fattree.cc (built as scratch/repflow-trace-fattree.cc)",
        "trace": "../trace.txt (the htsim scenario's flows), in start order",
        "commands (each in a temporary directory holding trace.txt; output gzipped here)": runs,
        "variants": {k: {"driver flags": v["flags"], "ns-3 seeds": list(v["seeds"]),
                         "ours (changes to validation/refs.py our_config)": v["ours"]}
                     for k, v in WS_NS3_VARIANTS.items()},  # fmt: skip
        "network": "8-pod fat-tree, 10 Gb/s, 1 µs per link; per-flow ECMP (a salted hash of "
        "the five-tuple per switch, FlowHashRouting in the driver); host queues 100,000 "
        "packets; traffic-control qdiscs removed; ns-3 adds a 2-byte PPP header per packet",
        "tcp": "TcpNewReno + TcpClassicRecovery, no SACK, no timestamps, no limited "
        "transmit, ClockGranularity 1 us; the rest per variant",
        "timeouts": "entries into CA_LOSS (a SYN retransmission is not counted)",
    }  # fmt: skip
    (d / "provenance.json").write_text(json.dumps(prov, indent=2, ensure_ascii=False) + "\n")


def cmd_compare_ns3_websearch(_: argparse.Namespace) -> None:
    """ns-3's figures beside ours and htsim's on websearch-k8 (Markdown)."""
    rows = []
    hs = pd.DataFrame(htsim_figures(WS_NS3))
    for variant in WS_NS3_VARIANTS:
        n3 = pd.DataFrame(ns3_ws_figures(variant))
        me = pd.DataFrame([ours_ws_ns3(variant, s)
                           for s in WS_NS3_VARIANTS[variant]["our_seeds"]])  # fmt: skip
        for m in ("short_mean", "short_p99", "large_mean", "drops", "flows_with_timeout"):
            scale = 1e3 if "mean" in m or "p99" in m else 1

            def fmt(x: pd.Series, scale: float = scale) -> str:
                return (f"{scale * x.mean():.4g} ({scale * x.min():.4g}–"
                        f"{scale * x.max():.4g})")  # fmt: skip

            rows.append({"variant": variant, "figure": m,
                         "ns-3 (seeds)": f"{fmt(n3[m])} [{len(n3)}]",
                         "ours (seeds)": f"{fmt(me[m])} [{len(me)}]",
                         "htsim (8 seeds)": fmt(hs[m]) if variant == "matched" else "—",
                         "ours / ns-3": f"{me[m].mean() / n3[m].mean():.2f}"})  # fmt: skip
    df = pd.DataFrame(rows)
    print("| " + " | ".join(df.columns) + " |")
    print("|" + "---|" * len(df.columns))
    for r in df.itertuples(index=False):
        print("| " + " | ".join(str(x) for x in r) + " |")


# --- The RepFlow study's quick scenario under htsim (docs/validation.md, "The RepFlow study
# under htsim"). Our runs of experiments/repflow-paper-quick.toml's points (TCP, RepFlow, DCTCP,
# RepFlow-DCTCP; both workloads, the three loads, both seeds) under the `ns3-2014` and `dc`
# profiles; their flows frozen as traces; htsim replaying each trace with each scheme under the
# profile's settings as far as htsim lets a driver set them.

RQ = "repflow-quick"
RQ_SPEC = REPO / "experiments" / "repflow-paper-quick.toml"
RQ_SCHEMES = ("tcp", "repflow", "dctcp", "repflow-dctcp")
RQ_PROFILES = ("ns3-2014", "dc")
#: The run end of htsim (arrivals last 0.1 s; our runs drain for up to 10 s after them).
RQ_END_MS = 10_100

#: The studies replayed in htsim: our spec, the schemes htsim can run (a scheme it cannot
#: run, pFabric or MPTCP-L, is left out, never approximated), the profiles, the schemes whose
#: ideal FCTs the traces keep (python/repflow/experiments/references.py, IDEAL_OF), the
#: topology arguments of the drivers and the end of htsim's runs.
STUDY_RUNS: dict[str, dict[str, Any]] = {
    # A subset of the quick study, for htsim's sake (its runs take minutes where ours take
    # seconds): the first 100 ms of arrivals instead of 300 ms; every scheme, workload, load
    # and seed, so that every RF claim's comparison is covered.
    RQ: {"spec": RQ_SPEC, "schemes": RQ_SCHEMES, "profiles": RQ_PROFILES, "seeds": (1, 2),
         "overrides": {"workload.duration": "100ms"},
         "ideal": ("tcp", "dctcp"), "short_max": 100_000,
         "topology": ["-k", "8", "-gbps", "1", "-link_us", "2", "-queue_pkts", "100"],
         "end_ms": RQ_END_MS},
    "mptcp-l-quick": {"spec": REPO / "experiments" / "mptcp-l-quick.toml",
                      "schemes": ("tcp", "repflow", "mptcp"), "profiles": ("dc",),
                      "seeds": (1,),
                      "ideal": ("tcp", "mptcp"), "short_max": 1_000_000,
                      "topology": ["-k", "8", "-edge_hosts", "10", "-gbps", "1", "-link_us",
                                   "1", "-queue_pkts", "100"],
                      "end_ms": 10_100},
}  # fmt: skip


def study_points(study: str, profile: str) -> list[Any]:
    """A study's points under ``profile`` (as `repflow reproduce` runs them), limited to the
    schemes htsim has."""
    from repflow.experiments.reproduce import with_profile
    from repflow.experiments.spec import load_spec, set_path

    st = STUDY_RUNS[study]
    spec = with_profile(load_spec(st["spec"]), profile)
    points = [p for p in spec.points() if p.labels["scheme"] in st["schemes"]
              and p.labels.get("seed", 1) in st.get("seeds", (p.labels.get("seed", 1),))]
    for p in points:
        for path, value in st.get("overrides", {}).items():
            set_path(p.config, path, value)
    return points


def rq_points(profile: str) -> list[Any]:
    """The RepFlow quick study's points under ``profile``."""
    return study_points(RQ, profile)


def rq_htsim_args(tcp: dict[str, Any]) -> dict[str, Any]:
    """htsim driver settings from our resolved TCP configuration (run.json's ``tcp``)."""
    from repflow.units import seconds, size_bytes

    mw = tcp.get("max_window")
    return {
        "packet_bytes": int(tcp["mss"]) + int(tcp["header"]),
        "iw": int(tcp["init_cwnd"]),
        "ssthresh": int(tcp["initial_ssthresh"] or 0),
        "maxwnd_pkts": int(size_bytes(mw)) // int(tcp["mss"]) if mw not in (None, "none") else 0,
        "min_rto_us": seconds(tcp["min_rto"]) * 1e6,
        "initial_rto_us": seconds(tcp["initial_rto"]) * 1e6,
    }


def _family(study: str, scheme: str) -> str:
    """The scheme whose ideal FCT ``scheme``'s records use (replication keeps the ideal of
    one connection alone)."""
    fam = {"repflow": "tcp", "repflow-dctcp": "dctcp"}.get(scheme, scheme)
    assert fam in STUDY_RUNS[study]["ideal"], (study, scheme)
    return fam


def cmd_study_ours(args: argparse.Namespace) -> None:
    """Runs our points of a study (resumable: skips points already in ours-points.csv),
    writes each point's trace (flows, our ideal FCTs per profile and transport) and our
    per-point metrics."""
    import time

    from repflow import api
    from repflow.experiments.analysis import point_metrics

    study = args.study
    st = STUDY_RUNS[study]
    base = FIXTURES / study
    (base / "traces").mkdir(parents=True, exist_ok=True)
    traces: dict[str, pd.DataFrame] = {}
    for profile in st["profiles"]:
        d = base / profile
        d.mkdir(exist_ok=True)
        out = d / "ours-points.csv"
        done = pd.read_csv(out) if out.is_file() else pd.DataFrame()
        for p in study_points(study, profile):
            lb = p.labels
            w, load, seed = lb["workload.cdf"], lb["workload.load"], lb["seed"]
            scheme = lb["scheme"]
            if args.only and w not in args.only:
                continue
            cfg = api.load_config(p.config)  # resolved: the profile's values, the scheme's
            sch = {k: v for k, v in cfg["scheme"].items() if v is not None}
            (d / f"ours-{scheme}.json").write_text(
                json.dumps({"tcp": cfg["tcp"], "scheme": sch}, indent=2) + "\n"
            )
            name = f"{w}-{load:g}-seed{seed}"
            tf = base / "traces" / f"{name}.csv.gz"
            col = f"ideal_{profile}_{scheme}"
            keeps_ideal = scheme in st["ideal"]
            have = not done.empty and ((done.scheme == scheme) & (done.point == name)).any()
            per_flow = d / f"ours-{scheme}-{name}.csv.gz"
            if (
                have
                and per_flow.is_file()
                and tf.is_file()
                and (not keeps_ideal or col in pd.read_csv(tf, nrows=1).columns)
            ):
                continue
            t0 = time.monotonic()
            r = api.simulate(p.config)
            f = r.flows.sort_values("id").reset_index(drop=True)
            if name not in traces:
                traces[name] = (
                    pd.read_csv(tf)
                    if tf.is_file()
                    else f[["id", "src", "dst", "size", "start"]].copy()
                )
            tr = traces[name]
            same = (
                len(tr) == len(f)
                and (tr["src"].to_numpy() == f["src"].to_numpy()).all()
                and (tr["size"].to_numpy() == f["size"].to_numpy()).all()
            )
            if not same:
                raise SystemExit(f"{name}: {scheme} under {profile} drew other flows")
            if keeps_ideal:
                tr[col] = f["ideal_fct"].to_numpy()
                tr.to_csv(tf, index=False, float_format="%.12g")
            # our per-flow records beside htsim's (the bootstrap intervals of the agreement
            # test resample them); sizes and starts are the trace's
            pf = pd.DataFrame({"id": f["id"], "fct": f["fct"], "copies": f["copies"],
                               "timeouts": f["timeouts"]})  # fmt: skip
            pf.to_csv(per_flow, index=False, float_format="%.12g")
            m = point_metrics(f, st["short_max"], int(cfg["tcp"]["mss"]))
            m["overhead"] = r.overhead
            row = {"profile": profile, "scheme": scheme, "workload": w, "load": load,
                   "seed": seed, "point": name, **m,
                   "drops": r.metadata["counters"]["drops"],
                   "flows_with_timeout": int((f["timeouts"] > 0).sum()),
                   "wall_s": time.monotonic() - t0}  # fmt: skip
            if have:  # rerun (its per-flow file was missing): same seed, same metrics
                old = done[(done.scheme == scheme) & (done.point == name)].iloc[0]
                moved = [k for k in m if k in old and not np.isclose(old[k], m[k], rtol=1e-7,
                                                                     equal_nan=True)]  # fmt: skip
                if moved:
                    print(f"  {name} {scheme}: metrics moved since stored: {moved}", flush=True)
                done = done[~((done.scheme == scheme) & (done.point == name))]
            done = pd.concat([done, pd.DataFrame([row])], ignore_index=True)
            done.to_csv(out, index=False, float_format="%.8g")
            print(f"{profile} {scheme} {name}: {len(f)} flows, {row['wall_s']:.1f} s", flush=True)


def cmd_repflow_ours(args: argparse.Namespace) -> None:
    args.study = RQ
    cmd_study_ours(args)


def _driver_cmd(study: str, scheme: str, name: str, seed: int, h: dict[str, Any],
                ours: dict[str, Any], bindir: Path) -> list[str]:  # fmt: skip
    """The htsim driver's command line for one run (in a directory holding <name>.txt)."""
    st = STUDY_RUNS[study]
    common = [*st["topology"], "-trace", f"{name}.txt", "-out", f"{scheme}-{name}.csv",
              "-seed", str(seed), "-pkt", str(h["packet_bytes"]), "-iw", str(h["iw"]),
              "-ssthresh", str(h["ssthresh"]), "-maxwnd_pkts", str(h["maxwnd_pkts"]),
              "-initial_rto_us", f"{h['initial_rto_us']:g}", "-hostq", "fifo", "-scan_us", "10",
              "-end_ms", str(st["end_ms"])]  # fmt: skip
    sch = ours["scheme"]
    if scheme == "mptcp":
        return [str(bindir / "trace_mptcp"), *common, "-subflows", str(sch["subflows"]),
                "-cc", sch.get("coupling", "lia"), "-queue", "droptail",
                "-rto_rtts", f"{sch['rto_rtts']:g}", "-fct_at", "rx"]  # fmt: skip
    from repflow.units import size_bytes

    rep = int(size_bytes(sch.get("threshold", "100KB"))) if "repflow" in scheme else 100_000
    return [str(bindir / "trace_schemes"), *common, "-scheme", scheme, "-min_rto_us",
            f"{h['min_rto_us']:g}", "-ecn_k_pkts", "20", "-rep_max", str(rep), "-queue",
            "droptail"]  # fmt: skip


def _normalise_mptcp(text: str, mss: int) -> str:
    """trace_mptcp's CSV in trace_schemes' columns (copies = subflows; what it does not count,
    -1)."""
    import io

    f = pd.read_csv(io.StringIO(text))
    out = pd.DataFrame({
        "id": f["id"], "src": f["src"], "dst": f["dst"], "packets": f["size"] // mss,
        "bytes": -1, "start": f["start"], "fct": f["fct"], "copies": f["subflows"],
        "winner": -1, "timeouts": f["timeouts"], "fast_recoveries": f["fast_recoveries"],
        "drops": f["drops"], "sent_packets": -1, "fct0": -1, "fct1": -1, "syn_timeouts": -1,
        "overshoot": f["overshoot"],
    })  # fmt: skip
    return out.to_csv(index=False)


def cmd_htsim_study(args: argparse.Namespace) -> None:
    """Runs htsim's drivers on every trace, scheme and profile of a study (resumable)."""
    import gzip
    import tempfile
    import time

    study = args.study
    st = STUDY_RUNS[study]
    bindir = Path(args.bin).resolve()
    base = FIXTURES / study
    for profile in args.profiles or st["profiles"]:
        d = base / profile
        runs: list[str] = []
        settings: dict[str, Any] = {}
        for tf in sorted((base / "traces").glob("*.csv.gz")):
            name = tf.name.removesuffix(".csv.gz")
            if args.only and not any(name.startswith(o) for o in args.only):
                continue
            seed = int(name.rsplit("seed", 1)[1])
            tr = pd.read_csv(tf)
            for scheme in args.schemes or st["schemes"]:
                ours = json.loads((d / f"ours-{scheme}.json").read_text())
                tcp = ours["tcp"]
                mss = int(tcp["mss"])
                h = rq_htsim_args(tcp)
                settings[scheme] = {"htsim": h, "ours": ours}
                pk = np.maximum(np.ceil(tr["size"].to_numpy() / mss), 1).astype(np.int64)
                start = np.round(tr["start"].to_numpy() * 1e12).astype(np.int64)
                if scheme == "mptcp":  # trace_mptcp: "src dst bytes start_ps", whole packets
                    rows = zip(tr.src, tr.dst, pk * h["packet_bytes"], start, strict=True)
                else:  # trace_schemes: "src dst packets start_ps bytes"
                    rows = zip(tr.src, tr.dst, pk, start, tr["size"], strict=True)
                text = "".join(" ".join(str(int(x)) for x in r) + "\n" for r in rows)
                cmd = _driver_cmd(study, scheme, name, seed, h, ours, bindir)
                runs.append(" ".join([Path(cmd[0]).name, *cmd[1:]]))
                out = d / f"{scheme}-{name}.csv.gz"
                if out.is_file() and not args.force:
                    continue
                t0 = time.monotonic()
                with tempfile.TemporaryDirectory() as tmp:
                    (Path(tmp) / f"{name}.txt").write_text(text)
                    subprocess.run(cmd, cwd=tmp, check=True, stdout=subprocess.DEVNULL)
                    res = (Path(tmp) / f"{scheme}-{name}.csv").read_text()
                    if scheme == "mptcp":
                        res = _normalise_mptcp(res, h["packet_bytes"])
                    with gzip.GzipFile(out, "wb", mtime=0) as g:
                        g.write(res.encode())
                print(
                    f"{study} {profile} {scheme} {name}: {time.monotonic() - t0:.1f} s", flush=True
                )
        tcp = next(iter(settings.values()))["ours"]["tcp"]
        prov = rq_provenance(profile, tcp, rq_htsim_args(tcp), args.commit, runs)
        prov["study"] = study
        if study == RQ:
            prov["subset"] = (
                "the first 100 ms of arrivals (workload.duration = 100ms on our side) instead "
                "of 300 ms; every scheme, workload, load and seed"
            )
        prov["schemes"] = {k: v["ours"]["scheme"] for k, v in settings.items()}
        prov["topology arguments"] = " ".join(st["topology"])
        if study != RQ:
            prov["driver"] = ("validation/htsim/trace_schemes.cpp (tcp, repflow), "
                              "validation/htsim/trace_mptcp.cpp (mptcp), both on "
                              "validation/htsim/edge_fat_tree.h")  # fmt: skip
            prov["subset"] = "none: the study's points as they are (100 ms of arrivals)"
            prov["settings"]["matched"]["topology"] = (
                "8-pod fat-tree with 10 hosts per edge switch (320 hosts, 2.5:1 at the edge; "
                "validation/htsim/edge_fat_tree.h, htsim's queues and pipes), 1 Gb/s, 1 µs per "
                "link"
            )
            prov["settings"]["matched"]["mptcp"] = (
                "htsim MultipathTcpSrc COUPLED_INC (LIA), 8 TcpSrc subflows all opening with the "
                "flow, each on an independently drawn random path; every subflow's RTO = 4 "
                "smoothed RTTs without floor (the driver's -rto_rtts, as scheme.rto_rtts)"
            )
            prov["settings"]["not matched"]["mptcp data allocation"] = (
                "htsim has no data-level sequence space: the driver gives a flow a shared packet "
                "budget (docs/validation.md, 'Finite flows in htsim'); a subflow that has sent "
                "nothing may send one packet beyond it (column overshoot); ours schedules "
                "segments on the lowest-RTT subflow with room and reinjects after an RTO"
            )
        (d / "provenance.json").write_text(json.dumps(prov, indent=2, ensure_ascii=False) + "\n")


def cmd_htsim_repflow(args: argparse.Namespace) -> None:
    args.study = RQ
    cmd_htsim_study(args)


def rq_provenance(profile: str, tcp: dict[str, Any], h: dict[str, Any], commit: str,
                  runs: list[str]) -> dict[str, Any]:  # fmt: skip
    """Every setting of the htsim runs of one profile, beside ours, and every mismatch."""
    return {
        "reference": "htsim (github.com/Broadcom/csg-htsim)",
        "commit": commit,
        "build": "make -C sim; bash validation/htsim/build.sh <checkout> (g++ -O2): trace_schemes",
        "driver": "validation/htsim/trace_schemes.cpp",
        "traces": "../traces/<workload>-<load>-seed<N>.csv.gz: the flows our simulator drew "
        "for the point (python3 validation/refs.py repflow-ours), written for the "
        "driver as 'src dst packets start_ps bytes', packets = ceil(size / mss)",
        "commands (each in a temporary directory holding <point>.txt; output gzipped here)": runs,
        "ours": {
            "spec": "experiments/repflow-paper-quick.toml",
            "tcp.profile": profile,
            "resolved tcp": tcp,
        },
        "settings": {
            "htsim": h,
            "matched": {
                "topology": "8-pod fat-tree (128 hosts), 1 Gb/s links, 2 µs per link",
                "packets": f"{h['packet_bytes']} B on the wire per data packet in both "
                f"(ours: mss {tcp['mss']} + header {tcp['header']}); the same number "
                "of data packets per flow (ceil(size / mss)); htsim's last packet is "
                "full-sized where ours is not",
                "initial window": f"{h['iw']} packets (TcpSrc::set_cwnd)",
                "slow-start threshold": (
                    f"{h['ssthresh']} packets" if h["ssthresh"] else "unlimited (2^30 B)"
                )
                + " (TcpSrc::set_ssthresh)",
                "window cap": (
                    f"{h['maxwnd_pkts']} packets = floor(max_window / mss) (TcpSrc::_maxcwnd)"
                )
                if h["maxwnd_pkts"]
                else "none",
                "min RTO": f"{h['min_rto_us'] / 1000:g} ms: htsim floors RTOs at 250 ms in "
                "TcpSrc::receivePacket; the driver's subclass recomputes srtt + 4 mdev "
                "with this floor after every RTT sample and re-arms the timer htsim "
                "just armed",
                "initial RTO": f"{h['initial_rto_us'] / 1000:g} ms (TcpSrc::_rto before the "
                "start; the SYN's timer)",
                "handshake": "a SYN exchange first in both",
                "loss recovery": "NewReno without SACK in both (3 duplicate ACKs)",
                "switch queues": "100 packets (htsim: 100 × packet_bytes bytes), DropTail",
                "ECN (dctcp, repflow-dctcp)": "K = 20 packets (our default for ≤ 1 Gb/s ports, "
                "docs/schemes.md): htsim ECNQueue with K = 20 × "
                "packet_bytes bytes",
                "DCTCP g": "1/16 in both; α starts at 0 in both",
                "replication": "flows ≤ 100,000 B: two connections on independently drawn "
                "equal-cost paths, the first to finish counts",
                "host queues": "FIFO, unlimited in both (htsim's Queue instead of the "
                "topology's FairPriorityQueue)",
                "run end": f"{RQ_END_MS} ms (ours: 0.1 s of arrivals + up to 10 s drain)",
            },
            "not matched": {
                "queue accounting": "htsim counts bytes (a 40 B ACK takes 40 B of the "
                "100-packet buffer); ours counts packets (an ACK takes a "
                "slot), queue.limit_packets = 100 as the study sets",
                "ECN marking": "htsim marks on dequeue when more than K bytes are queued (the "
                "departing packet included); ours marks on arrival when at "
                "least K packets wait (the one in service not counted)",
                "DCTCP": "htsim's DCTCPSrc updates α every cwnd's worth of ACKs and cuts "
                "cwnd·(1 − α/2) at each update when α > 0 (marks or not); ours cuts "
                "once per window on an ECE (cwnd − ⌊cwnd·α/2⌋) and updates α per "
                "window of data; htsim's DCTCP starts with a 10 ms RTO, overridden "
                "here by the profile's",
                "delayed ACK": (
                    "htsim's TcpSink acknowledges every packet; ours delays "
                    "(every second segment or 200 ms) under ns3-2014"
                )
                if tcp.get("delayed_ack")
                else "none in both",
                "max RTO": f"htsim doubles without a cap; ours caps at {tcp['max_rto']}",
                "RTO backoff": "htsim recomputes the RTO from srtt on every new RTT sample, "
                "retransmitted packets included (no Karn's rule: ACKs echo the "
                "timestamp of the packet that triggered them)",
                "ssthresh after a timeout": "htsim: max(cwnd/2, 2 packets); ours: "
                "max(flight size/2, 2) (RFC 5681 (4))",
                "SYN": "htsim's SYN is a 1-byte packet; ours 40 B (header)",
                "timer": "htsim checks RTOs every 10 µs (the driver scans the unfinished "
                "connections at TcpRtxTimerScanner's instants); ours exact",
                "paths": "htsim: a uniformly random equal-cost path per connection and per ACK "
                "stream (seeded); ours: ECMP hash of the five-tuple (the seed sets the "
                "salt); so copies and ACKs take other paths in the two simulators",
            },
        },
    }


# --- The RepFlow study's quick scenario under ns-3 with per-flow ECMP (docs/validation.md,
# "The RepFlow study under ns-3"): the same traces as htsim's, TCP and RepFlow, replayed by
# validation/ns3/trace-fattree.cc on the same 8-pod fat-tree.

#: Where a study's ns-3 records live, beside htsim's: <study>/<profile>/ns3/.
NS3_DIR = "ns3"
NS3_SCHEMES = ("tcp", "repflow")


def ns3_args(tcp: dict[str, Any]) -> dict[str, Any]:
    """trace-fattree's TCP flags from our resolved TCP configuration."""
    from repflow.units import seconds, size_bytes

    mw = tcp.get("max_window")
    if mw in (None, "none"):
        raise SystemExit("trace-fattree runs without window scaling: a max_window is needed")
    return {
        "mss": int(tcp["mss"]), "iw": int(tcp["init_cwnd"]),
        "ssthreshPkts": int(tcp["initial_ssthresh"] or 0),
        "maxWindow": int(size_bytes(mw)),
        "minRtoMs": seconds(tcp["min_rto"]) * 1e3,
        "connTimeoutMs": seconds(tcp["initial_rto"]) * 1e3,
        "delAckCount": 2 if tcp.get("delayed_ack") else 1,
        "delAckTimeoutMs": seconds(tcp.get("delayed_ack_timeout") or "200ms") * 1e3,
    }  # fmt: skip


def ns3_trace_text(tr: pd.DataFrame) -> str:
    """A point's flows as trace-fattree reads them: ``src dst size_bytes start_ps``."""
    start = np.round(tr["start"].to_numpy() * 1e12).astype(np.int64)
    return "".join(f"{a} {b} {z} {t}\n" for a, b, z, t in
                   zip(tr.src, tr.dst, tr["size"], start, strict=True))  # fmt: skip


def ns3_study_cmd(binary: Path, profile: str, scheme: str, name: str, seed: int, out: str,
                  extra: tuple[str, ...] = ()) -> list[str]:  # fmt: skip
    """trace-fattree's command line for one point of the RepFlow quick study (run in a
    directory holding ``<name>.txt``), the scheme's and profile's settings as ours resolved
    them; ``seed`` salts the switches' hashes."""
    from repflow.units import size_bytes

    ours = json.loads((FIXTURES / RQ / profile / f"ours-{scheme}.json").read_text())
    rep = int(size_bytes(ours["scheme"].get("threshold", "100KB")))
    return [str(binary), "--k=8", "--gbps=1", "--linkUs=2", "--queuePkts=100",
            f"--trace={name}.txt", f"--out={out}", f"--scheme={scheme}", f"--repMax={rep}",
            f"--seed={seed}", f"--endS={STUDY_RUNS[RQ]['end_ms'] / 1000:g}", *extra,
            *(f"--{k}={v:g}" for k, v in ns3_args(ours["tcp"]).items())]  # fmt: skip


def cmd_ns3_study(args: argparse.Namespace) -> None:
    """Runs ns-3's fat-tree driver on every trace of the RepFlow quick study, TCP and RepFlow,
    under each profile (resumable), and writes the provenance."""
    import gzip
    import tempfile
    import time

    binary = Path(args.binary).resolve()
    base = FIXTURES / RQ
    for profile in args.profiles or ["ns3-2014"]:
        d = base / profile / NS3_DIR
        d.mkdir(parents=True, exist_ok=True)
        runs: list[str] = []
        flags: dict[str, Any] = {}
        for tf in sorted((base / "traces").glob("*.csv.gz")):
            name = tf.name.removesuffix(".csv.gz")
            skip = bool(args.only) and not any(name.startswith(o) for o in args.only)
            seed = int(name.rsplit("seed", 1)[1])
            text = ns3_trace_text(pd.read_csv(tf))
            for scheme in args.schemes or NS3_SCHEMES:
                ours = json.loads((base / profile / f"ours-{scheme}.json").read_text())
                flags = ns3_args(ours["tcp"])
                cmd = ns3_study_cmd(binary, profile, scheme, name, seed, f"{scheme}-{name}.csv")
                runs.append(" ".join([binary.name, *cmd[1:]]))  # every run, --only or not
                out = d / f"{scheme}-{name}.csv.gz"
                if skip or (out.is_file() and not args.force):
                    continue
                t0 = time.monotonic()
                with tempfile.TemporaryDirectory() as tmp:
                    (Path(tmp) / f"{name}.txt").write_text(text)
                    r = subprocess.run(cmd, cwd=tmp, check=True, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, text=True)  # fmt: skip
                    res = (Path(tmp) / f"{scheme}-{name}.csv").read_text()
                    with gzip.GzipFile(out, "wb", mtime=0) as g:
                        g.write(res.encode())
                print(f"ns-3 {profile} {scheme} {name}: {time.monotonic() - t0:.1f} s; "
                      f"{r.stderr.strip()}", flush=True)  # fmt: skip
        tcp = json.loads((base / profile / "ours-tcp.json").read_text())["tcp"]
        prov = {
            "reference": "ns-3 (github.com/nsnam/ns-3-dev-git)",
            "commit": args.commit,
            "build": "bash validation/ns3/build.sh <checkout> (cmake, ninja, release profile)",
            "driver": "validation/ns3/trace-fattree.cc (built as scratch/repflow-trace-fattree.cc)",
            "study": RQ,
            "subset": "the first 100 ms of arrivals (the htsim subset's traces); TCP and RepFlow",
            "traces": "../../traces/<workload>-<load>-seed<N>.csv.gz, written for the driver as "
            "'src dst size_bytes start_ps'",
            "commands (each in a temporary directory holding <point>.txt; output gzipped here)":
                runs,
            "ours": {"spec": "experiments/repflow-paper-quick.toml", "tcp.profile": profile,
                     "resolved tcp": tcp},
            "settings": {
                "driver flags": flags,
                "matched": {
                    "topology": "8-pod fat-tree (128 hosts), every link 1 Gb/s, 2 µs; host h "
                    "under edge h / 4 as in ours",
                    "routing": "per-flow ECMP: each switch picks among its shortest-path next "
                    "hops by a 64-bit mix of (source, destination, protocol, ports) salted per "
                    "switch from the seed (FlowHashRouting in the driver); ours hashes the same "
                    "five-tuple with SplitMix64 and its own salt, so the two draw different but "
                    "equally distributed paths",
                    "switch queues": "DropTailQueue of 100 packets per port, ACKs counted as "
                    "packets (as queue.limit_packets); traffic-control qdiscs removed",
                    "host queues": "100,000 packets (ours unlimited)",
                    "tcp": "TcpNewReno + TcpClassicRecovery (RFC 6582), no SACK, no "
                    "timestamps, no window scaling (receive buffer = max_window, the window "
                    "cap), no limited transmit; segment size, initial window, initial "
                    "ssthresh, minimum RTO, SYN timeout (ConnTimeout), delayed ACK (DelAckCount, "
                    "DelAckTimeout) from the profile (driver flags)",
                    "replication": "flows <= repMax bytes as two connections with their own "
                    "ports (so their own five-tuples and hashes); the first copy whose receiver "
                    "holds all bytes completes the flow",
                    "flows": "the exact bytes of each flow (the last segment partial), as ours",
                },
                "not matched": {
                    "max RTO": f"ns-3 caps the backed-off RTO at 60 s; ours at {tcp['max_rto']}",
                    "RTO timer": "ns-3's clock granularity 1 µs, RTO = max(min RTO, srtt + "
                    "max(G, 4 rttvar)); ours RFC 6298 with the profile's floor",
                    "timeouts": "ns-3 counts entries into CA_LOSS (data timeouts; a SYN "
                    "retransmission is not counted); ours counts every RTO",
                    "delayed ACK": "ns-3 acknowledges every DelAckCount-th segment or at the "
                    "timer, and at once on out-of-order data; ours the same rule (RFC 1122)",
                },
            },
        }  # fmt: skip
        (d / "provenance.json").write_text(json.dumps(prov, indent=2, ensure_ascii=False) + "\n")


def cmd_compare_repflow(_: argparse.Namespace) -> None:
    """Our effects beside htsim's (RepFlow vs TCP, RepFlow-DCTCP vs DCTCP) and ns-3's (RepFlow
    vs TCP), per profile, as the Markdown tables of docs/validation.md, and the RF claims'
    verdicts on each."""
    from repflow.experiments.references import available_references

    def cell(r: pd.Series) -> str:
        return f"{r.estimate:+.0f} [{r.lo:+.0f}, {r.hi:+.0f}]"

    frames = [rq_intervals(ref=ref) for ref in REF_PAIRS]
    e = pd.concat([f for f in frames if not f.empty], ignore_index=True)
    print("reduction 1 − a/b (%), 95 % bootstrap intervals (seeds, flows within seeds); "
          "≠: the difference's interval excludes 0")  # fmt: skip
    for profile in RQ_PROFILES:
        sims = [x for x in ("htsim", "ns3") if ((e.profile == profile) & (e.sim == x)).any()]
        print(f"\n**{profile}**\n")
        head = ["pair", "workload", "load", "metric", "ours", *sims,
                *(f"ours − {x} (pp)" for x in sims)]  # fmt: skip
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        g = e[e.profile == profile]
        for (pair, w, load, m), x in g.groupby(["pair", "workload", "load", "metric"],
                                               sort=False):  # fmt: skip
            by = {r.sim: r for r in x.itertuples()}
            cells = [pair, w, f"{load:g}", m.removeprefix("short_"), cell(pd.Series(
                by["ours"]._asdict()))]  # fmt: skip
            for sim in sims:
                cells.append(cell(pd.Series(by[sim]._asdict())) if sim in by else "—")
            for sim in sims:
                d = by.get(f"ours - {sim}")
                if d is None:
                    cells.append("—")
                    continue
                mark = " **≠**" if d.lo > 0 or d.hi < 0 else ""
                cells.append(cell(pd.Series(d._asdict())) + mark)
            print("| " + " | ".join(cells) + " |")
        print(f"\n== claims, {profile} ({', '.join(available_references(RQ, profile))})")
        c = rq_claims(RQ, profile)
        print(c[[x for x in c.columns if not x.endswith(" measured")]].to_string(index=False))


def rq_replay_config(profile: str, w: str, load: float, trace_seed: int, scheme: str,
                     path_seed: int) -> dict[str, Any]:
    """Our configuration of a RepFlow-subset point replaying its committed flows as
    ``workload.trace`` with ``seed`` = ``path_seed``: the flows stay, the switches' hash salt
    (and any other draw the seed makes) changes; path seed N on trace seed N is the point."""
    from repflow.experiments.references import read_point_trace

    tr = read_point_trace(RQ, w, load, trace_seed)
    (p,) = [q for q in rq_points(profile) if q.labels["workload.cdf"] == w
            and q.labels["workload.load"] == load and q.labels["seed"] == trace_seed
            and q.labels["scheme"] == scheme]  # fmt: skip
    cfg = p.config
    cfg["seed"] = path_seed
    cfg.setdefault("workload", {})["trace"] = [
        {"start": f"{round(t * 1e12)}ps", "src": int(a), "dst": int(b), "size": f"{int(z)}B"}
        for t, a, b, z in zip(tr.start, tr.src, tr.dst, tr["size"], strict=True)
    ]
    return cfg


def ns3_2014_websearch_points(ours_dir: Path | None = None):  # noqa: ANN201
    """The RepFlow subset's 12 web-search points under ``ns3-2014`` (TCP and RepFlow, 3 loads,
    2 seeds), each as (scheme, load, seed, point name, its trace, ours' per-flow records (from
    ``ours_dir``, default the fixtures), ns-3's records, our drops)."""
    from repflow.experiments.references import point_name, read_point_trace, reference_records

    d = ours_dir or FIXTURES / RQ / "ns3-2014"
    n3 = reference_records(RQ, "ns3-2014", ref="ns3")
    pts = pd.read_csv(d / "ours-points.csv")
    for scheme in NS3_SCHEMES:
        for load in (0.2, 0.5, 0.8):
            for seed in (1, 2):
                name = point_name("websearch", load, seed)
                n = n3[(n3.scheme == scheme) & (n3.workload == "websearch")
                       & np.isclose(n3.load, load) & (n3.seed == seed)]  # fmt: skip
                yield (scheme, load, seed, name, read_point_trace(RQ, "websearch", load, seed),
                       pd.read_csv(d / f"ours-{scheme}-{name}.csv.gz"), n,
                       float(pts[(pts.scheme == scheme) & (pts.point == name)].drops.iloc[0]))


def ns3_2014_websearch_pooled(ours_dir: Path | None = None) -> dict[str, dict[str, float]]:
    """Ours and ns-3's large flows pooled over :func:`ns3_2014_websearch_points`: the mean FCT
    of every finished large flow (s), the drops, and the large flows with a timeout
    (docs/validation.md, "The ns3-2014 large-flow gap, found")."""
    acc = {who: {"fct": [], "drops": 0.0, "timeouts": 0} for who in ("ours", "ns-3")}
    for *_, tr, o, n, drops in ns3_2014_websearch_points(ours_dir):
        for who, size, fct, to, dr in (
            ("ours", tr["size"].to_numpy(), o.fct.to_numpy(float), o.timeouts.to_numpy(), drops),
            ("ns-3", n["size"].to_numpy(), n.fct.to_numpy(float), n.timeouts.to_numpy(),
             n.drops.sum()),
        ):  # fmt: skip
            big = size > SHORT_MAX
            done = big & np.isfinite(fct) & (fct >= 0)
            acc[who]["fct"].extend(fct[done])
            acc[who]["drops"] += float(dr)
            acc[who]["timeouts"] += int((to[big] > 0).sum())
    return {who: {"large_mean": float(np.mean(a["fct"])), "drops": a["drops"],
                  "large_flows_with_timeout": float(a["timeouts"])}
            for who, a in acc.items()}  # fmt: skip


def cmd_compare_ns3(args: argparse.Namespace) -> None:
    """Per point and scheme: the short-flow mean and p99, the large-flow mean, flows with a
    timeout and drops in our runs, htsim's and ns-3's on the same flows, and the median of the
    per-flow FCT ratio ns-3 / ours (Markdown)."""
    from repflow.experiments.references import point_name, read_point_trace, reference_records

    for profile in args.profiles or ["ns3-2014"]:
        d = FIXTURES / RQ / profile
        n3 = reference_records(RQ, profile, ref="ns3")
        ht = reference_records(RQ, profile)
        print(f"\n**{profile}** (short ≤ 100 KB; FCTs in ms; ours / htsim / ns-3)\n")
        print("| scheme | point | short mean | short p99 | large mean | flows with a timeout "
              "| drops | per-flow ns-3 / ours, median [p10, p90] |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        ours_pts = pd.read_csv(d / "ours-points.csv")
        for scheme in NS3_SCHEMES:
            for w in ("websearch", "datamining"):
                for load in (0.2, 0.5, 0.8):
                    for seed in (1, 2):
                        name = point_name(w, load, seed)
                        tr = read_point_trace(RQ, w, load, seed)
                        o = pd.read_csv(d / f"ours-{scheme}-{name}.csv.gz")
                        of = tr[["id", "size", "start"]].assign(fct=o["fct"].to_numpy(float))
                        h, n = (r[(r.scheme == scheme) & (r.workload == w)
                                  & np.isclose(r.load, load) & (r.seed == seed)]
                                for r in (ht, n3))  # fmt: skip
                        op = ours_pts[(ours_pts.scheme == scheme) & (ours_pts.point == name)]
                        ms = [figures(x["size"].to_numpy(), x["fct"].to_numpy(float),
                                      t.to_numpy(), dr)
                              for x, t, dr in ((of, o["timeouts"], op["drops"].iloc[0]),
                                               (h, h["timeouts"], h["drops"].sum()),
                                               (n, n["timeouts"], n["drops"].sum()))]  # fmt: skip
                        ft = [m["flows_with_timeout"] for m in ms]
                        dr = [int(m["drops"]) for m in ms]
                        ratio = n["fct"].to_numpy(float) / of["fct"].to_numpy(float)
                        ratio = ratio[np.isfinite(ratio)]
                        q = np.percentile(ratio, [50, 10, 90])

                        def f3(key: str, ms=ms) -> str:
                            return " / ".join(f"{1e3 * m[key]:.3g}" for m in ms)

                        print(f"| {scheme} | {name} | {f3('short_mean')} | {f3('short_p99')} | "
                              f"{f3('large_mean')} | {' / '.join(map(str, ft))} | "
                              f"{' / '.join(map(str, dr))} | {q[0]:.3f} [{q[1]:.3f}, "
                              f"{q[2]:.3f}] |")  # fmt: skip


def rq_claims(study: str, profile: str) -> pd.DataFrame:
    """Every claim of the study's scenario on our points and on each reference's (means over
    seeds; the p99 is the mean of the seeds' p99s on all sides, as our side keeps no flows)."""
    sys.path.insert(0, str(REPO / "python"))
    from repflow.experiments import analysis, claims
    from repflow.experiments.references import available_references, reference_points

    ours = pd.read_csv(FIXTURES / study / profile / "ours-points.csv")
    ours["series"] = ours["scheme"]
    scen = {RQ: [claims.NS3], "mptcp-l-quick": ["mptcp-l"]}[study]
    a = claims.evaluate_claims(analysis.aggregate(ours.drop(columns=["point"])), scen)
    cols = {"ours": a}
    for ref in available_references(study, profile):
        pts, _ = reference_points(study, profile, ref=ref)
        cols[ref] = claims.evaluate_claims(analysis.aggregate(pts), scen)
    rows = []
    for i, x in enumerate(a):
        if x.claim.scenario not in scen:
            continue
        row = {"claim": x.claim.id}
        for name, res in cols.items():
            row[name] = res[i].verdict
        for name, res in cols.items():
            row[f"{name} measured"] = res[i].measured
        rows.append(row)
    return pd.DataFrame(rows)


def rq_effects(metrics: tuple[str, ...] = ("short_mean", "short_p99")) -> pd.DataFrame:
    """Per profile, pair, workload, load and metric: the reduction 1 − a/b (%) in our runs and
    in htsim's, per seed (mean over seeds and min–max)."""
    sys.path.insert(0, str(REPO / "python"))
    from repflow.experiments.references import reference_points

    rows = []
    for profile in RQ_PROFILES:
        if not (FIXTURES / RQ / profile / "provenance.json").is_file():
            continue  # htsim not run for this profile
        ours = pd.read_csv(FIXTURES / RQ / profile / "ours-points.csv")
        ref, _ = reference_points(RQ, profile)
        for a, b in (("repflow", "tcp"), ("repflow-dctcp", "dctcp")):
            for who, pts in (("ours", ours), ("htsim", ref)):
                if pts.empty:
                    continue
                for (w, load), g in pts.groupby(["workload", "load"]):
                    ga = g[g.scheme == a].set_index("seed")
                    gb = g[g.scheme == b].set_index("seed")
                    seeds = sorted(set(ga.index) & set(gb.index))
                    if not seeds:
                        continue
                    for m in metrics:
                        red = [100 * (1 - ga.at[s, m] / gb.at[s, m]) for s in seeds]
                        rows.append({"profile": profile, "pair": f"{a} vs {b}", "workload": w,
                                     "load": load, "metric": m, "sim": who,
                                     "mean": float(np.mean(red)), "min": float(min(red)),
                                     "max": float(max(red)), "seeds": len(seeds)})  # fmt: skip
    return pd.DataFrame(rows)


#: The scheme pairs each reference can compare (ns-3 ran TCP and RepFlow only).
REF_PAIRS = {"htsim": (("repflow", "tcp"), ("repflow-dctcp", "dctcp")),
             "ns3": (("repflow", "tcp"),)}  # fmt: skip


def rq_intervals(metrics: tuple[str, ...] = ("short_mean", "short_p99"),
                 ref: str = "htsim") -> pd.DataFrame:  # fmt: skip
    """Per profile, pair, workload, load and metric: the reduction 1 − a/b (%) in our runs and
    in the reference's (``sim`` = ``ours``, ``htsim`` or ``ns3``), each with its 95 % interval
    from the verdicts' two-stage bootstrap (seeds, then flows within seeds) over each
    simulator's per-flow records, and their difference (``sim`` = ``ours - <ref>``, percentage
    points) with its interval. Both simulators replayed the same flows, so every replicate
    draws the same flows for all four series: the difference's interval is about how the
    simulators treat the same flows, not about which flows were drawn."""
    sys.path.insert(0, str(REPO / "python"))
    from repflow.experiments import stats
    from repflow.experiments.references import (
        REFERENCE_DIRS,
        point_name,
        read_point_trace,
        reference_records,
    )

    spec_short = SHORT_MAX
    pairs = REF_PAIRS[ref]
    schemes = list(dict.fromkeys(s for pair in pairs for s in pair))
    rows = []
    for profile in RQ_PROFILES:
        d = FIXTURES / RQ / profile
        if not (d / REFERENCE_DIRS[ref] / "provenance.json").is_file():
            continue  # the reference not run for this profile
        href = reference_records(RQ, profile, ref=ref)
        boot = stats.Bootstrap()
        for w in sorted(set(href["workload"])):
            for load in sorted(set(href["load"])):
                samples: dict[tuple[str, str], stats.Sample] = {}
                for seed in sorted(set(href["seed"])):
                    trace = read_point_trace(RQ, w, load, seed)
                    for scheme in schemes:
                        f = d / f"ours-{scheme}-{point_name(w, load, seed)}.csv.gz"
                        ours = pd.read_csv(f)
                        if len(ours) != len(trace) or (ours["id"] != trace["id"]).any():
                            raise SystemExit(f"{f}: its flows are not its trace's")
                        o = trace[["size", "start"]].assign(fct=ours["fct"].to_numpy(float))
                        h = href[(href.scheme == scheme) & (href.workload == w)
                                 & np.isclose(href.load, load) & (href.seed == seed)]  # fmt: skip
                        h = h[["size", "start", "fct"]].reset_index(drop=True)
                        for sim, flows in (("ours", o), (ref, h)):
                            samples.setdefault((sim, scheme), stats.Sample()).add(seed, flows)
                for a, b in pairs:
                    for m in metrics:
                        # one group for both simulators: they ran the same flows, so the
                        # bootstrap draws the same flows for all four series (paired)
                        group = (profile, w, load)
                        eff: dict[str, np.ndarray] = {}
                        for sim in ("ours", ref):
                            iv = boot.effect(samples[(sim, a)], samples[(sim, b)], m,
                                             spec_short, stats.reduction, group)  # fmt: skip
                            _, ra = boot.replicates(samples[(sim, a)], m, spec_short, group)
                            _, rb = boot.replicates(samples[(sim, b)], m, spec_short, group)
                            eff[sim] = stats.reduction(ra, rb)
                            rows.append({"profile": profile, "pair": f"{a} vs {b}",
                                         "workload": w, "load": float(load), "metric": m,
                                         "sim": sim, "estimate": iv.estimate, "lo": iv.lo,
                                         "hi": iv.hi, "flows": iv.flows[0], "seeds": iv.seeds,
                                         "paired": iv.paired,
                                         "tail_flows": iv.tail_flows})  # fmt: skip
                        est = rows[-2]["estimate"] - rows[-1]["estimate"]
                        lo, hi = stats._bounds(eff["ours"] - eff[ref])  # noqa: SLF001
                        rows.append({"profile": profile, "pair": f"{a} vs {b}", "workload": w,
                                     "load": float(load), "metric": m, "sim": f"ours - {ref}",
                                     "estimate": est, "lo": lo, "hi": hi,
                                     "flows": rows[-1]["flows"], "seeds": rows[-1]["seeds"],
                                     "paired": True,
                                     "tail_flows": rows[-1]["tail_flows"]})  # fmt: skip
    return pd.DataFrame(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("traces").set_defaults(func=cmd_traces)
    h = sub.add_parser("htsim")
    h.add_argument("--binary", required=True)
    h.add_argument("--commit", default="unknown")
    h.set_defaults(func=cmd_htsim)
    sub.add_parser("compare").set_defaults(func=cmd_compare)
    sub.add_parser("star-traces").set_defaults(func=cmd_star_traces)
    n = sub.add_parser("ns3")
    n.add_argument("--binary", required=True)
    n.add_argument("--commit", default="unknown")
    n.set_defaults(func=cmd_ns3)
    sub.add_parser("mptcp-traces").set_defaults(func=cmd_mptcp_traces)
    m = sub.add_parser("htsim-mptcp")
    m.add_argument("--binary", required=True)
    m.add_argument("--commit", default="unknown")
    m.set_defaults(func=cmd_htsim_mptcp)
    sub.add_parser("compare-mptcp").set_defaults(func=cmd_compare_mptcp)
    r = sub.add_parser("repflow-ours")
    r.add_argument("--only", nargs="*", help="workloads to run (default: both)")
    r.set_defaults(func=cmd_repflow_ours)
    r = sub.add_parser("study-ours")
    r.add_argument("study", choices=list(STUDY_RUNS))
    r.add_argument("--only", nargs="*", help="workloads to run (default: all)")
    r.set_defaults(func=cmd_study_ours)
    r = sub.add_parser("htsim-study")
    r.add_argument("study", choices=list(STUDY_RUNS))
    r.add_argument("--bin", required=True, help="directory of trace_schemes and trace_mptcp")
    r.add_argument("--commit", default="unknown")
    r.add_argument("--profiles", nargs="*")
    r.add_argument("--schemes", nargs="*")
    r.add_argument("--only", nargs="*", help="point-name prefixes, e.g. fb-hadoop-0.2")
    r.add_argument("--force", action="store_true")
    r.set_defaults(func=cmd_htsim_study)
    r = sub.add_parser("htsim-repflow")
    r.add_argument("--bin", required=True, help="directory of trace_schemes")
    r.add_argument("--commit", default="unknown")
    r.add_argument("--profiles", nargs="*")
    r.add_argument("--schemes", nargs="*")
    r.add_argument("--only", nargs="*", help="point-name prefixes, e.g. websearch-0.2")
    r.add_argument("--force", action="store_true")
    r.set_defaults(func=cmd_htsim_repflow)
    sub.add_parser("compare-repflow").set_defaults(func=cmd_compare_repflow)
    r = sub.add_parser("ns3-websearch")
    r.add_argument("--binary", required=True, help="ns-3's scratch program repflow-trace-fattree")
    r.add_argument("--commit", default="unknown")
    r.add_argument("--variants", nargs="*", choices=list(WS_NS3_VARIANTS))
    r.add_argument("--force", action="store_true")
    r.set_defaults(func=cmd_ns3_websearch)
    sub.add_parser("compare-ns3-websearch").set_defaults(func=cmd_compare_ns3_websearch)
    r = sub.add_parser("compare-ns3")
    r.add_argument("--profiles", nargs="*")
    r.set_defaults(func=cmd_compare_ns3)
    r = sub.add_parser("ns3-study")
    r.add_argument("--binary", required=True, help="ns-3's scratch program repflow-trace-fattree")
    r.add_argument("--commit", default="unknown")
    r.add_argument("--profiles", nargs="*")
    r.add_argument("--schemes", nargs="*")
    r.add_argument("--only", nargs="*", help="point-name prefixes, e.g. websearch-0.2")
    r.add_argument("--force", action="store_true")
    r.set_defaults(func=cmd_ns3_study)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    sys.exit(main())
