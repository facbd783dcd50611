"""``repflow testbed up|check|run|toy|status|down`` — the namespace fat-tree testbed."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Iterator


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so cleanup code runs on both; the exit status is then 143."""
    from repflow.cli import Terminated

    def handler(_sig, _frame):
        raise Terminated

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _say(msg: str) -> None:
    print(f"testbed: {msg}", file=sys.stderr, flush=True)


def _add_common(p: argparse.ArgumentParser) -> None:
    from repflow.testbed.netns import DEFAULT_PREFIX

    p.add_argument(
        "--prefix",
        default=DEFAULT_PREFIX,
        help=f"name prefix of everything the testbed creates (default {DEFAULT_PREFIX})",
    )


def _add_tcp(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tcp",
        default="reno",
        help="hosts' TCP congestion control (default reno, the papers' NewReno)",
    )
    p.add_argument(
        "--rto-min",
        default=None,
        help="hosts' minimum TCP retransmission timeout, e.g. 10ms (default: Linux's 200ms)",
    )


def _rto_ms(text: str | None) -> float | None:
    from repflow.units import parse_duration

    return None if text is None else parse_duration(text, "--rto-min") * 1000.0


def _cmd_up(args: argparse.Namespace) -> int:
    from repflow.testbed import netns
    from repflow.testbed.topology import fat_tree
    from repflow.units import format_rate, parse_rate

    rate = parse_rate(args.link_rate, like="20Mbps")
    topo = fat_tree(args.k)
    t0 = time.perf_counter()
    with _sigterm_as_interrupt():
        tb = netns.up(
            topo,
            rate_bps=rate,
            buffer=args.buffer,
            seed=args.seed,
            prefix=args.prefix,
            progress=_say,
            host_shaping=not args.no_host_shaping,
            tcp_cc=args.tcp,
            rto_min_ms=_rto_ms(args.rto_min),
        )
    took = time.perf_counter() - t0
    print(
        f"testbed up: {args.k}-pod fat-tree, {len(topo.hosts)} hosts, {len(topo.switches)} "
        f"switches, {len(topo.links)} links at {format_rate(rate)}, buffer {args.buffer} packets, "
        f"ECMP seed {args.seed}{'' if tb.hash_seed else ' (IGNORED: no fib_multipath_hash_seed)'}"
        f" — {took:.1f} s"
    )
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    from repflow.testbed import netns

    t0 = time.perf_counter()
    deleted = netns.down(args.prefix, force=args.force)
    took = time.perf_counter() - t0
    if deleted:
        print(f"testbed down: removed {len(deleted)} namespaces — {took:.1f} s")
    else:
        print("testbed down: nothing to remove")
    stray = netns.stray_namespaces(args.prefix)
    if stray:
        print(
            f"note: {len(stray)} namespaces named {args.prefix}* are not recorded as ours "
            f"(left alone; `--force` removes them): {', '.join(stray[:6])}"
        )
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from repflow.testbed import netns
    from repflow.units import format_rate

    state = netns.read_state(args.prefix)
    if state is None:
        print(f"no testbed recorded for prefix {args.prefix!r}")
        stray = netns.stray_namespaces(args.prefix) if netns.shutil.which("ip") else []
        if stray:
            print(f"but {len(stray)} namespaces named {args.prefix}* exist: {', '.join(stray[:6])}")
        return 1
    tb = netns.Testbed.from_state(state)
    present = set(netns.list_netns())
    missing = [n for n in state["namespaces"] if n not in present]
    params = tb.topo.params
    print(
        f"status: {state['status']}; {tb.topo.name}{' k=' + str(params['k']) if params else ''}"
        f", {len(tb.topo.hosts)} hosts, {len(tb.topo.switches)} switches, "
        f"{format_rate(tb.rate_bps)}, buffer {tb.buffer}, seed {tb.seed}, "
        f"hash seed {'fixed per switch' if tb.hash_seed else 'UNAVAILABLE (random)'}, "
        f"hosts: TCP {tb.tcp_cc}, min RTO "
        f"{'200ms (Linux)' if tb.rto_min_ms is None else f'{tb.rto_min_ms:g}ms'}, egress "
        f"{'shaped' if tb.host_shaping else 'unshaped'}"
    )
    print(
        f"namespaces: {len(state['namespaces']) - len(missing)}/{len(state['namespaces'])} "
        f"present{'; missing: ' + ', '.join(missing[:6]) if missing else ''}"
    )
    if not missing and args.verbose:
        stats = tb.qdisc_stats()
        for (node, dev), st in sorted(stats.items()):
            print(
                f"  {node:>5} {dev:<10} sent {st['bytes']:>12} B {st['packets']:>9} pkt "
                f"drops {st['drops']:>6}"
            )
    return 0 if not missing else 1


