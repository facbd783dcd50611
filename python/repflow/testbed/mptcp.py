"""Multipath TCP on the testbed: the kernel's MPTCP, configured per host namespace.

Every host has one address, and the switches hash five-tuples (ECMP policy 1 / L4). A subflow
only takes another path if its five-tuple differs, so each host *announces extra ports*: for
``--subflows N`` every host namespace gets ``N - 1`` ``signal`` endpoints ``ADDR port
SIGNAL_PORT + k`` (the kernel opens a listener on each for MP_JOIN only) and the limits
``subflows N - 1 add_addr_accepted N - 1``. When a connection is established the server
announces its ports (ADD_ADDR with port, one at a time), and the client's in-kernel path
manager opens a subflow to each: same addresses, different destination ports, so ECMP hashes
each subflow on its own. Every host is also a client, so it announces its own ports as well and
the server may open a subflow back to them; the ``subflows`` limit caps the total at ``N``
subflows per connection (the first plus ``N - 1`` joins) either way.

Why not extra addresses? ``subflow`` endpoints need one local address each, which the
fat-tree's per-host ``/32`` routes would then have to carry too; announced ports need no change
to the fabric and vary the five-tuple just as well (see docs/testbed.md, "MPTCP").

MPTCP-L (MPTCP with a redundant scheduler and a new TCP option) cannot run on the kernel:
upstream Linux offers only the ``default`` packet scheduler.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from repflow.errors import UserError
from repflow.testbed.netns import Testbed, run, signals_held, stop_processes

#: first announced port: host ``h`` announces ``ADDR:SIGNAL_PORT+1 .. ADDR:SIGNAL_PORT+N-1``
SIGNAL_PORT = 7900
#: most subflows per connection (the first one included) ``--subflows`` accepts
MAX_SUBFLOWS = 8
#: the kernel's own cap on additional subflows and accepted ADD_ADDRs (MPTCP_PM_ADDR_MAX)
KERNEL_MAX_EXTRA = 8
DEFAULT_SUBFLOWS = 8
#: Linux's limits of a new namespace, restored after a run
KERNEL_DEFAULT_LIMITS = (2, 0)
#: ``net.mptcp.blackhole_timeout``: 0 during a run (see :func:`configure`), Linux's default after
BLACKHOLE = "/proc/sys/net/mptcp/blackhole_timeout"
KERNEL_DEFAULT_BLACKHOLE = 3600
MPTCP_L_REFUSAL = (
    "--scheme mptcp-l: MPTCP-L cannot run on the kernel: it needs a redundant packet scheduler "
    "and a new TCP option, and Linux offers only the 'default' MPTCP scheduler "
    "(net.mptcp.available_schedulers = default); the simulator runs it: repflow sim --scheme "
    "mptcp-l"
)


def check_subflows(n: int, field_name: str = "--subflows") -> int:
    """``n`` subflows per connection (first included): 1..MAX_SUBFLOWS, or one clear line."""
    if not 1 <= n <= MAX_SUBFLOWS:
        raise UserError(
            f"{field_name}: must be between 1 and {MAX_SUBFLOWS} subflows per connection (the "
            f"first one and up to {MAX_SUBFLOWS - 1} joined ones; the kernel allows at most "
            f"{KERNEL_MAX_EXTRA} additional subflows), got {n}"
        )
    return n


def signal_ports(subflows: int) -> list[int]:
    """The ports every host announces for ``subflows`` subflows per connection."""
    return [SIGNAL_PORT + k for k in range(1, subflows)]


def check_ports(subflows: int, ports: Sequence[int], field_name: str = "--port") -> None:
    """The announced ports must not be ports the hosts serve on."""
    clash = sorted(set(signal_ports(subflows)) & set(ports))
    if clash:
        raise UserError(
            f"{field_name}: ports {ports[0]}..{ports[-1]} overlap MPTCP's announced ports "
            f"{SIGNAL_PORT + 1}..{SIGNAL_PORT + subflows - 1}; choose another port"
        )


def _enabled_text(tb: Testbed, host: str) -> str | None:
    """``net.mptcp.enabled`` inside ``host`` (``None``: the sysctl does not exist)."""
    out = run(
        tb.exec_argv(host, ["sh", "-c", "cat /proc/sys/net/mptcp/enabled 2>/dev/null || true"]),
        what=f"reading net.mptcp.enabled on {host}",
    )
    return out.strip() or None


def require_enabled(tb: Testbed, hosts: Sequence[str] | None = None) -> None:
    """One line naming the sysctl unless MPTCP exists and is enabled in every host namespace."""
    names = list(hosts) if hosts is not None else [h.name for h in tb.topo.hosts]
    for h in names:
        val = _enabled_text(tb, h)
        if val is None:
            raise UserError(
                "--scheme mptcp: this kernel has no MPTCP (the sysctl net.mptcp.enabled does not "
                "exist; it needs CONFIG_MPTCP=y, Linux 5.6 or later)"
            )
        if val != "1":
            raise UserError(
                f"--scheme mptcp: MPTCP is disabled in {h}'s namespace (sysctl "
                f"net.mptcp.enabled = {val}); enable it with `ip netns exec {tb.ns(h)} "
                "sysctl -w net.mptcp.enabled=1`"
            )


def schedulers(tb: Testbed, host: str) -> dict[str, str]:
    """``net.mptcp.scheduler`` and ``net.mptcp.available_schedulers`` inside ``host`` (a
    missing sysctl reads as an empty string)."""
    out = {}
    for key in ("scheduler", "available_schedulers"):
        out[key] = run(
            tb.exec_argv(host, ["sh", "-c", f"cat /proc/sys/net/mptcp/{key} 2>/dev/null || true"]),
            what=f"reading net.mptcp.{key} on {host}",
        ).strip()
    return out


def _batch(tb: Testbed, host: str, lines: Sequence[str], what: str) -> None:
    run(["ip", "-n", tb.ns(host), "-batch", "-"], stdin="\n".join(lines) + "\n", what=what)


def _blackhole(tb: Testbed, host: str, value: int) -> None:
    run(
        tb.exec_argv(host, ["sh", "-c", f"[ ! -e {BLACKHOLE} ] || echo {value} > {BLACKHOLE}"]),
        what=f"net.mptcp.blackhole_timeout on {host}",
    )


def configure(tb: Testbed, subflows: int, hosts: Sequence[str] | None = None) -> None:
    """Limits and ``signal`` endpoints for ``subflows`` subflows per connection on every host
    (replacing any endpoints they had), and no blackhole detection: Linux (6.12 and later)
    stops opening MPTCP connections for ``net.mptcp.blackhole_timeout`` (an hour) after MPTCP
    SYNs were lost a few times, taking them for a middlebox; in this emulation such losses are
    congestion, and the detection would silently turn the scheme into plain TCP."""
    check_subflows(subflows)
    chosen = [h for h in tb.topo.hosts if hosts is None or h.name in hosts]
    extra = subflows - 1
    for h in chosen:
        lines = [
            "mptcp endpoint flush",
            f"mptcp limits set subflows {extra} add_addr_accepted {extra}",
        ]
        lines += [f"mptcp endpoint add {h.addr} port {p} signal" for p in signal_ports(subflows)]
        try:
            _batch(tb, h.name, lines, f"MPTCP endpoints of {h.name}")
            _blackhole(tb, h.name, 0)
        except UserError as exc:
            raise UserError(
                f"--subflows {subflows}: the kernel refused the MPTCP path-manager settings on "
                f"{h.name}: {exc}"
            ) from None


def unconfigure(tb: Testbed, hosts: Sequence[str] | None = None) -> None:
    """Removes the endpoints and restores Linux's default limits (best effort)."""
    sub, acc = KERNEL_DEFAULT_LIMITS
    lines = ["mptcp endpoint flush", f"mptcp limits set subflows {sub} add_addr_accepted {acc}"]
    for h in tb.topo.hosts:
        if hosts is not None and h.name not in hosts:
            continue
        with contextlib.suppress(UserError):
            _batch(tb, h.name, lines, f"MPTCP endpoints of {h.name}")
            _blackhole(tb, h.name, KERNEL_DEFAULT_BLACKHOLE)


