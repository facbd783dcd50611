"""``repflow testbed run``: real traffic on every host of the testbed, records in the run format.

Every host namespace runs ``repflow serve`` (the receiver) and ``repflow load`` (an open-loop
Poisson generator: sizes from the workload CDF, random other hosts as destinations, load relative
to the host link rate). When every generator has stopped, their per-host run directories are
merged into one run directory (``flows.parquet`` + ``run.json``) with the same schema as a
simulated run, and the summary is printed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from repflow.errors import UserError
from repflow.net import summarize as net_summarize
from repflow.testbed.netns import Testbed, run, stop_processes
from repflow.testbed.units import format_rate, parse_duration

REPFLOW = [sys.executable, "-m", "repflow"]
#: ``repflow serve|load`` with only the net commands registered (see :mod:`.hostcmd`)
HOSTCMD = [sys.executable, "-m", "repflow.testbed.hostcmd"]
#: longest wait for sixteen servers or generators to start (Python start-up on a busy machine)
START_TIMEOUT = 180.0
#: ports each host serves: PORT .. PORT + SERVE_PORTS - 1 (copies use port + i)
SERVE_PORTS = 4


# --------------------------------------------------------------------------------- summary
def summarize(flows: pd.DataFrame, counters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run summary (same bins, keys and overhead as the simulator's, computed by its code)
    from flow records; without ``flow_bytes``/``extra_copy_bytes`` counters the overhead is
    counted from the records' sizes and copies."""
    return net_summarize(flows, counters or {})


def merge_host_runs(dirs: Sequence[Path]) -> tuple[pd.DataFrame, dict[str, Any], list[dict]]:
    """Concatenates per-host run directories; renumbers flow ids by start time.

    Returns the records, summed numeric counters and each host's ``run.json`` content.
    """
    from repflow.runio import load_run

    frames, counters, metas = [], {}, []
    for d in dirs:
        res = load_run(d)
        frames.append(res.flows)
        metas.append(res.metadata)
        for k, v in (res.metadata.get("counters") or {}).items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                counters[k] = counters.get(k, 0) + v
    flows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if len(flows):
        flows = flows.sort_values(["start", "src", "id"], kind="stable").reset_index(drop=True)
        flows["id"] = np.arange(len(flows), dtype=np.int64)
    return flows, counters, metas


# ----------------------------------------------------------------------------- queues
class QueueWatch:
    """Drops per port over a run (qdisc counters before/after) and the largest switch queue
    seen by sampling every port's queue length about once a second."""

    def __init__(self, tb: Testbed, period: float = 1.0) -> None:
        self.tb, self.period = tb, period
        self.before: dict = {}
        self.after: dict = {}
        self.max_switch_queue = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        switches = [s.name for s in self.tb.topo.switches]
        while not self._stop.wait(self.period):
            with contextlib.suppress(Exception):
                st = self.tb.qdisc_stats(switches)
                self.max_switch_queue = max(
                    [self.max_switch_queue, *(v["qlen"] for v in st.values())]
                )
                self.samples += 1

    def __enter__(self) -> QueueWatch:
        self.before = self.tb.qdisc_stats()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        with contextlib.suppress(Exception):
            self.after = self.tb.qdisc_stats()

    def counters(self) -> dict[str, int]:
        """``drops``, ``switch_drops``, ``host_drops``, ``max_switch_queue`` (sampled)."""
        kinds = {n.name: n.kind for n in self.tb.topo.nodes.values()}
        drops = {"switch": 0, "host": 0}
        for key, v in self.after.items():
            drops[kinds[key[0]]] += v["drops"] - self.before.get(key, {"drops": 0})["drops"]
        return {
            "drops": drops["switch"] + drops["host"],
            "switch_drops": drops["switch"],
            "host_drops": drops["host"],
            "max_switch_queue": self.max_switch_queue,
            "queue_samples": self.samples,
        }


