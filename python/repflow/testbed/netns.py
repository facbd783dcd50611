"""Building and tearing down the testbed with iproute2, as a user would type it.

Every node of a :class:`~repflow.testbed.topology.Topology` becomes a network namespace named
``<prefix><node>`` (default prefix ``rftb-``); every link a veth pair created directly inside the
two namespaces. Switches forward IPv4 with ``ip nexthop`` ECMP groups hashed on the five-tuple
(``fib_multipath_hash_policy=3``, ``fib_multipath_hash_fields=0x0037``, a fixed per-switch
``fib_multipath_hash_seed`` derived from ``--seed``). Every egress port — switch and host — is
shaped by ``tbf`` at the link rate with a ``pfifo`` DropTail child of ``--buffer`` packets.

A state file (``/run/repflow-testbed/<prefix>.json``) is written *before* anything is created, so
``down`` after an error, Ctrl-C or a crash removes exactly what this tool made: the namespaces
it lists (their veths, routes and qdiscs vanish with them) and the processes running inside
them. Nothing outside those namespaces is touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from repflow.errors import UserError
from repflow.testbed.topology import Topology, port_name

log = logging.getLogger(__name__)

#: Default name prefix of everything the testbed creates.
DEFAULT_PREFIX = "rftb-"
#: ``fib_multipath_hash_fields``: source/destination address, protocol, source/destination port.
HASH_FIELDS = 0x0037
#: Ethernet frame of a full-size packet (used for the token bucket size).
FRAME_BYTES = 1514
_PARALLEL = 6


from repflow.testbed.stale import state_dir  # noqa: E402  (the lower layer holds it)


def _state_path(prefix: str) -> Path:
    return state_dir() / f"{prefix.rstrip('-') or 'default'}.json"


def check_prefix(prefix: str) -> str:
    """Validates a name prefix (letters, digits and ``-``, 2–6 characters, ending in ``-``)."""
    ok = 2 <= len(prefix) <= 6 and prefix.endswith("-")
    ok = ok and all(c.isascii() and (c.isalnum() or c == "-") for c in prefix)
    if not ok:
        raise UserError(
            f"--prefix: {prefix!r} is not accepted; use 2-6 letters/digits ending in '-', "
            "e.g. rftb-"
        )
    return prefix


# ---------------------------------------------------------------------------------------------
# preflight
# ---------------------------------------------------------------------------------------------
def require_root() -> None:
    """Stops with a clear message unless running as root."""
    if os.geteuid() != 0:
        raise UserError(
            "the testbed needs root (it creates network namespaces, veth pairs and tc qdiscs); "
            "run it as root, e.g. `sudo repflow testbed up`"
        )


def require_tools() -> None:
    """Stops with a clear message unless ``ip`` and ``tc`` (iproute2) are installed."""
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise UserError(
                f"`{tool}` was not found on PATH; install iproute2 "
                "(Debian/Ubuntu: `apt-get install iproute2`)"
            )


def sysctl_path(key: str) -> Path:
    """``net.ipv4.ip_forward`` → ``/proc/sys/net/ipv4/ip_forward``."""
    return Path("/proc/sys") / key.replace(".", "/")


def kernel_features() -> dict[str, bool]:
    """Which of the sysctls the testbed relies on exist on this kernel."""
    keys = {
        "hash_policy": "net.ipv4.fib_multipath_hash_policy",
        "hash_fields": "net.ipv4.fib_multipath_hash_fields",
        "hash_seed": "net.ipv4.fib_multipath_hash_seed",
        "icmp_ratelimit": "net.ipv4.icmp_ratelimit",
    }
    return {name: sysctl_path(key).exists() for name, key in keys.items()}


# ---------------------------------------------------------------------------------------------
# the plan: pure functions from a topology to iproute2 batch lines
# ---------------------------------------------------------------------------------------------
def hash_seed(seed: int, switch: str) -> int:
    """Fixed, distinct, non-zero 32-bit ECMP hash seed of ``switch`` for run seed ``seed``."""
    digest = hashlib.sha256(f"repflow-testbed:{seed}:{switch}".encode()).digest()
    return int.from_bytes(digest[:4], "big") or 1


def sysctls(
    topo: Topology, node: str, seed: int, have_seed: bool, tcp_cc: str = "reno"
) -> list[tuple[str, str]]:
    """Sysctls written inside ``node``'s namespace before its links exist.

    Hosts use ``tcp_cc`` (default ``reno``: the papers' TCP is NewReno, and a new namespace
    would otherwise inherit the machine's default, which may be e.g. BBR).
    """
    out = [
        # no IPv6 (no router solicitations or DAD noise in the queues and counters)
        ("net.ipv6.conf.all.disable_ipv6", "1"),
        ("net.ipv6.conf.default.disable_ipv6", "1"),
        ("net.ipv4.conf.all.rp_filter", "0"),
        ("net.ipv4.conf.default.rp_filter", "0"),
    ]
    if topo.nodes[node].kind == "host":
        out.append(("net.ipv4.tcp_congestion_control", tcp_cc))
    if topo.nodes[node].kind == "switch":
        out += [
            ("net.ipv4.ip_forward", "1"),
            ("net.ipv4.fib_multipath_hash_policy", "3"),
            ("net.ipv4.fib_multipath_hash_fields", f"0x{HASH_FIELDS:04x}"),
            # answer every TTL probe: no per-destination and (almost) no global ICMP limit
            ("net.ipv4.icmp_ratelimit", "0"),
            ("net.ipv4.icmp_msgs_per_sec", "1000000"),
            ("net.ipv4.icmp_msgs_burst", "1000000"),
        ]
        if have_seed:
            out.append(("net.ipv4.fib_multipath_hash_seed", str(hash_seed(seed, node))))
    return out


def sysctl_script(pairs: Sequence[tuple[str, str]]) -> str:
    """A POSIX shell script that writes each sysctl and names the first one that fails."""
    lines = ["set -e"]
    for key, value in pairs:
        path = sysctl_path(key)
        lines.append(
            f"printf '%s' '{value}' > {path} 2>/dev/null || "
            f"{{ echo 'cannot set {key}={value}' >&2; exit 3; }}"
        )
    return "\n".join(lines) + "\n"


def veth_batch(topo: Topology, prefix: str) -> list[str]:
    """``ip -batch`` lines creating every veth pair directly inside its two namespaces."""
    return [
        f"link add {port_name(lk.b)} netns {prefix}{lk.a} type veth "
        f"peer name {port_name(lk.a)} netns {prefix}{lk.b}"
        for lk in topo.links
    ]


def node_link_batch(topo: Topology, node: str) -> list[str]:
    """``ip -n <ns> -batch`` lines: the node's address on every port, ports up."""
    me = topo.nodes[node]
    lines = ["link set lo up"]
    for nb in topo.neighbours(node):
        lines.append(f"address add {me.addr}/32 dev {port_name(nb)}")
        lines.append(f"link set {port_name(nb)} up")
    return lines


def node_route_batch(topo: Topology, node: str, rto_min_ms: float | None = None) -> list[str]:
    """``ip -n <ns> -batch`` lines: next hops, ECMP groups and routes (ports must be up).

    ``rto_min_ms`` sets TCP's minimum retransmission timeout on hosts (route attribute
    ``rto_min``); None keeps Linux's 200 ms.
    """
    me = topo.nodes[node]
    nbrs = topo.neighbours(node)
    lines: list[str] = []
    if me.kind == "host":
        if len(nbrs) != 1:
            raise ValueError(f"host {node} must have exactly one link")
        gw = topo.nodes[nbrs[0]]
        rto = f" rto_min {rto_min_ms:g}ms" if rto_min_ms is not None else ""
        lines.append(f"route add default via {gw.addr} dev {port_name(gw.name)} onlink{rto}")
        return lines
    nh_id = {nb: i + 1 for i, nb in enumerate(nbrs)}
    for nb in nbrs:
        peer = topo.nodes[nb]
        if peer.kind == "host":
            lines.append(f"nexthop add id {nh_id[nb]} dev {port_name(nb)}")
        else:
            lines.append(f"nexthop add id {nh_id[nb]} via {peer.addr} dev {port_name(nb)} onlink")
    groups: dict[tuple[str, ...], int] = {}
    route_lines = []
    for host, hops in topo.routes()[node].items():
        if len(hops) == 1:
            nhid = nh_id[hops[0]]
        else:
            if hops not in groups:
                gid = 1000 + len(groups)
                groups[hops] = gid
                members = "/".join(str(nh_id[h]) for h in hops)
                lines.append(f"nexthop add id {gid} group {members}")
            nhid = groups[hops]
        route_lines.append(f"route add {topo.nodes[host].addr}/32 nhid {nhid}")
    return lines + route_lines


def tbf_burst(rate_bps: int) -> int:
    """Token bucket depth: one full frame (plus slack for the bucket's rate-table rounding).

    An idle port sends one frame at once and then one frame per frame time, i.e. the port never
    sends faster than the link rate, even for an instant.
    """
    del rate_bps
    return FRAME_BYTES + 86


def node_tc_batch(
    topo: Topology, node: str, rate_bps: int, buffer: int, host_shaping: bool = True
) -> list[str]:
    """``tc -n <ns> -batch`` lines: tbf at the link rate with a pfifo DropTail child per port.

    With ``host_shaping`` off, hosts send at veth speed and only switch ports are shaped.
    """
    burst = tbf_burst(rate_bps)
    lines: list[str] = []
    if topo.nodes[node].kind == "host" and not host_shaping:
        return lines
    for nb in topo.neighbours(node):
        dev = port_name(nb)
        # tbf's own limit only matters for its default child, which pfifo replaces
        lines.append(
            f"qdisc add dev {dev} root handle 1: tbf rate {rate_bps}bit burst {burst} "
            f"limit {max(buffer, 1) * FRAME_BYTES + burst}"
        )
        lines.append(f"qdisc add dev {dev} parent 1:1 handle 10: pfifo limit {buffer}")
    return lines


# ---------------------------------------------------------------------------------------------
# running commands
# ---------------------------------------------------------------------------------------------
class CommandError(UserError):
    """An iproute2 command failed; the message names the command and its error output."""


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Holds SIGINT and SIGTERM for the block: their handlers run (and may unwind) only once
    it ends. A process start and the line that records it (``procs.append(tb.popen_in(...))``)
    belong in one such block, so a Ctrl-C or SIGTERM cannot strike between the fork and the
    record and leave a process that no cleanup knows about. Outside the main thread, where
    Python runs no signal handler, it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    old = {
        sig: signal.signal(sig, lambda s, _frame: caught.append(s))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in old.items():
            if handler is not None:
                signal.signal(sig, handler)
        if caught:
            signal.raise_signal(caught[0])  # now to the handler that was in place


def run(
    argv: Sequence[str], *, stdin: str | None = None, timeout: float = 60.0, what: str | None = None
) -> str:
    """Runs ``argv``; on failure raises :class:`CommandError` naming it (and ``what``)."""
    try:
        proc = subprocess.run(
            list(argv), input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        raise UserError(f"`{argv[0]}` was not found; install iproute2") from None
    except subprocess.TimeoutExpired:
        raise CommandError(f"{' '.join(argv[:6])} did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        detail = "; ".join(err[:3]) if err else f"exit status {proc.returncode}"
        label = f"{what}: " if what else ""
        raise CommandError(f"{label}`{' '.join(argv[:5])}` failed: {detail}")
    return proc.stdout


def _parallel(fn: Callable[[str], object], items: Sequence[str]) -> list[object]:
    with ThreadPoolExecutor(max_workers=_PARALLEL) as pool:
        return list(pool.map(fn, items))


def list_netns() -> list[str]:
    """Names of all network namespaces known to ``ip netns``."""
    out = run(["ip", "-j", "netns", "list"]) or "[]"
    try:
        return [e["name"] for e in json.loads(out)]
    except (ValueError, KeyError, TypeError):
        return [line.split()[0] for line in out.splitlines() if line.strip()]


# ---------------------------------------------------------------------------------------------
# state
# ---------------------------------------------------------------------------------------------
def _lock_path(prefix: str) -> Path:
    return state_dir() / f"{prefix.rstrip('-')}.lock"


@contextlib.contextmanager
def _locked(prefix: str) -> Iterator[None]:
    d = state_dir()
    d.mkdir(parents=True, exist_ok=True)
    with open(_lock_path(prefix), "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(
                f"another `repflow testbed` command is working on prefix {prefix!r}; wait for it"
            ) from None
        yield


def _write_state(prefix: str, state: dict) -> None:
    path = _state_path(prefix)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, path)


def read_state(prefix: str = DEFAULT_PREFIX) -> dict | None:
    """The state of the testbed with ``prefix``, or None if none was recorded."""
    path = _state_path(prefix)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError:
        raise UserError(
            f"{path}: unreadable testbed state; delete it after checking "
            f"`ip netns list` for namespaces named {prefix}*"
        ) from None


# ---------------------------------------------------------------------------------------------
# the testbed
# ---------------------------------------------------------------------------------------------
@dataclass
class Testbed:
    """A testbed that is up: its topology, parameters and helpers to act inside it."""

    prefix: str
    topo: Topology
    rate_bps: int
    buffer: int
    seed: int
    hash_seed: bool
    host_shaping: bool = True
    tcp_cc: str = "reno"
    rto_min_ms: float | None = None

    @classmethod
    def from_state(cls, state: dict) -> Testbed:
        """Rebuilds the handle from a state file's content."""
        return cls(
            state["prefix"],
            Topology.from_dict(state["topology"]),
            state["rate_bps"],
            state["buffer"],
            state["seed"],
            state.get("hash_seed", False),
            state.get("host_shaping", True),
            state.get("tcp_cc", "reno"),
            state.get("rto_min_ms"),
        )

    def ns(self, node: str) -> str:
        """Namespace of ``node``."""
        return f"{self.prefix}{node}"

    def exec_argv(self, node: str, argv: Sequence[str]) -> list[str]:
        """argv that runs ``argv`` inside ``node``'s namespace."""
        return ["ip", "netns", "exec", self.ns(node), *argv]

    def run_in(self, node: str, argv: Sequence[str], timeout: float = 60.0) -> str:
        """Runs ``argv`` inside ``node`` and returns its standard output."""
        return run(self.exec_argv(node, argv), timeout=timeout, what=f"on {node}")

    def popen_in(self, node: str, argv: Sequence[str], **kwargs) -> subprocess.Popen:
        """Starts ``argv`` inside ``node`` (a child process of the caller), tagged as this
        tool's (:data:`TAG_ENV`). Call it, and record the process, inside
        :func:`signals_held`."""
        env = dict(kwargs.pop("env", None) or os.environ)
        env[TAG_ENV] = self.prefix
        return subprocess.Popen(self.exec_argv(node, argv), env=env, **kwargs)

    def tagged_pids(self, nodes: Sequence[str]) -> dict[str, list[int]]:
        """The processes inside each of ``nodes`` that this tool started for this testbed
        (:meth:`popen_in`'s tag): what a killed run left. Others — a user's observer started
        with ``ip netns exec`` — are not listed."""
        out: dict[str, list[int]] = {}
        for node, pids in self.pids().items():
            if node in nodes:
                mine = [p for p in pids if process_tag(p) == self.prefix]
                if mine:
                    out[node] = mine
        return out

    def qdisc_stats(self, nodes: Sequence[str] | None = None) -> dict[tuple[str, str], dict]:
        """``{(node, port): {"bytes", "packets", "drops", "backlog", "qlen"}}`` of every root
        tbf (its counters include its pfifo child's drops and queue)."""
        names = list(nodes) if nodes is not None else list(self.topo.nodes)

        def one(node: str) -> list[tuple[tuple[str, str], dict]]:
            out = run(
                ["tc", "-n", self.ns(node), "-s", "-j", "qdisc", "show"],
                what=f"qdisc counters of {node}",
            )
            rows = []
            for q in json.loads(out or "[]"):
                if q.get("kind") == "tbf" and q.get("root"):
                    rows.append(
                        (
                            (node, q["dev"]),
                            {
                                "bytes": int(q.get("bytes", 0)),
                                "packets": int(q.get("packets", 0)),
                                "drops": int(q.get("drops", 0)),
                                "backlog": int(q.get("backlog", 0)),
                                "qlen": int(q.get("qlen", 0)),
                            },
                        )
                    )
            return rows

        result: dict[tuple[str, str], dict] = {}
        for rows in _parallel(one, names):
            result.update(rows)  # type: ignore[arg-type]
        return result

    def pids(self) -> dict[str, list[int]]:
        """Processes running inside each existing namespace of this testbed."""
        existing = set(list_netns())
        out: dict[str, list[int]] = {}
        for node in self.topo.nodes:
            if self.ns(node) in existing:
                text = run(["ip", "netns", "pids", self.ns(node)], what="ip netns pids")
                out[node] = [int(x) for x in text.split()]
        return out


def command(action: str, prefix: str) -> str:
    """The ``repflow testbed ACTION`` command line that acts on ``prefix`` (``--prefix`` given
    unless it is the default), for messages a user may follow literally."""
    tail = "" if prefix == DEFAULT_PREFIX else f" --prefix {prefix}"
    return f"repflow testbed {action}{tail}"


def check_tcp_cc(tcp_cc: str) -> None:
    """Refuses, before anything is built, a host congestion control the namespaces could not
    use: one the kernel does not have (``tcp_available_congestion_control``), or one it has but
    allows only in the root namespace (a namespace may set only what
    ``net.ipv4.tcp_allowed_congestion_control`` lists)."""
    avail_cc = sysctl_path("net.ipv4.tcp_available_congestion_control")
    if avail_cc.exists() and tcp_cc not in avail_cc.read_text().split():
        raise UserError(
            f"--tcp: congestion control {tcp_cc!r} is not available in this kernel; "
            f"available: {avail_cc.read_text().strip()} (a module may add it: "
            f"`modprobe tcp_{tcp_cc}`)"
        )
    allowed_cc = sysctl_path("net.ipv4.tcp_allowed_congestion_control")
    if allowed_cc.exists():
        allowed = allowed_cc.read_text().split()
        if tcp_cc not in allowed:
            wanted = " ".join([*allowed, tcp_cc])
            raise UserError(
                f"--tcp: congestion control {tcp_cc!r} is available but a network namespace "
                f"may use only those in net.ipv4.tcp_allowed_congestion_control "
                f"({' '.join(allowed)}); allow it, as root in the root namespace: "
                f'sysctl -w net.ipv4.tcp_allowed_congestion_control="{wanted}"'
            )


def up(
    topo: Topology,
    *,
    rate_bps: int,
    buffer: int,
    seed: int,
    prefix: str = DEFAULT_PREFIX,
    progress: Callable[[str], None] | None = None,
    host_shaping: bool = True,
    tcp_cc: str = "reno",
    rto_min_ms: float | None = None,
) -> Testbed:
    """Creates the testbed; on any failure (or Ctrl-C) removes what it created and re-raises."""
    check_prefix(prefix)
    require_root()
    require_tools()
    if buffer < 1:
        raise UserError(f"--buffer must be at least 1 packet, got {buffer}")
    if rto_min_ms is not None and not 1 <= rto_min_ms <= 10_000:
        raise UserError(f"--rto-min must be between 1ms and 10s, got {rto_min_ms:g} ms")
    check_tcp_cc(tcp_cc)
    feats = kernel_features()
    for name, key, needed in (
        (
            "hash_policy",
            "net.ipv4.fib_multipath_hash_policy",
            "five-tuple ECMP needs Linux >= 5.12",
        ),
        (
            "hash_fields",
            "net.ipv4.fib_multipath_hash_fields",
            "five-tuple ECMP needs Linux >= 5.12",
        ),
        ("icmp_ratelimit", "net.ipv4.icmp_ratelimit", "TTL probes need it"),
    ):
        if not feats[name]:
            raise UserError(f"kernel feature missing: this kernel has no {key} ({needed})")
    say = progress or (lambda _msg: None)
    if not feats["hash_seed"]:
        msg = (
            "WARNING: net.ipv4.fib_multipath_hash_seed is missing (Linux < 6.11): every switch "
            "hashes with a random key of its own, so which path a five-tuple takes changes from "
            "one `up` to the next and --seed does not fix it"
        )
        log.warning(msg)
        say(msg)
    with _locked(prefix):
        if read_state(prefix) is not None:
            raise UserError(
                f"a testbed with prefix {prefix!r} is already up; run "
                f"`{command('down', prefix)}` first"
            )
        names = [f"{prefix}{n}" for n in topo.nodes]
        clash = sorted(set(names) & set(list_netns()))
        if clash:
            raise UserError(
                f"namespaces {', '.join(clash[:4])}{' ...' if len(clash) > 4 else ''} already "
                f"exist but no state says this tool made them; delete them yourself (`ip netns "
                f"del NAME`) or run `repflow testbed down --force --prefix {prefix}`"
            )
        tb = Testbed(
            prefix,
            topo,
            rate_bps,
            buffer,
            seed,
            feats["hash_seed"],
            host_shaping,
            tcp_cc,
            rto_min_ms,
        )
        state = {
            "prefix": prefix,
            "status": "building",
            "created_at": time.time(),
            "namespaces": names,
            "topology": topo.to_dict(),
            "rate_bps": rate_bps,
            "buffer": buffer,
            "seed": seed,
            "hash_seed": feats["hash_seed"],
            "host_shaping": host_shaping,
            "tcp_cc": tcp_cc,
            "rto_min_ms": rto_min_ms,
        }
        _write_state(prefix, state)
        try:
            _build(tb, say)
        except BaseException:
            say("build failed; removing what was created")
            with contextlib.suppress(Exception):
                _teardown(names)
            with contextlib.suppress(OSError):
                _state_path(prefix).unlink()
            raise
        state["status"] = "up"
        state["up_seconds"] = time.time() - state["created_at"]
        _write_state(prefix, state)
    return tb


def _build(tb: Testbed, say: Callable[[str], None]) -> None:
    topo = tb.topo
    nodes = list(topo.nodes)
    say(f"creating {len(nodes)} namespaces")
    run(
        ["ip", "-batch", "-"],
        stdin="".join(f"netns add {tb.ns(n)}\n" for n in nodes),
        what="creating namespaces",
    )

    def set_sysctls(node: str) -> None:
        script = sysctl_script(sysctls(topo, node, tb.seed, tb.hash_seed, tb.tcp_cc))
        try:
            run(tb.exec_argv(node, ["sh", "-c", script]), what=f"sysctls of {node}")
        except CommandError as exc:
            raise UserError(f"kernel feature missing or refused: {exc}") from None

    say("setting sysctls (five-tuple ECMP hash, per-switch seeds, icmp_ratelimit=0)")
    _parallel(set_sysctls, nodes)
    say(f"creating {len(topo.links)} veth pairs")
    run(
        ["ip", "-batch", "-"],
        stdin="\n".join(veth_batch(topo, tb.prefix)) + "\n",
        what="creating veth pairs",
    )

    def links(node: str) -> None:
        run(
            ["ip", "-n", tb.ns(node), "-batch", "-"],
            stdin="\n".join(node_link_batch(topo, node)) + "\n",
            what=f"ports of {node}",
        )

    def routes(node: str) -> None:
        try:
            run(
                ["ip", "-n", tb.ns(node), "-batch", "-"],
                stdin="\n".join(node_route_batch(topo, node, tb.rto_min_ms)) + "\n",
                what=f"routing of {node}",
            )
        except CommandError as exc:
            text = str(exc).lower()
            if "not supported" in text or "unknown" in text or "invalid argument" in text:
                raise UserError(
                    f"kernel feature missing: nexthop objects (`ip nexthop`, Linux "
                    f">= 5.3) were refused: {exc}"
                ) from None
            raise

    def qdiscs(node: str) -> None:
        try:
            run(
                ["tc", "-n", tb.ns(node), "-batch", "-"],
                stdin="\n".join(node_tc_batch(topo, node, tb.rate_bps, tb.buffer, tb.host_shaping))
                + "\n",
                what=f"qdiscs of {node}",
            )
        except CommandError as exc:
            raise UserError(f"kernel feature missing or refused: tbf/pfifo qdiscs: {exc}") from None

    say("addresses and ports")
    _parallel(links, nodes)
    say("ECMP next-hop groups and routes")
    _parallel(routes, nodes)
    say("tbf/pfifo qdiscs on every port")
    _parallel(qdiscs, nodes)


#: Environment variable that marks a process this tool started inside a testbed's namespace
#: (its value: the testbed's prefix); ``testbed run`` stops only such leftovers.
TAG_ENV = "REPFLOW_TESTBED_PREFIX"


def process_tag(pid: int) -> str | None:
    """The :data:`TAG_ENV` value process ``pid`` was started with, or None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
    except OSError:
        return None
    key = TAG_ENV.encode() + b"="
    for item in env:
        if item.startswith(key):
            return item[len(key):].decode(errors="replace")
    return None


def kill_inside(namespaces: Sequence[str]) -> int:
    """SIGTERM, then SIGKILL, every process inside ``namespaces``. Returns how many are still
    alive afterwards (0 when all stopped)."""
    existing = set(list_netns())
    pids: list[int] = []
    for ns in namespaces:
        if ns in existing:
            pids += [int(x) for x in run(["ip", "netns", "pids", ns]).split()]
    return kill_pids(pids)


def kill_pids(pids: Sequence[int]) -> int:
    """SIGTERM, then SIGKILL, every process of ``pids``. Returns how many are still alive
    afterwards (0 when all stopped)."""
    pids = list(pids)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
                alive.append(pid)
        deadline = time.time() + 2.0
        while time.time() < deadline and any(_alive(p) for p in alive):
            time.sleep(0.05)
        pids = [p for p in alive if _alive(p)]
        if not pids:
            break
    return len(pids)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().split(")")[-1].split()[0] == "Z":
                return False
    return True


def _teardown(namespaces: Sequence[str]) -> list[str]:
    kill_inside(namespaces)
    existing = set(list_netns())
    mine = [ns for ns in namespaces if ns in existing]
    if mine:
        run(
            ["ip", "-batch", "-"],
            stdin="".join(f"netns del {ns}\n" for ns in mine),
            what="deleting namespaces",
        )
    return mine


def down(prefix: str = DEFAULT_PREFIX, force: bool = False) -> list[str]:
    """Removes the testbed recorded for ``prefix``; returns the namespaces deleted.

    With ``force``, also deletes namespaces named ``<prefix>*`` that no state file records
    (e.g. after the state directory was wiped by a reboot of ``/run``... or by hand).
    """
    check_prefix(prefix)
    require_root()
    require_tools()
    with _locked(prefix):
        state = read_state(prefix)
        names = list(state["namespaces"]) if state else []
        if force:
            names += [n for n in list_netns() if n.startswith(prefix) and n not in names]
        deleted = _teardown(names)
        from repflow.testbed import stale

        # A run killed with -9: its work directories and run lock, provably unused now.
        stale.clean(prefix)
        with contextlib.suppress(FileNotFoundError):
            _state_path(prefix).unlink()
        with contextlib.suppress(OSError):
            _lock_path(prefix).unlink()
    with contextlib.suppress(OSError):
        state_dir().rmdir()  # only if empty
    return deleted


def stray_namespaces(prefix: str = DEFAULT_PREFIX) -> list[str]:
    """Namespaces named ``<prefix>*`` that the state file does not list."""
    state = read_state(prefix)
    known = set(state["namespaces"]) if state else set()
    return [n for n in list_netns() if n.startswith(prefix) and n not in known]


def current(prefix: str = DEFAULT_PREFIX) -> Testbed:
    """The testbed that is up with ``prefix``; a clear error if there is none."""
    state = read_state(prefix)
    if state is None:
        raise UserError(
            f"no testbed is up (prefix {prefix!r}); run `{command('up', prefix)}` first"
        )
    if state.get("status") != "up":
        raise UserError(
            f"the testbed with prefix {prefix!r} is not fully built "
            f"(status {state.get('status')!r}); run `{command('down', prefix)}`"
        )
    return Testbed.from_state(state)


def stop_processes(procs: Sequence[subprocess.Popen], timeout: float = 5.0) -> None:
    """Terminates every process still running, then waits for them; those that have not exited
    ``timeout`` seconds after the signal (one deadline for all) are killed, all at once (a
    process takes up to half a second to die: one after the other, sixteen took seconds)."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(0.02)
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait()
