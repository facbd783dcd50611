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


def _bits(table):
    """Each column's values as 64-bit patterns (floats by their bits: NaN compares)."""
    return {n: table.column(n).to_numpy().view(np.int64).tolist() for n in table.column_names}


def test_the_cores_parquet_file_reads_back_as_pyarrows_own(tmp_path):
    """The core's Parquet writer (what `repflow sim --out` uses) against pyarrow's: the same
    schema and every value bit for bit, under the default layout and under layouts that force
    many row groups, many pages, tiny dictionaries; the same records give the same bytes."""
    pq = pytest.importorskip("pyarrow.parquet")
    cfg = api.load_config({"seed": 3, "topology": {"kind": "star", "hosts": 8},
                           "workload": {"cdf": "websearch-bytes", "load": 0.9,
                                        "duration": "200ms", "drain": "1ms"},
                           "scheme": {"name": "repflow"}})  # fmt: skip
    records = _core.simulate(json.dumps(cfg))["records"]
    ref_path = tmp_path / "pyarrow.parquet"
    pq.write_table(pa.Table.from_batches([pa.record_batch(records)]), ref_path)
    ref = pq.read_table(ref_path)
    fct = ref.column("fct").to_numpy()
    assert ref.num_rows > 50 and np.isnan(fct).any() and np.isfinite(fct).any()
    layouts = [{}, {"rows_per_group": 7, "values_per_page": 3, "max_dictionary": 2},
               {"values_per_page": 1}, {"max_dictionary": 1}, {"rows_per_group": 1}]  # fmt: skip
    for i, layout in enumerate(layouts):
        path = tmp_path / f"core-{i}.parquet"
        _core.write_parquet(records, path, **layout)
        got = pq.read_table(path)
        assert got.schema == ref.schema == api.record_schema(), layout
        assert _bits(got) == _bits(ref), layout
    meta = pq.read_metadata(tmp_path / "core-1.parquet")
    assert meta.num_rows == ref.num_rows and meta.num_row_groups == -(-ref.num_rows // 7)
    again = tmp_path / "again.parquet"
    _core.write_parquet(records, again)
    assert again.read_bytes() == (tmp_path / "core-0.parquet").read_bytes()
    empty = tmp_path / "empty.parquet"
    _core.write_parquet(_core.record_schema(), empty)
    assert pq.read_table(empty).num_rows == 0
    assert pq.read_table(empty).schema == ref.schema
    with pytest.raises(ValueError, match="values_per_page: 0 is not within"):
        _core.write_parquet(records, tmp_path / "bad.parquet", values_per_page=0)
    assert not (tmp_path / "bad.parquet").exists()
    with pytest.raises(OSError, match="no-such-dir"):
        _core.write_parquet(records, tmp_path / "no-such-dir" / "x.parquet")


def test_saving_a_run_loads_no_parquet_library(tmp_path):
    """`repflow sim --out`'s path: the core's records are saved by the core, so the process
    never imports pyarrow (~0.15 s and ~50 MiB) or pandas; the file reads back."""
    import subprocess
    import sys

    script = (
        "import sys, repflow.api as api\n"
        "r = api.simulate({'topology': {'kind': 'star', 'hosts': 4},"
        " 'workload': {'cdf': 'websearch-bytes', 'load': 0.5, 'duration': '5ms'}})\n"
        f"r.save({str(tmp_path / 'run')!r})\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'pandas')))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert out.stdout.strip() == "[]", out.stdout
    from repflow.records import load_run

    back = load_run(tmp_path / "run")
    assert len(back.flows) == back.metadata["counters"]["flows"] > 0


def test_the_package_version_is_the_cores_and_the_installed_ones():
    from importlib.metadata import version

    from repflow.version import package_version

    assert package_version() == _core.core_version() == version("repflow")
