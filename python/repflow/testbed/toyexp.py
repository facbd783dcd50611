"""RepFlow's toy example (Fig. 3, Table I) on the namespace testbed.

Topology: edge switches S1, S2; middle switches S3, S4; H1, H2 under S1; H3, H4 under S2; every
link at 50 Mb/s. A persistent large flow H2 → H4 and back-to-back 10-packet flows H1 → H3, in
three scenarios: the short flows alone, beside the large flow, and beside it with every short
flow replicated once (copy 2 goes to destination port + 1, same source port, first
acknowledgement wins — as in the paper's Mininet implementation).

With ``--scheme mptcp`` a fourth scenario sends the short flows over the kernel's Multipath TCP
(one connection per flow, up to ``--subflows`` subflows that ECMP hashes apart, see
:mod:`.mptcp`) beside the same large flow (plain TCP).

A flow's FCT is measured at the sender from the start of ``connect()`` to the receiver's 1-byte
acknowledgement of the last byte (so it includes the handshake). Source ports are drawn from the
seed, so every scenario uses the same five-tuples and the same ECMP paths.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from repflow.errors import UserError
from repflow.testbed import netns
from repflow.testbed.checks import AGENT, agent, sinks
from repflow.testbed.topology import port_name, toy
from repflow.testbed.workload import servers
from repflow.units import format_rate, parse_rate

#: Table I of the RepFlow paper (Mininet, 50 Mb/s links with 1 ms delay): (mean, 99th) seconds.
PAPER = {
    "alone": (0.0135, 0.0145),
    "large": (0.175, 0.490),
    "replicated": (0.105, 0.212),
}
LABELS = {
    "alone": "without the large flow",
    "large": "with the large flow",
    "replicated": "with the large flow and replication",
    "smartrep": "with the large flow and SmartRep",
    "mptcp": "with the large flow, MPTCP",
}
#: scheme of the short flows in each scenario (``--engine net``)
NET_SCHEMES = {
    "alone": "tcp",
    "large": "tcp",
    "replicated": "repflow",
    "smartrep": "smartrep",
    "mptcp": "tcp",
}
NET_PORT = 6201
#: the MPTCP scenario's receiver (a separate MPTCP listener: the other scenarios stay plain TCP)
MPTCP_PORT = 6301
NET_MPTCP_PORT = 6401
#: ``--scheme`` of the toy: the paper's scenarios (tcp, repflow) always run; mptcp adds one
TOY_SCHEMES = ("tcp", "repflow", "mptcp")
SHORT_BYTES = 10 * 1460
PORT = 6001
LARGE_PORT = 6101


@dataclass
class Scenario:
    """Measured short-flow FCTs of one scenario."""

    name: str
    fct: list[float]
    unfinished: int
    #: fraction of short flows all of whose copies hashed onto the large flow's middle switch
    collided: float
    #: rate S1 forwarded towards S3 and S4 during the scenario (all flows)
    s1_uplink_mbps: float

    @property
    def mean(self) -> float:
        return float(np.mean(self.fct)) if self.fct else math.nan

    @property
    def p99(self) -> float:
        return float(np.percentile(self.fct, 99)) if self.fct else math.nan


def _middle_of(hops: list[dict]) -> str | None:
    for h in hops:
        if h["ttl"] == 2 and h["kind"] == "time-exceeded":
            return h["addr"]
    return None


def run_toy(
    tb: netns.Testbed,
    flows: int,
    seed: int,
    cancel: bool = False,
    say: Callable[[str], None] = lambda _m: None,
    warmup: float = 1.0,
    engine: str = "agent",
    mptcp_subflows: int | None = None,
) -> list[Scenario]:
    """Runs the scenarios on an up toy testbed and returns their measurements.

    ``engine="agent"`` sends the short flows with the testbed's own sender (the paper's
    implementation: a copy to port + 1 from the same source port, losers run on unless
    ``cancel``); ``engine="net"`` sends them with ``repflow send`` (the repflow-net library:
    tcp, repflow, and a fourth scenario with smartrep's probed source ports). With
    ``mptcp_subflows`` the short flows also run over MPTCP with that many subflows per
    connection (H1's and H3's MPTCP endpoints are set here).
    """
    from contextlib import ExitStack

    from repflow.testbed import mptcp

    if engine not in ("agent", "net"):
        raise UserError(f"--engine must be agent or net, got {engine!r}")
    topo = tb.topo
    h1, h2, h3, h4 = (topo.nodes[n] for n in ("h1", "h2", "h3", "h4"))
    rng = random.Random(seed)
    sports = rng.sample(range(20000, 60000), flows)
    large_sport = rng.randrange(60001, 65000)
    by_addr = topo.node_by_addr()
    # which middle switch each five-tuple hashes to (TTL-2 probes)
    say("probing the paths of every five-tuple (TTL 2)")
    sp = ",".join(map(str, sports))
    short_paths = [
        agent(
            tb,
            "h1",
            [
                "probe",
                "--dst",
                h3.addr,
                "--dport",
                str(PORT + i),
                "--sports",
                sp,
                "--min-ttl",
                "2",
                "--max-ttl",
                "2",
            ],
        )
        for i in range(2)
        if engine == "agent"
    ]
    large_hops = agent(
        tb,
        "h2",
        [
            "probe",
            "--dst",
            h4.addr,
            "--dport",
            str(LARGE_PORT),
            "--sports",
            str(large_sport),
            "--min-ttl",
            "2",
            "--max-ttl",
            "2",
        ],
    )
    large_mid = _middle_of(large_hops[str(large_sport)])  # type: ignore[index]
    say(f"large flow H2->H4 hashes via {by_addr.get(large_mid or '', '?')}")
    results = []
    names = ["alone", "large", "replicated"] + (["smartrep"] if engine == "net" else [])
    if mptcp_subflows is not None:
        mptcp.require_enabled(tb, ["h1", "h3"])
        mptcp.configure(tb, mptcp_subflows, ["h1", "h3"])
        names.append("mptcp")
    with tempfile.TemporaryDirectory(prefix="repflow-toy-") as tmp:
        workdir = Path(tmp)
        receivers = (
            servers(tb, NET_PORT, workdir, hosts=["h3"])
            if engine == "net"
            else sinks(tb, ["h3"], [PORT, PORT + 1])
        )
        extra = ExitStack()
        if mptcp_subflows is not None:
            mdir = workdir / "mptcp"
            mdir.mkdir()
            extra.enter_context(
                servers(tb, NET_MPTCP_PORT, mdir, hosts=["h3"], mptcp=True)
                if engine == "net"
                else sinks(tb, ["h3"], [MPTCP_PORT], mptcp=True)
            )
        with receivers, extra, sinks(tb, ["h4"], [LARGE_PORT]):
            for name in names:
                copies = 1 if name in ("alone", "large", "mptcp") else 2
                large = None
                before = tb.qdisc_stats(["s1"])
                t0 = time.perf_counter()
                try:
                    if name != "alone":
                        with netns.signals_held():
                            large = tb.popen_in(
                                "h2",
                                [
                                    *AGENT,
                                    "flows",
                                    "--dst",
                                    h4.addr,
                                    "--port",
                                    str(LARGE_PORT),
                                    "--size",
                                    str(10**15),
                                    "--sports",
                                    str(large_sport),
                                ],
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL,
                            )
                        time.sleep(warmup)
                    say(f"scenario '{LABELS[name]}': {flows} flows of {SHORT_BYTES} B H1->H3")
                    if engine == "net":
                        recs = _net_flows(tb, name, flows, workdir)
                    else:
                        recs = agent(
                            tb,
                            "h1",
                            [
                                "flows", "--dst", h3.addr,
                                "--port", str(MPTCP_PORT if name == "mptcp" else PORT),
                                "--size", str(SHORT_BYTES), "--count", str(flows),
                                "--copies", str(copies), "--sports", sp,
                            ]
                            + (["--cancel"] if cancel else [])
                            + (["--mptcp"] if name == "mptcp" else []),
                            timeout=600,
                        )  # fmt: skip
                finally:
                    if large is not None:
                        netns.stop_processes([large], timeout=10)
                took = time.perf_counter() - t0
                after = tb.qdisc_stats(["s1"])
                large_bytes = sum(
                    after[("s1", port_name(m))]["bytes"] - before[("s1", port_name(m))]["bytes"]
                    for m in ("s3", "s4")
                )
                fct = [r["fct"] for r in recs if r["winner"] >= 0]  # type: ignore[union-attr]
                hit = 0
                if engine == "net" or name == "mptcp":
                    # the library chooses its own source ports, MPTCP's joins their own: not
                    # probed here
                    hit = -1
                elif large_mid is not None and name != "alone":
                    for s in map(str, sports):
                        mids = [_middle_of(short_paths[i][s]) for i in range(copies)]  # type: ignore[index]
                        hit += all(m == large_mid for m in mids)
                results.append(
                    Scenario(
                        name,
                        fct,
                        flows - len(fct),
                        math.nan if hit < 0 else hit / flows if name != "alone" else 0.0,
                        large_bytes * 8 / took / 1e6,
                    )
                )
    return results


def _net_flows(tb: netns.Testbed, name: str, flows: int, workdir: Path) -> list[dict]:
    """Short flows H1 -> H3 with ``repflow send`` (scheme by scenario); one record per flow."""
    from repflow.records import read_flows
    from repflow.testbed.workload import HOSTCMD

    h1, h3 = tb.topo.nodes["h1"], tb.topo.nodes["h3"]
    out = workdir / f"send-{name}"
    port = NET_MPTCP_PORT if name == "mptcp" else NET_PORT
    tb.run_in(
        "h1",
        [
            *HOSTCMD, "--", "send", "--to", f"{h3.addr}:{port}", "--size", f"{SHORT_BYTES}B",
            "--count", str(flows), "--scheme", NET_SCHEMES[name], "--bind", h1.addr,
            "--link-rate", f"{tb.rate_bps}bps", "--out", str(out),
            *(["--warm"] if NET_SCHEMES[name] == "smartrep" else []),
            *(["--mptcp"] if name == "mptcp" else []),
        ],
        timeout=600,
    )  # fmt: skip
    df = read_flows(out / "flows.parquet")
    return [
        {"fct": float(f), "winner": int(w)} for f, w in zip(df["fct"], df["winner"], strict=True)
    ]


def format_table(results: list[Scenario], rate_bps: int, host_shaping: bool = False) -> str:
    """Table I as measured here beside the paper's values."""
    shaping = "hosts and switches shaped" if host_shaping else "switch ports shaped"
    lines = [
        f"Table I (toy, {format_rate(rate_bps)} links, {shaping}, no propagation delay) — "
        "measured vs paper (Mininet, 1 ms per link)",
        f"{'scenario':<38}{'mean FCT':>10}{'paper':>9}{'99th FCT':>11}{'paper':>9}"
        f"{'on large path':>15}",
    ]
    for r in results:
        pm, p99 = PAPER.get(r.name, (math.nan, math.nan))
        hit = "-" if r.name == "alone" or math.isnan(r.collided) else f"{100 * r.collided:.0f}%"
        paper_m = f"{pm:>8.4f}s" if not math.isnan(pm) else f"{'-':>9}"
        paper_t = f"{p99:>8.4f}s" if not math.isnan(p99) else f"{'-':>9}"
        lines.append(
            f"{LABELS[r.name]:<38}{r.mean:>9.4f}s{paper_m}{r.p99:>10.4f}s{paper_t}{hit:>15}"
        )
    for r in results:
        if r.unfinished:
            lines.append(f"note: {r.unfinished} short flows did not finish in '{r.name}'")
    return "\n".join(lines)


#: The simulator's series name of each toy scenario (for the Table I claims, RF-T1 and RF-T2).
CLAIM_SERIES = {"alone": "tcp-alone", "large": "tcp", "replicated": "repflow"}


@dataclass
class TrialSummary:
    """Table I over several trials: per scenario its mean and p99 with 95 % intervals, and
    the verdicts of RF-T1 (means) and RF-T2 (99th percentiles)."""

    #: scenario → (mean, mean's interval, p99, p99's interval, flows, trials)
    rows: dict[str, tuple[float, tuple[float, float], float, tuple[float, float], int, int]]
    #: claim id → (verdict, measured, reason)
    verdicts: dict[str, tuple[str, str, str]]


def summarize_trials(trials: list[list[Scenario]], resamples: int = 1000) -> TrialSummary:
    """Pools the trials (each a seed: its own ECMP hash and source ports) into intervals by
    a two-stage bootstrap (its table; the verdicts use the claims' own method,
    docs/metrics.md), and decides
    RF-T1 and RF-T2 with the claims' own rule."""
    import pandas as pd

    from repflow.experiments import stats
    from repflow.experiments.claims import Evidence, evaluate_claims

    samples: dict[tuple[str, str, float], stats.Sample] = {}
    names = list(dict.fromkeys(r.name for t in trials for r in t))
    rows_agg = []
    table: dict[str, tuple[float, tuple[float, float], float, tuple[float, float], int, int]] = {}
    for name in names:
        s = stats.Sample()
        for i, t in enumerate(trials):
            for r in t:
                if r.name != name:
                    continue
                fct = np.asarray(r.fct, dtype=float)
                fct = np.concatenate([fct, np.full(r.unfinished, np.nan)])
                s.add(i, pd.DataFrame({"size": np.full(len(fct), SHORT_BYTES),
                                       "start": np.arange(len(fct), dtype=float),
                                       "fct": fct}))  # fmt: skip
        if not s.flows:
            continue
        boot = stats.Bootstrap(resamples)
        m = boot.level(s, "short_mean", 100_000, ("toy", name))
        p = boot.level(s, "short_p99", 100_000, ("toy", name))
        table[name] = (m.estimate, (m.lo, m.hi), p.estimate, (p.lo, p.hi),
                       s.n_flows(), len(s.seeds))  # fmt: skip
        series = CLAIM_SERIES.get(name)
        if series:
            samples[("trace", series, 0.0)] = s
            rows_agg.append({"workload": "trace", "series": series, "scheme": series, "load": 0.0,
                             "short_mean": m.estimate, "short_p99": p.estimate,
                             "seeds": len(s.seeds)})  # fmt: skip
    agg = pd.DataFrame(rows_agg)
    verdicts: dict[str, tuple[str, str, str]] = {}
    if len(rows_agg) == 3:
        ev = Evidence(agg, samples, resamples=resamples)
        for res in evaluate_claims(ev, ["repflow-toy"]):
            if res.claim.scenario == "repflow-toy":
                verdicts[res.claim.id] = (res.verdict, res.measured, res.reason)
    return TrialSummary(table, verdicts)


def format_trials(summary: TrialSummary, rate_bps: int, seeds: list[int],
                  host_shaping: bool = False) -> str:  # fmt: skip
    """Table I over the trials, with intervals, beside the paper's values; then RF-T1/RF-T2."""
    shaping = "hosts and switches shaped" if host_shaping else "switch ports shaped"
    lines = [
        f"Table I (toy, {format_rate(rate_bps)} links, {shaping}, no propagation delay; "
        f"{len(seeds)} trials, seeds {', '.join(map(str, seeds))}; 95 % intervals over trials "
        "and flows) — measured vs paper (Mininet, 1 ms per link)",
        f"{'scenario':<38}{'mean FCT [95 % interval]':>30}{'paper':>9}"
        f"{'99th FCT [95 % interval]':>30}{'paper':>9}{'flows':>7}",
    ]
    for name, (mean, (mlo, mhi), p99, (plo, phi), n, _t) in summary.rows.items():
        pm, pp = PAPER.get(name, (math.nan, math.nan))
        paper_m = f"{pm:>8.4f}s" if not math.isnan(pm) else f"{'-':>9}"
        paper_t = f"{pp:>8.4f}s" if not math.isnan(pp) else f"{'-':>9}"
        cm = f"{mean:.4f}s [{mlo:.4f}, {mhi:.4f}]"
        cp = f"{p99:.4f}s [{plo:.4f}, {phi:.4f}]"
        lines.append(f"{LABELS[name]:<38}{cm:>30}{paper_m}{cp:>30}{paper_t}{n:>7}")
    for cid, (verdict, measured, reason) in summary.verdicts.items():
        lines.append(f"{cid}: {verdict} — {measured}" + (f" ({reason})" if reason else ""))
    return "\n".join(lines)


def check_toy_scheme(scheme: str | None, subflows: int | None) -> int | None:
    """``toy --scheme/--subflows``: the MPTCP scenario's subflows per connection, or ``None``
    when the toy runs only the paper's scenarios; one clear line on bad input."""
    from repflow.testbed import mptcp

    if scheme == "mptcp-l":
        raise UserError(mptcp.MPTCP_L_REFUSAL)
    if scheme is not None and scheme not in TOY_SCHEMES:
        raise UserError(
            f"--scheme: the toy runs tcp and repflow always and adds mptcp; got {scheme!r}"
        )
    if subflows is not None:
        mptcp.check_subflows(subflows)
    if scheme != "mptcp":
        if subflows is not None:
            raise UserError(f"--subflows: only with --scheme mptcp, not {scheme or 'the default'}")
        return None
    from repflow.testbed.workload import DEFAULT_SUBFLOWS

    return mptcp.check_subflows(DEFAULT_SUBFLOWS if subflows is None else subflows)


def run_cli(args, say: Callable[[str], None]) -> None:
    """``repflow testbed toy``: builds the toy topology, runs Table I, removes it."""
    from repflow.testbed.workload import check_out

    rate = parse_rate(args.link_rate, like="50Mbps")
    if not 10 <= args.flows <= 40_000:
        raise UserError(f"--flows must be between 10 and 40000, got {args.flows}")
    subflows = check_toy_scheme(getattr(args, "scheme", None), getattr(args, "subflows", None))
    if args.out:
        check_out(args.out)  # before anything is built, not after the experiment
    if netns.read_state(args.prefix) is not None:
        raise UserError(
            f"a testbed with prefix {args.prefix!r} is already up; "
            f"run `repflow testbed down --prefix {args.prefix}` first"
        )
    trials_n = int(getattr(args, "trials", 1) or 1)
    if not 1 <= trials_n <= 20:
        raise UserError(f"--trials must be between 1 and 20, got {trials_n}")
    seeds = [args.seed + i for i in range(trials_n)]
    trials: list[list[Scenario]] = []
    for i, seed in enumerate(seeds):
        t0 = time.perf_counter()
        tb = netns.up(
            toy(),
            rate_bps=rate,
            buffer=args.buffer,
            seed=seed,
            prefix=args.prefix,
            progress=say,
            host_shaping=args.host_shaping,
            tcp_cc=args.tcp,
            rto_min_ms=args.rto_min_ms,
        )
        trial = f"trial {i + 1}/{trials_n} (seed {seed}): " if trials_n > 1 else ""
        say(f"{trial}toy topology up in {time.perf_counter() - t0:.1f} s")
        try:
            trials.append(run_toy(
                tb, args.flows, seed, args.cancel, say, engine=args.engine,
                mptcp_subflows=subflows,
            ))  # fmt: skip
        finally:
            netns.down(args.prefix)
    summary = summarize_trials(trials)
    print(format_trials(summary, rate, seeds, args.host_shaping))
    for t, seed in zip(trials, seeds, strict=True):
        for r in t:
            if r.unfinished:
                print(f"note: {r.unfinished} short flows did not finish in '{r.name}' "
                      f"(seed {seed})")  # fmt: skip
    if args.out:
        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"--out: cannot create '{out}': {exc.strerror}") from None
        tmp = out / "toy.json.tmp"
        tmp.write_text(
            json.dumps(
                {
                    "config": {
                        "link_rate_bps": rate,
                        "buffer": args.buffer,
                        "seed": args.seed,
                        "trials": seeds,
                        "flows": args.flows,
                        "cancel": args.cancel,
                        "host_shaping": args.host_shaping,
                        "engine": args.engine,
                        "tcp": args.tcp,
                        "rto_min_ms": args.rto_min_ms,
                        "scheme": getattr(args, "scheme", None),
                        "subflows": subflows,
                    },
                    "paper": PAPER,
                    "summary": {
                        name: {"mean": m, "mean_ci95": list(mci), "p99": p, "p99_ci95": list(pci),
                               "flows": n, "trials": k}
                        for name, (m, mci, p, pci, n, k) in summary.rows.items()
                    },
                    "verdicts": {c: {"verdict": v, "measured": me, "reason": why}
                                 for c, (v, me, why) in summary.verdicts.items()},
                    "trials": [
                        {"seed": seed, "scenarios": [
                            {
                                "name": r.name,
                                "mean": r.mean,
                                "p99": r.p99,
                                "fct": r.fct,
                                "unfinished": r.unfinished,
                                "collided": r.collided,
                                "s1_uplink_mbps": r.s1_uplink_mbps,
                            }
                            for r in t
                        ]}
                        for t, seed in zip(trials, seeds, strict=True)
                    ],
                },
                indent=1,
            )
        )
        tmp.replace(out / "toy.json")
