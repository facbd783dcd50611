"""``repflow serve``, ``repflow send`` and ``repflow load``: the real-socket library at work.

- ``serve`` receives flows (and answers calls with their own payload) on PORT..PORT+N-1
  until SIGINT/SIGTERM.
- ``send`` sends N flows of one size one after the other and prints their FCTs.
- ``load`` is an open-loop Poisson generator (sizes from a workload CDF, random peers, load
  relative to the local link rate) that writes a run directory like the simulator's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repflow.errors import UserError

if TYPE_CHECKING:  # numpy and pandas load on first use: `repflow --help` stays fast
    import pandas as pd

SCHEMES = ("tcp", "repflow", "smartrep")


def _units():
    from repflow import units

    return units


def _key(args: argparse.Namespace) -> bytes | None:
    return read_key_file(getattr(args, "key_file", None))


def read_key_file(path: str | None) -> bytes | None:
    """The shared key in ``--key-file PATH`` (surrounding whitespace stripped), or None without
    one; a file that cannot be read or is empty is a one-line error naming the flag."""
    if not path:
        return None
    try:
        key = Path(path).read_bytes().strip()
    except OSError as exc:
        raise UserError(f"--key-file: cannot read '{path}': {exc.strerror}") from None
    if not key:
        raise UserError(f"--key-file: '{path}' is empty")
    return key


def _client_options(args: argparse.Namespace) -> dict[str, Any]:
    u = _units()
    opts: dict[str, Any] = {
        "copies": args.copies,
        "threshold": u.parse_size(args.threshold, "--threshold"),
        "mode": args.mode,
        "key": _key(args),
        "bind_ip": getattr(args, "bind", None),
        "flow_timeout": u.parse_duration(args.flow_timeout, "--flow-timeout"),
        "probe_ttls": _int_list(args.probe_ttls, "--probe-ttls"),
        "mptcp": _check_mptcp(args),
    }
    if args.copies < 1 or args.copies > 16:
        raise UserError(f"--copies: must be between 1 and 16, got {args.copies}")
    if args.overhead_budget is not None:
        if not 0 <= args.overhead_budget <= 1:
            raise UserError(f"--overhead-budget: must be in [0, 1], got {args.overhead_budget}")
        opts["overhead_budget"] = args.overhead_budget
    return opts


def _check_mptcp(args: argparse.Namespace) -> bool:
    """``--mptcp``: refused with one line when this namespace cannot open MPTCP sockets."""
    if not getattr(args, "mptcp", False):
        return False
    from repflow.net import mptcp_error

    err = mptcp_error()
    if err is not None:
        raise UserError(f"--mptcp: {err}")
    return True


def _add_mptcp_flag(p: argparse.ArgumentParser, whose: str) -> None:
    p.add_argument(
        "--mptcp",
        action="store_true",
        help=f"open {whose} as Multipath TCP sockets (IPPROTO_MPTCP): the kernel's path "
        "manager adds subflows as its `ip mptcp` endpoints and limits allow",
    )


def _int_list(text: str, field: str) -> list[int]:
    try:
        vals = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{field}: expected comma-separated integers, got {text!r}") from None
    if not vals:
        raise UserError(f"{field}: expected comma-separated integers, got {text!r}")
    return vals


def _add_client_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scheme", choices=SCHEMES, default="repflow", help="default: repflow")
    p.add_argument("--copies", type=int, default=2, help="copies per short flow (default 2)")
    p.add_argument(
        "--mode",
        choices=("per-flow", "pooled"),
        default="per-flow",
        help="a new connection per copy (default) or persistent pooled connections",
    )
    p.add_argument(
        "--threshold", default="100KB", help="flows up to this size are replicated (default 100KB)"
    )
    p.add_argument(
        "--overhead-budget",
        type=float,
        default=None,
        metavar="F",
        help="make no copies while extra bytes exceed this fraction of all bytes "
        "over the last second",
    )
    p.add_argument("--probe-ttls", default="2,3", help="TTLs of SmartRep path probes (default 2,3)")
    p.add_argument("--flow-timeout", default="30s", help="give up on a flow after this long")
    p.add_argument("--key-file", default=None, help="pre-shared key file (HMAC tags)")
    p.add_argument("--bind", default=None, metavar="ADDR", help="local address to send from")
    p.add_argument(
        "--link-rate",
        default="1Gbps",
        help="local link rate, for ideal FCT and load (default 1Gbps)",
    )
    p.add_argument("--base-rtt", default=None,
                   help="added to ideal FCT (size·8/link rate); default 0")  # fmt: skip
    _add_mptcp_flag(p, "every connection")


def _add_warm_flag(p: argparse.ArgumentParser, whom: str) -> None:
    p.add_argument(
        "--warm",
        action="store_true",
        help=f"smartrep: probe the paths to {whom} before the first flow (SmartRep's probe "
        "database), so no flow waits for probes; the warm-up is printed and recorded",
    )


def _warm(client: Any, args: argparse.Namespace, dsts: list[str], copies: int) -> dict[str, Any]:
    """``--warm``: probes the paths to every destination; returns what the warm-up learnt."""
    if args.scheme != "smartrep":
        raise UserError(f"--warm: only the smartrep scheme probes paths, not {args.scheme}")
    t0 = time.monotonic()
    known = [client.warm_paths(d, copies) for d in dsts]
    return {"copies": copies, "paths": known, "probes": client.counters()["probes"],
            "seconds": time.monotonic() - t0}  # fmt: skip


def _add_verbose_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="library log on stderr: warnings by default, -v info, -vv debug, -vvv trace "
        "(RUST_LOG, e.g. repflow_net=debug, overrides)",
    )


def add_stats_flags(p: argparse.ArgumentParser) -> None:
    """``--stats`` and ``--duration`` of a command that runs until stopped (``serve``, the
    proxy sidecars)."""
    p.add_argument(
        "--stats",
        default=None,
        metavar="T",
        help="print a line of counters every T (e.g. 10s); default: only at the end",
    )
    p.add_argument("--duration", default=None, help="stop after this long (default: never)")


#: Memory bounds of a server's call responses: (flag, keyword, default, what it bounds).
RESPONSE_MEMORY_FLAGS = (
    (
        "--response-cache-bytes",
        "response_cache_bytes",
        "64MiB",
        "call responses held to answer late copies, for all senders together; past it the "
        "sender holding the most loses its oldest, and a late copy is answered 'executed, "
        "response no longer held' (0B: hold none)",
    ),
    (
        "--response-cache-bytes-per-peer",
        "response_cache_bytes_per_peer",
        "16MiB",
        "of --response-cache-bytes, held at most for one sender address (a larger "
        "response is answered but not held)",
    ),
    (
        "--response-queue-bytes",
        "response_queue_bytes",
        "64MiB",
        "call responses queued for the connections' writers, all connections together "
        "(plus one response): a peer that does not read holds no more",
    ),
)

#: Largest byte limit the size options accept (1 TiB).
MAX_BYTE_LIMIT = 2**40


def parse_byte_limit(text: str, flag: str, lo: int = 0, hi: int = MAX_BYTE_LIMIT) -> int:
    """A size option (``64MiB``, ``0B``; a bare number is refused) between ``lo`` and ``hi``
    bytes, or a :class:`UserError` naming ``flag``."""
    from repflow import units

    n = int(units.parse_size(text, flag))
    if not lo <= n <= hi:
        raise UserError(
            f"{flag}: must be between {_size_text(lo)} and {_size_text(hi)}, got {text!r}"
        )
    return n


def _size_text(n: int) -> str:
    """``n`` bytes in the largest binary unit the size options accept that divides it."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n}B"


