"""Python front of ``repflow-net``, the real-socket RepFlow/SmartRep transport.

- :class:`Client` / :class:`Server`: blocking calls (the GIL is released while waiting, Ctrl-C
  works) with ``a``-prefixed asyncio variants that run the blocking call in a worker thread.
- :func:`make_schedule`, :func:`load_records`, :func:`summarize`: the open-loop generator of
  ``repflow load`` (Poisson arrivals, sizes from a workload CDF) and its records in the
  simulator's run format.

See ``docs/library.md``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from repflow.errors import UserError


def _core() -> Any:
    from repflow import _core

    if not hasattr(_core, "NetClient"):
        raise UserError(
            "this build of repflow._core lacks the network library; rebuild it with "
            "`maturin develop --release` (or `pip install -e .`)"
        )
    return _core


def _user_error(exc: Exception) -> UserError:
    return UserError(str(exc))


@dataclass
class Incoming:
    """A flow or call received by a :class:`Server` (each delivered exactly once)."""

    token: int
    kind: str  # "flow" or "call"
    flow_id: int
    peer: str
    copy: int
    data: bytes


class Server:
    """A RepFlow server on ``listen``'s port and the ``ports - 1`` following ones.

    With ``sink=True`` flows are dropped and calls echoed in the background (what
    ``repflow serve`` does); otherwise take them with :meth:`recv`.
    """

    def __init__(self, listen: str, ports: int = 4, *, sink: bool = False, **limits: Any):
        try:
            self._s = _core().NetServer(listen, ports, sink=sink, **limits)
        except (ValueError, ConnectionError) as exc:
            raise _user_error(exc) from None

    @property
    def addrs(self) -> list[str]:
        """Bound ``ADDR:PORT`` strings."""
        return list(self._s.addrs())

    def counters(self) -> dict[str, int]:
        """Server counters (connections, flows delivered, duplicates, rejections, ...)."""
        return json.loads(self._s.counters())

    def recv(self, timeout: float = 1.0) -> Incoming | None:
        """The next flow or call, or ``None`` after ``timeout`` seconds."""
        t = self._s.recv(timeout)
        return None if t is None else Incoming(*t)

    def respond(self, incoming: Incoming, data: bytes) -> None:
        """Answers a call."""
        self._s.respond(incoming.token, data)

    async def arecv(self, timeout: float = 1.0) -> Incoming | None:
        """:meth:`recv` for asyncio (runs in a worker thread)."""
        return await asyncio.to_thread(self.recv, timeout)

    def close(self) -> None:
        """Stops serving and closes every connection."""
        self._s.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Client:
    """A RepFlow/SmartRep client (see ``docs/library.md`` for every keyword)."""

    def __init__(self, scheme: str = "repflow", **options: Any):
        try:
            self._c = _core().NetClient(scheme, **options)
        except ValueError as exc:
            raise _user_error(exc) from None

    def send(
        self, addr: str, data: bytes | None = None, *, size: int | None = None
    ) -> dict[str, Any]:
        """Sends one flow; returns its report (``fct`` in seconds, ``copies``, ``winner``,
        ``bytes_sent``, ``bytes_wasted``, ``cancelled``, ``failed``, ``fallback``, ...).

        Raises :class:`ConnectionError` naming each copy's failure when every copy fails.
        """
        report = json.loads(self._c.send(addr, data, size))
        return _seconds(report)

    def warm_paths(self, addr: str, copies: int = 2) -> int:
        """SmartRep: probes the paths to ``addr`` before any flow is sent, until ``copies``
        pairwise different paths are known (or the probe budget is spent); returns how many
        are known (0 for ``tcp`` and ``repflow``, which do not choose ports by path)."""
        if not 1 <= copies <= 16:
            raise UserError(f"copies: must be between 1 and 16, got {copies}")
        try:
            return int(self._c.warm_paths(addr, copies))
        except ValueError as exc:
            raise _user_error(exc) from None

    def call(self, addr: str, data: bytes) -> tuple[bytes, dict[str, Any]]:
        """Sends a request; returns the first response and the report."""
        body, report = self._c.call(addr, data)
        return body, _seconds(json.loads(report))

    async def asend(
        self, addr: str, data: bytes | None = None, *, size: int | None = None
    ) -> dict[str, Any]:
        """:meth:`send` for asyncio (runs in a worker thread)."""
        return await asyncio.to_thread(self.send, addr, data, size=size)

    async def acall(self, addr: str, data: bytes) -> tuple[bytes, dict[str, Any]]:
        """:meth:`call` for asyncio (runs in a worker thread)."""
        return await asyncio.to_thread(self.call, addr, data)

    def counters(self) -> dict[str, int]:
        """Client counters (copies sent, won by a replica, cancelled, bytes wasted, ...)."""
        return json.loads(self._c.counters())

    def run_load(
        self,
        at: Sequence[float],
        dsts: Sequence[str],
        sizes: Sequence[int],
        duration: float,
        drain: float,
    ) -> dict[str, list]:
        """Replays a schedule (see ``repflow._core.NetClient.run_load``)."""
        return self._c.run_load(
            [float(x) for x in at], list(dsts), [int(s) for s in sizes], duration, drain
        )


def mptcp_error() -> str | None:
    """``None`` when this network namespace can open Multipath TCP sockets, else one line saying
    why not (the kernel lacks MPTCP, or the sysctl ``net.mptcp.enabled`` is 0)."""
    return _core().mptcp_error()


def init_logging(verbosity: int = 0, env: str | None = None) -> bool:
    """Sends the library's ``tracing`` events to standard error: warnings (refused
    connections and frames, rate-limited) by default, ``info`` with ``verbosity`` 1, ``debug``
    with 2, ``trace`` with 3; ``env`` (the ``RUST_LOG`` value, e.g. ``repflow_net=debug``)
    replaces that filter when set. Returns ``False`` if a subscriber was already installed.
    """
    spec = env if env else ["warn", "info", "debug", "trace"][max(0, min(verbosity, 3))]
    try:
        return bool(_core().NetServer.init_logging(spec))
    except ValueError as exc:
        raise UserError(f"RUST_LOG: {exc}") from None


def _seconds(report: dict[str, Any]) -> dict[str, Any]:
    fct = report.get("fct")
    if isinstance(fct, Mapping):  # serde's Duration: {"secs", "nanos"}
        report["fct"] = fct["secs"] + fct["nanos"] * 1e-9
    return report


# ------------------------------------------------------------------ open-loop generator
def _columns(batch: Any) -> dict[str, np.ndarray]:
    """The columns of an Arrow batch from ``repflow._core`` as numpy arrays."""
    import pyarrow as pa

    rb = pa.record_batch(batch)
    return {name: rb.column(name).to_numpy() for name in rb.schema.names}


def sample_sizes(cdf: Mapping[str, Any], n: int, *, seed: int) -> np.ndarray:
    """``n`` flow sizes (bytes) drawn from ``cdf`` (``repflow._core.parse_cdf``'s dict) by the
    simulator's own sampler (linear interpolation between CDF points, rounded up to a whole
    unit, at least one unit). Same ``seed`` → same sizes."""
    from repflow import _core as core

    try:
        batch = core.sample_sizes(list(cdf["points"]), str(cdf["unit"]), int(n), int(seed))
    except core.ConfigError as exc:
        raise UserError(f"cdf: {exc}") from None
    return _columns(batch)["size"]


@dataclass
class Schedule:
    """Flows of one host's open-loop run, sorted by start time."""

    at: np.ndarray  # seconds from the start
    peer: np.ndarray  # index into the peer list
    size: np.ndarray  # bytes
    rate: float  # arrivals per second


