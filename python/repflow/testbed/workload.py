"""``repflow testbed run``: real traffic on every host of the testbed, records in the run format.

Every host namespace runs ``repflow serve`` (the receiver) and ``repflow load`` (an open-loop
Poisson generator: sizes from the workload CDF, random other hosts as destinations, load relative
to the host link rate). When every generator has stopped, their per-host run directories are
merged into one run directory (``flows.parquet`` + ``run.json``) with the same schema as a
simulated run, plus two testbed columns (``outcome``: finished, failed or unfinished;
``reason``: why a flow failed), and the summary is printed.

Every argument is checked before any process starts. A run holds a lock on its testbed for as
long as its servers run; processes that a killed earlier run left in the host namespaces are
stopped first, and the servers are verified to own their listening sockets (``ss -ltnp``), so a
run never talks to an orphan. A host process that dies during the run fails the run with one line
naming the host; the per-host logs are then kept beside ``--out`` (and copied into
``--out/logs`` when the run succeeds).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
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
from repflow.testbed import netns, stale
from repflow.testbed.netns import Testbed, run, signals_held, stop_processes
from repflow.units import format_rate, parse_duration

REPFLOW = [sys.executable, "-m", "repflow"]
#: ``repflow serve|load`` with only the net commands registered (see :mod:`.hostcmd`)
HOSTCMD = [sys.executable, "-m", "repflow.testbed.hostcmd"]
#: longest wait for sixteen servers or generators to start (Python start-up on a busy machine)
START_TIMEOUT = 180.0
#: seconds the servers of a failed run get to stop before SIGKILL
FAILED_STOP_TIMEOUT = 0.2
#: ports each host serves: PORT .. PORT + SERVE_PORTS - 1 (copies use port + i)
SERVE_PORTS = 4
#: ``--scheme`` of a testbed run (``mptcp``: TCP flows on the kernel's Multipath TCP)
SCHEMES = ("tcp", "repflow", "smartrep", "mptcp")
#: MPTCP's subflows per connection when ``--subflows`` is not given
DEFAULT_SUBFLOWS = 8


# --------------------------------------------------------------------------------- summary
def summarize(flows: pd.DataFrame, counters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run summary (same bins, keys and overhead as the simulator's, computed by its code)
    from flow records; without ``flow_bytes``/``extra_copy_bytes`` counters the overhead is
    counted from the records' sizes and copies."""
    return net_summarize(flows, counters or {})


#: written by :mod:`.hostcmd` into each host's run directory: why each unsuccessful flow ended
ERRORS_FILE = "errors.json"
#: the library's text for a flow still in progress when the generator stopped
UNFINISHED_TEXT = "unfinished when the run stopped"


def merge_host_runs(dirs: Sequence[Path]) -> tuple[pd.DataFrame, dict[str, Any], list[dict]]:
    """Concatenates per-host run directories; renumbers flow ids by start time.

    Returns the records, summed numeric counters and each host's ``run.json`` content. The
    records gain ``outcome`` (``finished``, ``failed`` or ``unfinished``) and ``reason`` (the
    library's error for a failed flow, e.g. every copy hit the flow timeout; empty otherwise),
    read from each host's ``errors.json`` (a flow without a finite FCT and no recorded error is
    ``unfinished``).
    """
    import json

    from repflow.records import load_run

    frames, counters, metas = [], {}, []
    for d in dirs:
        res = load_run(d)
        df = res.flows.copy()
        errors: dict[int, str] = {}
        path = Path(d) / ERRORS_FILE
        if path.exists():
            doc = json.loads(path.read_text())
            errors = {int(i): str(e) for i, e in zip(doc["index"], doc["error"], strict=True)}
        reason = [errors.get(int(i), "") for i in df["id"]]
        done = np.isfinite(df["fct"].to_numpy(dtype=float))
        df["outcome"] = [
            "finished" if ok else "unfinished" if r in ("", UNFINISHED_TEXT) else "failed"
            for ok, r in zip(done, reason, strict=True)
        ]
        df["reason"] = [
            "" if o != "failed" else r for o, r in zip(df["outcome"], reason, strict=True)
        ]
        frames.append(df)
        metas.append(res.metadata)
        for k, v in (res.metadata.get("counters") or {}).items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                counters[k] = counters.get(k, 0) + v
    flows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if len(flows):
        flows = flows.sort_values(["start", "src", "id"], kind="stable").reset_index(drop=True)
        flows["id"] = np.arange(len(flows), dtype=np.int64)
    return flows, counters, metas


