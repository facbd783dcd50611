"""The record schema comes from the Rust core; records cross the boundary as Arrow."""

from __future__ import annotations

import json

import numpy as np
import pytest
from repflow import api

_core = pytest.importorskip("repflow._core")
pa = pytest.importorskip("pyarrow")


def test_schema_is_read_from_the_core():
    schema = pa.record_batch(_core.record_schema()).schema
    assert api.record_schema() == schema
    assert api.RECORD_COLUMNS == tuple(schema.names)
    assert api.RECORD_COLUMNS[:4] == ("id", "src", "dst", "size")
    assert {str(f.type) for f in schema} == {"int64", "double"}
    assert api.RECORD_DTYPES["fct"] == "float64" and api.RECORD_DTYPES["winner"] == "int64"
    from repflow.records import arrow_schema

    assert arrow_schema() == schema


def test_simulated_records_cross_as_arrow_with_the_schema():
    cfg = api.load_config({"seed": 4, "topology": {"kind": "star", "hosts": 6},
                           "workload": {"cdf": "websearch-bytes", "load": 0.6,
                                        "duration": "200ms"},
                           "scheme": {"name": "repflow"}})  # fmt: skip
    out = _core.simulate(json.dumps(cfg))
    records = out["records"]
    assert hasattr(records, "__arrow_c_array__")
    batch = pa.record_batch(records)
    counters = json.loads(out["counters"])
    assert batch.schema == api.record_schema()
    assert batch.num_rows == len(records) == counters["flows"] > 10
    flows = api.flows_frame(records)
    assert {c: str(t) for c, t in flows.dtypes.items()} == api.RECORD_DTYPES
    # the values are the simulator's: its own summary agrees with the frame
    summary = json.loads(out["summary"])
    every = next(b for b in summary["bins"] if b["bin"] == "all")
    assert every["count"] == len(flows)
    finished = flows["fct"].to_numpy()[np.isfinite(flows["fct"].to_numpy())]
    assert every["finished"] == len(finished)
    assert every["fct_p50"] == float(np.percentile(finished, 50))
    assert (flows["id"].to_numpy() == np.arange(len(flows))).all()
    assert int(flows["size"].sum()) == counters["flow_bytes"]
    extra = int((flows["size"] * (flows["copies"] - 1)).sum())
    assert extra == counters["extra_copy_bytes"] > 0


def test_a_batch_imports_twice_and_an_empty_one_has_the_schema():
    empty = _core.record_schema()
    assert len(empty) == 0
    a = pa.record_batch(empty)
    b = pa.record_batch(empty)
    assert a.equals(b) and a.num_rows == 0
    assert list(api.flows_frame(empty).columns) == list(api.RECORD_COLUMNS)
