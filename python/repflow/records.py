"""The per-flow records: their schema, the :class:`SimResult` that holds a run's records, and
the run directory they are stored in.

The record schema is defined once, in Rust (``repflow_sim::metrics::record_columns``), and read
from the core on first use. A run directory (``flows.parquet`` + ``run.json``) is the unit every
part of RepFlow exchanges (simulator, real-network runs, the experiment store)::

    DIR/flows.parquet   one row per application flow, columns RECORD_COLUMNS
    DIR/run.json        {"version", "config", "counters", "summary", ...}

:func:`write_run` writes both files into a fresh temporary directory next to ``DIR`` and
renames it into place, so ``DIR`` either does not exist or holds a complete run. It refuses
to replace a non-empty ``DIR`` unless ``force`` is given (an empty directory is replaced
silently); with ``force`` the old directory is swapped out only after the new one is complete.
The core's own records are written to Parquet by the core (``repflow_sim::parquet``:
dictionary or plain pages, uncompressed), so saving a run loads no Parquet library; records
given as a DataFrame or a pyarrow table go through pyarrow (zstd).

This module sits below the API (:mod:`repflow.api`) and every reader and writer of runs: it
imports nothing of the package but :mod:`repflow.errors`, and neither NumPy nor pandas until
a function needs them.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repflow.errors import UserError, require_core

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa

# NumPy and pandas are imported where they are used, not here: `repflow sim` and a sweep's
# workers hand the core's Arrow records to Parquet or IPC without a DataFrame, and pandas
# alone took 0.6 s of a 4 s run's start (docs/performance.md, "Outside the loop").


def _core():
    return require_core()


# The record schema is defined once, in Rust (``repflow_sim::metrics::record_columns``);
# RECORD_SCHEMA, RECORD_COLUMNS and RECORD_DTYPES below are read from the core on first use.


@functools.cache
def record_schema() -> pa.Schema:
    """The Arrow schema of the per-flow records (every ``flows.parquet``), from the Rust core.

    Sizes and counts are int64, times (seconds) float64. Unfinished flows have NaN
    ``finish``, ``fct`` and ``slowdown`` and ``winner == -1``.
    """
    import pyarrow as pa

    return pa.record_batch(_core().record_schema()).schema


#: Record columns counted by the simulator's TCP (loss recovery); runs over real sockets
#: (library, testbed) cannot see them and record -1.
TCP_COUNTER_COLUMNS = (
    "retransmissions",
    "timeouts",
    "fast_retransmits",
    "timeout_retransmits",
    "data_timeouts",
    "syn_timeouts",
    "spurious_retransmissions",
    "detect_retransmits",
    "atimer_retransmits",
)


def unmeasured_tcp_counters(n: int) -> dict[str, np.ndarray]:
    """-1 for every TCP counter column of ``n`` records (runs over real sockets)."""
    import numpy as np

    return {c: np.full(n, -1, dtype=np.int64) for c in TCP_COUNTER_COLUMNS}


def record_columns() -> tuple[str, ...]:
    """Column order of the per-flow records (shared with real-network runs)."""
    return tuple(record_schema().names)


def record_dtypes() -> dict[str, str]:
    """pandas dtype of every record column: ``"int64"`` or ``"float64"``."""
    import numpy as np

    return {f.name: np.dtype(f.type.to_pandas_dtype()).name for f in record_schema()}


def __getattr__(name: str) -> Any:
    # RECORD_SCHEMA / RECORD_COLUMNS / RECORD_DTYPES: constants in use, computed on first use
    # so that importing this module does not need the Rust core.
    if name == "RECORD_SCHEMA":
        return record_schema()
    if name == "RECORD_COLUMNS":
        return record_columns()
    if name == "RECORD_DTYPES":
        return record_dtypes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _is_arrow(x: Any) -> bool:
    """Whether ``x`` is Arrow data (a table, a record batch, or an object exporting one)
    rather than a DataFrame."""
    return hasattr(x, "__arrow_c_array__") or hasattr(x, "__arrow_c_stream__")


def _as_arrow(x: Any) -> pa.Table | pa.RecordBatch:
    """Arrow data (see :func:`_is_arrow`) as a pyarrow table or record batch."""
    import pyarrow as pa

    return x if isinstance(x, pa.Table | pa.RecordBatch) else pa.record_batch(x)


class SimResult:
    """The outcome of one simulation run (or of a run directory read back).

    ``flows`` may be given as a DataFrame or as Arrow records (a ``pyarrow`` table or record
    batch, such as the core's): Arrow records become a DataFrame on first use of
    :attr:`flows` only, so that writing them (:meth:`save`, :meth:`flows_table`) never needs
    pandas. ``summary`` may be the ``run.json`` form (a dict) or a DataFrame.
    """

    def __init__(self, flows: Any, summary: Any, metadata: dict[str, Any] | None = None):
        self._flows = flows
        #: ``{"version", "core_version", "config", "counters", "peak_memory_bytes", ...}``:
        #: everything needed to rerun and account for the run.
        self.metadata: dict[str, Any] = {} if metadata is None else metadata
        self._summary: Any = None
        if isinstance(summary, Mapping) or summary is None:
            #: The ``run.json`` form of the summary.
            self.summary_record = normalize_summary(summary or {})
        else:  # a DataFrame
            self._summary = summary
            self.summary_record = summary_record(summary)

    @property
    def flows(self) -> pd.DataFrame:
        """One row per application flow (columns :func:`record_columns`, dtypes
        :func:`record_dtypes`), in id order."""
        if _is_arrow(self._flows):
            self._flows = _as_arrow(self._flows).to_pandas()
        return self._flows

    @flows.setter
    def flows(self, value: Any) -> None:
        self._flows = value

    def flows_table(self) -> pa.Table:
        """The records as an Arrow table with the run-directory schema (no DataFrame is made
        when they came as Arrow)."""
        return flows_table(self._flows)

    @property
    def summary(self) -> pd.DataFrame:
        """A pandas DataFrame, one row per size bin (index ``bin``: ``"(0, 100KB]"``,
        ``"(100KB, 10MB]"``, ``"(10MB, inf)"``, ``"all"``; columns ``count``, ``finished``,
        ``fct_mean``, ``fct_p50``, ``fct_p99``, ``fct_p999``, ``slowdown_*``, ...; FCTs in
        seconds, NaN where a bin has no finished flow); the run-wide ``overhead`` and
        ``unfinished`` are in ``summary.attrs`` (and :attr:`overhead`, :attr:`unfinished`).
        :attr:`summary_record` keeps the ``run.json`` form."""
        if self._summary is None:
            self._summary = summary_frame(self.summary_record)
        return self._summary

    def __repr__(self) -> str:
        flows = self.counters.get("flows", "?")
        return f"SimResult(flows={flows} records, unfinished={self.unfinished})"

    @property
    def overhead(self) -> float:
        """Replication overhead: extra copies' application bytes / all flows' bytes."""
        return float(self.summary_record.get("overhead") or 0.0)

    @property
    def unfinished(self) -> int:
        """Flows that did not finish."""
        return int(self.summary_record.get("unfinished") or 0)

    @property
    def config(self) -> dict[str, Any]:
        """The full resolved configuration of the run."""
        return self.metadata.get("config", {})

    @property
    def counters(self) -> dict[str, Any]:
        """Run counters (flows, events, packet_hops, drops, wall_time, ...)."""
        return self.metadata.get("counters", {})

    def bin(self, label: str) -> dict[str, Any]:
        """Summary statistics of one bin: ``"(0, 100KB]"``, ``"(100KB, 10MB]"``,
        ``"(10MB, inf)"`` or ``"all"``."""
        for b in self.summary_record.get("bins", []):
            if b.get("bin") == label:
                return b
        raise KeyError(label)

    def save(self, path: str | os.PathLike[str], *, force: bool = False) -> Path:
        """Writes the run directory ``path`` (``flows.parquet`` + ``run.json``) atomically.

        A non-empty existing directory is replaced only with ``force``.
        """
        return write_run(path, self._flows, {**self.metadata, "summary": self.summary_record},
                         force=force)  # fmt: skip


def normalize_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Returns ``summary`` with JSON nulls of the bin statistics turned back into NaN."""
    out = dict(summary)
    bins = []
    for b in summary.get("bins", []) or []:
        bins.append({k: (math.nan if v is None else v) for k, v in b.items()})
    out["bins"] = bins
    return out


#: Columns :func:`summary_frame` adds (derived; not part of ``run.json``).
THIN_COLUMNS = ("p99_flows", "p99_thin")


#: A percentile resting on fewer finished flows than this is marked (its top 1 % is ~10
#: flows; docs/metrics.md). Also :data:`repflow.experiments.stats.P99_MIN_FLOWS`.
P99_MIN_FLOWS = 1000


def p99_min_flows() -> int:
    """Fewest finished flows a percentile (p99, p99.9) of a summary should rest on
    (:data:`P99_MIN_FLOWS`)."""
    return P99_MIN_FLOWS


def p99_flows(b: Mapping[str, Any]) -> int:
    """How many flows a summary bin's percentiles rest on: its finished flows."""
    n = b.get("finished", b.get("count", 0))
    try:
        return 0 if n is None or n != n else int(n)
    except (TypeError, ValueError):
        return 0


def thin_bins(record: Mapping[str, Any]) -> list[tuple[str, int]]:
    """``(bin, flows)`` of every summary bin with finished flows whose p99 rests on fewer than
    :func:`p99_min_flows` of them (its top 1 % is ten flows or fewer)."""
    floor = p99_min_flows()
    out = []
    for b in record.get("bins", []) or []:
        n = p99_flows(b)
        if 0 < n < floor:
            out.append((str(b.get("bin")), n))
    return out


def summary_frame(record: Mapping[str, Any]) -> pd.DataFrame:
    """The summary of ``run.json`` (``{"bins": [...], "overhead", "unfinished"}``) as a
    DataFrame with one row per size bin (index ``bin``) and the run-wide values in
    ``attrs``. Two derived columns say how far to trust the percentiles: ``p99_flows`` (the
    finished flows the bin's p99 and p99.9 rest on) and ``p99_thin`` (fewer than
    ``attrs["p99_min_flows"]``, :data:`~repflow.experiments.stats.P99_MIN_FLOWS`)."""
    bins = [dict(b) for b in record.get("bins", []) or []]
    floor = p99_min_flows()
    for b in bins:
        if "bin" in b:
            b["p99_flows"] = p99_flows(b)
            b["p99_thin"] = 0 < b["p99_flows"] < floor
    import pandas as pd

    df = pd.DataFrame(bins)
    if "bin" in df.columns:
        df = df.set_index("bin")
    df.attrs = {k: v for k, v in record.items() if k != "bins"}
    df.attrs["p99_min_flows"] = floor
    return df


def summary_record(frame: pd.DataFrame) -> dict[str, Any]:
    """The inverse of :func:`summary_frame`: the ``run.json`` form of a summary."""
    frame = frame.drop(columns=[c for c in THIN_COLUMNS if c in frame.columns])
    frame.attrs = {k: v for k, v in frame.attrs.items() if k != "p99_min_flows"}
    df = frame.reset_index() if frame.index.name == "bin" else frame
    bins = [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
            for row in df.to_dict("records")]  # fmt: skip
    return normalize_summary({"bins": bins, **frame.attrs})


def records_frame(columns: Mapping[str, Any]) -> pd.DataFrame:
    """Builds the records DataFrame (column order and dtypes fixed) from column sequences."""
    import pandas as pd

    dtypes = record_dtypes()
    return pd.DataFrame({c: pd.Series(columns[c], dtype=dtypes[c]) for c in record_columns()})


def flows_frame(batch: Any) -> pd.DataFrame:
    """The records DataFrame of an Arrow record batch (any object with ``__arrow_c_array__``,
    such as the ``records`` the core's ``simulate`` returns)."""
    import pyarrow as pa

    return pa.record_batch(batch).to_pandas()


#: File names inside a run directory.
FLOWS_FILE = "flows.parquet"
RUN_FILE = "run.json"
#: Version of the run-directory format (bump on incompatible change).
FORMAT_VERSION = 1

def arrow_schema() -> pa.Schema:
    """The Parquet schema of ``flows.parquet`` (the record schema of the Rust core)."""
    return record_schema()


def check_out_dir(out: str | os.PathLike[str], force: bool = False) -> Path:
    """Checks up front that a run can be written to ``out``; returns it as a path.

    Raises :class:`UserError` if ``out`` is a file, or a non-empty directory and not ``force``.
    """
    p = Path(out)
    if p.exists() or p.is_symlink():
        if not p.is_dir():
            raise UserError(f"--out: '{p}' exists and is not a directory")
        if any(p.iterdir()) and not force:
            raise UserError(
                f"--out: directory '{p}' exists and is not empty; choose another or pass --force "
                "to replace it"
            )
    return p


def _jsonable(obj: Any) -> Any:
    """Replaces NaN/inf floats by None so run.json is strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    return obj


def _json_default(obj: Any) -> Any:
    """JSON for numpy scalars and arrays, paths and sets in run metadata."""
    if hasattr(obj, "item") and getattr(obj, "ndim", 0) == 0:  # numpy scalar
        value = obj.item()
        return None if isinstance(value, float) and not math.isfinite(value) else value
    if hasattr(obj, "tolist"):
        return _jsonable(obj.tolist())
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    raise TypeError(f"run metadata: {type(obj).__name__} is not JSON-serializable")


#: One encoder for every element (``json.dumps`` with options builds one per call).
_ENCODER = json.JSONEncoder(allow_nan=False, default=_json_default)

#: Lists longer than this are written one element per line (a trace of thousands of flows):
#: each element by the C encoder, not the pure-Python one that indentation needs (0.3 s for
#: a 2,473-flow trace).
LONG_LIST = 16


def dumps_run_json(doc: Any, indent: int = 0) -> str:
    """``doc`` as strict JSON (NaN is an error), indented by two spaces per level, with the
    elements of a long list (more than :data:`LONG_LIST`) one per line, each on one line;
    ends with a newline at the top level. ``json.loads`` of it is ``doc``."""

    compact = _ENCODER.encode
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(doc, Mapping) and doc:
        items = [f"{inner}{compact(str(k))}: {dumps_run_json(v, indent + 1)}"
                 for k, v in doc.items()]  # fmt: skip
        text = "{\n" + ",\n".join(items) + f"\n{pad}}}"
    elif isinstance(doc, list | tuple) and doc:
        if len(doc) > LONG_LIST:
            items = [f"{inner}{compact(v)}" for v in doc]
        else:
            items = [f"{inner}{dumps_run_json(v, indent + 1)}" for v in doc]
        text = "[\n" + ",\n".join(items) + f"\n{pad}]"
    else:
        text = compact(doc)
    return text + "\n" if indent == 0 else text


def flows_table(flows: Any) -> pa.Table:
    """Converts records (a DataFrame, or Arrow records: a table, a record batch or an object
    exporting one) to an Arrow table with the run-directory schema."""
    import pyarrow as pa

    columns = list(record_columns())
    arrow = _is_arrow(flows)
    if arrow:
        flows = _as_arrow(flows)
    names = flows.schema.names if arrow else list(flows.columns)
    missing = [c for c in columns if c not in names]
    if missing:
        raise ValueError(f"flow records lack columns {missing}")
    if arrow:
        table = flows if isinstance(flows, pa.Table) else pa.Table.from_batches([flows])
        return table.select(columns).cast(arrow_schema())
    return pa.Table.from_pandas(flows[columns], schema=arrow_schema(), preserve_index=False)


def _core_records(flows: Any) -> bool:
    """Whether ``flows`` is the core's own batch of records (its ``ArrowBatch`` with the
    record columns), which the core writes to Parquet itself."""
    kind = type(flows)
    if kind.__name__ != "ArrowBatch" or kind.__module__ != "repflow._core":
        return False
    return list(flows.column_names) == list(_core().record_schema().column_names)


def write_run(
    out: str | os.PathLike[str],
    flows: Any,
    meta: Mapping[str, Any],
    *,
    force: bool = False,
) -> Path:
    """Writes ``flows`` (a DataFrame or Arrow records) and ``meta`` as a run directory at
    ``out``, atomically.

    ``meta`` becomes ``run.json`` (NaN written as null). Returns the directory.
    """
    target = check_out_dir(out, force).absolute()
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out: cannot create '{parent}': {exc}") from None
    core = _core_records(flows)
    table = None if core else flows_table(flows)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=parent))
    old: Path | None = None
    try:
        if table is None:  # the core's records: its own writer, no pyarrow in this process
            _core().write_parquet(flows, tmp / FLOWS_FILE)
        else:
            import pyarrow.parquet as pq

            pq.write_table(table, tmp / FLOWS_FILE, compression="zstd")
        try:  # metadata without NaN as it is; else with NaN as null (a walk of it all)
            text = dumps_run_json({"format": FORMAT_VERSION, **meta})
        except ValueError:
            text = dumps_run_json({"format": FORMAT_VERSION, **_jsonable(dict(meta))})
        with open(tmp / RUN_FILE, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o755)
        if target.exists():
            if any(target.iterdir()):
                if not force:  # appeared while we were writing
                    raise UserError(f"--out: directory '{target}' is not empty")
                old = parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
                os.rename(target, old)
            else:
                target.rmdir()
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not target.exists():
            os.rename(old, target)
            old = None
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target


def read_flows(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Reads a ``flows.parquet`` file into a DataFrame with the record dtypes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = Path(path)
    try:
        table = pq.read_table(p)
    except FileNotFoundError:
        raise UserError(f"'{p}' does not exist") from None
    except (OSError, pa.ArrowException) as exc:
        raise UserError(f"'{p}' is not a readable Parquet file: {exc}") from None
    columns = list(record_columns())
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise UserError(f"'{p}': missing columns {', '.join(missing)}")
    df = table.select(columns).to_pandas()
    return df.astype(record_dtypes())


def load_run(path: str | os.PathLike[str]) -> SimResult:
    """Reads a run directory written by :func:`write_run` (or ``repflow sim --out``).

    ``metadata`` holds every key of ``run.json`` except ``summary``.
    """
    d = Path(path)
    if not d.is_dir():
        raise UserError(f"run directory '{d}' does not exist")
    run_file = d / RUN_FILE
    try:
        with open(run_file, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise UserError(f"'{run_file}' does not exist (not a run directory?)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"'{run_file}' is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise UserError(f"'{run_file}': expected a JSON object")
    flows = read_flows(d / FLOWS_FILE)
    summary = normalize_summary(doc.pop("summary", {}) or {})
    return SimResult(flows=flows, summary=summary, metadata=doc)