def add_outcome_columns(path: Path, flows: pd.DataFrame) -> None:
    """Adds ``outcome`` and ``reason`` to the ``flows.parquet`` :func:`write_run` wrote (it
    keeps only the simulator's columns; readers of the run format ignore extra ones)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from repflow.records import FLOWS_FILE

    table = pq.read_table(path / FLOWS_FILE)
    for col in ("outcome", "reason"):
        table = table.append_column(col, pa.array(flows[col].astype(str).tolist(), pa.string()))
    tmp = path / (FLOWS_FILE + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path / FLOWS_FILE)


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
def net_commands_available() -> bool:
    """Whether this build has the host commands a testbed run needs (``repflow serve`` and
    ``repflow load``, from repflow-net)."""
    return all(
        subprocess.run([*HOSTCMD, "--", c, "--help"], capture_output=True).returncode == 0
        for c in ("serve", "load")
    )


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


def check_workload(name: str) -> str:
    """The workload as ``repflow load`` on a host will read it: a built-in name, or the absolute
    path of a readable, valid CDF file. A clear error otherwise (before any process starts)."""
    from repflow import _core

    if _core.workload_text(name) is not None:
        return name
    path = Path(name)
    if not path.is_file():
        names = ", ".join(n for n, _ in _core.builtin_workloads())
        raise UserError(f"--workload: {name!r} is neither a built-in ({names}) nor a file")
    try:
        _core.parse_cdf(path.read_text())
    except OSError as exc:
        raise UserError(f"--workload: cannot read '{path}': {exc.strerror}") from None
    except (_core.ConfigError, ValueError) as exc:
        raise UserError(f"--workload {name}: {exc}") from None
    return str(path.absolute())


def check_port(port: int) -> None:
    """Each host serves ``port .. port + SERVE_PORTS - 1``."""
    if not 1024 <= port <= 65535 - (SERVE_PORTS - 1):
        raise UserError(f"--port: must be between 1024 and {65535 - (SERVE_PORTS - 1)}, got {port}")


def _run_lock_path(tb: Testbed) -> Path:
    return netns.state_dir() / f"{tb.prefix.rstrip('-') or 'default'}.run.lock"


@contextlib.contextmanager
def exclusive_hosts(tb: Testbed, say=lambda _m: None) -> Iterator[None]:
    """Holds the testbed's run lock for the block, after stopping what earlier runs left behind.

    A second run while one is in progress is refused (the lock is a ``flock``, released by the
    kernel when its holder dies, so a killed run never blocks the next). Every process this
    tool started inside a host namespace (tagged, :data:`netns.TAG_ENV`) then belongs to a dead
    run (its orphaned servers or generators): they are stopped, and ``say`` reports how many.
    Processes a user started there (an ``ip netns exec … ip mptcp monitor``) are left alone.
    """
    path = _run_lock_path(tb)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(
                f"another `repflow testbed run` is using the testbed with prefix {tb.prefix!r}; "
                "wait for it to finish"
            ) from None
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        left = tb.tagged_pids([h.name for h in tb.topo.hosts])
        if left:
            n = sum(len(p) for p in left.values())
            stopped = netns.kill_pids([pid for pids in left.values() for pid in pids])
            say(
                f"stopped {n} processes an earlier run left on {', '.join(sorted(left))}"
                + ("" if stopped == 0 else f" ({stopped} would not die)")
            )
            if stopped:
                raise UserError(
                    f"{stopped} processes left by an earlier run on {', '.join(sorted(left))} "
                    f"would not stop; run `{netns.command('down', tb.prefix)}` and `up` again"
                )
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()


_SS_PID = re.compile(r"pid=(\d+)")


def socket_owners(tb: Testbed, host: str, ports: Sequence[int]) -> dict[int, set[int]]:
    """``{port: pids}`` of the processes listening on each of ``ports`` inside ``host``
    (``ss -ltnp``; a port nobody listens on maps to an empty set)."""
    out = run(tb.exec_argv(host, ["ss", "-Hltnp"]), what=f"ss on {host}")
    owners: dict[int, set[int]] = {p: set() for p in ports}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) < 4:
            continue
        port = cols[3].rpartition(":")[2]
        if port.isdigit() and int(port) in owners:
            owners[int(port)] |= {int(x) for x in _SS_PID.findall(line)}
    return owners


def _exit_text(code: int | None) -> str:
    if code is None:
        return "still running"
    return f"killed by signal {-code}" if code < 0 else f"exit {code}"


def _last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith("Traceback")]
        if lines:
            return lines[-1][-300:]
    return "no output"


class Servers(list):
    """The ``repflow serve`` processes of a block, with their hosts and logs."""

    def __init__(self, logdir: Path) -> None:
        super().__init__()
        self.hosts: list[str] = []
        self.logdir = logdir

    def check_alive(self) -> None:
        """Raises a one-line error naming the first host whose server has exited."""
        for h, p in zip(self.hosts, self, strict=True):
            if p.poll() is not None:
                raise UserError(
                    f"`repflow serve` on {h} died during the run ({_exit_text(p.returncode)}): "
                    f"{_last_line(self.logdir / f'serve-{h}.log')}"
                )


@contextlib.contextmanager
def servers(
    tb: Testbed,
    port: int,
    logdir: Path,
    hosts: Sequence[str] | None = None,
    mptcp: bool = False,
) -> Iterator[Servers]:
    """``repflow serve`` on every host (or on ``hosts``) for the duration of the block
    (listening on MPTCP sockets with ``mptcp``).

    Ready means: the server's own "listening" line, and the kernel's word that the process we
    started (not another one) owns every one of its ports. A server that exits before that —
    e.g. "Address already in use" — is an error naming the host.
    """
    procs = Servers(logdir)
    chosen = [h for h in tb.topo.hosts if hosts is None or h.name in hosts]
    ports = list(range(port, port + SERVE_PORTS))
    try:
        for h in chosen:
            log = open(logdir / f"serve-{h.name}.log", "w")  # noqa: SIM115 - closed with process
            with signals_held():
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
                            # The workloads' long flows (up to 30 MB) exceed serve's default.
                            "--max-flow-size",
                            "64MiB",
                            *(["--mptcp"] if mptcp else []),
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
                procs.hosts.append(h.name)
            log.close()
        deadline = time.time() + START_TIMEOUT
        pending = list(zip(chosen, procs, strict=True))
        while pending:
            for h, p in zip(chosen, procs, strict=True):
                if p.poll() is not None:
                    raise UserError(
                        f"`repflow serve` on {h.name} could not start ({_exit_text(p.returncode)}"
                        f"): {_last_line(logdir / f'serve-{h.name}.log')}"
                    )
            still = []
            for h, p in pending:
                if "listening" not in (logdir / f"serve-{h.name}.log").read_text():
                    still.append((h, p))
                    continue
                owners = socket_owners(tb, h.name, ports)
                foreign = {q: o for q, o in owners.items() if o and p.pid not in o}
                if foreign:
                    q, o = next(iter(foreign.items()))
                    raise UserError(
                        f"port {q} on {h.name} is held by another process (pid "
                        f"{', '.join(map(str, sorted(o)))}), not by the server this run started"
                    )
                if any(not o for o in owners.values()):
                    still.append((h, p))
            pending = still
            if pending and time.time() > deadline:
                raise UserError(
                    f"`repflow serve` did not listen on {pending[0][0].name} "
                    f"within {START_TIMEOUT:.0f} s"
                )
            if pending:
                time.sleep(0.2)
        yield procs
    except BaseException:
        # The run failed (a server or generator died, Ctrl-C): the servers' own orderly stop
        # waits for connections the dead run cannot close (~7 s on a k = 4 testbed), so they
        # get 0.2 s, not ten, before SIGKILL, and the error reaches the user within ~1 s.
        stop_processes(procs, timeout=FAILED_STOP_TIMEOUT)
        raise
    finally:
        stop_processes(procs, timeout=10)


def host_seed(seed: int, index: int) -> int:
    """Distinct, fixed seed of host ``index``'s generator."""
    return (seed * 1_000_003 + index * 7919 + 1) % (2**31 - 1)


