"""``repflow testbed proxy-demo``: an unmodified Redis and nginx behind ``repflow proxy`` on the
k-pod fat tree, with and without a background large flow (docs/proxy.md, "On the testbed").

Hosts (k = 4): the client h0 (pod 0), the server h12 (the first host of the last pod); the
large flow runs from h1 (h0's edge switch) to h13 (h12's edge switch), so it shares the client's
edge uplinks and the server's edge downlinks but neither host's own link. Host egress is
unshaped, so the large flow's queue builds at the first shaped port it crosses: the uplink of
h0's edge switch that its five-tuple hashes to — a request hashed onto the same uplink waits
behind it.

Six paths per protocol and trial: straight to the server (``direct``), through the two
sidecars with one copy, and with two copies; each without and with the large flow. Redis is
measured with ``redis-benchmark`` (GET, a fixed number of requests), HTTP with ``wrk`` (a small
static file from nginx, a fixed duration). Each trial is a testbed of its own seed (ECMP hash
seeds), so the trials see different path collisions.

Latencies come from the tools' own histograms: redis-benchmark prints its percentile
distribution (HdrHistogram, 3 significant digits) and wrk's Lua ``done`` hook prints 1,000
quantiles. Each trial's distribution is expanded back to one value per request (at most
:data:`MAX_SAMPLES`, equally spaced quantiles), and the percentiles' 95 % intervals come from
a two-stage bootstrap like the simulator's claims' candidates (trials, then requests within a trial;
docs/metrics.md). Throughput's interval is a Student t interval over trials.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from repflow.errors import UserError
from repflow.testbed import netns
from repflow.testbed.checks import AGENT, sinks
from repflow.testbed.topology import fat_tree, port_name
from repflow.testbed.workload import REPFLOW, socket_owners
from repflow.units import format_rate, parse_duration, parse_rate

PROTOCOLS = ("redis", "http")
#: (via, copies) in the order they run and are shown
PATHS = (("direct", 0), ("proxy", 1), ("proxy", 2))
#: with ``--relay``, also two socat relays
ALL_PATHS = (*PATHS, ("relay", 0))
REDIS_PORT = 6379
NGINX_PORT = 8080
#: first repflow-net port of the server sidecar, per protocol
SIDECAR_PORT = {"redis": 7000, "http": 7100}
#: client sidecar's port on the client's loopback: base + copies
CLIENT_BASE = {"redis": 6380, "http": 8080}
#: ``--relay``: the server-side socat relay's port and the client-side one's (on loopback)
RELAY_SERVER = {"redis": 7200, "http": 7300}
RELAY_CLIENT = {"redis": 6390, "http": 8090}
LARGE_PORT = 6101
#: requests a trial's distribution is expanded into, at most (equally spaced quantiles)
MAX_SAMPLES = 5000
RESAMPLES = 1000
#: wrk's Lua hook: one JSON line with the counts and 1,000 quantiles (µs)
WRK_LUA = """
done = function(summary, latency, requests)
  local e = summary.errors
  local errs = e.connect + e.read + e.write + e.status + e.timeout
  local q = {}
  for i = 1, 999 do q[#q + 1] = string.format("%.0f", latency:percentile(i / 10)) end
  for i = 1, 9 do q[#q + 1] = string.format("%.0f", latency:percentile(99.9 + i / 100)) end
  q[#q + 1] = string.format("%.0f", latency.max)
  io.write(string.format('\\nREPFLOW-WRK {"requests": %d, "duration_us": %d, "errors": %d, ' ..
    '"q_us": [%s]}\\n', summary.requests, summary.duration, errs, table.concat(q, ",")))
end
"""
#: the quantile levels of :data:`WRK_LUA`'s list
WRK_LEVELS = [i / 1000 for i in range(1, 1000)] + [0.999 + i / 10000 for i in range(1, 10)] + [1.0]


@dataclass
class Measurement:
    """One load generator run: a protocol over one path, in one trial."""

    protocol: str
    via: str
    copies: int
    background: bool
    trial: int
    seed: int
    requests: int
    errors: int
    seconds: float
    rps: float
    #: the latency distribution as (seconds, cumulative fraction) points, ascending
    points: list[tuple[float, float]] = field(default_factory=list)
    #: the client sidecar's connections after the run: (server port, smoothed RTT in ms) —
    #: a connection ECMP put behind the large flow has an RTT of milliseconds
    conns: list[tuple[int, float]] = field(default_factory=list)
    #: beside the large flow: packets queued at the busiest uplink port of the client's edge
    #: switch when the run started and when it ended (-1: idle network, not read), and that
    #: port (``node:device``)
    queue_before: int = -1
    queue_after: int = -1
    queue_port: str = ""
    #: the run's place in its trial's (shuffled) order, from 0
    order: int = -1
    #: (local port, uplink) of each of the sidecar's connections: the uplink of the client's
    #: edge switch that the kernel's ECMP picks for its five-tuple (``ip route get``); and the
    #: large flow's
    uplinks: list[tuple[int, str]] = field(default_factory=list)
    large_uplink: str = ""
    #: through the proxy: the sidecars' per-hop times during this run (hop → ``count``,
    #: ``mean_us``, ``p50_us``, ``p99_us``; docs/proxy.md, "Where the time goes"), from their
    #: counters snapshotted before and after it
    hops: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: through the proxy: what the client sidecar's repflow-net client and path pool counted
    #: during this run (counter → increase; connections opened, copies failed, …)
    counted: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``direct``, ``proxy, 1 copy``, ``proxy, 2 copies``."""
        return path_label(self.via, self.copies)


def path_label(via: str, copies: int) -> str:
    """How a path is named in tables and figures."""
    if via == "direct":
        return "direct"
    if via == "relay":
        return "2 socat relays"
    return f"proxy, {copies} cop{'y' if copies == 1 else 'ies'}"


# -- the tools' outputs ---------------------------------------------------------------------

_SS_PEER = re.compile(r"(?<=\s)(\d+\.\d+\.\d+\.\d+):(\d+)(?=\s)")
_SS_PID = re.compile(r"pid=(\d+)")
_SS_RTT = re.compile(r"\brtt:([\d.]+)/")


def parse_ss(text: str, pid: int) -> list[tuple[int, float]]:
    """(peer port, smoothed RTT in ms) of ``pid``'s connections in ``ss -Htinp`` output
    (each socket is a line with its addresses and owner, then an indented line of TCP info)."""
    out: list[tuple[int, float]] = []
    port: int | None = None
    for line in text.splitlines():
        if not line.startswith((" ", "\t")):
            m = _SS_PEER.findall(" " + line + " ")
            owner = _SS_PID.search(line)
            port = int(m[-1][1]) if m and owner and int(owner.group(1)) == pid else None
        elif port is not None:
            r = _SS_RTT.search(line)
            if r:
                out.append((port, float(r.group(1))))
            port = None
    return sorted(out)


_RB_LINE = re.compile(r"^\s*([\d.]+)% <= ([\d.]+) milliseconds \(cumulative count (\d+)\)")
_RB_RPS = re.compile(r"throughput summary: ([\d.]+) requests per second")


def parse_ss_tuples(text: str, pid: int) -> list[tuple[str, int, str, int]]:
    """(local address, local port, peer address, peer port) of ``pid``'s connections in
    ``ss -Htinp`` output."""
    out: list[tuple[str, int, str, int]] = []
    for line in text.splitlines():
        if line.startswith((" ", "\t")):
            continue
        m = _SS_PEER.findall(" " + line + " ")
        owner = _SS_PID.search(line)
        if len(m) >= 2 and owner and int(owner.group(1)) == pid:
            (la, lp), (pa, pp) = m[-2], m[-1]
            out.append((la, int(lp), pa, int(pp)))
    return out


def parse_redis_benchmark(text: str) -> tuple[int, float, list[tuple[float, float]]]:
    """(requests, requests per second, distribution points) from redis-benchmark's full
    output (not ``-q``/``--csv``): its "Latency by percentile distribution" and "Cumulative
    distribution of latencies" lines, both as (latency in s, cumulative fraction)."""
    pts: dict[float, int] = {}
    for line in text.splitlines():
        m = _RB_LINE.match(line)
        if m:
            v, c = float(m.group(2)) / 1000.0, int(m.group(3))
            pts[v] = max(pts.get(v, 0), c)
    rps = _RB_RPS.search(text)
    if not pts or rps is None:
        tail = " | ".join(text.strip().splitlines()[-3:])
        raise UserError(f"redis-benchmark printed no latency distribution: {tail[-300:]!r}")
    total = max(pts.values())
    vals = sorted(pts)
    # a cumulative count never falls as the latency grows
    cum, run = [], 0
    for v in vals:
        run = max(run, pts[v])
        cum.append(run / total)
    return total, float(rps.group(1)), list(zip(vals, cum, strict=True))


def parse_wrk(text: str) -> tuple[int, float, int, list[tuple[float, float]]]:
    """(requests, seconds, errors, distribution points) from :data:`WRK_LUA`'s line."""
    for line in text.splitlines():
        if line.startswith("REPFLOW-WRK "):
            d = json.loads(line[len("REPFLOW-WRK "):])
            q = [float(x) / 1e6 for x in d["q_us"]]
            if len(q) != len(WRK_LEVELS):
                break
            pts = list(zip(np.maximum.accumulate(q).tolist(), WRK_LEVELS, strict=True))
            return int(d["requests"]), d["duration_us"] / 1e6, int(d["errors"]), pts
    tail = " | ".join(text.strip().splitlines()[-3:])
    raise UserError(f"wrk printed no latency distribution: {tail[-300:]!r}")


def expand(points: Sequence[tuple[float, float]], n: int, cap: int = MAX_SAMPLES) -> np.ndarray:
    """One latency per request (at most ``cap``, equally spaced in rank): request ``r`` of
    ``m`` takes the smallest latency whose cumulative fraction reaches ``r / m`` — the upper
    edge of its histogram bucket."""
    m = min(n, cap)
    if m <= 0 or not points:
        return np.array([])
    vals = np.array([p[0] for p in points])
    cum = np.array([p[1] for p in points])
    ranks = np.arange(1, m + 1) / m
    idx = np.searchsorted(cum, ranks - 1e-12, side="left")
    return vals[np.minimum(idx, len(vals) - 1)]


# -- processes on the testbed ---------------------------------------------------------------


def _start(tb: netns.Testbed, procs: list[subprocess.Popen], node: str, argv: Sequence[str],
           port: int, what: str, log: Path, timeout: float = 30.0) -> int:  # fmt: skip
    """Starts ``argv`` inside ``node`` (recorded in ``procs``, stopped by the caller) and
    returns its pid once the kernel says that process listens on TCP ``port``."""
    fh = log.open("w")
    with netns.signals_held():
        p = tb.popen_in(node, argv, stdout=fh, stderr=subprocess.STDOUT)
        procs.append(p)
    fh.close()
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if p.poll() is not None:
            raise UserError(f"{what} on {node} exited ({p.returncode}) before it listened "
                            f"on port {port}")  # fmt: skip
        owners = socket_owners(tb, node, [port])[port]
        if p.pid in owners:
            return p.pid
        if owners:
            raise UserError(f"port {port} on {node} is held by another process (pid "
                            f"{', '.join(map(str, sorted(owners)))}), not by {what}")  # fmt: skip
        time.sleep(0.1)
    raise UserError(f"{what} on {node} did not listen on port {port} within {timeout:g} s")


def nginx_conf(work: Path, port: int) -> str:
    """A one-worker nginx serving ``work/www`` on ``port``, everything under ``work``."""
    return (
        "user root;\n"
        f"pid {work}/nginx.pid;\nerror_log {work}/nginx-error.log;\n"
        "worker_processes 1;\nevents { worker_connections 1024; }\n"
        f"http {{\n access_log off;\n client_body_temp_path {work}/body;\n"
        f" proxy_temp_path {work}/proxy;\n fastcgi_temp_path {work}/fcgi;\n"
        f" uwsgi_temp_path {work}/uwsgi;\n scgi_temp_path {work}/scgi;\n"
        f" server {{\n  listen 0.0.0.0:{port};\n  root {work}/www;\n }}\n}}\n"
    )


def require_tools(protocols: Sequence[str], relay: bool = False) -> None:
    """The Debian programs the demo runs, with the install line when one is missing."""
    need = {"redis": ["redis-server", "redis-benchmark"], "http": ["nginx", "wrk"]}
    wanted = [t for p in protocols for t in need[p]] + (["socat"] if relay else [])
    missing = [t for t in wanted
               if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]  # fmt: skip
    if missing:
        pkgs = {"redis-server": "redis-server", "redis-benchmark": "redis-tools",
                "nginx": "nginx", "wrk": "wrk", "socat": "socat"}  # fmt: skip
        raise UserError(
            f"proxy-demo needs {', '.join(missing)}: apt-get install "
            f"{' '.join(sorted({pkgs[m] for m in missing}))} (or --protocol without it)"
        )


def _exe(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclass
class Hosts:
    """Who is who on the fat tree."""

    client: str
    server: str
    large_src: str
    large_dst: str


def hosts_of(k: int) -> Hosts:
    """Client h0, server the first host of the last pod; the large flow from h0's neighbour
    to the server's neighbour."""
    half = k // 2
    first_last_pod = (k - 1) * half * half
    return Hosts("h0", f"h{first_last_pod}", "h1", f"h{first_last_pod + 1}")


def run_trial(tb: netns.Testbed, cfg: DemoConfig, trial: int, work: Path,
              say: Callable[[str], None]) -> list[Measurement]:  # fmt: skip
    """Every protocol × path × background of one trial on an up fat tree."""
    h = hosts_of(tb.topo.params["k"])
    srv = tb.topo.nodes[h.server].addr
    dst = tb.topo.nodes[h.large_dst].addr
    procs: list[subprocess.Popen] = []
    out: list[Measurement] = []
    sidecars: dict[tuple[str, int], int] = {}
    # (pid, log) of each sidecar, client ones by (protocol, copies), server ones by protocol
    logs: dict[Any, tuple[int, Path]] = {}
    try:
        for proto in cfg.protocols:
            if proto == "redis":
                argv = [_exe("redis-server"), "--port", str(REDIS_PORT), "--bind", "0.0.0.0",
                        "--protected-mode", "no", "--save", "", "--appendonly", "no",
                        "--dir", str(work)]  # fmt: skip
                _start(tb, procs, h.server, argv, REDIS_PORT, "redis-server", work / "redis.log")
                upstream = REDIS_PORT
            else:
                (work / "www").mkdir(exist_ok=True)
                (work / "www" / "index.html").write_text("x" * cfg.http_bytes)
                (work / "report.lua").write_text(WRK_LUA)
                conf = work / "nginx.conf"
                conf.write_text(nginx_conf(work, NGINX_PORT))
                argv = [_exe("nginx"), "-c", str(conf), "-g", "daemon off;"]
                _start(tb, procs, h.server, argv, NGINX_PORT, "nginx", work / "nginx.log")
                upstream = NGINX_PORT
            if cfg.relay:
                # Two plain relays, the sidecars' hops without their work: the floor any
                # pair of proxies pays on this testbed.
                rs, rc = RELAY_SERVER[proto], RELAY_CLIENT[proto]
                _start(tb, procs, h.server, [_exe("socat"), f"TCP-LISTEN:{rs},reuseaddr,fork,"
                                             "nodelay", f"TCP:127.0.0.1:{upstream},nodelay"],
                       rs, "socat relay", work / f"rs-{proto}.log")  # fmt: skip
                _start(tb, procs, h.client, [_exe("socat"), f"TCP-LISTEN:{rc},bind=127.0.0.1,"
                                             "reuseaddr,fork,nodelay", f"TCP:{srv}:{rs},nodelay"],
                       rc, "socat relay", work / f"rc-{proto}.log")  # fmt: skip
            sp = SIDECAR_PORT[proto]
            argv = [*REPFLOW, "proxy", "server", "--listen", f":{sp}",
                    "--ports", str(max(c for _v, c in PATHS)),
                    "--upstream", f"127.0.0.1:{upstream}", "--protocol", proto,
                    "--journal", str(work / f"journal-{proto}")]  # fmt: skip
            log = work / f"ps-{proto}.log"
            logs[proto] = (_start(tb, procs, h.server, argv, sp, "proxy server", log), log)
            for _via, copies in PATHS:
                if copies:
                    lp = CLIENT_BASE[proto] + copies
                    argv = [*REPFLOW, "proxy", "client", "--listen", f"127.0.0.1:{lp}",
                            "--to", f"{srv}:{sp}", "--protocol", proto,
                            "--copies", str(copies)]  # fmt: skip
                    log = work / f"pc-{proto}-{copies}.log"
                    sidecars[(proto, copies)] = _start(tb, procs, h.client, argv, lp,
                                                       "proxy client", log)  # fmt: skip
                    logs[(proto, copies)] = (sidecars[(proto, copies)], log)
        # Every protocol × path of a trial, in an order drawn from the trial's seed: no path
        # always runs first (before the large flow's queue has settled) or last.
        paths = [*PATHS, *((("relay", 0),) if cfg.relay else ())]
        combos = [(proto, via, copies) for proto in cfg.protocols for via, copies in paths]
        # Each client sidecar's first request probes its paths and fills its pool (~0.2 s):
        # a start-up cost, paid before anything is measured.
        for proto, copies in sidecars:
            warm_up(tb, cfg, h, proto, CLIENT_BASE[proto] + copies, work)
        edge = edge_of(tb, h.client)
        with sinks(tb, [h.large_dst], [LARGE_PORT]):
            for background in (False, True):
                order = combos[:]
                random.Random(cfg.seeds[trial] * 2 + background).shuffle(order)
                large = None
                try:
                    if background:
                        with netns.signals_held():
                            large = tb.popen_in(
                                h.large_src,
                                [*AGENT, "flows", "--dst", dst, "--port", str(LARGE_PORT),
                                 "--size", str(10**15), "--sports", str(61000 + trial)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            )  # fmt: skip
                        time.sleep(cfg.warmup)
                    for i, (proto, via, copies) in enumerate(order):
                        say(f"trial {trial + 1}: {proto}, {path_label(via, copies)}, "
                            f"{'beside the large flow' if background else 'idle'}")
                        port, before = (standing_queue(tb, edge, cfg.buffer // 2)
                                        if background else ("", -1))  # fmt: skip
                        sides = [logs[(proto, copies)], logs[proto]] if via == "proxy" else []
                        snaps = [sidecar_stats(*x) for x in sides]
                        m = _measure(tb, cfg, h, srv, proto, via, copies, background,
                                     trial, work)  # fmt: skip
                        for side, (b, x) in enumerate(zip(snaps, sides, strict=True)):
                            after = sidecar_stats(*x)
                            m.hops |= hops_between(b, after)
                            if side == 0:  # the client sidecar
                                m.counted = counted_between(b, after)
                        m.order, m.queue_port, m.queue_before = i, port, before
                        if background:
                            m.queue_after = uplink_queue(tb, edge)[1]
                        if (proto, copies) in sidecars:
                            ss = tb.run_in(h.client, ["ss", "-Htinp", "dst", srv])
                            pid = sidecars[(proto, copies)]
                            m.conns = parse_ss(ss, pid)
                            m.uplinks = [(t[1], uplink_of(tb, edge, h.client, t))
                                         for t in parse_ss_tuples(ss, pid)]  # fmt: skip
                        if background:
                            m.large_uplink = uplink_of(tb, edge, h.large_src, (
                                tb.topo.nodes[h.large_src].addr, 61000 + trial, dst,
                                LARGE_PORT))  # fmt: skip
                        out.append(m)
                finally:
                    if large is not None:
                        netns.stop_processes([large], timeout=10)
    finally:
        netns.stop_processes(procs, timeout=10)
    return out


def sidecar_stats(pid: int, log: Path, timeout: float = 5.0) -> dict[str, Any]:
    """A sidecar's counters: SIGUSR1 makes it print them as one line to its log."""
    from repflow.cli.proxy import STATS_PREFIX

    start = log.stat().st_size
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with log.open("rb") as fh:
            fh.seek(start)
            lines = fh.read().decode(errors="replace").split("\n")[:-1]  # complete lines
        for line in lines:
            if line.startswith(STATS_PREFIX):
                return json.loads(line[len(STATS_PREFIX):])
        time.sleep(0.02)
    raise UserError(f"proxy-demo: the sidecar (pid {pid}) printed no counters within "
                    f"{timeout:g} s of SIGUSR1; see {log}")  # fmt: skip


def hops_between(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each hop's times between two snapshots of a sidecar's counters: count, mean and
    quantiles (µs) of what was recorded in between."""
    from repflow._core import hop_quantile

    out: dict[str, dict[str, Any]] = {}
    for name, b in after.get("hops", {}).items():
        a = before.get("hops", {}).get(name, {"count": 0, "sum_ns": 0, "buckets": []})
        prev = {int(i): int(c) for i, c in a["buckets"]}
        diff = [[int(i), int(c) - prev.get(int(i), 0)] for i, c in b["buckets"]
                if int(c) > prev.get(int(i), 0)]  # fmt: skip
        n = int(b["count"]) - int(a["count"])
        out[name] = {"count": n,
                     "mean_us": (int(b["sum_ns"]) - int(a["sum_ns"])) / n / 1e3 if n else None,
                     "p50_us": hop_quantile(diff, 0.5), "p99_us": hop_quantile(diff, 0.99)}
    return out


def counted_between(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    """The client sidecar's library and path-pool counters that grew between two snapshots
    (``net.connections``, ``paths.replaced``, …)."""
    out: dict[str, int] = {}
    for part in ("net", "paths"):
        b, a = before.get(part) or {}, after.get(part) or {}
        for k, v in a.items():
            if isinstance(v, int) and v > int(b.get(k, 0)):
                out[f"{part}.{k}"] = v - int(b.get(k, 0))
    return out


def edge_of(tb: netns.Testbed, host: str) -> str:
    """The switch a host hangs off."""
    for link in tb.topo.links:
        if host in (link.a, link.b):
            return link.b if link.a == host else link.a
    raise UserError(f"proxy-demo: host {host} has no link")  # pragma: no cover


def uplink_queue(tb: netns.Testbed, edge: str) -> tuple[str, int]:
    """(``node:device``, packets queued) of the edge switch's uplink with the longest queue,
    from ``tc -s`` (the root tbf's counters include its FIFO child)."""
    ups = {port_name(n) for link in tb.topo.links for n in (link.a, link.b)
           if edge in (link.a, link.b) and n != edge
           and tb.topo.nodes[n].kind == "switch"}  # fmt: skip
    stats = {k: v for k, v in tb.qdisc_stats([edge]).items() if k[1] in ups}
    if not stats:
        return "", 0
    (node, dev), q = max(stats.items(), key=lambda kv: kv[1]["qlen"])
    return f"{node}:{dev}", q["qlen"]


def uplink_of(tb: netns.Testbed, edge: str, host: str,
              five: tuple[str, int, str, int]) -> str:  # fmt: skip
    """The device by which ``edge`` forwards TCP five-tuple ``five`` (source address and
    port, destination address and port) arriving from ``host``: the kernel's own ECMP choice,
    asked with the same hash inputs (``ip route get … iif … ipproto tcp sport … dport …``)."""
    src, sport, dst, dport = five
    argv = ["ip", "route", "get", dst, "from", src, "iif", port_name(host), "ipproto", "tcp",
            "sport", str(sport), "dport", str(dport)]  # fmt: skip
    text = tb.run_in(edge, argv)
    words = text.split()
    return words[words.index("dev") + 1] if "dev" in words else "?"


#: how long a measured run waits for the large flow's queue to stand, at most
QUEUE_WAIT = 10.0


def standing_queue(tb: netns.Testbed, edge: str, min_packets: int) -> tuple[str, int]:
    """Waits until a port of ``edge`` holds at least ``min_packets`` (the large flow's queue
    stands) and returns that port and its queue; after :data:`QUEUE_WAIT` seconds it returns
    what it saw (recorded with the run, so a run that met no queue is visible)."""
    deadline = time.monotonic() + QUEUE_WAIT
    while True:
        port, qlen = uplink_queue(tb, edge)
        if qlen >= min_packets or time.monotonic() > deadline:
            return port, qlen
        time.sleep(0.02)


def warm_up(tb: netns.Testbed, cfg: DemoConfig, h: Hosts, proto: str, port: int,
            work: Path) -> None:  # fmt: skip
    """A few requests through a client sidecar on loopback ``port``, not measured."""
    if proto == "redis":
        argv = [_exe("redis-benchmark"), "-p", str(port), "-t", "get", "-n", "200", "-c", "1"]
    else:
        argv = [_exe("wrk"), "-t", "1", "-c", "1", "-d", "1s",
                f"http://127.0.0.1:{port}/index.html"]  # fmt: skip
    tb.run_in(h.client, argv, timeout=cfg.timeout)


def _measure(tb: netns.Testbed, cfg: DemoConfig, h: Hosts, srv: str, proto: str, via: str,
             copies: int, background: bool, trial: int, work: Path) -> Measurement:  # fmt: skip
    if via == "direct":
        host, port = srv, REDIS_PORT if proto == "redis" else NGINX_PORT
    elif via == "relay":
        host, port = "127.0.0.1", RELAY_CLIENT[proto]
    else:
        host, port = "127.0.0.1", CLIENT_BASE[proto] + copies
    t0 = time.perf_counter()
    if proto == "redis":
        text = tb.run_in(h.client, [_exe("redis-benchmark"), "-h", host, "-p", str(port),
                                    "-t", "get", "-n", str(cfg.requests),
                                    "-c", str(cfg.clients), "--precision", "3"],
                         timeout=cfg.timeout)  # fmt: skip
        n, rps, pts = parse_redis_benchmark(text)
        took, errors = time.perf_counter() - t0, 0
    else:
        lua = work / "report.lua"  # written once per trial (run_trial)
        text = tb.run_in(h.client, [_exe("wrk"), "-t", "1", "-c", str(cfg.clients),
                                    "-d", f"{cfg.http_seconds:g}s", "--timeout", "10s",
                                    "-s", str(lua), f"http://{host}:{port}/index.html"],
                         timeout=cfg.timeout)  # fmt: skip
        n, took, errors, pts = parse_wrk(text)
        rps = n / took if took > 0 else math.nan
    return Measurement(proto, via, copies, background, trial, cfg.seeds[trial], n, errors,
                       took, rps, pts)  # fmt: skip


# -- the whole demo -------------------------------------------------------------------------


@dataclass
class DemoConfig:
    """Every parameter of a demo run (recorded beside its results)."""

    k: int = 4
    rate_bps: int = 50_000_000
    buffer: int = 50
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])
    protocols: list[str] = field(default_factory=lambda: list(PROTOCOLS))
    requests: int = 20000
    clients: int = 4
    http_seconds: float = 3.0
    http_bytes: int = 512
    warmup: float = 1.0
    timeout: float = 300.0
    #: also measure two plain socat relays (client side, server side) in front of the server
    relay: bool = False
    prefix: str = "rfpd-"


@dataclass
class Row:
    """One protocol × path × background over every trial."""

    protocol: str
    path: str
    background: bool
    mean: tuple[float, float, float]
    p50: tuple[float, float, float]
    p99: tuple[float, float, float]
    p999: tuple[float, float, float]
    rps: tuple[float, float, float]
    requests: int
    trials: int
    errors: int


def _t_interval(xs: Sequence[float]) -> tuple[float, float, float]:
    """(mean, lower, upper): the mean across trials with its Student t interval (unbounded
    with one trial)."""
    from repflow.experiments.analysis import mean_ci95

    a = np.asarray([x for x in xs if math.isfinite(x)], dtype=float)
    if not len(a):
        return (math.nan, math.nan, math.nan)
    m = float(a.mean())
    if len(a) < 2:
        return (m, -math.inf, math.inf)
    h = mean_ci95(float(a.std(ddof=1)), len(a))
    return (m, m - h, m + h)


def _samples(ms: Sequence[Measurement], path: int = 0):  # noqa: ANN202
    """The runs of one path as a bootstrap sample: one seed per trial. ``path`` makes the
    requests' identity differ between paths, so each path's requests are drawn on their own
    (their expanded values are sorted quantiles: drawing two paths' requests together would
    pair them by rank), while the trials, shared by every path, are drawn together."""
    import pandas as pd

    from repflow.experiments import stats

    s = stats.Sample()
    for m in sorted(ms, key=lambda m: m.trial):
        v = expand(m.points, m.requests)
        df = pd.DataFrame(
            {"size": np.ones(len(v), dtype=np.int64),
             "start": np.arange(len(v), dtype=float) + path * 1e9, "fct": v}
        )  # fmt: skip
        s.add(m.trial, df)
    return s


def summarize(ms: Sequence[Measurement], resamples: int = RESAMPLES
              ) -> tuple[list[Row], list[tuple[str, str, tuple[float, float, float]]]]:  # fmt: skip
    """Rows with intervals, and the effects on the p99 beside the large flow (reduction in
    percent, positive = faster, with its interval)."""
    from repflow.experiments import stats

    boot = stats.Bootstrap(resamples)
    rows: list[Row] = []
    samples = {}
    for proto in dict.fromkeys(m.protocol for m in ms):
        for background in (False, True):
            for via, copies in ALL_PATHS:
                sel = [m for m in ms if (m.protocol, m.via, m.copies, m.background)
                       == (proto, via, copies, background)]  # fmt: skip
                if not sel:
                    continue
                s = _samples(sel, ALL_PATHS.index((via, copies)))
                samples[(proto, background, via, copies)] = s
                group = (proto, background)
                ivs = [boot.level(s, name, 1, group) for name in
                       ("short_mean", "short_p50", "short_p99", "short_p999")]  # fmt: skip
                boot.forget_flow_draws()  # every replicate the effects need is cached
                rows.append(Row(proto, path_label(via, copies), background,
                                *[(i.estimate, i.lo, i.hi) for i in ivs],
                                _t_interval([m.rps for m in sel]), sum(m.requests for m in sel),
                                len(sel), sum(m.errors for m in sel)))  # fmt: skip
    effects = []
    for proto in dict.fromkeys(m.protocol for m in ms):
        for a, b in (((("proxy", 2)), ("proxy", 1)), (("proxy", 2), ("direct", 0)),
                     (("proxy", 1), ("direct", 0))):  # fmt: skip
            sa = samples.get((proto, True, *a))
            sb = samples.get((proto, True, *b))
            if sa is None or sb is None:
                continue
            for name, what in (("short_mean", "mean"), ("short_p99", "p99")):
                iv = boot.effect(sa, sb, name, 1, stats.reduction, (proto, True))
                effects.append((proto, f"{what}, {path_label(*a)} against {path_label(*b)}",
                                (iv.estimate, iv.lo, iv.hi)))  # fmt: skip
    return rows, effects


def _ms(x: tuple[float, float, float]) -> str:
    e, lo, hi = (v * 1000 for v in x)
    return f"{e:.2f} [{lo:.2f}, {hi:.2f}]"


def format_table(rows: Sequence[Row], effects, cfg: DemoConfig) -> str:  # noqa: ANN001
    """The measured table (latencies in ms, 95 % intervals) and the p99 effects."""
    lines = [
        f"proxy-demo: k = {cfg.k} fat tree, {format_rate(cfg.rate_bps)} links, buffer "
        f"{cfg.buffer} packets, {len(cfg.seeds)} trials (seeds {', '.join(map(str, cfg.seeds))}),"
        f" {cfg.clients} client connections; latencies in ms with 95 % intervals (bootstrap over "
        "trials and requests), throughput with a t interval over trials",
        f"{'protocol':<9}{'path':<17}{'large flow':<11}{'mean':>22}{'p50':>22}{'p99':>24}"
        f"{'p99.9':>24}"
        f"{'req/s':>24}{'requests':>10}",
    ]
    for r in rows:
        rps = (f"{r.rps[0]:.0f} [{r.rps[1]:.0f}, {r.rps[2]:.0f}]" if r.trials > 1
               else f"{r.rps[0]:.0f} (1 trial)")  # fmt: skip
        lines.append(
            f"{r.protocol:<9}{r.path:<17}{'yes' if r.background else 'no':<11}{_ms(r.mean):>22}"
            f"{_ms(r.p50):>22}"
            f"{_ms(r.p99):>24}{_ms(r.p999):>24}{rps:>24}{r.requests:>10}"
            + (f"  ({r.errors} errors)" if r.errors else "")
        )
    for proto, what, (e, lo, hi) in effects:
        lines.append(f"{proto}: beside the large flow, {what}: {e:+.0f} % [{lo:+.0f}, "
                     f"{hi:+.0f}] (positive: lower latency)")  # fmt: skip
    return "\n".join(lines)


#: a sidecar connection whose smoothed RTT is at least this (ms) waited behind the large flow
#: (idle RTTs here are below 1.5 ms; the large flow's queue holds up to 12 ms at 50 Mb/s)
BEHIND_MS = 3.0


def behind_counts(ms: Sequence[Measurement]) -> dict[tuple[str, int], tuple[int, int]]:
    """(protocol, copies) → (trials in which every connection of the client sidecar was
    behind the large flow, trials), beside the large flow."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for m in ms:
        if m.background and m.via == "proxy" and m.conns:
            k, n = out.get((m.protocol, m.copies), (0, 0))
            out[(m.protocol, m.copies)] = (k + all(r >= BEHIND_MS for _p, r in m.conns), n + 1)
    return out


#: the hops in the order a request meets them, and how they are grouped in the breakdown
HOPS = ("client_in", "client_call", "client_out", "server_queue", "server_in",
        "server_upstream")  # fmt: skip


def hop_breakdown(ms: Sequence[Measurement], background: bool = False) -> list[dict[str, Any]]:
    """Per protocol and copies: where a request's median time goes through the sidecars
    (µs, the median over trials of each run's p50), beside direct's p50. ``wire`` is the
    client's call less the server sidecar's three hops (the network both ways and the
    libraries' framing); ``outside`` is the load generator's p50 less the client sidecar's
    three hops (the application's loopback legs to the client sidecar and the generator).
    Medians do not add exactly: the parts are each a median."""

    def med(xs: list[float]) -> float:
        return float(np.median(xs)) if xs else math.nan

    def p50_us(m: Measurement) -> float:
        v = expand(m.points, m.requests)
        return float(np.percentile(v, 50)) * 1e6 if len(v) else math.nan

    out = []
    for proto in dict.fromkeys(m.protocol for m in ms):
        runs = [m for m in ms if m.protocol == proto and m.background == background]
        direct = med([p50_us(m) for m in runs if m.via == "direct"])
        relay = med([p50_us(m) for m in runs if m.via == "relay"])
        for copies in sorted({m.copies for m in runs if m.via == "proxy"}):
            rs = [m for m in runs if m.via == "proxy" and m.copies == copies
                  and all((m.hops.get(h) or {}).get("p50_us") is not None for h in HOPS)]
            if not rs:
                continue
            row: dict[str, Any] = {"protocol": proto, "copies": copies, "runs": len(rs),
                                   "direct_p50_us": direct, "relay_p50_us": relay,
                                   "proxy_p50_us": med([p50_us(m) for m in rs])}  # fmt: skip
            for h in HOPS:
                row[h] = med([m.hops[h]["p50_us"] for m in rs])
            row["wire"] = med([m.hops["client_call"]["p50_us"]
                               - sum(m.hops[h]["p50_us"] for h in HOPS[3:]) for m in rs])
            row["outside"] = med([p50_us(m) - sum(m.hops[h]["p50_us"] for h in HOPS[:3])
                                  for m in rs])  # fmt: skip
            out.append(row)
    return out


def format_hops(rows: Sequence[dict[str, Any]]) -> str:
    """:func:`hop_breakdown` as a table."""
    if not rows:
        return ""
    lines = ["idle network, where a request's median time goes (µs; medians over trials of "
             "each run's p50):",
             "  protocol, path: direct | relay | proxy = outside + client sidecar (in, out) + "
             "wire + server sidecar (queue, in) + upstream"]  # fmt: skip
    for r in rows:
        lines.append(
            f"  {r['protocol']}, {path_label('proxy', r['copies'])} ({r['runs']} runs): "
            f"{r['direct_p50_us']:.0f} | {r['relay_p50_us']:.0f} | {r['proxy_p50_us']:.0f} = "
            f"{r['outside']:.0f} + ({r['client_in']:.0f}, {r['client_out']:.0f}) + "
            f"{r['wire']:.0f} + ({r['server_queue']:.0f}, {r['server_in']:.0f}) + "
            f"{r['server_upstream']:.0f}")  # fmt: skip
    return "\n".join(lines)


def format_trials(ms: Sequence[Measurement]) -> str:
    """Per trial beside the large flow: each path's p99 and, through the proxy, the smoothed
    RTT of each of the client sidecar's connections (a few ms: ECMP put it behind the large
    flow)."""
    lines = ["per trial, beside the large flow: p99 (ms); proxy: RTT of each sidecar "
             "connection (ms)"]  # fmt: skip
    for trial in dict.fromkeys(m.trial for m in ms):
        for proto in dict.fromkeys(m.protocol for m in ms):
            parts = []
            for m in ms:
                if (m.trial, m.protocol, m.background) != (trial, proto, True):
                    continue
                v = expand(m.points, m.requests)
                p99 = float(np.percentile(v, 99)) * 1000 if len(v) else math.nan
                rtt = (" (RTT " + ", ".join(f"{r:.1f}{'*' if r >= BEHIND_MS else ''}"
                                            for _p, r in m.conns) + ")"
                       if m.conns else "")  # fmt: skip
                parts.append(f"{m.label} {p99:.1f}{rtt}")
            if parts:
                seed = next(m.seed for m in ms if m.trial == trial)
                lines.append(f"  trial {trial + 1} (seed {seed}) {proto}: " + "; ".join(parts))
    lines.append(f"  (* an RTT of {BEHIND_MS:g} ms or more: that connection waited behind the "
                 "large flow)")  # fmt: skip
    for (proto, copies), (k, n) in behind_counts(ms).items():
        lines.append(f"  {proto}, {path_label('proxy', copies)}: every connection behind the "
                     f"large flow in {k} of {n} trials")  # fmt: skip
    for (proto, copies), (k, n, on, total) in route_counts(ms).items():
        lines.append(f"  {proto}, {path_label('proxy', copies)}, by the kernel's route: every "
                     f"connection on the large flow's uplink in {k} of {n} trials; {on} of "
                     f"{total} connections on it")  # fmt: skip
    return "\n".join(lines)


def route_counts(ms: Sequence[Measurement]) -> dict[tuple[str, int], tuple[int, int, int, int]]:
    """(protocol, copies) → (trials in which every connection of the client sidecar took the
    large flow's uplink, trials, connections on it, connections), beside the large flow, from
    the kernel's routes (``uplinks``) rather than RTTs."""
    out: dict[tuple[str, int], tuple[int, int, int, int]] = {}
    for m in ms:
        if m.background and m.via == "proxy" and m.uplinks and m.large_uplink:
            k, n, on, total = out.get((m.protocol, m.copies), (0, 0, 0, 0))
            hit = sum(u == m.large_uplink for _p, u in m.uplinks)
            out[(m.protocol, m.copies)] = (k + (hit == len(m.uplinks)), n + 1, on + hit,
                                           total + len(m.uplinks))  # fmt: skip
    return out


def plot(rows: Sequence[Row], path: Path) -> None:
    """Per protocol a panel: mean, p50, p99 and p99.9 of each path, idle and beside the large
    flow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    protos = list(dict.fromkeys(r.protocol for r in rows))
    per = max(len([r for r in rows if r.protocol == p]) for p in protos)
    fig, axes = plt.subplots(1, len(protos), figsize=(max(5.6, 0.95 * per) * len(protos), 4.4),
                             squeeze=False)  # fmt: skip
    marks = {"mean": "D", "p50": "o", "p99": "s", "p999": "^"}
    for ax, proto in zip(axes[0], protos, strict=True):
        sel = [r for r in rows if r.protocol == proto]
        labels = [f"{r.path.replace(', ', chr(10))}\n{'large flow' if r.background else 'idle'}"
                  for r in sel]  # fmt: skip
        x = np.arange(len(sel))
        for j, (attr, mk) in enumerate(marks.items()):
            est = np.array([getattr(r, attr)[0] for r in sel]) * 1000
            lo = np.array([getattr(r, attr)[1] for r in sel]) * 1000
            hi = np.array([getattr(r, attr)[2] for r in sel]) * 1000
            lo = np.where(np.isfinite(lo), lo, est)
            hi = np.where(np.isfinite(hi), hi, est)
            ax.errorbar(x + (j - 1.5) * 0.18, est, yerr=[est - lo, hi - est], fmt=mk, capsize=3,
                        label={"p999": "p99.9"}.get(attr, attr))  # fmt: skip
        ax.set_yscale("log")
        ax.set_xticks(x, labels, fontsize=7)
        ax.axvline(len(sel) / 2 - 0.5, color="0.7", lw=0.8)
        ax.set_ylabel("request latency (ms)")
        ax.set_title(f"{proto}: mean and percentiles (bars: 95 % intervals, trials and requests)",
                     fontsize=9)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(cfg: DemoConfig, say: Callable[[str], None] = lambda _m: None) -> list[Measurement]:
    """Every trial, each on a fat tree of its own seed (built and removed here)."""
    netns.require_root()
    require_tools(cfg.protocols, cfg.relay)
    if netns.read_state(cfg.prefix) is not None:
        raise UserError(f"a testbed with prefix {cfg.prefix!r} is already up; run "
                        f"`repflow testbed down --prefix {cfg.prefix}` first")  # fmt: skip
    out: list[Measurement] = []
    for i, seed in enumerate(cfg.seeds):
        t0 = time.perf_counter()
        tb = netns.up(fat_tree(cfg.k), rate_bps=cfg.rate_bps, buffer=cfg.buffer, seed=seed,
                      prefix=cfg.prefix, progress=None, host_shaping=False)  # fmt: skip
        say(f"trial {i + 1}/{len(cfg.seeds)} (seed {seed}): fat tree up in "
            f"{time.perf_counter() - t0:.1f} s")  # fmt: skip
        try:
            with tempfile.TemporaryDirectory(prefix="repflow-proxy-demo-") as tmp:
                out.extend(run_trial(tb, cfg, i, Path(tmp), say))
        finally:
            netns.down(cfg.prefix)
    return out


def run_cli(args, say: Callable[[str], None]) -> None:  # noqa: ANN001
    """``repflow testbed proxy-demo``."""
    from repflow.testbed.workload import check_out

    if args.k not in (4, 6, 8):
        raise UserError(f"--k must be 4, 6 or 8, got {args.k}")
    if not 1 <= args.trials <= 20:
        raise UserError(f"--trials must be between 1 and 20, got {args.trials}")
    if not 100 <= args.requests <= 1_000_000:
        raise UserError(f"--requests must be between 100 and 1000000, got {args.requests}")
    if not 1 <= args.clients <= 256:
        raise UserError(f"--clients must be between 1 and 256, got {args.clients}")
    if args.buffer < 1:
        raise UserError(f"--buffer must be at least 1 packet, got {args.buffer}")
    secs = parse_duration(args.http_duration, "--http-duration")
    if not 0.5 <= secs <= 600:
        raise UserError(f"--http-duration must be between 0.5s and 600s, got {args.http_duration}")
    protocols = list(PROTOCOLS) if args.protocol == "both" else [args.protocol]
    rate = parse_rate(args.link_rate, like="50Mbps")
    cfg = DemoConfig(k=args.k, rate_bps=rate, buffer=args.buffer,
                     seeds=[args.seed + i for i in range(args.trials)], protocols=protocols,
                     requests=args.requests, clients=args.clients, http_seconds=secs,
                     prefix=args.prefix, relay=args.relay)  # fmt: skip
    out = check_out(args.out) if args.out else None
    if args.summarize:
        cfg, ms = load_measurements(Path(args.summarize))
    else:
        ms = run(cfg, say)
    if out is not None:
        # the measurements first: a failure while summarizing loses nothing
        out.mkdir(parents=True, exist_ok=True)
        save_measurements(out / "measurements.json", cfg, ms)
    say("bootstrap intervals")
    rows, effects = summarize(ms)
    print(format_table(rows, effects, cfg))
    print(format_trials(ms))
    hops = hop_breakdown(ms)
    if hops:
        print(format_hops(hops))
    if out is not None:
        tmp = out / "proxy-demo.json.tmp"
        tmp.write_text(json.dumps({
            "config": asdict(cfg),
            "rows": [asdict(r) for r in rows],
            "effects": [{"protocol": p, "what": w, "reduction_pct": list(v)}
                        for p, w, v in effects],
            "behind": [{"protocol": p, "copies": c, "trials_all_behind": k, "trials": n}
                       for (p, c), (k, n) in behind_counts(ms).items()],
            "by_route": [{"protocol": p, "copies": c, "trials_all_on_large_uplink": k,
                          "trials": n, "connections_on_it": on, "connections": t}
                         for (p, c), (k, n, on, t) in route_counts(ms).items()],
            "hops_idle": hops,
            "hops_beside_the_large_flow": hop_breakdown(ms, background=True),
        }, indent=1))  # fmt: skip
        tmp.replace(out / "proxy-demo.json")
        plot(rows, out / "proxy-demo.png")
        print(f"wrote {out / 'measurements.json'}, {out / 'proxy-demo.json'} and "
              f"{out / 'proxy-demo.png'}")  # fmt: skip


def save_measurements(path: Path, cfg: DemoConfig, ms: Sequence[Measurement]) -> None:
    """Every run's distribution and counts, with the configuration (atomically)."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"config": asdict(cfg), "measurements": [asdict(m) for m in ms]},
                              indent=1))  # fmt: skip
    tmp.replace(path)


def load_measurements(path: Path) -> tuple[DemoConfig, list[Measurement]]:
    """What :func:`save_measurements` wrote, for ``--summarize``."""
    try:
        d = json.loads(path.read_text())
        cfg = DemoConfig(**d["config"])
        ms = []
        for m in d["measurements"]:
            m["points"] = [tuple(p) for p in m["points"]]
            m["conns"] = [tuple(c) for c in m["conns"]]
            m["uplinks"] = [tuple(u) for u in m.get("uplinks", [])]
            ms.append(Measurement(**m))
    except OSError as exc:
        raise UserError(f"--summarize: cannot read '{path}': {exc.strerror}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"--summarize: '{path}' is not a proxy-demo measurements.json "
                        f"({type(exc).__name__}: {exc})") from None  # fmt: skip
    if not ms:
        raise UserError(f"--summarize: '{path}' holds no measurements")
    return cfg, ms
