"""Huge pages for the simulator's heap.

At scale a packet hop waits on memory: ports, their rings, connections and routes spread
over tens of megabytes, and on 4 KiB pages nearly every cache miss is a TLB miss too (under
a hypervisor, a two-level page walk). glibc (2.35 and later) backs its whole heap with
transparent huge pages when a process *starts* with the tunable ``glibc.malloc.hugetlb=1``
(it then asks for them with ``madvise``, which the kernel honours unless its
``transparent_hugepage`` mode is ``never``). Measured gains are in docs/performance.md
("Huge pages for the heap"); results do not depend on it (where memory lies never changes
what is computed).

The tunable is read when a process starts, so it reaches the simulator by the environment
of the processes that run it: ``repflow sim`` and ``repflow bench`` start themselves again
with it, and the sweep's workers are started with it (local workers by their environment,
Ray's — a local Ray or a cluster's — by the job's ``runtime_env``). Set
``REPFLOW_HUGE_PAGES=0`` to run with the heap as the system gives it. A program that calls
:func:`repflow.simulate` itself gets it by being started with
``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path

#: glibc's tunable, and the value that asks for transparent huge pages (``madvise``).
TUNABLE = "glibc.malloc.hugetlb"
#: Environment variable that turns the feature off when set to ``0``.
OPT_OUT = "REPFLOW_HUGE_PAGES"
#: Set in a process started again by :func:`restart_with_huge_pages` (never restarts twice).
RESTARTED = "REPFLOW_HUGE_PAGES_RESTARTED"

_THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _glibc_has_tunable() -> bool:
    """Whether this process runs on glibc 2.35 or later (which reads the tunable)."""
    if not sys.platform.startswith("linux"):
        return False
    lib, version = platform.libc_ver()
    if lib != "glibc":
        return False
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (2, 35)


def thp_mode() -> str | None:
    """The kernel's transparent huge page mode (``always``, ``madvise``, ``never``), or
    None where it cannot be read."""
    try:
        text = _THP_MODE.read_text()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else None


def _possible() -> bool:
    """glibc reads the tunable and the kernel can give huge pages."""
    return _glibc_has_tunable() and thp_mode() != "never"


def wanted(env: Mapping[str, str] | None = None) -> bool:
    """Whether processes that simulate should be started with the tunable: glibc reads it,
    the kernel can give huge pages, and the user did not turn it off."""
    env = os.environ if env is None else env
    return env.get(OPT_OUT, "1") != "0" and _possible()


def with_huge_pages(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the tunable added to ``GLIBC_TUNABLES`` (other tunables kept; a value
    the user gave for it is left alone)."""
    out = dict(env)
    current = out.get("GLIBC_TUNABLES", "")
    names = [t.split("=", 1)[0] for t in current.split(":") if t]
    if TUNABLE not in names:
        out["GLIBC_TUNABLES"] = f"{current}:{TUNABLE}=1" if current else f"{TUNABLE}=1"
    return out


def _startup_tunables() -> str:
    """``GLIBC_TUNABLES`` as this process started with it (later changes to ``os.environ``
    reach child processes only)."""
    try:
        raw = Path("/proc/self/environ").read_bytes()
    except OSError:
        return os.environ.get("GLIBC_TUNABLES", "")
    for item in raw.split(b"\0"):
        if item.startswith(b"GLIBC_TUNABLES="):
            return item.split(b"=", 1)[1].decode(errors="replace")
    return ""


def active() -> bool:
    """Whether this process's heap asks for huge pages: it started with the tunable set to
    a value that does, on a glibc that reads it, under a kernel that gives them."""
    values = [t.split("=", 1) for t in _startup_tunables().split(":") if "=" in t]
    on = any(name == TUNABLE and value.strip() not in ("", "0") for name, value in values)
    return on and _possible()


def child_env() -> dict[str, str] | None:
    """The environment to start a simulating child process with (this one's, with the
    tunable), or None (this one's as it is) where huge pages are not :func:`wanted`."""
    return with_huge_pages(os.environ) if wanted() else None


def prepare_children() -> None:
    """Makes processes started from now on by this one (the local sweep's workers) start
    with the tunable, if :func:`wanted`. This process's own heap is unchanged."""
    env = child_env()
    if env is not None:
        os.environ.update(env)


def ray_runtime_env() -> dict[str, dict[str, str]] | None:
    """The Ray ``runtime_env`` that starts a job's workers with the tunable (Ray sets its
    ``env_vars`` in a worker's environment before the worker's Python starts, on every node
    of a cluster), or None where huge pages are not :func:`wanted` here. The value is this
    process's ``GLIBC_TUNABLES`` with the tunable added: it replaces a node's own. A node
    whose glibc is older than 2.35 ignores it, one whose kernel never gives huge pages runs
    as before; each stored point's ``timing.json`` says which (``huge_pages``)."""
    env = child_env()
    return None if env is None else {"env_vars": {"GLIBC_TUNABLES": env["GLIBC_TUNABLES"]}}


def restart_with_huge_pages() -> None:
    """Replaces this process by the same ``python -m repflow`` command started with the
    tunable, if :func:`wanted` and not done already; returns only when it does nothing."""
    if active() or not wanted() or os.environ.get(RESTARTED):
        return
    env = with_huge_pages(os.environ)
    env[RESTARTED] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, [sys.executable, "-m", "repflow", *sys.argv[1:]], env)
    except OSError:
        return  # cannot start again: run as we are
