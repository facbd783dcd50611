"""Self-checks of a running testbed: reachability, ECMP spreading, TTL-probe path prediction.

Each check returns a result object with ``ok`` and the numbers behind it; :func:`run_all` prints
them. They generate traffic only between the testbed's own namespace addresses.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from repflow.errors import UserError
from repflow.testbed.netns import Testbed, signals_held, stop_processes
from repflow.testbed.topology import port_name

AGENT = [sys.executable, "-m", "repflow.testbed.agent"]
SINK_PORT = 5001


def agent(tb: Testbed, node: str, args: Sequence[str], timeout: float = 120.0) -> object:
    """Runs an agent command inside ``node`` and returns its JSON output."""
    out = tb.run_in(node, [*AGENT, *args], timeout=timeout)
    return json.loads(out)


@contextlib.contextmanager
def sinks(
    tb: Testbed, hosts: Sequence[str], ports: Sequence[int], mptcp: bool = False
) -> Iterator[None]:
    """Flow receivers on ``ports`` of every host in ``hosts`` for the duration of the block
    (listening on Multipath TCP sockets with ``mptcp``)."""
    procs: list[subprocess.Popen] = []
    try:
        for h in hosts:
            with signals_held():
                procs.append(
                    tb.popen_in(
                        h,
                        [*AGENT, "sink", "--ports", ",".join(map(str, ports))]
                        + (["--mptcp"] if mptcp else []),
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                    )
                )
        for h, p in zip(hosts, procs, strict=True):
            line = p.stdout.readline() if p.stdout else ""
            if not line.startswith('{"ready"'):
                err = p.stderr.read() if p.stderr else ""
                raise UserError(f"flow receiver on {h} did not start: {err.strip()[-300:]}")
        yield
    finally:
        stop_processes(procs)


# ------------------------------------------------------------------------------ reachability
@dataclass
class Reachability:
    """All-pairs ICMP reachability between hosts."""

    pairs: int
    failed: list[tuple[str, str]]
    max_rtt: float

    @property
    def ok(self) -> bool:
        return not self.failed and self.pairs > 0


def reachability(tb: Testbed) -> Reachability:
    """Every host pings every other host."""
    hosts = tb.topo.hosts

    def one(h) -> tuple[str, dict]:
        targets = [o.addr for o in hosts if o.name != h.name]
        return h.name, agent(tb, h.name, ["ping", "--targets", ",".join(targets)])  # type: ignore[return-value]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(one, hosts))
    by_addr = tb.topo.node_by_addr()
    failed, rtts = [], []
    for src, res in results:
        for addr, rtt in res.items():
            if rtt is None:
                failed.append((src, by_addr[addr]))
            else:
                rtts.append(rtt)
    return Reachability(sum(len(r) for _, r in results), failed, max(rtts, default=float("nan")))


# --------------------------------------------------------------------------------- spreading
@dataclass
class Spreading:
    """Bytes each switch uplink carried while many five-tuples crossed the core."""

    flows: int
    uplink_bytes: dict[str, dict[str, int]]
    #: smallest share any uplink got of its switch's uplink bytes, times the number of uplinks
    #: (1.0 = perfectly even, 0 = an uplink idle)
    min_balance: float
    min_required: float = 0.3

    @property
    def ok(self) -> bool:
        return self.flows > 0 and self.min_balance >= self.min_required


def _peer(tb: Testbed, i: int) -> int:
    """A host in another pod (half-way round the host list)."""
    n = len(tb.topo.hosts)
    return (i + n // 2) % n


def spreading(
    tb: Testbed, flows_per_host: int = 8, size: int = 50_000, sport_base: int = 20000
) -> Spreading:
    """Each host sends ``flows_per_host`` flows (distinct source ports) to a far host."""
    hosts = tb.topo.hosts
    switches = [s.name for s in tb.topo.switches if tb.topo.uplinks(s.name)]
    with sinks(tb, [h.name for h in hosts], [SINK_PORT]):
        before = tb.qdisc_stats(switches)

        def one(i: int) -> list:
            sports = ",".join(
                str(sport_base + i * flows_per_host + j) for j in range(flows_per_host)
            )
            return agent(
                tb,
                hosts[i].name,
                [  # type: ignore[return-value]
                    "flows",
                    "--dst",
                    hosts[_peer(tb, i)].addr,
                    "--port",
                    str(SINK_PORT),
                    "--size",
                    str(size),
                    "--count",
                    str(flows_per_host),
                    "--sports",
                    sports,
                    "--parallel",
                ],
            )

        with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
            recs = [r for rs in pool.map(one, range(len(hosts))) for r in rs]
        after = tb.qdisc_stats(switches)
    unfinished = [r for r in recs if r["winner"] < 0]
    if unfinished:
        raise UserError(f"spreading check: {len(unfinished)} of {len(recs)} flows did not finish")
    uplink_bytes: dict[str, dict[str, int]] = {}
    balance = []
    for s in switches:
        ups = tb.topo.uplinks(s)
        got = {
            u: after[(s, port_name(u))]["bytes"] - before[(s, port_name(u))]["bytes"] for u in ups
        }
        uplink_bytes[s] = got
        total = sum(got.values())
        balance.append(min(got.values()) * len(ups) / total if total else 0.0)
    return Spreading(len(recs), uplink_bytes, min(balance, default=0.0))


# ----------------------------------------------------------------------------- path probes
@dataclass
class PathCheck:
    """A TTL-probed path next to the path a real connection with that five-tuple took."""

    src: str
    dst: str
    sport: int
    dport: int
    probed: list[str]
    taken: list[str]

    @property
    def ok(self) -> bool:
        return bool(self.probed) and self.probed == self.taken


@dataclass
class PathPrediction:
    """Several :class:`PathCheck` results."""

    checks: list[PathCheck] = field(default_factory=list)

    @property
    def distinct_paths(self) -> int:
        return len({(c.src, c.dst, tuple(c.probed)) for c in self.checks})

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)


def _taken_path(tb: Testbed, src: str, delta: dict[tuple[str, str], int], size: int) -> list[str]:
    """Follows the ports that carried (almost) the whole flow, starting at ``src``."""
    path, cur, seen = [], tb.topo.neighbours(src)[0], {src}
    path.append(cur)
    seen.add(cur)
    while True:
        nxt = [
            nb
            for nb in tb.topo.neighbours(cur)
            if delta.get((cur, port_name(nb)), 0) >= 0.9 * size and nb not in seen
        ]
        if len(nxt) != 1:
            return path if not nxt else [*path, "?ambiguous"]
        cur = nxt[0]
        if tb.topo.nodes[cur].kind == "host":
            return path
        path.append(cur)
        seen.add(cur)


def path_prediction(
    tb: Testbed,
    pairs: Sequence[tuple[int, int]] | None = None,
    sports: Sequence[int] = (31000, 31001, 31002),
    size: int = 150_000,
    dport: int = SINK_PORT,
) -> PathPrediction:
    """For each (src, dst) host pair and source port: probe, then send a real flow and compare."""
    hosts = tb.topo.hosts
    n = len(hosts)
    if pairs is None:
        pairs = [(0, n - 1), (1, _peer(tb, 1))] if n > 2 else [(0, 1)]
    by_addr = tb.topo.node_by_addr()
    result = PathPrediction()
    dsts = sorted({hosts[d].name for _, d in pairs})
    nodes = [sw.name for sw in tb.topo.switches]
    with sinks(tb, dsts, [dport]):
        for s, d in pairs:
            src, dst = hosts[s], hosts[d]
            probes = agent(
                tb,
                src.name,
                [
                    "probe",
                    "--dst",
                    dst.addr,
                    "--dport",
                    str(dport),
                    "--sports",
                    ",".join(map(str, sports)),
                ],
            )
            for sp in sports:
                hops = probes[str(sp)]  # type: ignore[index]
                probed = [
                    by_addr.get(h["addr"], h["addr"] or "?")
                    for h in hops
                    if h["kind"] == "time-exceeded"
                ]
                before = tb.qdisc_stats(nodes)
                recs = agent(
                    tb,
                    src.name,
                    [
                        "flows",
                        "--dst",
                        dst.addr,
                        "--port",
                        str(dport),
                        "--size",
                        str(size),
                        "--sports",
                        str(sp),
                    ],
                )
                after = tb.qdisc_stats(nodes)
                if not recs or recs[0]["winner"] < 0:  # type: ignore[index]
                    raise UserError(f"path check: flow {src.name}->{dst.name} did not finish")
                delta = {k: after[k]["bytes"] - before[k]["bytes"] for k in after}
                taken = _taken_path(tb, src.name, delta, size)
                result.checks.append(PathCheck(src.name, dst.name, sp, dport, probed, taken))
                time.sleep(0.05)
    return result


# ----------------------------------------------------------------------- copy collisions
@dataclass
class Collisions:
    """How often a RepFlow copy (destination port + 1, same source port) hashes onto exactly
    the same path as its original, measured with TTL probes between hosts in different pods."""

    samples: int
    collided: int
    paths: int  # equal-cost paths between the sampled pairs

    @property
    def rate(self) -> float:
        return self.collided / self.samples if self.samples else float("nan")


def copy_collisions(
    tb: Testbed, pairs: int = 8, per_pair: int = 25, seed: int = 1, dport: int = SINK_PORT
) -> Collisions:
    """Probes ``pairs × per_pair`` random inter-pod five-tuples and their dport+1 copies."""
    import random

    rng = random.Random(seed)
    hosts = tb.topo.hosts
    by_addr = tb.topo.node_by_addr()
    chosen = []
    while len(chosen) < pairs:
        s, d = rng.sample(range(len(hosts)), 2)
        if hosts[s].pod != hosts[d].pod or len({h.pod for h in hosts}) == 1:
            chosen.append((s, d))
    jobs = [(s, d, rng.sample(range(20000, 60000), per_pair)) for s, d in chosen]

    def one(job) -> int:
        s, d, sports = job
        sp = ",".join(map(str, sports))
        paths = []
        for port in (dport, dport + 1):
            res = agent(
                tb,
                hosts[s].name,
                ["probe", "--dst", hosts[d].addr, "--dport", str(port), "--sports", sp],
            )
            paths.append(
                {
                    k: [
                        by_addr.get(h["addr"], h["addr"]) for h in v if h["kind"] == "time-exceeded"
                    ]
                    for k, v in res.items()
                }
            )  # type: ignore[union-attr]
        return sum(paths[0][k] == paths[1][k] and bool(paths[0][k]) for k in paths[0])

    with ThreadPoolExecutor(max_workers=4) as pool:
        collided = sum(pool.map(one, jobs))
    s, d = chosen[0]
    routes = tb.topo.routes()

    def count(node: str, dst: str) -> int:
        return 1 if node == dst else sum(count(n, dst) for n in routes[node][dst])

    npaths = count(tb.topo.neighbours(hosts[s].name)[0], hosts[d].name)
    return Collisions(pairs * per_pair, collided, npaths)


# ---------------------------------------------------------------------------------- all
def run_all(tb: Testbed, flows_per_host: int = 8, report: Callable[[str], None] = print) -> bool:
    """Runs every check and prints what it measured; True when all passed."""
    t0 = time.perf_counter()
    r = reachability(tb)
    report(
        f"reachability: {r.pairs - len(r.failed)}/{r.pairs} host pairs answer ping "
        f"(max RTT {r.max_rtt * 1e3:.2f} ms) — {'ok' if r.ok else 'FAILED'}"
        + (f"; unreachable: {r.failed[:5]}" if r.failed else "")
    )
    sp = spreading(tb, flows_per_host)
    report(
        f"ECMP spreading: {sp.flows} flows; worst uplink balance {sp.min_balance:.2f} "
        f"(1 = even, need >= {sp.min_required}) — {'ok' if sp.ok else 'FAILED'}"
    )
    for s, ups in sp.uplink_bytes.items():
        report(f"  {s:>4} uplinks: " + "  ".join(f"{u} {b / 1e3:8.1f} kB" for u, b in ups.items()))
    pp = path_prediction(tb)
    report(
        f"TTL-probe path prediction: {sum(c.ok for c in pp.checks)}/{len(pp.checks)} "
        f"five-tuples took the probed path ({pp.distinct_paths} distinct paths) — "
        f"{'ok' if pp.ok else 'FAILED'}"
    )
    for c in pp.checks:
        report(
            f"  {c.src}->{c.dst} sport {c.sport}: probed {'-'.join(c.probed)}  "
            f"taken {'-'.join(c.taken)}"
        )
    co = copy_collisions(tb)
    report(
        f"RepFlow copy collisions (dst port + 1, same source port): {co.collided}/{co.samples}"
        f" = {100 * co.rate:.0f}% of inter-pod five-tuples share the whole path "
        f"({co.paths} equal-cost paths; an ideal hash gives {100 / co.paths:.0f}%)"
    )
    report(f"checks took {time.perf_counter() - t0:.1f} s")
    return r.ok and sp.ok and pp.ok