def make_schedule(
    cdf: Mapping[str, Any],
    *,
    load: float,
    link_rate_bps: float,
    duration: float,
    peers: int,
    seed: int,
) -> Schedule:
    """Poisson arrivals at ``load`` × the host link rate, sizes from ``cdf``, destinations
    uniform over ``peers``. Same arguments → same schedule.

    The schedule is drawn by the simulator's arrival process
    (``repflow_sim::workload::host_schedule``): a simulated incast onto one host with the same
    seed, CDF and flow-byte rate has the same arrival times and sizes.
    """
    from repflow import _core as core

    if peers < 1:
        raise UserError("--peers: give at least one ADDR:PORT")
    try:
        batch = core.host_schedule(list(cdf["points"]), str(cdf["unit"]), float(load),
                                   float(link_rate_bps), float(duration), int(peers),
                                   int(seed))  # fmt: skip
    except core.ConfigError as exc:
        raise UserError(f"load schedule: {exc}") from None
    cols = _columns(batch)
    rate = load * link_rate_bps / 8.0 / float(cdf["mean_bytes"])
    return Schedule(at=cols["at"], peer=cols["peer"], size=cols["size"], rate=rate)


def load_records(
    raw: Mapping[str, Sequence[Any]],
    sched: Schedule,
    *,
    host_index: int,
    peer_indices: Sequence[int],
    link_rate_bps: float,
    base_rtt: float = 0.0,
) -> pd.DataFrame:
    """Turns ``Client.run_load`` output into records with the simulator's columns.

    ``ideal_fct = size·8 / link_rate + base_rtt``; the TCP counter columns (retransmissions,
    timeouts, …) are −1 (not measured on real sockets); ``src``/``dst`` are host indices
    (0 when unknown).
    """
    from repflow.api import RECORD_COLUMNS, unmeasured_tcp_counters

    idx = np.asarray(raw["index"], dtype=np.int64)
    size = sched.size[idx]
    start = np.asarray(raw["start"], dtype=float)
    fct = np.asarray(raw["fct"], dtype=float)
    ideal = size * 8.0 / float(link_rate_bps) + base_rtt
    peers = np.asarray(list(peer_indices) or [0] * (int(sched.peer.max(initial=0)) + 1))
    df = pd.DataFrame(
        {
            "id": idx,
            "src": np.full(len(idx), host_index, dtype=np.int64),
            "dst": peers[sched.peer[idx]].astype(np.int64),
            "size": size.astype(np.int64),
            "start": start,
            "finish": start + fct,
            "fct": fct,
            "ideal_fct": ideal,
            "slowdown": fct / ideal,
            "copies": np.asarray(raw["copies"], dtype=np.int64),
            "winner": np.asarray(raw["winner"], dtype=np.int64),
            "bytes_sent": np.asarray(raw["bytes_sent"], dtype=np.int64),
            **unmeasured_tcp_counters(len(idx)),
        }
    )
    return df[list(RECORD_COLUMNS)]


