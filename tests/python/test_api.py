"""The Python API: SimResult, run directories (repflow.runio) and repflow.simulate."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import repflow
from repflow import runio
from repflow.api import RECORD_COLUMNS, RECORD_DTYPES, SimResult, records_frame
from repflow.errors import UserError


def _fake_result(n: int = 5) -> SimResult:
    """A hand-made result (not a simulation) to exercise storage independently of the core."""
    rng = np.random.default_rng(0)
    start = np.sort(rng.uniform(0, 0.01, n))
    fct = rng.uniform(1e-4, 1e-2, n)
    fct[1] = np.nan  # one unfinished flow
    cols = {
        "id": list(range(n)), "src": [0] * n, "dst": [1] * n,
        "size": rng.integers(1, 10**7, n).tolist(), "start": start.tolist(),
        "finish": (start + fct).tolist(), "fct": fct.tolist(), "ideal_fct": [1e-4] * n,
        "slowdown": (fct / 1e-4).tolist(), "copies": [2] * n,
        "winner": [-1 if math.isnan(f) else 0 for f in fct], "bytes_sent": [10**6] * n,
        "retransmissions": [0] * n, "timeouts": [0] * n,
    }  # fmt: skip
    summary = {"bins": [{"bin": "all", "count": n, "finished": n - 1, "fct_mean": float("nan")}],
               "overhead": 0.01, "unfinished": 1}  # fmt: skip
    meta = {"version": "test", "config": {"seed": 1}, "counters": {"flows": n}}
    return SimResult(flows=records_frame(cols), summary=summary, metadata=meta)


def test_records_frame_has_schema_columns_and_dtypes():
    res = _fake_result()
    assert tuple(res.flows.columns) == RECORD_COLUMNS
    assert {c: str(t) for c, t in res.flows.dtypes.items()} == RECORD_DTYPES


def test_save_and_load_round_trip(tmp_path: Path):
    res = _fake_result()
    out = res.save(tmp_path / "run")
    assert sorted(p.name for p in out.iterdir()) == ["flows.parquet", "run.json"]
    back = runio.load_run(out)
    pd.testing.assert_frame_equal(back.flows, res.flows)
    assert math.isnan(back.flows.fct[1]) and back.flows.winner[1] == -1
    # run.json is strict JSON (NaN -> null) and NaN comes back as NaN in the summary.
    doc = json.loads((out / "run.json").read_text())
    assert doc["summary"]["bins"][0]["fct_mean"] is None
    assert math.isnan(back.summary["bins"][0]["fct_mean"])
    assert back.metadata["config"] == {"seed": 1} and back.counters == {"flows": 5}
    assert back.bin("all")["count"] == 5


def test_refuses_non_empty_dir_unless_forced(tmp_path: Path):
    target = tmp_path / "run"
    target.mkdir()
    (target / "keep.txt").write_text("precious")
    with pytest.raises(UserError, match="not empty.*--force"):
        _fake_result().save(target)
    assert (target / "keep.txt").read_text() == "precious"
    _fake_result(7).save(target, force=True)
    assert not (target / "keep.txt").exists()
    assert len(runio.load_run(target).flows) == 7
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # no temp or old dirs left


def test_empty_dir_is_reused_and_file_is_refused(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    _fake_result().save(tmp_path / "empty")
    assert (tmp_path / "empty" / "flows.parquet").exists()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(UserError, match="not a directory"):
        _fake_result().save(tmp_path / "afile")


def test_failed_write_leaves_nothing(tmp_path: Path):
    res = _fake_result()
    res.flows = res.flows.drop(columns=["timeouts"])
    with pytest.raises(ValueError, match="timeouts"):
        res.save(tmp_path / "run")
    assert list(tmp_path.iterdir()) == []


def test_load_run_errors_name_the_file(tmp_path: Path):
    with pytest.raises(UserError, match="does not exist"):
        runio.load_run(tmp_path / "nope")
    (tmp_path / "d").mkdir()
    with pytest.raises(UserError, match="run.json"):
        runio.load_run(tmp_path / "d")
    (tmp_path / "d" / "run.json").write_text("{}")
    (tmp_path / "d" / "flows.parquet").write_text("not parquet")
    with pytest.raises(UserError, match="flows.parquet"):
        runio.load_run(tmp_path / "d")


def test_simulate_rejects_bad_config_with_field_name():
    with pytest.raises(UserError, match=r"^topology.k"):
        repflow.simulate({"topology": {"k": 5}})
    with pytest.raises(UserError, match=r"^workload.load"):
        repflow.simulate({"workload": {"load": 1.5}})