# --------------------------------------------------------------------------------- counters
def netstat(tb: Testbed, host: str) -> dict[str, int]:
    """The ``MPTcpExt`` counters of ``host``'s namespace (``/proc/net/netstat``)."""
    text = tb.run_in(host, ["cat", "/proc/net/netstat"])
    lines = text.splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("MPTcpExt:") and values.startswith("MPTcpExt:"):
            return {k: int(v) for k, v in zip(names.split()[1:], values.split()[1:], strict=True)}
    return {}


#: the MPTcpExt counters a run records (summed over hosts), under ``mptcp_<name>``
RUN_COUNTERS = (
    "MPCapableSYNRX",
    "MPCapableACKRX",
    "MPCapableFallbackACK",
    "MPCapableFallbackSYNACK",
    "MPJoinSynRx",
    "MPJoinSynAckRx",
    "MPJoinAckRx",
    "AddAddr",
    "EchoAdd",
    "MPFallbackTokenInit",
    "MPCapableSYNTXDrop",
    "MPCapableSYNTXDisabled",
    "Blackhole",
)


def counter_delta(
    before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]
) -> dict[str, int]:
    """Summed over hosts: each of :data:`RUN_COUNTERS` after minus before."""
    out = {}
    for name in RUN_COUNTERS:
        out[f"mptcp_{name}"] = sum(
            a.get(name, 0) - before.get(h, {}).get(name, 0) for h, a in after.items()
        )
    return out