def check_run_args(
    *,
    scheme: str,
    workload: str,
    load: float,
    duration: float,
    drain: float,
    port: int,
    flow_timeout: float = 30.0,
    subflows: int | None = None,
) -> str:
    """Every check of :func:`run_workload` that needs no process; returns the workload as the
    hosts will read it. ``subflows`` (MPTCP's subflows per connection) only with ``mptcp``."""
    from repflow.testbed import mptcp

    if not 0 < load <= 1:
        raise UserError(f"--load must be in (0, 1], got {load}")
    if scheme == "mptcp-l":
        raise UserError(mptcp.MPTCP_L_REFUSAL)
    if scheme not in SCHEMES:
        raise UserError(f"--scheme must be {', '.join(SCHEMES)}, got {scheme!r}")
    if subflows is not None:
        mptcp.check_subflows(subflows)
        if scheme != "mptcp":
            raise UserError(f"--subflows: only with --scheme mptcp, not {scheme}")
    if not 0 < duration <= 86_400:
        raise UserError(f"--duration must be between 1 ms and 24 h, got {duration:g} s")
    if not 0 <= drain <= 3_600:
        raise UserError(f"--drain must be between 0 and 1 h, got {drain:g} s")
    if not 0 < flow_timeout <= 3_600:
        raise UserError(f"--flow-timeout must be between 1 ms and 1 h, got {flow_timeout:g} s")
    check_port(port)
    if scheme == "mptcp":
        mptcp.check_ports(
            DEFAULT_SUBFLOWS if subflows is None else subflows,
            list(range(port, port + SERVE_PORTS)),
        )
    return check_workload(workload)


