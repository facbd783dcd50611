"""SmartRep path probing through real Linux routers (needs root and network namespaces).

A six-namespace network: h1 — r1 ⇉ {a, b} ⇉ r2 — h2, where r1 spreads flows to h2 over a and b
by ECMP with a layer-4 hash. From h1, a TTL-2 SYN expires at a or b, which answer with ICMP Time
Exceeded: `repflow send --scheme smartrep` must learn both paths through IP_RECVERR, send every
flow's two copies from source ports on different paths, and so load a and b equally.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("ip") is None,
        reason="needs root and iproute2 (network namespaces)",
    ),
]

P = f"rfn{os.getpid() % 10000}"
NODES = ("h1", "r1", "a", "b", "r2", "h2")
# (node x, address of x, node y, address of y) on subnet 10.231.k.0/24
LINKS = [
    ("h1", "10.231.1.1", "r1", "10.231.1.2"),
    ("r1", "10.231.2.1", "a", "10.231.2.2"),
    ("r1", "10.231.3.1", "b", "10.231.3.2"),
    ("a", "10.231.4.1", "r2", "10.231.4.2"),
    ("b", "10.231.5.1", "r2", "10.231.5.2"),
    ("r2", "10.231.6.1", "h2", "10.231.6.2"),
]
ROUTES = {
    "h1": [["default", "via", "10.231.1.2"]],
    "r1": [["10.231.6.0/24", "nexthop", "via", "10.231.2.2", "nexthop", "via", "10.231.3.2"],
           ["10.231.4.0/24", "via", "10.231.2.2"], ["10.231.5.0/24", "via", "10.231.3.2"]],
    "a": [["10.231.6.0/24", "via", "10.231.4.2"], ["default", "via", "10.231.2.1"]],
    "b": [["10.231.6.0/24", "via", "10.231.5.2"], ["default", "via", "10.231.3.1"]],
    "r2": [["default", "via", "10.231.4.1"]],
    "h2": [["default", "via", "10.231.6.1"]],
}  # fmt: skip


def ns(node: str) -> str:
    return f"{P}{node}"


def sh(*argv: str) -> str:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {p.stderr.strip()}")
    return p.stdout


def in_ns(node: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", ns(node), *argv]


@pytest.fixture
def net():
    made: list[str] = []
    try:
        for n in NODES:
            sh("ip", "netns", "add", ns(n))
            made.append(ns(n))
            sh("ip", "-n", ns(n), "link", "set", "lo", "up")
            for key, val in (
                ("net.ipv4.ip_forward", "1"),
                ("net.ipv4.conf.all.rp_filter", "0"),
                ("net.ipv4.conf.default.rp_filter", "0"),
                ("net.ipv4.icmp_ratelimit", "0"),
                ("net.ipv4.fib_multipath_hash_policy", "1"),
            ):
                sh(*in_ns(n, "sysctl", "-q", "-w", f"{key}={val}"))
        for k, (x, ax, y, ay) in enumerate(LINKS):
            ix, iy = f"l{k}{x}", f"l{k}{y}"
            sh("ip", "link", "add", ix, "netns", ns(x), "type", "veth", "peer", "name", iy,
               "netns", ns(y))  # fmt: skip
            for node, ifname, addr in ((x, ix, ax), (y, iy, ay)):
                sh("ip", "-n", ns(node), "addr", "add", f"{addr}/24", "dev", ifname)
                sh("ip", "-n", ns(node), "link", "set", ifname, "up")
        for n, routes in ROUTES.items():
            for r in routes:
                sh("ip", "-n", ns(n), "route", "add", *r)
        yield
    finally:
        for name in made:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def tx_bytes(node: str, ifname: str) -> int:
    return int(sh(*in_ns(node, "cat", f"/sys/class/net/{ifname}/statistics/tx_bytes")))


def test_smartrep_probes_real_routers_and_spreads_copies(net, tmp_path: Path):
    serve = subprocess.Popen(
        in_ns("h2", sys.executable, "-m", "repflow", "serve", "--listen", "10.231.6.2:7000",
              "--ports", "2", "--duration", "60s"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.time() + 20
        while "listening" not in (serve.stdout.readline() if serve.stdout else ""):
            assert time.time() < deadline and serve.poll() is None, "serve did not start"
        before = (tx_bytes("a", "l3a"), tx_bytes("b", "l4b"))
        count, size = 20, 20_000
        p = subprocess.run(
            in_ns("h1", sys.executable, "-m", "repflow", "send", "--to", "10.231.6.2:7000",
                  "--count", str(count), "--size", f"{size}B", "--scheme", "smartrep",
                  "--probe-ttls", "2", "--warm"),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        print(p.stdout)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "fell back" not in p.stdout, p.stdout
        # two paths (a and b) were known before the first flow was sent
        assert "warm-up: 2 distinct paths known" in p.stdout, p.stdout
        assert f"SmartRep: {count} flows sent from probed source ports" in p.stdout, p.stdout
        via_a = tx_bytes("a", "l3a") - before[0]
        via_b = tx_bytes("b", "l4b") - before[1]
        # Every flow has one copy on each path. The winners carry every flow's bytes; a loser
        # is cancelled once the other copy has won, after anything from its handshake and
        # first segment to nearly all of it (CI once saw 9 KB of 20 KB per flow on one path),
        # so each path must carry at least a segment per flow, and both together every flow.
        print("bytes via a, b:", via_a, via_b)
        assert min(via_a, via_b) >= count * 1_000, (via_a, via_b)
        assert via_a + via_b >= count * size, (via_a, via_b)
    finally:
        serve.terminate()
        serve.communicate(timeout=20)
