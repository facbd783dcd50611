"""Experiments: declarative sweeps over the simulator, a resumable result store, local and Ray
executors, figures, and a report that sets results beside the papers' claims.

Typical use::

    from repflow.experiments import load_spec, run_sweep, build_report
    spec = load_spec("experiments/repflow-paper-quick.toml")
    run_sweep(spec, "runs/quick")             # computes only what runs/quick lacks
    build_report("runs/quick")                # figures/, report.html, report.md

See ``docs/experiments.md`` for the spec format and the store layout.
"""

from __future__ import annotations

import importlib
from typing import Any

# Lazy attributes: worker processes import repflow.experiments.executors without pulling in
# matplotlib and the report machinery.
_EXPORTS = {
    "LocalExecutor": "executors",
    "RayExecutor": "executors",
    "make_executor": "executors",
    "run_point": "executors",
    "build_report": "report",
    "Spec": "spec",
    "find_builtin_spec": "spec",
    "load_spec": "spec",
    "parse_spec": "spec",
    "Store": "store",
    "point_key": "store",
    "plan_sweep": "sweep",
    "run_sweep": "sweep",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = importlib.import_module(f"repflow.experiments.{_EXPORTS[name]}")
        return getattr(module, name)
    raise AttributeError(name)


__all__ = [
    "LocalExecutor",
    "RayExecutor",
    "Spec",
    "Store",
    "build_report",
    "find_builtin_spec",
    "load_spec",
    "make_executor",
    "parse_spec",
    "plan_sweep",
    "point_key",
    "run_point",
    "run_sweep",
]
