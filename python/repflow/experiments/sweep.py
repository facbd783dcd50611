"""Planning and running a sweep: resolve every grid point, skip what the store holds, run the
rest on an executor with a live progress bar, and store each result as it arrives."""

from __future__ import annotations

import math
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repflow.errors import UserError
from repflow.experiments.executors import Executor, Runner, make_executor, run_point
from repflow.experiments.spec import PLANNED_SCHEMES, SCHEME_AXIS, Spec, set_path
from repflow.experiments.store import PointResult, Store, point_key
from repflow.progress import bar as progress_bar
from repflow.units import bits_per_second, fmt_seconds, seconds

#: Simulator throughput used for estimates before any point of a store has been timed:
#: wall seconds per gigabyte of offered traffic on a 128-host network at load 1, TCP, web
#: search, 1,500-byte packets with an ACK per segment. Fitted 2026-11-26 on 36 points at the
#: RepFlow paper's scale (k = 16, 1 Gb/s, 0.5 s of arrivals; TCP, DCTCP, pFabric × web search,
#: data mining × loads 0.2, 0.5, 0.8 × the `dc` and `ns3-2014` profiles; two workers on this
#: 2-core machine): 0.73 s/GB at 1,024 hosts, brought to 128 by :data:`SIZE_EXPONENT`. See
#: docs/experiments.md ("The estimate") for the fit and its errors. Then 0.59; × 0.89 since
#: workers run with their heap on huge pages (repflow.hugepages): 40 points of the study run
#: both ways in one sitting took 0.89 of the time (2026-11-26). Then × 0.878: web search ×
#: the four TCP-family schemes × eight loads × seed 2 under `ns3-2014` (32 points) measured
#: 0.878 of their estimate after the rings' prefetches (2026-11-26, seventh sitting);
#: pFabric's web-search factor and data mining's cost were raised to keep their estimates
#: (pFabric measured 0.98 of its own beside them; data mining's points were not re-run).
SECONDS_PER_OFFERED_GB = 0.461
#: Schemes that cost more per offered byte than TCP (DCTCP 1.03: its 12 points of the fit
#: against TCP's, run side by side on 2026-11-26 after ECN ports kept their threshold in
#: the port — 1.15 before; MPTCP and MPTCP-L from the 320-host MPTCP-L study, 2.1 and 2.3).
#: pFabric has its own terms (:data:`PFABRIC_COST`). Others count as TCP.
SCHEME_COST = {
    "dctcp": 1.03,
    "repflow-dctcp": 1.03,
    "mptcp": 2.1,
    "mptcp-l": 2.3,
}
#: Cost per offered byte grows with the load (more concurrent flows, longer queues): as
#: load ** LOAD_EXPONENT (same fit).
LOAD_EXPONENT = 0.17
#: pFabric's cost against TCP's at load 1 and its load exponent, by workload (others count as
#: web search): its priority queues lengthen with the load in web search (the queue's search
#: is most of a hop's cost there), while data mining's stay short. Refitted 2026-11-26 (after
#: the packed queue and the completions decided late) on the 12 pFabric points of the fit
#: above (both workloads × loads 0.2, 0.5, 0.8 × both profiles), brought to the TCP
#: constants' sitting by 12 TCP points run beside them (measured 0.94 of their estimate).
#: Then × 0.90 (web search, 3.8 → 3.4) and × 0.87 (data mining, 1.9 → 1.65): pFabric × each
#: workload × eight loads × seed 2 under `ns3-2014` measured that share of their estimates
#: after its ideal FCTs came from one replay per pair of paths and its ports' boxed state was
#: laid out in three lines (2026-11-26, eighth sitting).
PFABRIC_COST = {"websearch": (3.4, 0.57), "datamining": (1.65, 0.0)}
#: Workloads that cost less per offered byte than web search (same fit: data mining's bytes
#: are mostly in a few very large flows, whose packets meet little else).
WORKLOAD_COST = {"datamining": 0.58}
#: Larger networks cost more per byte (a bigger working set): (hosts / 128) ** SIZE_EXPONENT.
#: From `repflow bench --scenario` (2026-11-25, with the drain): k = 16 runs at 0.83–0.92 of
#: k = 8's packet-hops per second, k = 32 at 0.55–0.70.
SIZE_EXPONENT = 0.1
#: The per-byte figures above were measured with 1,500-byte packets (1,460 + 40) and an ACK
#: per segment: the cost follows packets, so smaller segments (ns-3's 536, ns-2's 1,000) cost
#: proportionally more and delayed ACKs (one per two segments) less.
CALIBRATION_PACKET_BYTES = 1500
#: Fixed cost of a point whatever its traffic, seconds: validating and building the network,
#: the records to Arrow, the driver storing them. Was 0.3 (2026-11-27, tiny points of a k = 4
#: fat-tree); refitted 2026-11-29 with the speed probe's factor on the main job's 448 points
#: (its 132 tiny ones — L2DCT, FA-DCTCP, the toy — took 0.04–0.06 s each, the records now
#: going to Arrow without a DataFrame).
POINT_SECONDS = 0.04
#: Fixed cost of a sweep, seconds: starting the workers (a spawned Python importing the
#: package, NumPy, pandas and Arrow: about 1.5 s on this machine) before the first point runs.
START_SECONDS = 1.5