def check_out(out: str | os.PathLike[str]) -> Path:
    """``--out`` must not exist, or be an empty directory; its parent must be writable."""
    p = Path(out)
    if p.exists() or p.is_symlink():
        if not p.is_dir():
            raise UserError(f"--out: '{p}' exists and is not a directory")
        if any(p.iterdir()):
            raise UserError(
                f"--out: directory '{p}' exists and is not empty; a testbed run never replaces "
                "results: choose a new directory"
            )
    from repflow.cli.outdir import check_writable

    return check_writable(p)


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
    flow_timeout: float = 30.0,
    subflows: int | None = None,
    say=lambda _m: None,
) -> tuple[Path, dict[str, Any]]:
    """Runs the workload on every host, merges the records into run directory ``out``.

    With ``start_servers=False`` the caller keeps :func:`servers` running on ``port`` (several
    runs can share them) inside :func:`exclusive_hosts`. ``smartrep_warm``: SmartRep hosts probe
    their paths to every peer before the common start (the paper's probe database); ``False``
    makes flows wait for probes. ``flow_timeout``: the library gives up on a flow none of whose
    copies completed within it (the flow is recorded as failed, with the reason). ``mptcp``:
    every connection is a kernel Multipath TCP socket with up to ``subflows`` subflows (default
    8; see :mod:`.mptcp`); the hosts' MPTCP endpoints are set for the run and removed after
    (with ``start_servers=False`` the caller's :func:`servers` must use ``mptcp=True``, or the
    connections fall back to TCP, which ``counters.mptcp_MPCapableFallbackACK`` shows). On
    failure the per-host logs are kept next to ``out`` and the error names them.
    """
    from repflow.records import write_run
    from repflow.testbed import mptcp

    workload = check_run_args(
        scheme=scheme,
        workload=workload,
        load=load,
        duration=duration,
        drain=drain,
        port=port,
        flow_timeout=flow_timeout,
        subflows=subflows,
    )
    check_out(out)
    require_net_commands()
    hosts = tb.topo.hosts
    use_mptcp = scheme == "mptcp"
    if use_mptcp:
        subflows = DEFAULT_SUBFLOWS if subflows is None else subflows
        mptcp.require_enabled(tb)  # before anything is made
    rate = format_rate(tb.rate_bps)
    parent = Path(out).absolute().parent
    # What a run killed with -9 left (its work directories, provably stale) goes first.
    stale.clean(tb.prefix, near=Path(out), locks=False)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{Path(out).name}.hosts-", dir=parent))
    except OSError as exc:
        raise UserError(f"--out: cannot create '{out}': {exc.strerror}") from None
    owner = contextlib.ExitStack()  # the work directory is live (locked) until it is removed
    owner.enter_context(stale.owned_workdir(work, tb.prefix))
    keep_logs = False
    saved: dict[str, bytes] = {}
    try:
        with contextlib.ExitStack() as serving:
            srv: Servers | None = None
            if start_servers:
                serving.enter_context(exclusive_hosts(tb, say))
            mp_before: dict[str, dict[str, int]] = {}
            mp_after: dict[str, dict[str, int]] = {}
            if use_mptcp:
                assert subflows is not None
                mptcp.configure(tb, subflows)
                serving.callback(mptcp.unconfigure, tb)
                mp_before = {h.name: mptcp.netstat(tb, h.name) for h in hosts}
            if start_servers:
                srv = serving.enter_context(servers(tb, port, work, mptcp=use_mptcp))
            with QueueWatch(tb) as watch:
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
                            "--duration", f"{duration}s", "--drain", f"{drain}s",
                            "--scheme", "tcp" if use_mptcp else scheme,
                            *(["--mptcp"] if use_mptcp else []),
                            "--flow-timeout", f"{flow_timeout}s",
                            "--seed", str(host_seed(seed, i)), "--out", str(work / f"host-{i}"),
                            "--bind", h.addr, "--host-index", str(i),
                            "--peer-indices", ",".join(str(j) for j, _ in peers),
                            *(["--warm"] if scheme == "smartrep" and smartrep_warm else []),
                        ]  # fmt: skip
                        log = open(work / f"load-{h.name}.log", "w")  # noqa: SIM115
                        with signals_held():
                            procs.append(
                                tb.popen_in(h.name, argv, stdout=log, stderr=subprocess.STDOUT)
                            )
                        log.close()
                    _await_ready(tb, procs, work, srv)
                    go.touch()  # every generator starts now, within a few milliseconds
                    t0 = time.time()
                    _wait_loads(tb, procs, work, duration, drain, t0, show_progress, srv)
                    if srv is not None:
                        srv.check_alive()
                finally:
                    stop_processes(procs)
            if use_mptcp:
                mp_after = {h.name: mptcp.netstat(tb, h.name) for h in hosts}
        flows, counters, metas = merge_host_runs([work / f"host-{i}" for i in range(len(hosts))])
    except UserError as exc:
        keep_logs = True
        kept = _keep_logs(work, Path(out))
        raise UserError(f"{exc} (host logs kept in {kept})") from None
    except Exception:
        keep_logs = True
        _keep_logs(work, Path(out))
        raise
    finally:
        if not keep_logs:
            logs = sorted(work.glob("*.log"))
            saved = {f.name: f.read_bytes() for f in logs}
            shutil.rmtree(work, ignore_errors=True)
        owner.close()
    from repflow.version import __version__

    summary = summarize(flows, counters)
    outcome = flows["outcome"] if len(flows) else pd.Series([], dtype=str)
    summary["failed"] = int((outcome == "failed").sum())
    summary["unfinished"] = int((outcome == "unfinished").sum())
    reasons = flows.loc[outcome == "failed", "reason"] if len(flows) else pd.Series([], dtype=str)
    summary["failure_reasons"] = {
        str(r): int(n) for r, n in reasons.map(_reason_kind).value_counts().items()
    }
    scheme_config: dict[str, Any] = {"name": scheme}
    if scheme == "smartrep":
        scheme_config["warm"] = smartrep_warm
    if use_mptcp:
        scheme_config.update(
            subflows=subflows,
            signal_ports=mptcp.signal_ports(subflows or 1),
            path_manager="kernel (in-kernel, signal endpoints with ports)",
            scheduler="default",
        )
    config = {
        "scheme": scheme_config,
        "workload": {"cdf": workload, "load": load},
        "seed": seed,
        "duration": duration,
        "drain": drain,
        "flow_timeout": flow_timeout,
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
    if use_mptcp:
        counters.update(mptcp.counter_delta(mp_before, mp_after))
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
    add_outcome_columns(path, flows)
    (path / "logs").mkdir()
    for name, data in saved.items():
        (path / "logs" / name).write_bytes(data)
    return path, meta


def _reason_kind(reason: str) -> str:
    """A failure reason without the flow id, so equal causes count together."""
    return re.sub(r"flow 0x[0-9a-f]+: ", "", reason)


def _keep_logs(work: Path, out: Path) -> Path:
    """Moves the per-host work directory to ``<out>.failed-logs`` (or a numbered sibling)."""
    base = out.absolute()
    for n in range(100):
        dest = base.with_name(f"{base.name}.failed-logs" + (f".{n}" if n else ""))
        if not dest.exists():
            with contextlib.suppress(OSError):
                work.rename(dest)
                return dest
            break
    return work


def _load_failed(tb: Testbed, work: Path, i: int, code: int | None) -> UserError:
    name = tb.topo.hosts[i].name
    return UserError(
        f"`repflow load` on {name} failed ({_exit_text(code)}): "
        f"{_last_line(work / f'load-{name}.log')}"
    )


def _await_ready(
    tb: Testbed, procs: Sequence[subprocess.Popen], work: Path, srv: Servers | None
) -> None:
    deadline = time.time() + START_TIMEOUT
    while not all((work / f"ready-{i}").exists() for i in range(len(procs))):
        for i, p in enumerate(procs):
            if p.poll() is not None:
                raise _load_failed(tb, work, i, p.returncode)
        if srv is not None:
            srv.check_alive()
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
    srv: Servers | None = None,
) -> None:
    """Waits for every generator; fails at once, naming the host, when a generator exits with
    an error or a server dies."""
    from repflow.progress import bar as progress_bar

    limit = duration + drain + 60
    bar = progress_bar(
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
            for i, p in enumerate(procs):
                if p.returncode not in (None, 0):
                    raise _load_failed(tb, work, i, p.returncode)
            if srv is not None:
                srv.check_alive()
            el = time.time() - t0
            if el > duration and not draining:
                draining = True
                bar.set_postfix_str("draining flows in progress")
            bar.n = min(round(el), round(duration))
            bar.refresh()
            if el > limit:
                raise UserError(f"`repflow load` still running {el:.0f} s after start; stopped")
            time.sleep(0.2)
    finally:
        bar.close()
    for i, p in enumerate(procs):
        if p.returncode != 0:
            raise _load_failed(tb, work, i, p.returncode)


def parse_run_args(args) -> dict[str, Any]:
    """``repflow testbed run``'s arguments, all checked (no process started, nothing made)."""
    duration = parse_duration(args.duration)
    drain = parse_duration(args.drain, "--drain")
    flow_timeout = parse_duration(args.flow_timeout, "--flow-timeout")
    workload = check_run_args(
        scheme=args.scheme, workload=args.workload, load=args.load, duration=duration,
        drain=drain, port=args.port, flow_timeout=flow_timeout,
        subflows=getattr(args, "subflows", None),
    )  # fmt: skip
    check_out(args.out)
    return {
        "duration": duration, "drain": drain, "workload": workload, "flow_timeout": flow_timeout
    }  # fmt: skip


def run_cli(tb: Testbed, args, checked: Mapping[str, Any] | None = None, say=print) -> None:
    """``repflow testbed run``."""
    from repflow.cli.sim import format_summary

    checked = checked or parse_run_args(args)
    duration = checked["duration"]
    path, meta = run_workload(
        tb,
        scheme=args.scheme,
        workload=checked["workload"],
        load=args.load,
        duration=duration,
        seed=args.seed,
        out=args.out,
        port=args.port,
        drain=checked["drain"],
        smartrep_warm=not getattr(args, "smartrep_cold", False),
        flow_timeout=checked["flow_timeout"],
        subflows=getattr(args, "subflows", None),
        show_progress=not getattr(args, "quiet", False),
        say=say,
    )
    print(
        f"testbed run: {args.scheme}, {args.workload}, load {args.load}, {duration:g} s on "
        f"{len(tb.topo.hosts)} hosts -> {path}"
    )
    table = format_summary(meta["summary"], meta["counters"]).split("\n\n")[0]
    c = meta["counters"]
    s = meta["summary"]
    print(table)
    print()
    print(
        f"flows {c.get('flows', 0)} (failed {s['failed']}, unfinished {s['unfinished']}), "
        f"connections {c.get('connections', 0)}, replication overhead "
        f"{100 * (s.get('overhead') or 0.0):.2f} % of flow bytes, offered load "
        f"{c.get('offered_load', float('nan')):.3f}"
    )
    for reason, n in sorted(s["failure_reasons"].items(), key=lambda kv: -kv[1])[:3]:
        print(f"  failed {n}: {reason}")
    print(
        f"drops {c['drops']} (switch {c['switch_drops']}, host {c['host_drops']}), largest "
        f"switch queue {c['max_switch_queue']} packets (sampled every ~1 s)"
    )
    if args.scheme == "mptcp":
        print(
            f"MPTCP: {meta['config']['scheme']['subflows']} subflows per connection at most; "
            f"{c.get('mptcp_MPCapableACKRX', 0)} connections MP_CAPABLE, "
            f"{c.get('mptcp_MPJoinAckRx', 0)} subflows joined, "
            f"{c.get('mptcp_MPCapableFallbackACK', 0) + c.get('mptcp_MPCapableFallbackSYNACK', 0)}"
            f" fell back to TCP, {c.get('mptcp_MPCapableSYNTXDisabled', 0)} opened as TCP"
        )
