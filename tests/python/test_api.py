"""The Python API: SimResult, run directories (repflow.records) and repflow.simulate."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import repflow
from repflow import records
from repflow.api import (
    RECORD_COLUMNS,
    RECORD_DTYPES,
    TCP_COUNTER_COLUMNS,
    SimResult,
    records_frame,
)
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
        **{c: [0] * n for c in TCP_COUNTER_COLUMNS},
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
    back = records.load_run(out)
    pd.testing.assert_frame_equal(back.flows, res.flows)
    assert math.isnan(back.flows.fct[1]) and back.flows.winner[1] == -1
    # run.json is strict JSON (NaN -> null) and NaN comes back as NaN in the summary.
    doc = json.loads((out / "run.json").read_text())
    assert doc["summary"]["bins"][0]["fct_mean"] is None
    assert math.isnan(back.summary["fct_mean"].iloc[0])
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
    assert len(records.load_run(target).flows) == 7
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
        records.load_run(tmp_path / "nope")
    (tmp_path / "d").mkdir()
    with pytest.raises(UserError, match="run.json"):
        records.load_run(tmp_path / "d")
    (tmp_path / "d" / "run.json").write_text("{}")
    (tmp_path / "d" / "flows.parquet").write_text("not parquet")
    with pytest.raises(UserError, match="flows.parquet"):
        records.load_run(tmp_path / "d")


def test_simulate_rejects_bad_config_with_field_name():
    with pytest.raises(UserError, match=r"^topology.k"):
        repflow.simulate({"topology": {"k": 5}})
    with pytest.raises(UserError, match=r"^workload.load"):
        repflow.simulate({"workload": {"load": 1.5}})


# ---------------------------------------------------------------------------------------------
# Real simulations (small: a 4-pod fat-tree, a few ms of small flows).

SMALL_CDF = "# test sizes\n1000 0\n20000 0.5\n200000 1\n"


@pytest.fixture(scope="module")
def small_cdf(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("cdf") / "small.cdf"
    p.write_text(SMALL_CDF)
    return p


def _small_config(cdf: Path, seed: int = 1, scheme: str = "repflow") -> dict:
    return {
        "seed": seed,
        "topology": {"kind": "fat-tree", "k": 4, "link_rate": "1Gbps", "link_delay": "2us"},
        "workload": {"cdf": str(cdf), "load": 0.4, "duration": "4ms", "drain": "1s"},
        "scheme": {"name": scheme},
    }


@pytest.fixture(scope="module")
def small_run(small_cdf) -> SimResult:
    return repflow.simulate(_small_config(small_cdf))


def test_simulate_returns_typed_records(small_run: SimResult):
    f = small_run.flows
    assert tuple(f.columns) == RECORD_COLUMNS
    assert {c: str(t) for c, t in f.dtypes.items()} == RECORD_DTYPES
    assert len(f) == small_run.counters["flows"] > 20
    assert (f.id.to_numpy() == np.arange(len(f))).all()
    assert ((f.src >= 0) & (f.src < 16) & (f.dst >= 0) & (f.dst < 16) & (f.src != f.dst)).all()
    assert f["size"].between(1000, 200_000).all()
    assert (f.start.diff().dropna() >= 0).all() and (f.start < 0.004).all()


def test_records_are_consistent(small_run: SimResult):
    f = small_run.flows
    done = f[f.fct.notna()]
    assert len(done) == small_run.counters["flows_finished"]
    np.testing.assert_allclose(done.finish - done.start, done.fct, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(done.fct / done.ideal_fct, done.slowdown, rtol=1e-9)
    assert (done.slowdown >= 1 - 1e-9).all()  # never faster than alone on an idle network
    assert ((done.winner >= 0) & (done.winner < done.copies)).all()
    # RepFlow: flows of at most 100 KB get two copies, larger ones one.
    assert (f.copies == np.where(f["size"] <= 100_000, 2, 1)).all()
    # Overhead = extra copies' application bytes / all application bytes.
    expected = (f["size"] * (f.copies - 1)).sum() / f["size"].sum()
    assert small_run.overhead == pytest.approx(expected, rel=1e-12)
    assert small_run.config["workload"]["cdf_text"] == SMALL_CDF


def test_summary_matches_numpy_on_the_records(small_run: SimResult):
    f = small_run.flows
    bins = {
        "(0, 100KB]": f[f["size"] <= 100_000],
        "(100KB, 10MB]": f[(f["size"] > 100_000) & (f["size"] <= 10_000_000)],
        "all": f,
    }
    for label, sub in bins.items():
        b = small_run.bin(label)
        assert b["count"] == len(sub)
        fct = sub.fct.dropna().to_numpy()
        assert b["finished"] == len(fct)
        if len(fct):
            assert b["fct_mean"] == pytest.approx(fct.mean(), rel=1e-12)
            for q, key in ((50, "fct_p50"), (99, "fct_p99"), (99.9, "fct_p999")):
                assert b[key] == pytest.approx(np.percentile(fct, q), rel=1e-12)
            sd = sub.slowdown.dropna().to_numpy()
            assert b["slowdown_p99"] == pytest.approx(np.percentile(sd, 99), rel=1e-12)


def test_same_seed_same_records_other_seed_differs(small_cdf, small_run: SimResult):
    again = repflow.simulate(_small_config(small_cdf))
    pd.testing.assert_frame_equal(again.flows, small_run.flows)
    other = repflow.simulate(_small_config(small_cdf, seed=2))
    assert not other.flows.equals(small_run.flows)


def test_saved_run_reads_back_identically(tmp_path: Path, small_run: SimResult):
    small_run.save(tmp_path / "r")
    back = records.load_run(tmp_path / "r")
    pd.testing.assert_frame_equal(back.flows, small_run.flows)
    assert back.config == small_run.config and back.counters == small_run.counters
    assert back.overhead == small_run.overhead


def test_simulate_accepts_a_toml_path(tmp_path: Path, small_cdf, small_run: SimResult):
    from repflow.config_io import dumps_toml

    path = tmp_path / "run.toml"
    path.write_text(dumps_toml(_small_config(small_cdf)))
    res = repflow.simulate(path)
    pd.testing.assert_frame_equal(res.flows, small_run.flows)


def test_numpy_and_path_metadata_are_written_as_json(tmp_path: Path):
    res = _fake_result()
    res.metadata.update(n=np.int64(3), x=np.float64("nan"), arr=np.array([1.5, 2.0]),
                        where=tmp_path)  # fmt: skip
    back = records.load_run(res.save(tmp_path / "r"))
    assert back.metadata["n"] == 3 and back.metadata["x"] is None
    assert back.metadata["arr"] == [1.5, 2.0] and back.metadata["where"] == str(tmp_path)
