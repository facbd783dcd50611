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

import json
import os
import resource
import sys
from collections.abc import Callable, Mapping
from typing import Any

from repflow import hugepages
from repflow.errors import UserError, require_core

# The records and their run directory live in repflow.records (below this module, which
# re-exports them so that ``repflow.api.SimResult``, ``repflow.api.RECORD_COLUMNS`` etc. keep
# working).
from repflow.records import (  # noqa: F401  (re-exported)
    TCP_COUNTER_COLUMNS,
    SimResult,
    flows_frame,
    normalize_summary,
    record_columns,
    record_dtypes,
    record_schema,
    records_frame,
    unmeasured_tcp_counters,
)
from repflow.version import __version__


def __getattr__(name: str) -> Any:
    # RECORD_SCHEMA / RECORD_COLUMNS / RECORD_DTYPES, computed on first use (repflow.records).
    if name in ("RECORD_SCHEMA", "RECORD_COLUMNS", "RECORD_DTYPES"):
        from repflow import records

        return getattr(records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


ConfigLike = Mapping[str, Any] | str | os.PathLike[str]


def _core():
    return require_core()


def load_config(config: ConfigLike | None = None) -> dict[str, Any]:
    """Validates ``config`` (a mapping or a TOML file path) and returns it with every default
    filled in and the flow-size CDF loaded into ``workload.cdf_text``.

    Raises :class:`~repflow.errors.UserError` naming the offending field or file.
    """
    from repflow import config_io

    origins: dict[str, config_io.Origin] = {}
    if config is None:
        cfg: Mapping[str, Any] = {}
    elif isinstance(config, str | os.PathLike):
        cfg, origins = config_io.load_toml_with_origins(config)
    else:
        cfg = config
    return config_io.validate(cfg, origins=origins)


def peak_rss_bytes(who: int = resource.RUSAGE_SELF) -> int:
    """Peak resident set size of this process (or of its waited-for children), in bytes."""
    rss = resource.getrusage(who).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


ProgressFn = Callable[[float, float, int, int, int], bool | None]


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
    # The core's Arrow records, kept as they are: a DataFrame is made on first use of
    # `SimResult.flows` only (writing them needs none).
    flows = out["records"]
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
