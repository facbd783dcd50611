"""What a killed ``repflow testbed run`` leaves behind, and removing it once provably stale.

A run works in a hidden directory beside ``--out`` (``.<out>.hosts-XXXX``: the hosts' logs and
records until they are merged) and holds a lock file in the state directory
(``/run/repflow-testbed/<prefix>.run.lock``). A run that ends, however it ends short of
``kill -9``, removes both. After ``kill -9`` they stay; this module lets ``repflow testbed down``
and the next run remove them — but only what is *provably* stale:

* a work directory holds a lock file (:data:`OWNER`) that its run keeps ``flock``-ed while it
  lives; a directory whose lock can be taken belongs to a dead run (the kernel releases a
  ``flock`` when its holder dies, whatever killed it). A directory without that file is left
  alone. Work directories are registered in ``<prefix>.workdirs`` in the state directory, so
  ``down`` finds them wherever ``--out`` was;
* a lock file in the state directory is stale when it can be locked (nobody holds it).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path


def state_dir() -> Path:
    """Directory of state files: ``$REPFLOW_TESTBED_STATE_DIR`` or ``/run/repflow-testbed``."""
    return Path(os.environ.get("REPFLOW_TESTBED_STATE_DIR", "/run/repflow-testbed"))


#: The lock file inside a run's work directory, held for the run's lifetime.
OWNER = ".owner.lock"


def _registry(prefix: str) -> Path:
    return state_dir() / f"{prefix.rstrip('-') or 'default'}.workdirs"


def _unheld(path: Path) -> bool:
    """Whether nobody holds a ``flock`` on ``path`` (checked by taking and releasing it)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # releases the lock if it was taken
    return True


@contextlib.contextmanager
def owned_workdir(work: Path, prefix: str) -> Iterator[None]:
    """Marks ``work`` as the live work directory of a run of testbed ``prefix`` for the block:
    its :data:`OWNER` lock is held, and the directory is registered for :func:`clean`."""
    fd = os.open(work / OWNER, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with contextlib.suppress(OSError):
            reg = _registry(prefix)
            reg.parent.mkdir(parents=True, exist_ok=True)
            with open(reg, "a", encoding="utf-8") as fh:
                fh.write(f"{work.absolute()}\n")
        yield
    finally:
        os.close(fd)
        _forget(prefix, work)


def _forget(prefix: str, work: Path) -> None:
    reg = _registry(prefix)
    with contextlib.suppress(OSError):
        lines = [ln for ln in reg.read_text(encoding="utf-8").splitlines() if ln.strip()]
        keep = [ln for ln in lines if Path(ln) != work.absolute()]
        if keep:
            reg.write_text("".join(f"{ln}\n" for ln in keep), encoding="utf-8")
        else:
            reg.unlink()


def stale_workdir(d: Path) -> bool:
    """Whether ``d`` is a run's work directory whose run is dead."""
    return d.is_dir() and (d / OWNER).is_file() and _unheld(d / OWNER)


def clean(prefix: str, near: Path | None = None, locks: bool = True) -> list[Path]:
    """Removes the stale work directories of testbed ``prefix`` (those registered, and any
    ``.*.hosts-*`` directory beside ``near``, a run's ``--out``) and, with ``locks``, its stale
    run lock (``down`` does; a run takes that lock itself and removes it when done). Returns the
    directories removed."""
    removed: list[Path] = []
    candidates: list[Path] = []
    reg = _registry(prefix)
    with contextlib.suppress(OSError):
        candidates += [Path(ln) for ln in reg.read_text(encoding="utf-8").splitlines() if ln]
    if near is not None:
        parent = Path(near).absolute().parent
        with contextlib.suppress(OSError):
            candidates += sorted(parent.glob(".*.hosts-*"))
    for d in dict.fromkeys(candidates):
        if stale_workdir(d):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
        if not d.exists():
            _forget(prefix, d)
    run_lock = state_dir() / f"{prefix.rstrip('-') or 'default'}.run.lock"
    if locks and run_lock.exists() and _unheld(run_lock):
        with contextlib.suppress(OSError):
            run_lock.unlink()
    return removed
