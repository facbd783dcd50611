"""What ``--out DIR`` means in every command (docs/cli.md), checked before anything is computed.

- ``DIR`` may not exist yet: it is created (with its parents) when the results are written.
- ``DIR`` must not be a file, and an empty directory is always accepted.
- A non-empty ``DIR`` is accepted only if the same command made it for the same job: a sweep
  resumes a directory of the same spec (``sweep.json`` naming it), ``model`` replaces its own
  files; a directory holding anything else is refused (a run directory of ``sim`` is replaced
  only with ``sim --force``; ``testbed run`` never replaces one).
- The nearest existing ancestor must be a directory in which an entry can really be created: a
  file is created there and removed at once (``os.access`` would answer yes for root even on a
  read-only file system), so nothing is left behind when the command refuses.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from repflow.errors import UserError


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def check_writable(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """Raises a one-line :class:`UserError` unless ``path`` can be written or created."""
    p = Path(path)
    probe = p.absolute()
    while not (probe.exists() or probe.is_symlink()):
        probe = probe.parent
    if probe != p.absolute() and not probe.is_dir():
        raise UserError(f"{flag}: cannot create '{p}': '{probe}' is not a directory")
    if probe == p.absolute() and not p.is_dir():
        raise UserError(f"{flag}: '{p}' exists and is not a directory")
    try:
        fd, name = tempfile.mkstemp(prefix=".repflow-write-test-", dir=probe)
    except OSError as exc:
        raise UserError(f"{flag}: cannot write in '{probe}': {_reason(exc)}") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)
    return p


def prepare_out(
    path: str | os.PathLike[str],
    *,
    command: str,
    owned: Callable[[Path], bool] | None = None,
    flag: str = "--out",
    hint: str = "choose another directory",
) -> Path:
    """Checks ``--out`` for ``command`` (see the module's rules). ``owned(dir)`` tells whether a
    non-empty directory is one this command may resume or update."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UserError(f"{flag}: '{p}' exists and is not a directory")
    if p.is_dir():
        try:
            entries = [e for e in p.iterdir() if not e.name.startswith(".repflow-write-test-")]
        except OSError as exc:
            raise UserError(f"{flag}: cannot read '{p}': {_reason(exc)}") from None
        if entries and not (owned is not None and owned(p)):
            made = made_by(p)
            why = (
                f"holds {made}"
                if made
                else f"is not empty and was not made by `repflow {command}` for this job"
            )
            raise UserError(f"{flag}: directory '{p}' {why}; {hint}")
    return check_writable(p, flag)


def made_by(d: Path) -> str:
    """What made the result directory ``d``, as far as its files tell ("the sweep of spec
    'x' (experiments/x.toml)", ...), or "" when they do not."""
    import json

    def read(name: str) -> dict:
        try:
            doc = json.loads((d / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    sweep = read("sweep.json")
    if sweep:
        spec = sweep.get("spec") if isinstance(sweep.get("spec"), dict) else {}
        path = spec.get("path") if spec else None
        where = f" ({path})" if path else ""
        return f"the sweep of spec {sweep.get('name')!r}{where}, made by `repflow sweep`"
    marker = read("reproduce.json")
    if marker:
        return f"the results of `{marker.get('command', 'repflow reproduce')}`"
    run = read("run.json")
    if run:
        what = str(run.get("command") or "").split(" ")[:2]
        return f"a run directory{' of `' + ' '.join(what) + '`' if what[0] else ''}"
    return ""