# ------------------------------------------------------------------------------- subflows
@dataclass
class Connection:
    """One MPTCP connection seen by ``ss -Mti`` inside a host: its subflows' five-tuples."""

    token: str
    subflows: list[tuple[str, int, str, int]] = field(default_factory=list)


_TOKEN = re.compile(r"token:([0-9a-f]+)\(id:\d+\)/([0-9a-f]+)\(id:\d+\)")


def _split(addr_port: str) -> tuple[str, int]:
    addr, _, port = addr_port.rpartition(":")
    return addr, int(port) if port.isdigit() else 0


def connections(tb: Testbed, host: str) -> list[Connection]:
    """The host's MPTCP connections, each with its TCP subflows (grouped by the peer's token,
    which every subflow of a connection shows in ``ss -ti``'s ``tcp-ulp-mptcp`` line)."""
    out = tb.run_in(host, ["ss", "-Htni", "state", "established"])
    conns: dict[str, Connection] = {}
    current: tuple[str, int, str, int] | None = None
    for line in out.splitlines():
        if not line.startswith((" ", "\t")):
            cols = line.split()
            current = None
            if len(cols) >= 4:
                current = (*_split(cols[2]), *_split(cols[3]))
            continue
        m = _TOKEN.search(line)
        if m and current is not None and "tcp-ulp-mptcp" in line:
            key = m.group(2)  # the remote token, the same on every subflow of the connection
            conns.setdefault(key, Connection(key)).subflows.append(current)
    return list(conns.values())


# ---------------------------------------------------------------------------- path check
#: receiver port of :func:`path_spread`'s transfer
SPREAD_PORT = 6501


@dataclass
class PathSpread:
    """One MPTCP transfer ``src`` → ``dst`` on an otherwise idle testbed: its subflows (as
    ``ss`` showed them on ``src``) and the packets every upward port of ``src``'s pod sent."""

    src: str
    dst: str
    #: five-tuples (local addr, port, remote addr, port) of the connection's subflows
    subflows: list[tuple[str, int, str, int]]
    #: ``"switch->neighbour"`` → packets it forwarded upward during the transfer
    uplink_packets: dict[str, int]
    fct: float

    def links_used(self, min_packets: int = 20) -> list[str]:
        """Upward ports that carried at least ``min_packets`` packets."""
        return sorted(k for k, v in self.uplink_packets.items() if v >= min_packets)


def path_spread(
    tb: Testbed, src: str, dst: str, subflows: int = 8, size: int = 3_000_000
) -> PathSpread:
    """Sends one ``size``-byte MPTCP flow ``src`` → ``dst`` (hosts with their endpoints set
    here and removed after) and reports its subflows and the upward ports it used."""
    import json
    import subprocess
    import time

    from repflow.testbed.checks import AGENT, sinks
    from repflow.testbed.topology import port_name

    topo = tb.topo
    edge = topo.uplinks(src)[0]
    ups = [(edge, a) for a in topo.uplinks(edge)]
    ups += [(a, c) for _, a in ups for c in topo.uplinks(a)]
    switches = sorted({s for s, _ in ups})
    require_enabled(tb, [src, dst])
    configure(tb, subflows, [src, dst])
    try:
        with sinks(tb, [dst], [SPREAD_PORT], mptcp=True):
            before = tb.qdisc_stats(switches)
            with signals_held():
                proc = tb.popen_in(
                    src,
                    [*AGENT, "flows", "--dst", topo.nodes[dst].addr, "--port", str(SPREAD_PORT),
                     "--size", str(size), "--mptcp"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                )  # fmt: skip
            try:
                seen: dict[str, Connection] = {}
                while proc.poll() is None:
                    for c in connections(tb, src):
                        if len(c.subflows) >= len(seen.get(c.token, Connection(c.token)).subflows):
                            seen[c.token] = c
                    time.sleep(0.1)
                out, err = proc.communicate()
            finally:
                stop_processes([proc])
            after = tb.qdisc_stats(switches)
    finally:
        unconfigure(tb, [src, dst])
    if proc.returncode != 0:
        raise UserError(f"MPTCP transfer {src} -> {dst} failed: {err.strip()[-300:]}")
    rec = json.loads(out)[0]
    best = max(seen.values(), key=lambda c: len(c.subflows), default=Connection(""))
    packets = {
        f"{s}->{n}": after[(s, port_name(n))]["packets"] - before[(s, port_name(n))]["packets"]
        for s, n in ups
    }
    return PathSpread(src, dst, best.subflows, packets, float(rec["fct"]))
