"""``repflow proxy client|server``: RepFlow in front of an unmodified service (docs/proxy.md).

- ``client`` runs next to the application: it accepts the application's ordinary TCP
  connections on ``--listen``, cuts them into requests (``--protocol redis|http|conn``) and
  sends each as a replicated repflow-net call to the server sidecar at ``--to``.
- ``server`` runs next to the real server: it receives each request once on ``--listen``'s
  port and the ``--ports - 1`` following ones, records it in its journal, hands it to
  ``--upstream`` over a bounded pool of plain TCP connections and returns the response.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from repflow.cli.net import (
    add_response_memory_flags,
    add_stats_flags,
    parse_byte_limit,
    read_key_file,
    response_memory_options,
)
from repflow.errors import UserError

PROTOCOLS = ("redis", "http", "conn")


def _units():
    from repflow import units

    return units


def _addr(text: str, flag: str) -> str:
    """``HOST:PORT``, or ``:PORT`` for every address (0.0.0.0)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"{flag}: expected HOST:PORT or :PORT (e.g. 127.0.0.1:6380), got {text!r}")
    return f"{host or '0.0.0.0'}:{port}"


def _count(value: int, flag: str, lo: int = 1, hi: int = 10**9) -> int:
    if not lo <= value <= hi:
        raise UserError(f"{flag}: must be between {lo} and {hi}, got {value}")
    return value


def _size(text: str, flag: str, hi: int = 2**32 - 1) -> int:
    n = _units().parse_size(text, flag)
    if not 0 < n <= hi:
        raise UserError(f"{flag}: must be between 1 B and {hi} B, got {text!r}")
    return int(n)


def _default_journal(listen: str) -> str:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    port = listen.rpartition(":")[2]
    return str(Path(base) / "repflow" / f"proxy-{port}.journal")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--protocol",
        required=True,
        choices=PROTOCOLS,
        help="redis (RESP, pipelines kept in order), http (HTTP/1.x keep-alive), "
        "conn (a whole short connection each way)",
    )
    p.add_argument(
        "--key-file",
        default=None,
        help="pre-shared key file (HMAC tags); the same on both sidecars",
    )
    p.add_argument(
        "--max-request",
        default="1MiB",
        help="largest request (Redis: run of pipelined commands) (default 1MiB)",
    )
    add_stats_flags(p)
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log on stderr: warnings (every refusal) by default, -v info, -vv debug",
    )