@dataclass
class PlannedPoint:
    """A grid point with its resolved configuration, store key and store status."""

    labels: dict[str, Any]
    config: dict[str, Any]
    key: str
    status: str
    estimate: float


@dataclass
class Plan:
    """What a sweep will do."""

    points: list[PlannedPoint]
    #: Scheme label → why this build cannot run it.
    unavailable: dict[str, str]
    #: Multiplier applied to :data:`SECONDS_PER_OFFERED_GB`: from timings already in the
    #: store, else from this machine's speed now (:func:`machine_factor`).
    calibration: float = 1.0
    #: Where :attr:`calibration` comes from: ``"store"``, ``"probe"`` or ``"model"`` (neither:
    #: the constants as fitted).
    basis: str = "model"

    def todo(self, retry_failed: bool = False) -> list[PlannedPoint]:
        """Points to compute, most expensive first (better packing, honest ETA sooner)."""
        want = {"missing", "failed"} if retry_failed else {"missing"}
        unique: dict[str, PlannedPoint] = {}
        for p in self.points:  # two labels may describe the same simulation
            if p.status in want:
                unique.setdefault(p.key, p)
        return sorted(unique.values(), key=lambda p: -p.estimate)

    def count(self, status: str) -> int:
        """Points with this store status."""
        return sum(1 for p in self.points if p.status == status)


@dataclass
class SweepSummary:
    """The outcome of :func:`run_sweep`."""

    root: Path
    total: int
    reused: int
    computed: int
    failed: list[str] = field(default_factory=list)
    skipped_failed: int = 0
    unavailable: dict[str, str] = field(default_factory=dict)
    wall: float = 0.0
    executor: str = ""

    def line(self) -> str:
        """One-line summary for the terminal."""
        parts = [
            f"{self.total} points",
            f"{self.computed} computed",
            f"{self.reused} already stored",
        ]
        if self.failed:
            parts.append(f"{len(self.failed)} failed")
        if self.skipped_failed:
            parts.append(f"{self.skipped_failed} failed earlier (not retried; --retry-failed)")
        if self.unavailable:
            parts.append(f"schemes not in this build: {', '.join(sorted(self.unavailable))}")
        return f"sweep: {'; '.join(parts)}; {fmt_seconds(self.wall)} wall"


