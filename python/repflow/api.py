"""The Python API of the simulator: :func:`simulate`, :func:`load_config` and :class:`SimResult`.

A configuration is a nested ``dict`` with the schema documented in
``docs/configuration.md`` (the same schema as ``--config run.toml`` files and the Rust
``repflow_sim::Config``); missing fields take their defaults. A path to a TOML file works
wherever a configuration is expected.

>>> import repflow
>>> res = repflow.simulate({"topology": {"kind": "star", "hosts": 8},
...                         "workload": {"load": 0.3, "duration": "5ms"}})  # doctest: +SKIP
>>> res.flows.groupby("copies").fct.mean()  # doctest: +SKIP
>>> res.save("runs/star")  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import json
import math
import os
import resource
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from repflow import hugepages
from repflow.errors import UserError, require_core

if TYPE_CHECKING:
    import pyarrow as pa

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
    return {c: np.full(n, -1, dtype=np.int64) for c in TCP_COUNTER_COLUMNS}


def record_columns() -> tuple[str, ...]:
    """Column order of the per-flow records (shared with real-network runs)."""
    return tuple(record_schema().names)


def record_dtypes() -> dict[str, str]:
    """pandas dtype of every record column: ``"int64"`` or ``"float64"``."""
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


ConfigLike = Mapping[str, Any] | str | os.PathLike[str]


@dataclass(eq=False)
class SimResult:
    """The outcome of one simulation run (or of a run directory read back)."""

    #: One row per application flow (columns :func:`record_columns`, dtypes
    #: :func:`record_dtypes`), in id order.
    flows: pd.DataFrame
    #: A pandas DataFrame, one row per size bin (index ``bin``: ``"(0, 100KB]"``,
    #: ``"(100KB, 10MB]"``, ``"(10MB, inf)"``, ``"all"``; columns ``count``, ``finished``,
    #: ``fct_mean``, ``fct_p50``, ``fct_p99``, ``fct_p999``, ``slowdown_*``, ...; FCTs in
    #: seconds, NaN where a bin has no finished flow); the run-wide ``overhead`` and
    #: ``unfinished`` are in ``summary.attrs`` (and :attr:`overhead`, :attr:`unfinished`).
    #: Given as the ``run.json`` form (a dict), it is converted; :attr:`summary_record` keeps
    #: that form.
    summary: Any
    #: ``{"version", "core_version", "config", "counters", "peak_memory_bytes", ...}``:
    #: everything needed to rerun and account for the run.
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.summary, pd.DataFrame):
            self.summary_record = summary_record(self.summary)
        else:
            self.summary_record = normalize_summary(self.summary or {})
            self.summary = summary_frame(self.summary_record)

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
        from repflow.runio import write_run

        return write_run(path, self.flows, {**self.metadata, "summary": self.summary_record},
                         force=force)  # fmt: skip


def _core():
    return require_core()


def load_config(config: ConfigLike | None = None) -> dict[str, Any]:
    """Validates ``config`` (a mapping or a TOML file path) and returns it with every default
    filled in and the flow-size CDF loaded into ``workload.cdf_text``.

    Raises :class:`~repflow.errors.UserError` naming the offending field or file.
    """
    from repflow import config_io

    if config is None:
        cfg: Mapping[str, Any] = {}
    elif isinstance(config, str | os.PathLike):
        cfg = config_io.load_toml(config)
    else:
        cfg = config
    return config_io.validate(cfg)


def normalize_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Returns ``summary`` with JSON nulls of the bin statistics turned back into NaN."""
    out = dict(summary)
    bins = []
    for b in summary.get("bins", []) or []:
        bins.append({k: (math.nan if v is None else v) for k, v in b.items()})
    out["bins"] = bins
    return out


def summary_frame(record: Mapping[str, Any]) -> pd.DataFrame:
    """The summary of ``run.json`` (``{"bins": [...], "overhead", "unfinished"}``) as a
    DataFrame with one row per size bin (index ``bin``) and the run-wide values in
    ``attrs``."""
    bins = [dict(b) for b in record.get("bins", []) or []]
    df = pd.DataFrame(bins)
    if "bin" in df.columns:
        df = df.set_index("bin")
    df.attrs = {k: v for k, v in record.items() if k != "bins"}
    return df


def summary_record(frame: pd.DataFrame) -> dict[str, Any]:
    """The inverse of :func:`summary_frame`: the ``run.json`` form of a summary."""
    df = frame.reset_index() if frame.index.name == "bin" else frame
    bins = [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
            for row in df.to_dict("records")]  # fmt: skip
    return normalize_summary({"bins": bins, **frame.attrs})


def peak_rss_bytes(who: int = resource.RUSAGE_SELF) -> int:
    """Peak resident set size of this process (or of its waited-for children), in bytes."""
    rss = resource.getrusage(who).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


ProgressFn = Callable[[float, float, int, int, int], bool | None]


def records_frame(columns: Mapping[str, Any]) -> pd.DataFrame:
    """Builds the records DataFrame (column order and dtypes fixed) from column sequences."""
    dtypes = record_dtypes()
    return pd.DataFrame({c: pd.Series(columns[c], dtype=dtypes[c]) for c in record_columns()})


def flows_frame(batch: Any) -> pd.DataFrame:
    """The records DataFrame of an Arrow record batch (any object with ``__arrow_c_array__``,
    such as the ``records`` the core's ``simulate`` returns)."""
    import pyarrow as pa

    return pa.record_batch(batch).to_pandas()


def simulate(
    config: ConfigLike | None = None, progress: ProgressFn | None = None, threads: int = 1
) -> SimResult:
    """Runs one simulation and returns its records, summary and metadata.

    ``config`` is a mapping of the schema (missing fields take defaults) or a TOML file path.
    ``progress(sim_time, duration, flows_started, flows_finished, events)`` is called now and
    then; returning ``False`` stops the run (raising :class:`KeyboardInterrupt`).
    ``threads`` > 1 runs the network's parts (fat-tree pods, core switches spread) on that
    many threads: the same results bit for bit, on every scheme.
    """
    from repflow import __version__

    if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= 65536:
        raise UserError(f"threads: a whole number of threads, 1 to 65536, not {threads!r}")
    core = _core()
    cfg = load_config(config)
    try:
        out = core.simulate(json.dumps(cfg), progress, threads)
    except core.ConfigError as exc:
        raise UserError(str(exc)) from None
    except ValueError as exc:  # unusable input the core names (a CDF file, a thread count)
        raise UserError(str(exc)) from None
    flows = flows_frame(out["records"])
    metadata = {
        "version": __version__,
        "core_version": core.core_version(),
        "config": json.loads(out["config"]),
        "counters": json.loads(out["counters"]),
        "peak_memory_bytes": peak_rss_bytes(),
        # Whether this process's heap asked for huge pages (speed only: repflow.hugepages).
        "huge_pages": hugepages.active(),
        "threads": threads,
    }
    summary = normalize_summary(json.loads(out["summary"]))
    return SimResult(flows=flows, summary=summary, metadata=metadata)
