"""Summaries of real-network and testbed records are the simulator's, computed by its code."""

from __future__ import annotations

import math

import numpy as np
import pytest
from repflow import net
from repflow.errors import UserError

pytest.importorskip("repflow._core")


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


@pytest.mark.parametrize("scheme", ["tcp", "repflow", "fullrep"])
def test_library_summary_of_simulated_records_is_the_simulators(scheme):
    from repflow import simulate
    from repflow.testbed.workload import summarize as testbed_summarize

    res = simulate({"seed": 2, "topology": {"kind": "fat-tree", "k": 4},
                    "workload": {"cdf": "fb-hadoop", "load": 0.6, "duration": "20ms",
                                 "drain": "1ms"},
                    "scheme": {"name": scheme}})  # fmt: skip
    f = res.flows
    assert len(f) > 100 and any(b["count"] for b in res.summary_record["bins"][:3])
    assert res.unfinished > 0  # the drain cap leaves some flows running
    assert _same(net.summarize(f, res.counters), res.summary_record)
    # without the counters, flow and copy bytes are counted from the records, the same way
    assert _same(testbed_summarize(f), res.summary_record)
    assert _same(net.size_bins(f), res.summary_record["bins"])
    short = f[f["size"] <= 100_000]
    assert _same(net.bin_summary("(0, 100KB]", short), res.summary_record["bins"][0])


def test_bin_statistics_are_numpy_linear_percentiles():
    rng = np.random.default_rng(5)
    fct = rng.exponential(1e-3, 1001)
    fct[::97] = np.nan
    import pandas as pd

    b = net.bin_summary("x", pd.DataFrame({"fct": fct, "slowdown": fct * 3}))
    fin = np.sort(fct[np.isfinite(fct)])
    assert b["count"] == 1001 and b["finished"] == len(fin)
    for q, key in ((50, "fct_p50"), (99, "fct_p99"), (99.9, "fct_p999")):
        assert b[key] == pytest.approx(np.percentile(fin, q), rel=1e-12)
    assert b["fct_mean"] == pytest.approx(fin.mean(), rel=1e-12)


def test_negative_sizes_are_refused():
    import pandas as pd

    df = pd.DataFrame({"size": [-1], "fct": [1.0], "slowdown": [1.0], "copies": [1]})
    with pytest.raises(UserError, match="size: -1 is negative"):
        net.summarize(df, {})
