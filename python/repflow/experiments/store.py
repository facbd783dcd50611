"""The result store: one directory per experiment, one subdirectory per grid point.

Layout::

    <root>/
      sweep.json               the spec, the points (axis labels → key), unavailable schemes
      spec.toml                the spec file as it was run
      points/<key>/            one finished point (written to a temporary directory, then renamed)
        flows.parquet          per-flow records (repflow.api.RECORD_COLUMNS)
        run.json               {"version", "config", "counters", "summary", "key"}
        timing.json            wall time, executor and whether its heap was on huge pages
                               (the only non-deterministic file)
      points/<key>/error.json  a point whose simulation failed: the error and its traceback
      figures/, report.html, report.md

A point's key is the SHA-256 of the canonical JSON of its fully resolved configuration (every
default filled in by the simulator's own validation, seed included) and the project version, so
a point is recomputed only when something that could change its result changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from repflow.errors import UserError

#: Length of the key prefix used as a directory name (64 bits).
KEY_DIR_LEN = 16

POINTS = "points"
SWEEP_FILE = "sweep.json"


def canonical_json(obj: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, exact floats."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)


def point_key(resolved_config: dict[str, Any], version: str) -> str:
    """The store key of a point: sha256 over its resolved configuration and project version."""
    payload = canonical_json({"config": resolved_config, "version": version})
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _umask() -> int:
    """The process's file-creation mask (read without changing it for good)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _public_mode(fd: int) -> None:
    """Gives a file made by ``mkstemp`` (always 0600) the mode ``open()`` would have given it:
    0666 less the umask, as every other file of a result directory."""
    os.fchmod(fd, 0o666 & ~_umask())


def write_json_atomic(path: Path, obj: Any) -> None:
    """Writes JSON to ``path`` through a temporary file in the same directory (mode as any
    new file: 0666 less the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        _public_mode(fd)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1, sort_keys=True, allow_nan=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str | bytes) -> None:
    """Writes text or bytes to ``path`` through a temporary file in the same directory (mode
    as any new file: 0666 less the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        _public_mode(fd)
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class PointResult:
    """What an executor hands back for one point (picklable, executor-independent)."""

    key: str
    ok: bool
    #: Per-flow records (Arrow IPC stream bytes) when ``ok``.
    flows_ipc: bytes | None = None
    #: run.json content when ``ok``.
    run: dict[str, Any] | None = None
    #: One-line error and traceback when not ``ok``.
    error: str | None = None
    traceback: str | None = None
    #: Seconds the simulation took.
    wall: float = 0.0
    #: Which executor/host ran it.
    where: str = ""
    #: Whether the simulating process's heap asked for huge pages (speed only), if known.
    huge_pages: bool | None = None

    def flows(self) -> pd.DataFrame:
        """The records as a DataFrame."""
        assert self.flows_ipc is not None
        return pa.ipc.open_stream(self.flows_ipc).read_all().to_pandas()


def table_to_ipc(table: pa.Table) -> bytes:
    """Serializes an Arrow table (compact, exact, fast to pickle)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


class Store:
    """A directory of stored points of one experiment."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.points_dir = self.root / POINTS

    # -- layout -----------------------------------------------------------------------------
    def point_dir(self, key: str) -> Path:
        """Directory of a point."""
        return self.points_dir / key[:KEY_DIR_LEN]

    def status(self, key: str) -> str:
        """``"done"``, ``"failed"`` or ``"missing"``."""
        d = self.point_dir(key)
        if (d / "run.json").is_file() and (d / "flows.parquet").is_file():
            return "done"
        if (d / "error.json").is_file():
            return "failed"
        return "missing"

    def prepare(self) -> None:
        """Creates the directories and removes temporary directories left by a killed run."""
        self.points_dir.mkdir(parents=True, exist_ok=True)
        for d in self.points_dir.glob(".tmp-*"):
            shutil.rmtree(d, ignore_errors=True)

    # -- writing ----------------------------------------------------------------------------
    def write(self, result: PointResult) -> None:
        """Stores a point atomically: everything goes to a temporary directory that is then
        renamed into place, so a point directory is either complete or absent."""
        final = self.point_dir(result.key)
        tmp = self.points_dir / f".tmp-{result.key[:KEY_DIR_LEN]}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        try:
            timing = {
                "wall_seconds": result.wall,
                "executor": result.where,
                "huge_pages": result.huge_pages,
                "stored_at": time.time(),
            }
            if result.ok:
                assert result.flows_ipc is not None and result.run is not None
                table = pa.ipc.open_stream(result.flows_ipc).read_all()
                pq.write_table(table, tmp / "flows.parquet")
                run = dict(result.run)
                run["key"] = result.key
                _dump(tmp / "run.json", run)
            else:
                _dump(
                    tmp / "error.json",
                    {"key": result.key, "error": result.error, "traceback": result.traceback},
                )
            _dump(tmp / "timing.json", timing)
            for f in tmp.iterdir():
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
            if final.exists():  # a failed point being retried
                shutil.rmtree(final)
            os.rename(tmp, final)
            _fsync_dir(self.points_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def write_sweep(self, sweep: dict[str, Any], spec_text: str) -> None:
        """Records which points make up the experiment (atomically)."""
        self.root.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.root / "spec.toml", spec_text)
        write_json_atomic(self.root / SWEEP_FILE, sweep)

    # -- reading ----------------------------------------------------------------------------
    def read_sweep(self) -> dict[str, Any]:
        """The sweep description written by :meth:`write_sweep`."""
        p = self.root / SWEEP_FILE
        try:
            return json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(
                f"{self.root}: not an experiment directory (no {SWEEP_FILE}); "
                "run `repflow sweep SPEC --out DIR` first"
            ) from None
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"{p}: unreadable ({exc})") from None

    def read_run(self, key: str) -> dict[str, Any]:
        """run.json of a finished point."""
        return json.loads((self.point_dir(key) / "run.json").read_text(encoding="utf-8"))

    def read_flows(self, key: str) -> pd.DataFrame:
        """flows.parquet of a finished point."""
        return pq.read_table(self.point_dir(key) / "flows.parquet").to_pandas()

    def read_error(self, key: str) -> dict[str, Any]:
        """error.json of a failed point."""
        return json.loads((self.point_dir(key) / "error.json").read_text(encoding="utf-8"))

    def read_timing(self, key: str) -> dict[str, Any] | None:
        """timing.json of a point, if present."""
        try:
            return json.loads((self.point_dir(key) / "timing.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None


def _dump(path: Path, obj: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=True, allow_nan=True)
        f.write("\n")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
