"""The Python API of the simulator: :func:`simulate` and :class:`SimResult`.

A configuration is a nested ``dict`` with the schema documented in
``docs/configuration.md`` (the same schema as ``--config run.toml`` files and the Rust
``repflow_sim::Config``). Missing fields take their defaults.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from repflow.errors import UserError

#: Column order of the per-flow records (shared with real-network runs).
RECORD_COLUMNS: tuple[str, ...] = (
    "id", "src", "dst", "size", "start", "finish", "fct", "ideal_fct", "slowdown",
    "copies", "winner", "bytes_sent", "retransmissions", "timeouts",
)  # fmt: skip


@dataclass
class SimResult:
    """The outcome of one simulation run."""

    #: One row per application flow (columns :data:`RECORD_COLUMNS`).
    flows: pd.DataFrame
    #: Per-bin FCT/slowdown statistics, overhead and unfinished count.
    summary: dict[str, Any]
    #: ``{"config": ..., "counters": ..., "version": ...}``: everything needed to rerun.
    metadata: dict[str, Any] = field(default_factory=dict)


def _core():
    try:
        from repflow import _core
    except ImportError as exc:  # pragma: no cover - broken install
        raise UserError(
            "the Rust core (repflow._core) is not built; run `pip install -e .` in the repository"
        ) from exc
    return _core


def load_config(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Validates ``config`` and returns it with every default filled in.

    Raises :class:`~repflow.errors.UserError` naming the offending field.
    """
    core = _core()
    try:
        return json.loads(core.validate_config(json.dumps(dict(config or {}))))
    except core.ConfigError as exc:
        raise UserError(str(exc)) from None


ProgressFn = Callable[[float, float, int, int, int], bool | None]


def simulate(
    config: Mapping[str, Any] | None = None, progress: ProgressFn | None = None
) -> SimResult:
    """Runs one simulation and returns its records, summary and metadata.

    ``progress(sim_time, duration, flows_started, flows_finished, events)`` is called now and
    then; returning ``False`` stops the run.
    """
    from repflow import __version__

    core = _core()
    cfg = dict(config or {})
    try:
        out = core.simulate(json.dumps(cfg), progress)
    except core.ConfigError as exc:
        raise UserError(str(exc)) from None
    flows = pd.DataFrame({c: out["records"][c] for c in RECORD_COLUMNS})
    metadata = {
        "version": __version__,
        "core_version": core.core_version(),
        "config": json.loads(out["config"]),
        "counters": json.loads(out["counters"]),
    }
    return SimResult(flows=flows, summary=json.loads(out["summary"]), metadata=metadata)
