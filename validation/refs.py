"""Differential validation against reference simulators: the scenarios, their traces, and
the figures compared (docs/validation.md).

    python3 validation/refs.py traces                      # write the traces (fixtures)
    python3 validation/refs.py htsim --binary PATH         # run htsim's driver on every trace
    python3 validation/refs.py compare                     # our figures beside the fixtures
    python3 validation/refs.py mptcp-traces                # the MPTCP scenario's trace
    python3 validation/refs.py htsim-mptcp --binary PATH   # htsim's MPTCP on it (fixtures)
    python3 validation/refs.py compare-mptcp               # our MPTCP beside htsim's

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


def _websearch() -> list[tuple[int, int, int, int]]:
    """k = 8, 10 Gb/s: the flows this simulator draws for web search at load 0.5 over 10 ms
    (seed 1), as a fixed trace."""
    from repflow import api

    r = api.simulate({
        "seed": 1, "topology": {"kind": "fat-tree", "k": 8, "link_rate": "10Gbps",
                                "link_delay": "1us"},
        "workload": {"cdf": "websearch", "load": 0.5, "duration": "10ms", "drain": "1ms"},
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
    trace = [{"src": s, "dst": d, "size": z, "start": f"{t}ps"} for s, d, z, t in rows]
    return {
        "seed": seed,
        "topology": {"kind": "fat-tree", "k": k, "link_rate": NETWORK["link_rate"],
                     "link_delay": NETWORK["link_delay"]},
        # htsim's queues hold bytes (100 × 1,500 B), so a 40-byte ACK takes 40 bytes of room,
        # not a packet's.
        "queue": {"limit_bytes": NETWORK["queue_packets"] * 1500, "host_limit_packets": 0},
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
    trace = [{"src": s, "dst": d, "size": z, "start": f"{t}ps"} for s, d, z, t in rows]
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
    trace = [{"src": s, "dst": d, "size": z // 1500 * TCP["mss"], "start": f"{t}ps"}
             for s, d, z, t in rows]  # fmt: skip
    return {
        "seed": seed,
        "topology": {"kind": "fat-tree", "k": MPTCP_K, "link_rate": MPTCP_NETWORK["link_rate"],
                     "link_delay": MPTCP_NETWORK["link_delay"]},
        "queue": {"limit_bytes": MPTCP_NETWORK["queue_packets"] * 1500, "host_limit_packets": 0},
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
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    sys.exit(main())