def register(sub: argparse._SubParsersAction) -> None:
    """Adds ``proxy client`` and ``proxy server``."""
    tp = sub.add_parser(
        "proxy",
        help="RepFlow in front of an unmodified service: client and server sidecars",
        description="Two sidecars carry an unmodified client's requests to an unmodified "
        "server over repflow-net: each request replicated, first response wins, executed "
        "once. See docs/proxy.md.",
    )
    ps = tp.add_subparsers(dest="proxy_command", metavar="SIDE", required=True)

    p = ps.add_parser("client", help="on the client's host: accept the application's connections")
    p.add_argument(
        "--listen",
        required=True,
        metavar="ADDR:PORT",
        help="where the application connects (e.g. 127.0.0.1:6380)",
    )
    p.add_argument(
        "--to", required=True, metavar="HOST:PORT", help="the server sidecar's first port"
    )
    p.add_argument("--copies", type=int, default=2, help="copies per short request (default 2)")
    p.add_argument(
        "--threshold",
        default="100KB",
        help="requests up to this size are replicated, larger ones go on one copy (default 100KB)",
    )
    p.add_argument(
        "--max-pipeline",
        type=int,
        default=256,
        help="pipelined Redis commands sent in one call at most (default 256)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=1024,
        help="application connections at once; more are refused (default 1024)",
    )
    p.add_argument(
        "--idle-timeout",
        default="60s",
        help="close an application connection silent this long (default 60s)",
    )
    p.add_argument(
        "--flow-timeout",
        default="10s",
        help="a request's copies all give up after this long (default 10s)",
    )
    p.add_argument(
        "--max-buffered",
        default="256MiB",
        metavar="SIZE",
        help="bytes all application connections together may hold beyond 64KiB each "
        "(requests in their calls, responses being written, larger read buffers); what "
        "would exceed it is refused: memory <= this + --max-connections x 64KiB (default 256MiB)",
    )
    p.add_argument(
        "--pool-paths",
        type=int,
        default=8,
        metavar="N",
        help="connections kept to the server sidecar, on source ports whose paths hop-limited "
        "probes found; each short request's copies go on connections of different paths, the "
        "first on the fastest recently (0: one connection per copy; default 8)",
    )
    p.add_argument(
        "--pool-keepalive",
        default="2min",
        metavar="DURATION",
        help="keep pooled connections open across idle spells this long after their last "
        "request (an empty keepalive frame on a connection idle 5 s), so that a quiet "
        "sidecar's next request finds its paths' connections open (0s: off; default 2min)",
    )
    p.add_argument(
        "--probe-budget",
        type=int,
        default=32,
        metavar="N",
        help="source ports probed at most (2 probes each) to fill the pool (default 32)",
    )
    _common(p)
    p.set_defaults(func=cmd_client)

    p = ps.add_parser("server", help="on the server's host: hand each request once to the server")
    p.add_argument(
        "--listen",
        required=True,
        metavar=":PORT",
        help="first repflow-net port (ADDR:PORT or :PORT for every address)",
    )
    p.add_argument(
        "--ports",
        type=int,
        default=4,
        help="consecutive ports (copy i uses port+i; at least --copies) (default 4)",
    )
    p.add_argument("--upstream", required=True, metavar="HOST:PORT", help="the real server")
    p.add_argument(
        "--max-response",
        default="16MiB",
        help="largest upstream response carried back (default 16MiB)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=4096,
        help="repflow-net connections at once (default 4096)",
    )
    p.add_argument(
        "--pool-size", type=int, default=64, help="upstream connections at most (default 64)"
    )
    p.add_argument(
        "--pool-wait",
        default="1s",
        help="refuse a request that found no free upstream connection in this time",
    )
    p.add_argument(
        "--upstream-timeout",
        default="30s",
        help="time for one exchange with the upstream (default 30s)",
    )
    p.add_argument(
        "--max-inflight",
        type=int,
        default=1024,
        help="requests handled at once; more wait in the queue (default 1024)",
    )
    p.add_argument(
        "--journal",
        default=None,
        metavar="PATH",
        help="journal of executed requests (PATH.0, PATH.1) (default "
        "$XDG_STATE_HOME/repflow/proxy-PORT.journal, ~/.local/state if unset)",
    )
    p.add_argument(
        "--no-journal",
        action="store_true",
        help="no journal: a copy arriving after a restart may execute again",
    )
    p.add_argument(
        "--journal-window",
        default="60s",
        help="executed requests are remembered at least this long; older "
        "requests are refused (default 60s)",
    )
    p.add_argument(
        "--journal-capacity",
        type=int,
        default=1 << 21,
        help="ids per journal generation (default 2097152)",
    )
    p.add_argument(
        "--journal-allow-missing",
        action="store_true",
        help="start a new journal although PATH.0 and PATH.1 went missing (PATH.created "
        "shows one was kept); without it the sidecar refuses to start",
    )
    p.add_argument(
        "--reply-copies",
        choices=("first", "all"),
        default="first",
        help="first: a response goes back on one copy's connection (the first delivered), the "
        "other copies get an empty 'answered elsewhere' reply — the return path carries one "
        "response per request; all: every copy gets the response (return paths replicated too, "
        "twice the response bytes with two copies) (default first)",
    )
    add_response_memory_flags(p)
    _common(p)
    p.set_defaults(func=cmd_server)


class _Stop:
    def __init__(self) -> None:
        self.flag = False

    def __call__(self, signum: int, frame: Any) -> None:
        self.flag = True


#: Starts the line a sidecar prints at SIGUSR1: its counters as JSON follow.
STATS_PREFIX = "REPFLOW-STATS "


def _stats_line(side: str, c: dict[str, Any]) -> str:
    p = c["proxy"]
    refused = {k[len("refused_") :]: v for k, v in p.items() if k.startswith("refused_") and v}
    text = ", ".join(f"{v} {k}" for k, v in refused.items()) or "none"
    return (
        f"repflow proxy {side}: {p['requests']} requests in {p['calls']} calls, "
        f"{p['connections']} connections; refused: {text}; {p['calls_failed']} calls "
        f"failed, {p['outcome_unknown']} outcomes unknown, {p['timeouts']} timeouts"
        + (
            f", {p['upstream_resent']} sent again after an upstream close"
            if side == "server"
            else ""
        )
        + _paths_text(c.get("paths"))
        + _hops_text(c.get("hops"))
    )


def _hops_text(hops: dict[str, Any] | None) -> str:
    """The median time of each hop the sidecar times (nothing before its first call)."""
    shown = [f"{name} {h['p50_us']:.0f}" for name, h in (hops or {}).items()
             if h.get("count") and h.get("p50_us") is not None]  # fmt: skip
    return f"; p50 per hop (µs): {', '.join(shown)}" if shown else ""


def _paths_text(paths: dict[str, int] | None) -> str:
    """The client's path pool in the stats line (nothing without one)."""
    if not paths or not paths.get("picks"):
        return ""
    return (f"; paths: {paths['picks_distinct']} of {paths['picks']} requests on different "
            f"paths, {paths['replaced']} connections replaced")  # fmt: skip


