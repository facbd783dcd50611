"""The analytical model of RepFlow (M/G/1-FCFS, section IV of the paper) and SmartRep's
extension (hash collisions, n copies), evaluated on any flow-size CDF.

Quick use::

    from repflow.model import fct_table
    df = fct_table("websearch", [0.1, 0.2, 0.5])

See ``docs/model.md`` for the formulas, assumptions and every function's signature.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Where each public name lives (imported on first use: the CLI's parser needs none of the
#: numerical stack, and ``repflow --help`` should not pay for scipy and pandas).
_WHERE = {
    **dict.fromkeys(
        ("TAIL_EXTRA", "Integrals", "collision_short_load", "copies_path_load",
         "copies_short_load", "integrals", "large_mean", "large_p99", "mean_wait",
         "repflow_path_load", "repflow_short_load", "short_mean", "short_p99"),
        "formulas",
    ),
    **dict.fromkeys(("BUILTIN_WORKLOADS", "SizeDistribution", "load_cdf", "parse_cdf_text"),
                    "sizes"),
    **dict.fromkeys(("DEFAULT_K", "DEFAULT_M", "DEFAULT_MSS", "DEFAULT_N", "DEFAULT_P",
                     "DEFAULT_S_L"), "defaults"),
    **dict.fromkeys(("TABLE_COLUMNS", "UNDEFINED", "fct_table", "format_table"), "table"),
}  # fmt: skip


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'repflow.model' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"repflow.model.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


__all__ = [
    "BUILTIN_WORKLOADS",
    "DEFAULT_K",
    "DEFAULT_M",
    "DEFAULT_MSS",
    "DEFAULT_N",
    "DEFAULT_P",
    "DEFAULT_S_L",
    "TABLE_COLUMNS",
    "TAIL_EXTRA",
    "UNDEFINED",
    "Integrals",
    "SizeDistribution",
    "collision_short_load",
    "copies_path_load",
    "copies_short_load",
    "fct_table",
    "format_table",
    "integrals",
    "large_mean",
    "large_p99",
    "load_cdf",
    "mean_wait",
    "parse_cdf_text",
    "repflow_path_load",
    "repflow_short_load",
    "short_mean",
    "short_p99",
]