def add_response_memory_flags(p: argparse.ArgumentParser) -> None:
    """The server's response memory bounds (``serve``, ``proxy server``); docs/library.md."""
    for flag, _, default, what in RESPONSE_MEMORY_FLAGS:
        p.add_argument(flag, default=default, metavar="SIZE", help=f"{what} (default {default})")


def response_memory_options(args: argparse.Namespace) -> dict[str, int]:
    """The values of :func:`add_response_memory_flags`, checked, as the bindings' keywords."""
    return {
        key: parse_byte_limit(getattr(args, key), flag) for flag, key, _, _ in RESPONSE_MEMORY_FLAGS
    }


def _init_logging(args: argparse.Namespace) -> None:
    from repflow.net import init_logging

    init_logging(getattr(args, "verbose", 0), os.environ.get("RUST_LOG"))


def _raise_fd_limit(need_connections: int) -> None:
    """Raises the soft open-file limit towards what ``--max-connections`` needs (up to the hard
    limit); the server warns in one line at start if it is still short."""
    try:
        import resource
    except ImportError:  # not on every platform
        return
    need = need_connections + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass


def _stats_line(c: dict[str, Any]) -> str:
    """The server's counters as one line: what was delivered, refused and why."""
    return (
        f"repflow serve: {c['flows_delivered']} flows, {c['calls_delivered']} calls delivered; "
        f"{c['duplicates']} duplicate copies discarded ({c['repeated_copies']} repeats); "
        f"{c['connections']} connections; refused: {c['connections_rejected']} at the "
        f"connection limit, {c['connections_rejected_source']} at the per-source share, "
        f"{c['connections_evicted']} evicted to make room, {c['accept_errors']} accept errors, "
        f"{c['malformed']} malformed, {c['auth_failures']} unauthenticated, "
        f"{c['timeouts']} timed out, {c['frame_timeouts']} past the frame deadline, "
        f"{c['write_timeouts']} not reading, {c['digest_mismatches']} with mismatched content, "
        f"{c['replays_refused']} possible replays; {c['responses_dropped']} responses dropped; "
        f"dedup {c['dedup_entries']} ids ({c['dedup_evictions']} forgotten early, "
        f"{c['calls_expired']} unanswered calls expired); receive buffers "
        f"{c['buffered_bytes']} B (peak {c['buffered_peak']} B)"
    )