def _run(side: str, opts: dict[str, Any], args: argparse.Namespace, what: str) -> int:
    """Starts the ``side`` sidecar with ``opts`` and says where it listens and ``what`` it
    carries; prints its counters every --stats and at the end; stops at SIGINT, SIGTERM or
    after --duration."""
    from repflow.net import proxy_sidecar

    _init_logging(args)
    # SIGUSR1: the whole counters (per-hop histograms included) as one JSON line, for a harness
    # that snapshots a sidecar around a measured run (the testbed's proxy-demo). Installed
    # before the sidecar listens, so a signal sent as soon as its port answers is not fatal
    # (SIGUSR1's default action); one that comes before the sidecar exists is answered then.
    box: dict[str, Any] = {"pending": False}

    def dump(_sig: int, _frame: object) -> None:
        if "sidecar" in box:
            print(f"{STATS_PREFIX}{box['sidecar'].counters()}", flush=True)
        else:
            box["pending"] = True

    old_usr1 = signal.signal(signal.SIGUSR1, dump)
    try:
        sidecar = proxy_sidecar(side, **opts)
    except BaseException:
        signal.signal(signal.SIGUSR1, old_usr1)
        raise
    box["sidecar"] = sidecar
    print(f"repflow proxy {side}: listening on {', '.join(sidecar.addrs())}, {what}", flush=True)
    if box["pending"]:
        dump(signal.SIGUSR1, None)
    u = _units()
    every = None if args.stats is None else u.parse_duration(args.stats, "--stats")
    until = None if args.duration is None else u.parse_duration(args.duration) + time.monotonic()
    stop = _Stop()
    old = signal.signal(signal.SIGTERM, stop)
    try:
        next_stats = None if every is None else time.monotonic() + every
        try:
            while not stop.flag and (until is None or time.monotonic() < until):
                time.sleep(0.2)
                if next_stats is not None and every is not None and time.monotonic() >= next_stats:
                    print(_stats_line(side, json.loads(sidecar.counters())), flush=True)
                    next_stats += every
        except KeyboardInterrupt:
            pass
        c = json.loads(sidecar.counters())
        sidecar.close()
    finally:
        signal.signal(signal.SIGTERM, old)
        signal.signal(signal.SIGUSR1, old_usr1)
    print(_stats_line(side, c), flush=True)
    return 0


def _init_logging(args: argparse.Namespace) -> None:
    from repflow.net import init_logging

    init_logging(args.verbose, os.environ.get("RUST_LOG"))


def cmd_client(args: argparse.Namespace) -> int:
    u = _units()
    opts = {
        "listen": _addr(args.listen, "--listen"),
        "to": _addr(args.to, "--to"),
        "protocol_name": args.protocol,
        "copies": _count(args.copies, "--copies", 1, 16),
        "key": read_key_file(args.key_file),
        "threshold": _size(args.threshold, "--threshold"),
        "max_request": _size(args.max_request, "--max-request"),
        "max_pipeline": _count(args.max_pipeline, "--max-pipeline", 1, 1 << 20),
        "max_connections": _count(args.max_connections, "--max-connections", 1, 1 << 20),
        "idle_timeout": u.parse_duration(args.idle_timeout, "--idle-timeout"),
        "flow_timeout": u.parse_duration(args.flow_timeout, "--flow-timeout"),
        "max_buffered": parse_byte_limit(args.max_buffered, "--max-buffered", lo=1024),
        "pool_paths": _count(args.pool_paths, "--pool-paths", 0, 256),
        "probe_budget": _count(args.probe_budget, "--probe-budget", 0, 1024),
        "pool_keepalive": u.parse_duration(args.pool_keepalive, "--pool-keepalive", zero=True),
    }
    paths = (f", {args.pool_paths} pooled connections on probed paths"
             if args.pool_paths else ", one connection per copy")  # fmt: skip
    what = f"{args.protocol} requests to {opts['to']} with {args.copies} copies{paths}"
    return _run("client", opts, args, what)


def cmd_server(args: argparse.Namespace) -> int:
    u = _units()
    listen = _addr(args.listen, "--listen")
    journal = None if args.no_journal else (args.journal or _default_journal(listen))
    if args.no_journal and args.journal:
        raise UserError("--no-journal: cannot be combined with --journal")
    opts = {
        "listen": listen,
        "ports": _count(args.ports, "--ports", 1, 64),
        "upstream": _addr(args.upstream, "--upstream"),
        "protocol_name": args.protocol,
        "key": read_key_file(args.key_file),
        "max_request": _size(args.max_request, "--max-request"),
        "max_response": _size(args.max_response, "--max-response", 2**40),
        "max_connections": _count(args.max_connections, "--max-connections", 1, 1 << 20),
        "pool_size": _count(args.pool_size, "--pool-size", 1, 1 << 16),
        "pool_wait": u.parse_duration(args.pool_wait, "--pool-wait"),
        "upstream_timeout": u.parse_duration(args.upstream_timeout, "--upstream-timeout"),
        "max_inflight": _count(args.max_inflight, "--max-inflight", 1, 1 << 20),
        "journal": journal,
        "journal_window": u.parse_duration(args.journal_window, "--journal-window"),
        "journal_capacity": _count(args.journal_capacity, "--journal-capacity", 1, 1 << 28),
        "journal_allow_missing": bool(args.journal_allow_missing),
        "reply_once": args.reply_copies == "first",
        **response_memory_options(args),
    }
    what = f"{args.protocol} requests to {opts['upstream']}, journal {journal or 'off'}"
    return _run("server", opts, args, what)
