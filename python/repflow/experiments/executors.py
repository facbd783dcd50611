"""Executors run grid points and hand back :class:`~repflow.experiments.store.PointResult`\\ s.

Two implementations behind one interface (:class:`Executor`):

* :class:`LocalExecutor` — one simulation per worker process on this machine (spawned, so a
  worker holds no state of the driver), at most one point in flight per worker;
* :class:`RayExecutor` — Ray tasks on an existing cluster (``address="auto"`` or
  ``"HOST:PORT"``) or on a local Ray instance started on demand.

Workers only compute; the driver writes the store. A point's result does not depend on which
executor ran it: the simulation is deterministic in its configuration, and records travel as
Arrow IPC bytes (exact float64 values).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import socket
import sys
import threading
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from repflow import hugepages
from repflow.errors import UserError
from repflow.experiments.store import PointResult, table_to_ipc

#: A unit of work: the point's store key and the configuration to simulate.
Task = tuple[str, dict[str, Any]]
#: Computes one point (must be a module-level function so it can be shipped to workers).
Runner = Callable[[str, dict[str, Any]], PointResult]


#: Run counters that measure the machine, not the simulation (kept out of run.json so that a
#: point's stored result is identical whoever computed it; wall time goes to timing.json).
VOLATILE = frozenset({"wall_time", "events_per_sec", "packet_hops_per_sec", "peak_memory_bytes"})


def run_point(key: str, config: dict[str, Any]) -> PointResult:
    """Simulates one point (the default runner); raises if the simulation fails."""
    where = f"{socket.gethostname()}:{os.getpid()}"
    t0 = time.perf_counter()
    import repflow

    res = repflow.simulate(config)
    # The core's Arrow records straight to IPC: no DataFrame (and no pandas) on the way.
    table = res.flows_table()
    md = res.metadata
    counters = {k: v for k, v in (md.get("counters") or {}).items() if k not in VOLATILE}
    run = {
        "version": md.get("version"),
        "core_version": md.get("core_version"),
        "config": md.get("config"),
        "counters": counters,
        "summary": res.summary_record,
    }
    return PointResult(
        key=key, ok=True, flows_ipc=table_to_ipc(table), run=run,
        wall=time.perf_counter() - t0, where=where, huge_pages=md.get("huge_pages"),
    )  # fmt: skip


def execute(runner: Runner, key: str, config: dict[str, Any]) -> PointResult:
    """Runs ``runner`` in a worker, turning any failure into a failed :class:`PointResult`
    (with the error line and traceback) so that one bad point never stops a sweep."""
    where = f"{socket.gethostname()}:{os.getpid()}"
    t0 = time.perf_counter()
    try:
        result = runner(key, config)
        if not result.where:
            result.where = where
        return result
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a Rust panic is a BaseException
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return PointResult(
            key=key, ok=False, error=f"{type(exc).__name__}: {msg}",
            traceback=traceback.format_exc(), wall=time.perf_counter() - t0, where=where,
        )  # fmt: skip


def failed(key: str, error: str, where: str = "") -> PointResult:
    """A result for a point whose worker died."""
    return PointResult(key=key, ok=False, error=error, traceback=None, where=where)


class Executor(ABC):
    """Runs tasks and reports each result as soon as it is known."""

    #: Short name for logs and the report (``local``, ``ray``).
    name: str = ""
    #: Simulations that run at once.
    workers: int = 1

    @abstractmethod
    def run(self, tasks: Iterable[Task], on_result: Callable[[PointResult], None]) -> None:
        """Computes every task, calling ``on_result`` in the driver for each one."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Releases workers."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- local processes ---------------------------------------------------------------------------


def _worker_init() -> None:
    # Ctrl-C reaches the whole process group; the driver decides, workers just get stopped.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Die with the driver (kill -9 of the driver must not leave simulations running).
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            pr_set_pdeathsig = 1
            libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
            if os.getppid() == 1:  # the driver died before prctl took effect
                os._exit(1)
        except OSError:
            pass


#: The warning filter :func:`quiet_resource_tracker` gives the resource tracker.
_TRACKER_FILTER = "ignore::UserWarning:multiprocessing.resource_tracker"