# ------------------------------------------------------------------------------- processes
def require_net_commands() -> None:
    """Stops with a clear message unless ``repflow serve`` and ``repflow load`` exist."""
    for cmd in ("serve", "load"):
        proc = subprocess.run(
            [*HOSTCMD, "--", cmd, "--help"], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise UserError(
                f"`repflow {cmd}` is not available in this build (it comes with repflow-net); "
                "`repflow testbed run` needs it — `repflow testbed toy` and `check` do not"
            )


def _listening(tb: Testbed, host: str, port: int) -> bool:
    out = run(tb.exec_argv(host, ["ss", "-Hltn", f"sport = :{port}"]), what="ss")
    return bool(out.strip())


@contextlib.contextmanager
def servers(
    tb: Testbed, port: int, logdir: Path, hosts: Sequence[str] | None = None
) -> Iterator[list[subprocess.Popen]]:
    """``repflow serve`` on every host (or on ``hosts``) for the duration of the block."""
    procs: list[subprocess.Popen] = []
    chosen = [h for h in tb.topo.hosts if hosts is None or h.name in hosts]
    try:
        for h in chosen:
            log = open(logdir / f"serve-{h.name}.log", "w")  # noqa: SIM115 - closed with process
            procs.append(
                tb.popen_in(
                    h.name,
                    [
                        *HOSTCMD,
                        "--",
                        "serve",
                        "--listen",
                        f"{h.addr}:{port}",
                        "--ports",
                        str(SERVE_PORTS),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            log.close()
        deadline = time.time() + START_TIMEOUT
        pending = list(chosen)
        while pending:
            for h, p in zip(chosen, procs, strict=True):
                if p.poll() is not None:
                    text = (logdir / f"serve-{h.name}.log").read_text()
                    raise UserError(f"`repflow serve` on {h.name} exited: {text.strip()[-300:]}")
            # cheap test first (the server's own "listening" line), then the kernel's word (ss)
            pending = [
                h
                for h in pending
                if "listening" not in (logdir / f"serve-{h.name}.log").read_text()
                and not _listening(tb, h.name, port)
            ]
            if pending and time.time() > deadline:
                raise UserError(
                    f"`repflow serve` did not listen on {pending[0].name} "
                    f"within {START_TIMEOUT:.0f} s"
                )
            if pending:
                time.sleep(0.5)
        yield procs
    finally:
        stop_processes(procs, timeout=10)


def host_seed(seed: int, index: int) -> int:
    """Distinct, fixed seed of host ``index``'s generator."""
    return (seed * 1_000_003 + index * 7919 + 1) % (2**31 - 1)


def run_workload(
    tb: Testbed,
    *,
    scheme: str,
    workload: str,
    load: float,
    duration: float,
    seed: int,
    out: str | os.PathLike[str],
    port: int = 7000,
    drain: float = 30.0,
    show_progress: bool = True,
    start_servers: bool = True,
    smartrep_warm: bool = True,
) -> tuple[Path, dict[str, Any]]:
    """Runs the workload on every host, merges the records into run directory ``out``.

    With ``start_servers=False`` the caller keeps :func:`servers` running on ``port`` (several
    runs can share them). ``smartrep_warm``: SmartRep hosts probe their paths to every peer
    before the common start (the paper's probe database); ``False`` makes flows wait for probes.
    """
    from repflow.runio import check_out_dir, write_run

    if not 0 < load <= 1:
        raise UserError(f"--load must be in (0, 1], got {load}")
    if scheme not in ("tcp", "repflow", "smartrep"):
        raise UserError(f"--scheme must be tcp, repflow or smartrep, got {scheme!r}")
    check_out_dir(out)
    require_net_commands()
    hosts = tb.topo.hosts
    rate = format_rate(tb.rate_bps)
    parent = Path(out).absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{Path(out).name}.hosts-", dir=parent))
    try:
        serving = servers(tb, port, work) if start_servers else contextlib.nullcontext()
        with serving, QueueWatch(tb) as watch:
            procs: list[subprocess.Popen] = []
            go = work / "go"
            try:
                for i, h in enumerate(hosts):
                    peers = [(j, o) for j, o in enumerate(hosts) if j != i]
                    argv = [
                        *HOSTCMD, "--ready", str(work / f"ready-{i}"), "--go", str(go), "--",
                        "load",
                        "--peers", ",".join(f"{o.addr}:{port}" for _, o in peers),
                        "--workload", workload, "--load", str(load), "--link-rate", rate,
                        "--duration", f"{duration}s", "--drain", f"{drain}s", "--scheme", scheme,
                        "--seed", str(host_seed(seed, i)), "--out", str(work / f"host-{i}"),
                        "--bind", h.addr, "--host-index", str(i),
                        "--peer-indices", ",".join(str(j) for j, _ in peers),
                        *(["--warm"] if scheme == "smartrep" and smartrep_warm else []),
                    ]  # fmt: skip
                    log = open(work / f"load-{h.name}.log", "w")  # noqa: SIM115
                    procs.append(tb.popen_in(h.name, argv, stdout=log, stderr=subprocess.STDOUT))
                    log.close()
                _await_ready(tb, procs, work)
                go.touch()  # every generator starts now, within a few milliseconds
                t0 = time.time()
                _wait_loads(tb, procs, work, duration, drain, t0, show_progress)
            finally:
                stop_processes(procs)
        flows, counters, metas = merge_host_runs([work / f"host-{i}" for i in range(len(hosts))])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    from repflow import __version__

    summary = summarize(flows, counters)
    config = {
        "scheme": {"name": scheme, **({"warm": smartrep_warm} if scheme == "smartrep" else {})},
        "workload": {"cdf": workload, "load": load},
        "seed": seed,
        "duration": duration,
        "drain": drain,
        "testbed": {
            "topology": tb.topo.name,
            **tb.topo.params,
            "hosts": len(hosts),
            "link_rate_bps": tb.rate_bps,
            "buffer_packets": tb.buffer,
            "ecmp_seed": tb.seed,
            "ecmp_hash_seed_fixed": tb.hash_seed,
            "host_shaping": tb.host_shaping,
            "tcp_cc": tb.tcp_cc,
            "rto_min_ms": tb.rto_min_ms,
            "propagation_delay": 0.0,
        },  # fmt: skip
        "hosts": [m.get("config", {}) for m in metas[:1]],
    }
    counters.update(watch.counters())
    bits = float(flows["size"].sum()) * 8 if len(flows) else 0.0
    counters["offered_load"] = bits / (duration * len(hosts) * tb.rate_bps)
    meta = {
        "version": __version__,
        "source": "testbed",
        "config": config,
        "counters": {**counters, "flows": int(len(flows))},
        "summary": summary,
    }
    path = write_run(out, flows, meta)
    return path, meta


def _load_failed(tb: Testbed, work: Path, i: int, code: int | None) -> UserError:
    name = tb.topo.hosts[i].name
    text = (work / f"load-{name}.log").read_text()
    return UserError(f"`repflow load` on {name} failed (exit {code}): {text.strip()[-400:]}")


def _await_ready(tb: Testbed, procs: Sequence[subprocess.Popen], work: Path) -> None:
    deadline = time.time() + START_TIMEOUT
    while not all((work / f"ready-{i}").exists() for i in range(len(procs))):
        for i, p in enumerate(procs):
            if p.poll() is not None:
                raise _load_failed(tb, work, i, p.returncode)
        if time.time() > deadline:
            raise UserError(
                f"`repflow load` did not start on every host within {START_TIMEOUT:.0f} s"
            )
        time.sleep(0.05)


def _wait_loads(
    tb: Testbed,
    procs: list[subprocess.Popen],
    work: Path,
    duration: float,
    drain: float,
    t0: float,
    show_progress: bool,
) -> None:
    from tqdm import tqdm

    limit = duration + drain + 60
    bar = tqdm(
        total=round(duration),
        unit="s",
        desc="testbed run",
        disable=not show_progress,
        leave=False,
        mininterval=1.0,
    )
    draining = False
    try:
        while any(p.poll() is None for p in procs):
            el = time.time() - t0
            if el > duration and not draining:
                draining = True
                bar.set_postfix_str("draining flows in progress")
            bar.n = min(round(el), round(duration))
            bar.refresh()
            if el > limit:
                raise UserError(f"`repflow load` still running {el:.0f} s after start; stopped")
            time.sleep(0.5)
    finally:
        bar.close()
    for i, p in enumerate(procs):
        if p.returncode != 0:
            raise _load_failed(tb, work, i, p.returncode)


def run_cli(tb: Testbed, args) -> None:
    """``repflow testbed run``."""
    from repflow.cli.sim import format_summary

    duration = parse_duration(args.duration)
    path, meta = run_workload(
        tb,
        scheme=args.scheme,
        workload=args.workload,
        load=args.load,
        duration=duration,
        seed=args.seed,
        out=args.out,
        port=args.port,
        drain=parse_duration(args.drain, "--drain"),
        smartrep_warm=not getattr(args, "smartrep_cold", False),
    )
    print(
        f"testbed run: {args.scheme}, {args.workload}, load {args.load}, {duration:g} s on "
        f"{len(tb.topo.hosts)} hosts -> {path}"
    )
    table = format_summary(meta["summary"], meta["counters"]).split("\n\n")[0]
    c = meta["counters"]
    print(table)
    print()
    print(
        f"flows {c.get('flows', 0)} (unfinished {meta['summary']['unfinished']}), connections "
        f"{c.get('connections', 0)}, replication overhead "
        f"{100 * (meta['summary'].get('overhead') or 0.0):.2f} % of flow bytes, offered load "
        f"{c.get('offered_load', float('nan')):.3f}"
    )
    print(
        f"drops {c['drops']} (switch {c['switch_drops']}, host {c['host_drops']}), largest "
        f"switch queue {c['max_switch_queue']} packets (sampled every ~1 s)"
    )