def _cmd_check(args: argparse.Namespace) -> int:
    from repflow.testbed import checks, netns

    tb = netns.current(args.prefix)
    with _sigterm_as_interrupt():
        ok = checks.run_all(tb, flows_per_host=args.flows_per_host, report=print)
    return 0 if ok else 1


def _cmd_run(args: argparse.Namespace) -> int:
    from repflow.testbed import netns, workload

    checked = workload.parse_run_args(args)  # every argument, before any process starts
    tb = netns.current(args.prefix)
    with _sigterm_as_interrupt():
        workload.run_cli(tb, args, checked, say=_say)
    return 0


def _cmd_toy(args: argparse.Namespace) -> int:
    from repflow.testbed import toyexp

    with _sigterm_as_interrupt():
        args.rto_min_ms = _rto_ms(args.rto_min)
        toyexp.run_cli(args, say=_say)
    return 0


def _cmd_proxy_demo(args: argparse.Namespace) -> int:
    from repflow.testbed import proxydemo

    with _sigterm_as_interrupt():
        proxydemo.run_cli(args, say=_say)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds ``repflow testbed ...``."""
    tp = subparsers.add_parser(
        "testbed",
        help="emulated fat-tree of network namespaces with kernel ECMP (needs root)",
        description="An emulated data-center fat-tree made of Linux network namespaces, veth "
        "pairs, kernel ECMP (ip nexthop groups) and tbf-shaped DropTail queues.",
    )
    sub = tp.add_subparsers(dest="testbed_command", metavar="ACTION", required=True)

    p = sub.add_parser("up", help="build a k-pod fat-tree")
    p.add_argument("--k", type=int, default=4, help="pods (even; 4 → 16 hosts, 20 switches)")
    p.add_argument("--link-rate", default="20Mbps", help="rate of every link (default 20Mbps)")
    p.add_argument(
        "--buffer",
        type=int,
        default=50,
        help="DropTail limit of every egress queue in packets (default 50)",
    )
    p.add_argument("--seed", type=int, default=1, help="fixes each switch's ECMP hash seed")
    p.add_argument(
        "--no-host-shaping",
        action="store_true",
        help="leave host egress unshaped (hosts send at veth speed; switches shape)",
    )
    _add_tcp(p)
    _add_common(p)
    p.set_defaults(func=_cmd_up)

    p = sub.add_parser("down", help="remove everything the testbed created")
    p.add_argument(
        "--force",
        action="store_true",
        help="also remove <prefix>* namespaces no state file records",
    )
    _add_common(p)
    p.set_defaults(func=_cmd_down)

    p = sub.add_parser("status", help="show the testbed and its queue counters")
    p.add_argument("-v", "--verbose", action="store_true", help="print per-port qdisc counters")
    _add_common(p)
    p.set_defaults(func=_cmd_status)

    p = sub.add_parser("check", help="reachability, ECMP spreading and TTL-probe path checks")
    p.add_argument(
        "--flows-per-host",
        type=int,
        default=8,
        help="flows per host in the spreading check (default 8)",
    )
    _add_common(p)
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("run", help="run `repflow load` on every host and collect flow records")
    p.add_argument(
        "--scheme",
        default="tcp",
        metavar="{tcp,repflow,smartrep,mptcp}",
        help="tcp (default), repflow, smartrep (repflow-net), or mptcp (the kernel's Multipath "
        "TCP; MPTCP-L cannot run on the kernel, see docs/testbed.md)",
    )
    p.add_argument(
        "--subflows",
        type=int,
        default=None,
        metavar="N",
        help="mptcp: subflows per connection, the first included (1..8, default 8); the hosts "
        "announce N-1 extra ports that ECMP hashes apart",
    )
    p.add_argument("--workload", default="websearch", help="workload name or CDF file")
    p.add_argument("--load", type=float, default=0.3, help="load relative to the host link rate")
    p.add_argument("--duration", default="30s", help="traffic duration, e.g. 60s")
    p.add_argument(
        "--drain",
        default="30s",
        help="then wait at most this long for flows in progress (default 30s)",
    )
    p.add_argument(
        "--flow-timeout",
        default="30s",
        help="give up on a flow none of whose copies completed within this (default 30s, the "
        "library's); such flows are recorded as failed, with the reason",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--out",
        required=True,
        help="new run directory to write (flows.parquet, run.json, logs/); must not exist or "
        "be empty — a run never replaces results",
    )
    p.add_argument(
        "--port",
        type=int,
        default=7000,
        help="first server port; each host serves PORT..PORT+3 (default 7000)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no live progress bar")
    p.add_argument(
        "--smartrep-cold",
        action="store_true",
        help="smartrep: do not probe paths before the start (flows wait for their probes); "
        "default: every host warms its probe cache first, as SmartRep's probe database",
    )
    _add_common(p)
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("toy", help="RepFlow Table I: the Fig. 3 toy topology, three scenarios")
    p.add_argument("--flows", type=int, default=300, help="short flows per scenario (default 300)")
    p.add_argument(
        "--trials", type=int, default=3,
        help="trials, each on its own seed (--seed, --seed+1, ...: ECMP hash and source ports); "
        "means and 99th percentiles come with 95 %% intervals over trials and flows "
        "(default 3)",
    )  # fmt: skip
    p.add_argument("--link-rate", default="50Mbps", help="rate of every link (default 50Mbps)")
    p.add_argument(
        "--buffer",
        type=int,
        default=50,
        help="DropTail limit of every egress queue in packets (default 50)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=1,
        help="fixes the ECMP hash seeds and the short flows' source ports",
    )
    p.add_argument(
        "--cancel",
        action="store_true",
        help="abort the losing copy once a replicated flow completes (not in the paper; "
        "--engine agent only, the library always cancels)",
    )
    p.add_argument(
        "--host-shaping",
        action="store_true",
        help="also shape host egress to the link rate (default: only switch ports; see "
        "docs/testbed.md)",
    )
    _add_tcp(p)
    p.add_argument(
        "--engine",
        default="agent",
        choices=["agent", "net"],
        help="who sends the short flows: the testbed's own sender, as in the paper "
        "(default), or `repflow send` (the library; adds a SmartRep scenario)",
    )
    p.add_argument(
        "--out",
        help="optional new directory for the per-flow results (toy.json); must not exist or "
        "be empty",
    )
    p.add_argument(
        "--scheme",
        default=None,
        metavar="{tcp,repflow,mptcp}",
        help="the paper's TCP and RepFlow scenarios always run; mptcp adds one with the short "
        "flows over the kernel's Multipath TCP",
    )
    p.add_argument(
        "--subflows",
        type=int,
        default=None,
        metavar="N",
        help="mptcp: subflows per connection, the first included (1..8, default 8)",
    )
    p.add_argument("--prefix", default="rftoy-", help="name prefix (default rftoy-)")
    p.set_defaults(func=_cmd_toy)

    p = sub.add_parser(
        "proxy-demo",
        help="real Redis and nginx behind `repflow proxy` on a k=4 fat tree, with and without "
        "a background large flow (docs/proxy.md)",
    )
    p.add_argument("--k", type=int, default=4, help="pods of the fat tree (4, 6 or 8; default 4)")
    p.add_argument("--link-rate", default="50Mbps", help="rate of every link (default 50Mbps)")
    p.add_argument(
        "--buffer", type=int, default=50,
        help="DropTail limit of every egress queue in packets (default 50)",
    )  # fmt: skip
    p.add_argument(
        "--seed", type=int, default=1,
        help="first trial's seed (ECMP hash seeds); trial i uses seed + i",
    )  # fmt: skip
    p.add_argument("--trials", type=int, default=5, help="trials, each its own seed (default 5)")
    p.add_argument(
        "--protocol", default="both", choices=["redis", "http", "both"],
        help="redis (redis-server, redis-benchmark GET), http (nginx, wrk), or both (default)",
    )  # fmt: skip
    p.add_argument(
        "--requests", type=int, default=20000,
        help="redis-benchmark requests per path and trial (default 20000)",
    )  # fmt: skip
    p.add_argument(
        "--http-duration", default="3s", help="wrk's duration per path and trial (default 3s)"
    )
    p.add_argument(
        "--clients", type=int, default=4,
        help="connections of the load generator (redis-benchmark -c, wrk -c; default 4)",
    )  # fmt: skip
    p.add_argument(
        "--out",
        help="optional new directory for measurements.json (written first), proxy-demo.json "
        "and proxy-demo.png",
    )
    p.add_argument(
        "--summarize", metavar="FILE", default=None,
        help="run nothing: summarize the measurements.json an earlier run wrote (no root)",
    )  # fmt: skip
    p.add_argument("--relay", action="store_true",
                   help="also measure two plain socat relays (client side and server side) "
                   "in front of each server: the floor any pair of proxies pays here")  # fmt: skip
    p.add_argument("--prefix", default="rfpd-", help="name prefix (default rfpd-)")
    p.set_defaults(func=_cmd_proxy_demo)