def host_count(resolved: dict[str, Any]) -> int:
    """Hosts of a resolved configuration's topology."""
    t = resolved.get("topology", {})
    kind = t.get("kind")
    if kind == "fat-tree":
        per_edge = t.get("hosts_per_edge") or t["k"] // 2
        hosts = t["k"] * (t["k"] // 2) * per_edge
    elif kind == "leaf-spine":
        hosts = t["leaves"] * t["hosts_per_leaf"]
    elif kind == "star":
        hosts = t["hosts"]
    else:
        hosts = 4
    return int(hosts)


def offered_gigabytes(resolved: dict[str, Any]) -> float:
    """Traffic a configuration offers: hosts × link rate × load × arrival duration."""
    t = resolved.get("topology", {})
    hosts = host_count(resolved)
    w = resolved.get("workload", {})
    try:
        rate = bits_per_second(t.get("link_rate", "1Gbps"))
        dur = seconds(w.get("duration", "50ms"))
    except ValueError:
        return 0.0
    return hosts * rate * float(w.get("load", 0.5)) * dur / 8 / 1e9


def estimate_seconds(resolved: dict[str, Any]) -> float:
    """Rough single-core wall time of one simulation, before calibration."""
    scale = (max(host_count(resolved), 1) / 128) ** SIZE_EXPONENT
    scheme = str((resolved.get("scheme") or {}).get("name"))
    cost = SCHEME_COST.get(scheme, 1.0)
    w = resolved.get("workload") or {}
    cdf = str(w.get("cdf"))
    cost *= WORKLOAD_COST.get(cdf, 1.0)
    try:
        load = min(max(float(w.get("load", 0.5)), 0.01), 1.0)
    except (TypeError, ValueError):
        load = 0.5
    exponent = LOAD_EXPONENT
    if scheme == "pfabric":
        factor, exponent = PFABRIC_COST.get(cdf, PFABRIC_COST["websearch"])
        cost *= factor
    tcp = resolved.get("tcp") or {}
    packet = int(tcp.get("mss", 1460)) + int(tcp.get("header", 40))
    # Hops per data packet: its own and its ACK's (half an ACK with delayed ACKs), against
    # the calibration's one ACK per segment.
    acks = 0.5 if tcp.get("delayed_ack") else 1.0
    per_packet = CALIBRATION_PACKET_BYTES / max(packet, 1) * (1 + acks) / 2
    return (
        offered_gigabytes(resolved)
        * SECONDS_PER_OFFERED_GB
        * scale
        * cost
        * load**exponent
        * per_packet
    )


def _validate(config: dict[str, Any]) -> dict[str, Any]:
    from repflow.api import load_config

    return load_config(config)


def _check(config: dict[str, Any], where: str) -> dict[str, Any]:
    try:
        return _validate(config)
    except UserError as exc:
        raise UserError(f"{where} {exc}") from None


def _planned_scheme(config: dict[str, Any], error: str) -> str | None:
    """The planned-but-absent scheme a validation error is about, if that is all it is."""
    scheme = config.get("scheme")
    name = scheme.get("name") if isinstance(scheme, dict) else None
    if name in PLANNED_SCHEMES and error.startswith("scheme.name: unknown variant"):
        return str(name)
    return None


def check_spec(spec: Spec) -> dict[str, str]:
    """Validates a spec's parts in turn, each as strictly as ``repflow sim``: ``[base]`` alone,
    every value of every grid axis on top of it, every scheme label with its overrides.

    Raises a one-line :class:`UserError` naming the spec file, the table and the field. Returns
    the scheme labels whose scheme this build lacks (:data:`PLANNED_SCHEMES`) → why.
    """
    from repflow.config_io import toml_key_lines
    from repflow.experiments.spec import check_grid_keys, check_scheme_labels

    lines = toml_key_lines(spec.text or "")

    def at(*keys: str) -> str:
        """``FILE:LINE`` of the first of ``keys`` the spec's text assigns (``FILE`` if none)."""
        for key in keys:
            if key in lines:
                return f"{spec.path}:{lines[key]}"
        return str(spec.path)

    def field_of(exc: UserError) -> str:
        return re.split(r"[:\s\[]", str(exc), maxsplit=1)[0]

    from repflow.experiments.spec import with_line

    try:
        check_grid_keys(spec)
    except UserError as exc:
        raise with_line(exc, str(spec.path), spec.text or "") from None
    scheme_in_base = isinstance(spec.base.get("scheme"), dict) and "name" in spec.base["scheme"]
    if not scheme_in_base or spec.base["scheme"]["name"] not in PLANNED_SCHEMES:
        try:
            _validate(_copy(spec.base))
        except UserError as exc:
            field = field_of(exc)
            where = at(f"base.{field}", f"base.{field.rpartition('.')[0]}", "base")
            raise UserError(f"{where}: [base] {exc}") from None
    for axis, values in spec.grid.items():
        if axis == SCHEME_AXIS:
            continue
        for value in values:
            cfg = _copy(spec.base)
            set_path(cfg, axis, value)
            if _planned_scheme(cfg, "scheme.name: unknown variant") is None:
                try:
                    _validate(cfg)
                except UserError as exc:
                    where = at(f"grid.{axis}", "grid")
                    if str(exc).startswith(f"{axis} = "):  # names the value already
                        raise UserError(f"{where}: [grid] {exc}") from None
                    raise UserError(f"{where}: [grid] {axis} = {value!r}: {exc}") from None
    unavailable: dict[str, str] = {}
    for label in spec.grid.get(SCHEME_AXIS, []):
        cfg = _copy(spec.base)
        for path, v in spec.scheme_overrides(label).items():
            set_path(cfg, path, v)
        table = f"[schemes.{label}]" if label in spec.schemes else f"[grid] scheme = {label!r}:"
        try:
            _validate(cfg)
        except UserError as exc:
            planned = _planned_scheme(cfg, str(exc))
            if planned is None:
                field = field_of(exc)
                where = at(f"schemes.{label}.{field}", f"schemes.{label}", "grid.scheme")
                raise UserError(f"{where}: {table} {exc}") from None
            unavailable[label] = f"{PLANNED_SCHEMES[planned]} ({planned}) is not in this build"
    try:
        check_scheme_labels(spec)
    except UserError as exc:
        raise with_line(exc, str(spec.path), spec.text or "") from None
    return unavailable


def plan_sweep(spec: Spec, store: Store, version: str | None = None) -> Plan:
    """Validates ``spec`` (:func:`check_spec`), resolves every point and looks each up in
    ``store``."""
    if version is None:
        from repflow.version import __version__ as version
    unavailable = check_spec(spec)
    points: list[PlannedPoint] = []
    for p in spec.points():
        if p.labels.get(SCHEME_AXIS) in unavailable:
            continue
        where = ", ".join(f"{k}={v}" for k, v in p.labels.items())
        resolved = _check(p.config, f"{spec.path}: point ({where}):")
        key = point_key(resolved, version)
        points.append(
            PlannedPoint(
                labels=p.labels, config=resolved, key=key, status=store.status(key),
                estimate=estimate_seconds(resolved),
            )  # fmt: skip
        )
    plan = Plan(points=points, unavailable=unavailable)
    plan.calibration = _calibrate(plan, store)
    if plan.calibration != 1.0:
        plan.basis = "store"
    elif any(p.status != "done" for p in points):
        plan.calibration = machine_factor()
        plan.basis = "probe" if plan.calibration != 1.0 else "model"
    for p in plan.points:
        p.estimate = p.estimate * plan.calibration + POINT_SECONDS
    return plan


#: The machine-speed probe (:func:`machine_factor`): bench-A's network and traffic (k = 8,
#: 10 Gb/s, web search at load 0.5, TCP) with this much of arrivals and no drain — about
#: 1.5 M packet-hops, a tenth of a second.
PROBE_DURATION = "3ms"
#: The probe's packet-hops per second (the faster of its two runs) on a machine for which the
#: constants above hold as they stand — fitted, not measured: on 2026-11-29, on a quiet
#: machine, the probe ran at 11.8–12.4 M packet-hops per second (bench-A at 12.8 M; 23.0 M on
#: 2026-11-26, when the constants were last fitted) and the main job's 448 points took 2.16
#: times their traffic's estimate (with the fixed 0.04 s per point): 12.0 M × 2.16. The
#: constants, and so the budget's unit of work (repflow.experiments.budget), stay as they were.
PROBE_REFERENCE = 25.9e6
#: Set to ``0`` to skip the probe (estimates then use the constants as fitted).
PROBE_ENV = "REPFLOW_SPEED_PROBE"


def machine_factor() -> float:
    """How much slower this machine simulates now than the one the constants were fitted on
    (``PROBE_REFERENCE`` over the probe's packet-hops per second, within 0.25–4): the same
    code runs 20–27 M packet-hops per second on bench-A on this 2-core machine from one
    sitting to the next (docs/performance.md), which no constant can follow. Measured once per
    process, in about 0.1–0.3 s; 1.0 where the probe cannot run or ``REPFLOW_SPEED_PROBE=0``."""
    global _MACHINE_FACTOR
    if _MACHINE_FACTOR is None:
        _MACHINE_FACTOR = _probe_factor()
    return _MACHINE_FACTOR


_MACHINE_FACTOR: float | None = None


def _probe_factor() -> float:
    import os

    if os.environ.get(PROBE_ENV, "1") == "0":
        return 1.0
    try:
        from repflow.api import simulate
        from repflow.cli.bench import bench_config

        cfg = bench_config(1, PROBE_DURATION, "bench-A", drain="0s")
        best = 0.0
        for _ in range(2):
            c = simulate(cfg).counters
            wall = float(c.get("wall_time") or 0.0)
            if wall > 0:
                best = max(best, float(c.get("packet_hops") or 0) / wall)
    except (UserError, ImportError, OSError, ValueError):
        return 1.0
    if best <= 0:
        return 1.0
    return min(max(PROBE_REFERENCE / best, 0.25), 4.0)


def _calibrate(plan: Plan, store: Store) -> float:
    """Ratio of measured to estimated wall time over the points already stored."""
    ratios = []
    for p in plan.points:
        if p.status != "done" or p.estimate <= 0:
            continue
        t = store.read_timing(p.key)
        if t and t.get("wall_seconds"):
            # the traffic's share of the measured time (the fixed cost is not scaled)
            ratios.append(max(float(t["wall_seconds"]) - POINT_SECONDS, 0.0) / p.estimate)
    return statistics.median(ratios) if len(ratios) >= 3 else 1.0


def _copy(obj: Any) -> Any:
    import copy

    return copy.deepcopy(obj)


def estimate_wall(points: list[PlannedPoint], workers: int) -> float:
    """Rough wall time for ``points`` on ``workers`` parallel workers (with the workers' start,
    :data:`START_SECONDS`)."""
    if not points:
        return 0.0
    total = sum(p.estimate for p in points)
    return START_SECONDS + max(total / max(1, workers), max(p.estimate for p in points))


def workers_for(points: list[PlannedPoint], seconds: float) -> int | None:
    """The fewest workers whose estimated wall time for ``points`` (:func:`estimate_wall`)
    is at most ``seconds``, or None if no number of workers is enough (a single point is
    estimated to take longer)."""
    if not points:
        return 1
    seconds -= START_SECONDS
    if max(p.estimate for p in points) > seconds:
        return None
    total = sum(p.estimate for p in points)
    return max(1, math.ceil(total / seconds))


def check_same_spec(store: Store, spec: Spec) -> None:
    """Refuses a result directory that holds another spec's sweep (its ``sweep.json`` would be
    replaced)."""
    import json

    path = store.root / "sweep.json"
    if not path.is_file():
        return
    try:
        name = json.loads(path.read_text(encoding="utf-8")).get("name")
    except (OSError, ValueError, AttributeError):
        name = None
    if name != spec.name:
        raise UserError(
            f"--out: '{store.root}' holds the results of spec {name!r}, not {spec.name!r}; "
            "choose another directory"
        )


def sweep_record(spec: Spec, plan: Plan, version: str) -> dict[str, Any]:
    """The content of ``sweep.json``."""
    return {
        "name": spec.name,
        "version": version,
        "spec": spec.to_dict(),
        "points": [{"key": p.key, "labels": p.labels} for p in plan.points],
        "unavailable": plan.unavailable,
    }


def run_sweep(
    spec: Spec,
    out: str | Path,
    executor: str | Executor = "local",
    jobs: int | None = None,
    address: str | None = None,
    retry_failed: bool = False,
    progress: bool = True,
    runner: Runner = run_point,
    confirm: Callable[[Plan, float, int], bool] | None = None,
    skip_unavailable: bool = False,
) -> SweepSummary:
    """Runs every point of ``spec`` that ``out`` does not already hold.

    ``confirm(plan, expected_seconds, workers)`` is asked before computing; returning
    ``False`` aborts with :class:`UserError`. A scheme this build lacks fails the sweep unless
    ``skip_unavailable``. ``out`` is created only once the executor is up and the run
    confirmed; a directory holding another spec's sweep is refused.
    """
    from repflow.version import __version__

    t0 = time.perf_counter()
    store = Store(out)
    check_same_spec(store, spec)
    plan = plan_sweep(spec, store, __version__)
    if plan.unavailable and not skip_unavailable:
        label, why = next(iter(plan.unavailable.items()))
        raise UserError(
            f"{spec.path}: scheme {label!r}: {why}; pass --skip-unavailable to run the other "
            "schemes without it"
        )
    if not plan.points:
        raise UserError(f"{spec.path}: the grid has no point this build can run")
    todo = plan.todo(retry_failed)
    summary = SweepSummary(
        root=store.root,
        total=len(plan.points),
        reused=plan.count("done"),
        computed=0,
        skipped_failed=0 if retry_failed else plan.count("failed"),
        unavailable=plan.unavailable,
    )
    if plan.unavailable:
        labels = ", ".join(plan.unavailable)
        first = next(iter(plan.unavailable.values()))
        print(f"sweep: skipping schemes this build does not have: {labels} ({first})",
              file=sys.stderr)  # fmt: skip
    if not todo:
        store.prepare()
        store.write_sweep(sweep_record(spec, plan, __version__), spec.text)
        summary.wall = time.perf_counter() - t0
        summary.executor = executor if isinstance(executor, str) else executor.name
        return summary

    ex = executor if isinstance(executor, Executor) else make_executor(
        executor, jobs=jobs, address=address, runner=runner
    )  # fmt: skip
    summary.executor = ex.name
    try:
        expected = estimate_wall(todo, ex.workers)
        if confirm is not None and not confirm(plan, expected, ex.workers):
            raise UserError("aborted: nothing was computed")
        # only now, with the executor up and the user's consent, does the directory appear
        store.prepare()
        store.write_sweep(sweep_record(spec, plan, __version__), spec.text)
        print(
            f"sweep {spec.name}: {len(plan.points)} points, {summary.reused} stored, "
            f"{len(todo)} to compute on {ex.name} ({ex.workers} workers), "
            f"expected ~{fmt_seconds(expected)} → {store.root}",
            file=sys.stderr,
        )
        bar = progress_bar(
            total=len(todo), unit="pt", desc=spec.name, disable=not progress,
            dynamic_ncols=True, smoothing=0.1, file=sys.stderr,
        )  # fmt: skip

        def on_result(r: PointResult) -> None:
            store.write(r)
            summary.computed += 1
            if not r.ok:
                summary.failed.append(r.key)
                bar.write(f"sweep: point {r.key[:16]} failed: {r.error}", file=sys.stderr)
            bar.update(1)
            bar.set_postfix(failed=len(summary.failed), refresh=False)

        try:
            ex.run([(p.key, p.config) for p in todo], on_result)
        finally:
            bar.close()
    finally:
        if not isinstance(executor, Executor):
            ex.close()
    summary.wall = time.perf_counter() - t0
    return summary