def register(sub: argparse._SubParsersAction) -> None:
    """Adds ``serve``, ``send`` and ``load``."""
    p = sub.add_parser(
        "serve",
        help="receive RepFlow flows until SIGINT/SIGTERM",
        description="Receive flows on PORT..PORT+N-1 (copies use port+i); flows "
        "are counted and dropped, calls answered with their payload.",
    )
    p.add_argument("--listen", required=True, metavar="ADDR:PORT")
    p.add_argument("--ports", type=int, default=4, help="number of consecutive ports (default 4)")
    p.add_argument("--key-file", default=None, help="pre-shared key file: require HMAC tags")
    p.add_argument(
        "--max-flow-size",
        default="1MiB",
        help="largest accepted flow; KB/MB are decimal, KiB/MiB binary (default 1MiB = "
        "1,048,576 B: short flows, with room for longer ones; raise it for bulk flows)",
    )
    p.add_argument("--max-connections", type=int, default=4096)
    p.add_argument(
        "--max-per-source",
        type=int,
        default=None,
        help="connections one source address may hold (default: a quarter of --max-connections)",
    )
    p.add_argument(
        "--evict-after",
        default="0s",
        metavar="T",
        help="when full, a new connection takes the slot of the connection that has gone "
        "longest without a complete frame, if at least T (default 0s)",
    )
    p.add_argument(
        "--ack-after",
        choices=("queue", "consume", "handled"),
        default="queue",
        help="when a flow is acknowledged: queue = received and queued for the application "
        "(default), consume = taken by the application, handled = the application is done "
        "with it; see docs/library.md",
    )
    add_response_memory_flags(p)
    add_stats_flags(p)
    _add_mptcp_flag(p, "the listening sockets")
    _add_verbose_flag(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser(
        "send",
        help="send N flows of one size and print their FCTs",
        description="Send --count flows of --size bytes one after another.",
    )
    p.add_argument("--to", required=True, metavar="ADDR:PORT")
    p.add_argument("--size", default="20KB", help="flow size (default 20KB)")
    p.add_argument("--count", type=int, default=100, help="number of flows (default 100)")
    p.add_argument("--interval", default="0s", help="pause between flows (default 0s)")
    p.add_argument("--out", default=None, metavar="DIR", help="write a run directory")
    _add_warm_flag(p, "--to")
    _add_client_flags(p)
    _add_verbose_flag(p)
    p.set_defaults(func=cmd_send)

    p = sub.add_parser(
        "load",
        help="open-loop Poisson traffic to peers; writes a run directory",
        description="Poisson arrivals at --load × --link-rate, sizes from the "
        "workload CDF, uniformly random peers.",
    )
    p.add_argument(
        "--peers",
        required=True,
        help="ADDR:PORT,ADDR:PORT,... or a file with one ADDR:PORT per line",
    )
    p.add_argument("--workload", default="websearch", help="built-in name or CDF file")
    p.add_argument("--load", type=float, required=True, help="offered load in (0, 1]")
    p.add_argument("--duration", default="30s", help="arrivals during this long (default 30s)")
    p.add_argument(
        "--drain",
        default="30s",
        help="then wait at most this long for flows in progress (default 30s)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--host-index", type=int, default=0, help="this host's index (src column)")
    p.add_argument(
        "--peer-indices",
        default=None,
        help="host index of each peer (dst column); default 0 = unknown",
    )
    p.add_argument(
        "--smartrep-eps",
        type=float,
        default=0.03,
        help="SmartRep byte budget ε for RepNumAssign (default 0.03)",
    )
    p.add_argument(
        "--smartrep-max-copies",
        type=int,
        default=4,
        help="SmartRep copies cap = equal-cost paths (default 4)",
    )
    p.add_argument("--force", action="store_true", help="replace a non-empty --out")
    _add_warm_flag(p, "every peer")
    _add_client_flags(p)
    _add_verbose_flag(p)
    p.set_defaults(func=cmd_load)  # fmt: skip


class _Stop:
    def __init__(self) -> None:
        self.flag = False

    def __call__(self, signum: int, frame: Any) -> None:
        self.flag = True


def cmd_serve(args: argparse.Namespace) -> int:
    from repflow.net import Server

    u = _units()
    if not 1 <= args.ports <= 64:
        raise UserError(f"--ports: must be between 1 and 64, got {args.ports}")
    max_size = u.parse_size(args.max_flow_size, "--max-flow-size")
    if not 0 < max_size < 2**32:
        raise UserError("--max-flow-size: must be between 1 B and 4 GB")
    if args.max_connections < 1:
        raise UserError(f"--max-connections: must be at least 1, got {args.max_connections}")
    per_source = args.max_per_source
    if per_source is not None and per_source < 1:
        raise UserError(f"--max-per-source: must be at least 1, got {per_source}")
    memory = response_memory_options(args)
    every = None if args.stats is None else u.parse_duration(args.stats, "--stats")
    evict_after = (
        0.0
        if args.evict_after.strip() in ("0", "0s", "0ms")
        else u.parse_duration(args.evict_after, "--evict-after")
    )
    _raise_fd_limit(args.max_connections + args.ports)
    until = None if args.duration is None else u.parse_duration(args.duration) + time.monotonic()
    mptcp = _check_mptcp(args)
    _init_logging(args)
    stop = _Stop()
    old = signal.signal(signal.SIGTERM, stop)
    try:
        srv = Server(args.listen, args.ports, sink=True, key=_key(args),
                     max_flow_size=int(max_size), max_connections=args.max_connections,
                     max_connections_per_source=per_source, mptcp=mptcp,
                     ack_after=args.ack_after, evict_after=evict_after,
                     **memory)  # fmt: skip
        print(f"repflow serve: listening on {', '.join(srv.addrs)}", flush=True)
        next_stats = None if every is None else time.monotonic() + every
        try:
            while not stop.flag and (until is None or time.monotonic() < until):
                time.sleep(0.2)
                if next_stats is not None and every is not None and time.monotonic() >= next_stats:
                    print(_stats_line(srv.counters()), flush=True)
                    next_stats += every
        except KeyboardInterrupt:
            pass
        c = srv.counters()
        srv.close()
    finally:
        signal.signal(signal.SIGTERM, old)
    print(_stats_line(c), flush=True)
    return 0


def _fallback_text(fb: Any) -> str:
    """A report's ``fallback`` (``"no_probe_answers"`` or ``{"fewer_paths": {...}}``) as text."""
    if isinstance(fb, str):
        try:
            fb = json.loads(fb)
        except ValueError:
            return fb
    return fb if isinstance(fb, str) else json.dumps(fb, sort_keys=True)


def _make_client(args: argparse.Namespace, copies_table: tuple[int, list[int]] | None = None):
    from repflow.net import Client

    opts = _client_options(args)
    if copies_table is not None:
        opts["copies_table"] = copies_table
    return Client(args.scheme, **opts)


def _fmt_s(x: float) -> str:
    if not math.isfinite(x):
        return "nan"
    return f"{x * 1e6:.0f} us" if x < 1e-3 else f"{x * 1e3:.2f} ms"


def cmd_send(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    u = _units()
    size = u.parse_size(args.size)
    if size < 0 or size >= 2**32:
        raise UserError(f"--size: must be below 4 GB, got {args.size!r}")
    if not 1 <= args.count <= 10_000_000:
        raise UserError(f"--count: must be between 1 and 10000000, got {args.count}")
    interval = u.parse_duration(args.interval, "--interval", zero=True)
    rate = u.parse_rate(args.link_rate, like="1Gbps")
    base_rtt = 0.0 if args.base_rtt is None else u.parse_duration(args.base_rtt, "--base-rtt")
    if args.out:
        from repflow.cli.outdir import check_writable
        from repflow.records import check_out_dir

        check_writable(check_out_dir(args.out))  # before any flow is sent
    _init_logging(args)
    client = _make_client(args)
    warm_note = None
    if args.warm:
        w = _warm(client, args, [args.to], args.copies)
        warm_note = (
            f"  warm-up: {w['paths'][0]} distinct paths known after "
            f"{w['probes']} probes in {_fmt_s(w['seconds'])}"
        )
    rows = []
    first_error = None
    probed = 0
    t0 = time.monotonic()
    for i in range(args.count):
        start = time.monotonic() - t0
        try:
            r = client.send(args.to, size=size)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        except ConnectionError as exc:
            first_error = first_error or str(exc)
            rows.append((i, start, math.nan, 0, -1, 0, 0, None))
        else:
            fb = r.get("fallback")
            routes = r.get("routes") or []
            if len(routes) > 1 and all(x.get("src_port") for x in routes):
                probed += 1
            note = None if fb is None else _fallback_text(fb)
            rows.append(
                (i, start, r["fct"], r["copies"], r["winner"], r["bytes_sent"],
                 r["bytes_wasted"], note)
            )  # fmt: skip
        if interval:
            time.sleep(interval)
    fct = np.array([r[2] for r in rows], dtype=float)
    ok = fct[np.isfinite(fct)]
    counters = client.counters()
    sent = sum(r[5] for r in rows)
    wasted = sum(r[6] for r in rows)
    wins = sum(1 for r in rows if r[4] > 0)
    fallbacks = {r[7] for r in rows if r[7]}
    print(f"repflow send: {args.count} flows of {size} B to {args.to}, scheme {args.scheme} "
          f"({args.mode}{', MPTCP' if args.mptcp else ''})")  # fmt: skip
    if len(ok):
        p50, p99 = np.percentile(ok, 50), np.percentile(ok, 99)
        print(
            f"  FCT mean {_fmt_s(float(ok.mean()))}  p50 {_fmt_s(float(p50))}"
            f"  p99 {_fmt_s(float(p99))}  max {_fmt_s(float(ok.max()))}"
        )
    print(f"  finished {len(ok)}/{args.count}; copies sent {counters['copies_sent']}, "
          f"won by a replica {wins}, cancelled {counters['copies_cancelled']}, "
          f"failed {counters['copies_failed']}")  # fmt: skip
    app = size * len(ok)
    print(f"  bytes sent {sent} (application {app}), wasted by losing copies {wasted}"
          + (f" ({wasted / sent:.1%})" if sent else ""))  # fmt: skip
    if warm_note:
        print(warm_note)
    if args.scheme == "smartrep":
        print(
            f"  SmartRep: {probed} flows sent from probed source ports on distinct paths "
            f"({counters['probes']} probes)"
        )
    for fb in sorted(fallbacks):
        print(f"  note: SmartRep path choice fell back to RepFlow ports: {fb}")
    if first_error:
        print(f"  first error: {first_error}")
    if args.out:
        from repflow.api import RECORD_COLUMNS, unmeasured_tcp_counters
        from repflow.records import write_run

        start = np.array([r[1] for r in rows])
        ideal = size * 8.0 / rate + base_rtt
        flows = pd.DataFrame({
            "id": np.arange(len(rows), dtype=np.int64), "src": 0, "dst": 0, "size": size,
            "start": start, "finish": start + fct, "fct": fct, "ideal_fct": ideal,
            "slowdown": fct / ideal, "copies": [r[3] for r in rows],
            "winner": [r[4] for r in rows], "bytes_sent": [r[5] for r in rows],
            **unmeasured_tcp_counters(len(rows)),
        })[list(RECORD_COLUMNS)]  # fmt: skip
        extra = sum(size * max(0, r[3] - 1) for r in rows)
        meta = _meta(args, "send", {"size": size, "count": args.count, "to": args.to,
                                        "warm": args.warm},
                     counters, flows, size * len(rows), extra)  # fmt: skip
        path = write_run(args.out, flows, meta)
        print(f"  wrote {path}")
    return 0 if len(ok) == args.count else 1


def _meta(
    args: argparse.Namespace,
    source: str,
    extra_config: dict[str, Any],
    counters: dict[str, Any],
    flows: pd.DataFrame,
    flow_bytes: int,
    extra_copy_bytes: int,
) -> dict[str, Any]:
    from repflow.net import summarize
    from repflow.version import __version__

    counters = {
        **counters,
        "flow_bytes": int(flow_bytes),
        "extra_copy_bytes": int(extra_copy_bytes),
        "extra_copy_bytes_sent": int(counters.get("bytes_wasted", 0)),
    }
    config = {
        "scheme": {"name": args.scheme, "copies": args.copies, "mode": args.mode,
                   "threshold": args.threshold, "overhead_budget": args.overhead_budget,
                   "mptcp": bool(getattr(args, "mptcp", False))},
        "link_rate": args.link_rate,
        **extra_config,
    }  # fmt: skip
    return {
        "version": __version__,
        "source": f"repflow {source}",
        "config": config,
        "counters": counters,
        "summary": summarize(flows, counters),
    }


def _read_peers(text: str) -> list[str]:
    p = Path(text)
    if "," not in text and p.is_file():
        peers = [ln.strip() for ln in p.read_text().splitlines()]
        peers = [x for x in peers if x and not x.startswith("#")]
    else:
        peers = [x.strip() for x in text.split(",") if x.strip()]
    for x in peers:
        host, _, port = x.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UserError(f"--peers: {x!r} is not ADDR:PORT (e.g. 10.0.0.2:7000)")
    if not peers:
        raise UserError("--peers: give at least one ADDR:PORT")
    return peers


def _workload(name: str) -> tuple[str, dict[str, Any]]:
    from repflow import _core

    text = _core.workload_text(name)
    if text is None:
        p = Path(name)
        if not p.is_file():
            names = ", ".join(n for n, _ in _core.builtin_workloads())
            raise UserError(f"--workload: {name!r} is neither a built-in ({names}) nor a file")
        text = p.read_text()
    try:
        return text, _core.parse_cdf(text)
    except _core.ConfigError as exc:
        raise UserError(f"--workload {name}: {exc}") from None


def cmd_load(args: argparse.Namespace) -> int:
    import numpy as np

    from repflow import _core
    from repflow.net import load_records, make_schedule
    from repflow.records import check_out_dir, write_run

    u = _units()
    if not 0 < args.load <= 1:
        raise UserError(f"--load: must be in (0, 1], got {args.load}")
    peers = _read_peers(args.peers)
    peer_idx = [0] * len(peers)
    if args.peer_indices:
        peer_idx = _int_list(args.peer_indices, "--peer-indices")
        if len(peer_idx) != len(peers):
            raise UserError(f"--peer-indices: {len(peer_idx)} indices for {len(peers)} peers")
    rate = u.parse_rate(args.link_rate, like="1Gbps")
    duration = u.parse_duration(args.duration)
    drain = u.parse_duration(args.drain, "--drain", zero=True)
    base_rtt = 0.0 if args.base_rtt is None else u.parse_duration(args.base_rtt, "--base-rtt")
    from repflow.cli.outdir import check_writable

    check_writable(check_out_dir(args.out, args.force))  # before any traffic
    _, cdf = _workload(args.workload)
    sched = make_schedule(cdf, load=args.load, link_rate_bps=rate, duration=duration,
                          peers=len(peers), seed=args.seed)  # fmt: skip
    table = None
    if args.scheme == "smartrep":
        if not 0 < args.smartrep_eps < 1:
            raise UserError(f"--smartrep-eps: must be in (0, 1), got {args.smartrep_eps}")
        if not 1 <= args.smartrep_max_copies <= 16:
            raise UserError("--smartrep-max-copies: must be between 1 and 16")
        # RepNumAssign over the size histogram of this run's flows (the "historical data").
        table = _core.smartrep_table(
            [int(s) for s in sched.size], eps=args.smartrep_eps, p=0.1,
            max_extra=args.smartrep_max_copies - 1,
            threshold=u.parse_size(args.threshold, "--threshold"),
        )  # fmt: skip
        table = (int(table[0]), [int(x) for x in table[1]])
    _init_logging(args)
    client = _make_client(args, table)
    warm = None
    if args.warm:
        want = max([args.copies] + [1 + x for x in (table[1] if table else [])])
        warm = _warm(client, args, peers, want)
        print(f"  warm-up: {warm['probes']} probes to {len(peers)} peers in "
              f"{_fmt_s(warm['seconds'])}; distinct paths known per peer: "
              f"min {min(warm['paths'])}, max {max(warm['paths'])}", flush=True)  # fmt: skip
    before_start = getattr(args, "before_start", None)
    if before_start is not None:
        before_start()  # e.g. the testbed's start barrier, after the warm-up
    print(f"repflow load: {len(sched.at)} flows over {duration:g} s to {len(peers)} peers "
          f"({sched.rate:.2f}/s, scheme {args.scheme}, {args.mode}"
          f"{', MPTCP' if args.mptcp else ''})", flush=True)  # fmt: skip
    t0 = time.monotonic()
    raw = client.run_load(sched.at, [peers[i] for i in sched.peer], sched.size, duration, drain)
    wall = time.monotonic() - t0
    flows = load_records(raw, sched, host_index=args.host_index, peer_indices=peer_idx,
                         link_rate_bps=rate, base_rtt=base_rtt)  # fmt: skip
    counters = client.counters()
    started = np.asarray(raw["index"], dtype=np.int64)
    copies = np.asarray(raw["copies"], dtype=np.int64)
    sizes = sched.size[started]
    flow_bytes = int(sizes.sum())
    extra = int((sizes * np.maximum(copies - 1, 0)).sum())
    errors = [e for e in raw["error"] if e]
    fallbacks = sorted({_fallback_text(f) for f in raw["fallback"] if f})
    counters["flows_unfinished_or_failed"] = len(errors)
    meta = _meta(
        args, "load",
        {"workload": {"cdf": args.workload, "load": args.load}, "seed": args.seed,
         "duration": duration, "drain": drain, "link_rate_bps": rate, "peers": peers,
         "host_index": args.host_index, "peer_indices": peer_idx,
         "smartrep_table": None if table is None else {"unit_bytes": table[0], "extra": table[1]},
         "path_fallbacks": fallbacks, "wall_time": wall, "warm": warm},
        counters, flows, flow_bytes, extra,
    )  # fmt: skip
    path = write_run(args.out, flows, meta, force=args.force)
    _print_load_summary(meta, flows, errors, fallbacks, path)
    return 0


def _print_load_summary(
    meta: dict[str, Any], flows: pd.DataFrame, errors: list[str], fallbacks: list[str], path: Path
) -> None:
    s = meta["summary"]
    c = meta["counters"]
    print(f"  {len(flows)} flows started, {len(flows) - s['unfinished']} finished; "
          f"copies sent {c['copies_sent']}, cancelled {c['copies_cancelled']}, "
          f"bytes wasted {c['bytes_wasted']}, overhead {s['overhead']:.2%}")  # fmt: skip
    for b in s["bins"]:
        if b["count"]:
            print(f"  {b['bin']:>14}: n={b['count']:<6} FCT mean {_fmt_s(b['fct_mean'])}"
                  f"  p99 {_fmt_s(b['fct_p99'])}")  # fmt: skip
    for f in fallbacks:
        print(f"  note: SmartRep path choice fell back to RepFlow ports: {f}")
    if errors:
        print(f"  {len(errors)} flows unfinished or failed; first: {errors[0]}")
    print(f"  wrote {path}")