def quiet_resource_tracker() -> None:
    """Keeps multiprocessing's resource tracker from warning about "leaked semaphore objects"
    after the driver was killed with ``kill -9``.

    The pool's queues hold POSIX semaphores, which the tracker (a process of its own) removes
    when the driver dies without closing them — it cleans them up, and then warns on the
    terminal the killed sweep ran in, where the warning lands in the next command's output.
    Nothing leaks, so the warning is silenced: the tracker starts with this process's warning
    options (``-W``), to which this adds an ``ignore`` for its module, before the first pool
    starts it. A tracker already running is left as it is."""
    if _TRACKER_FILTER not in sys.warnoptions:
        sys.warnoptions.append(_TRACKER_FILTER)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class LocalExecutor(Executor):
    """Worker processes on this machine, one simulation each."""

    name = "local"

    def __init__(self, jobs: int | None = None, runner: Runner = run_point, max_crashes: int = 2):
        self.workers = max(1, jobs or os.cpu_count() or 1)
        self.runner = runner
        self.max_crashes = max_crashes
        self._pool: ProcessPoolExecutor | None = None

    def _new_pool(self) -> ProcessPoolExecutor:
        hugepages.prepare_children()  # workers start with a heap on huge pages
        quiet_resource_tracker()
        return ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=mp.get_context("spawn"),
            initializer=_worker_init,
        )

    def _submit(self, task: Task) -> Future[PointResult]:
        assert self._pool is not None
        # Workers are spawned on submit; started with SIGINT ignored (inherited across exec),
        # they never print a KeyboardInterrupt traceback while still importing.
        with _sigint_ignored():
            return self._pool.submit(execute, self.runner, *task)

    def run(self, tasks: Iterable[Task], on_result: Callable[[PointResult], None]) -> None:
        pending = list(tasks)
        pending.reverse()  # pop() from the end keeps the given order
        crashes: dict[str, int] = {}
        inflight: dict[Future[PointResult], Task] = {}
        self._pool = self._new_pool()
        try:
            while pending or inflight:
                while pending and len(inflight) < self.workers:
                    task = pending.pop()
                    inflight[self._submit(task)] = task
                done, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
                broken = False
                for fut in done:
                    task = inflight.pop(fut)
                    try:
                        on_result(fut.result())
                    except BrokenProcessPool:
                        broken = True
                        crashes[task[0]] = crashes.get(task[0], 0) + 1
                        if crashes[task[0]] >= self.max_crashes:
                            on_result(failed(task[0], "worker process died while simulating"))
                        else:
                            pending.append(task)
                if broken:
                    # Every other in-flight future fails too; requeue them and start afresh.
                    for fut, task in inflight.items():
                        fut.cancel()
                        pending.append(task)
                    inflight.clear()
                    self._pool.shutdown(wait=False, cancel_futures=True)
                    self._pool = self._new_pool()
        finally:
            self.close()

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:  # a running simulation does not stop by itself
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(timeout=5)


# -- Ray -----------------------------------------------------------------------------------------


class RayExecutor(Executor):
    """Ray tasks, one CPU each, on a cluster or on a local Ray started on demand."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        jobs: int | None = None,
        runner: Runner = run_point,
        local_cpus: int | None = None,
    ):
        try:
            import ray
        except ImportError:
            raise UserError(
                "--executor ray needs Ray: pip install 'repflow[ray]' (or pip install ray)"
            ) from None
        self._ray = ray
        self.runner = runner
        self._started = False
        if address and address != "auto":
            _check_reachable(address)
        if not ray.is_initialized():
            # The workers Ray starts for this job start with the tunable in their
            # environment, on a cluster as on a local Ray: their heaps on huge pages.
            runtime_env = hugepages.ray_runtime_env()
            try:
                if address:
                    ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
                else:
                    ray.init(
                        address="local",  # a new instance, even if `ray start` left one
                        num_cpus=local_cpus or min(2, os.cpu_count() or 1),
                        include_dashboard=False,
                        log_to_driver=False,
                        runtime_env=runtime_env,
                    )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = f"Ray cluster at {address}" if address else "a local Ray instance"
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise UserError(f"--address: cannot connect to {where}: {first}") from None
            self._started = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = max(1, min(jobs or cpus, cpus))
        self._remote = ray.remote(num_cpus=1, max_retries=1)(execute)

    def run(self, tasks: Iterable[Task], on_result: Callable[[PointResult], None]) -> None:
        ray = self._ray
        pending = list(tasks)
        pending.reverse()
        inflight: dict[Any, Task] = {}
        try:
            while pending or inflight:
                while pending and len(inflight) < self.workers:
                    task = pending.pop()
                    inflight[self._remote.remote(self.runner, *task)] = task
                done, _ = ray.wait(list(inflight), num_returns=1)
                for ref in done:
                    task = inflight.pop(ref)
                    try:
                        result = ray.get(ref)
                    except (KeyboardInterrupt, SystemExit):
                        raise
                    except Exception as exc:  # noqa: BLE001 - worker died / task lost
                        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                        result = failed(task[0], f"Ray task failed: {type(exc).__name__}: {first}")
                    on_result(result)
        finally:
            for ref in inflight:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
            self._started = False


def _check_reachable(address: str) -> None:
    """Fails fast (Ray itself retries for minutes) when HOST:PORT does not accept connections."""
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise UserError(f"--address: expected auto or HOST:PORT, got '{address}'")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise UserError(
            f"--address: no Ray cluster reachable at {hostport} ({exc.strerror or exc}); "
            "start one with `ray start --head` or omit --address for a local Ray"
        ) from None


def make_executor(
    kind: str,
    jobs: int | None = None,
    address: str | None = None,
    runner: Runner = run_point,
) -> Executor:
    """``"local"`` or ``"ray"``."""
    if kind == "local":
        if address:
            raise UserError("--address only applies to --executor ray")
        return LocalExecutor(jobs=jobs, runner=runner)
    if kind == "ray":
        return RayExecutor(address=address, jobs=jobs, runner=runner)
    raise UserError(f"--executor: unknown executor '{kind}' (accepted: local, ray)")
