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

from repflow.experiments.executors import LocalExecutor, RayExecutor, make_executor, run_point
from repflow.experiments.report import build_report
from repflow.experiments.spec import Spec, find_builtin_spec, load_spec, parse_spec
from repflow.experiments.store import Store, point_key
from repflow.experiments.sweep import plan_sweep, run_sweep

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