def _column(df: pd.DataFrame, name: str, dtype: type) -> np.ndarray:
    return np.ascontiguousarray(df[name].to_numpy(dtype=dtype))


def bin_summary(label: str, df: pd.DataFrame) -> dict[str, Any]:
    """FCT and slowdown statistics of the flows in ``df``, with the simulator's keys
    (computed by the simulator's own code, ``repflow_sim::metrics::BinStats``)."""
    from repflow import _core as core
    from repflow.api import normalize_summary

    text = core.bin_stats(label, _column(df, "fct", np.float64),
                          _column(df, "slowdown", np.float64))  # fmt: skip
    return normalize_summary({"bins": [json.loads(text)]})["bins"][0]


def _summary(flows: pd.DataFrame, counters: Mapping[str, Any] | None) -> dict[str, Any]:
    """The simulator's summary (``repflow_sim::metrics::Summary``) of records ``flows``."""
    from repflow import _core as core
    from repflow.api import normalize_summary

    c = counters or {}
    fb = c.get("flow_bytes")
    extra = c.get("extra_copy_bytes")
    try:
        text = core.summarize(
            _column(flows, "size", np.int64), _column(flows, "fct", np.float64),
            _column(flows, "slowdown", np.float64), _column(flows, "copies", np.int64),
            None if fb is None else int(fb), None if extra is None else int(extra),
        )  # fmt: skip
    except ValueError as exc:
        raise UserError(f"flow records: {exc}") from None
    return normalize_summary(json.loads(text))


def size_bins(flows: pd.DataFrame) -> list[dict[str, Any]]:
    """:func:`bin_summary` of the simulator's bins: (0, 100KB], (100KB, 10MB], (10MB, inf), all."""
    return _summary(flows, None)["bins"]


def summarize(flows: pd.DataFrame, counters: Mapping[str, Any]) -> dict[str, Any]:
    """Summary with the simulator's bins and keys, computed by the simulator's code.

    ``overhead`` = extra copy bytes / application bytes (planned copies, as the simulator
    counts it), from ``counters["flow_bytes"]`` and ``counters["extra_copy_bytes"]``; a
    counter that is missing is counted from the records' sizes and copies.
    """
    return _summary(flows, counters)


__all__ = [
    "Client",
    "bin_summary",
    "size_bins",
    "Incoming",
    "Schedule",
    "Server",
    "load_records",
    "make_schedule",
    "sample_sizes",
    "summarize",
]


def proxy_sidecar(side: str, **opts: Any) -> Any:
    """Starts a ``repflow proxy`` sidecar in the background (``side`` is ``"client"`` or
    ``"server"``; options as in ``repflow proxy client|server --help``). The object has
    ``addrs()``, ``counters()`` (JSON text) and ``close()``. Bad options and unusable
    addresses raise :class:`UserError`. See ``docs/proxy.md``."""
    core = _core()
    if not hasattr(core, "ProxySidecar"):
        raise UserError(
            "this build of repflow._core lacks the proxy; rebuild it (`pip install -e .`)"
        )
    try:
        return getattr(core.ProxySidecar, side)(**opts)
    except (ValueError, ConnectionError) as exc:
        raise UserError(str(exc)) from None
