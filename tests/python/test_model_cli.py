"""``repflow model``: table, figures, overlay plumbing and input errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from repflow.api import TCP_COUNTER_COLUMNS
from repflow.cli import main
from repflow.cli.model import parse_loads
from repflow.errors import UserError
from repflow.model import fct_table
from repflow.model.overlay import overlay_table, parse_size


def test_parse_loads():
    assert parse_loads("0.1:0.8:0.1") == pytest.approx([0.1 * i for i in range(1, 9)])
    assert parse_loads("0.5") == [0.5]
    assert parse_loads("0.2,0.6") == [0.2, 0.6]
    for bad in ("0.1:", "a:b:c", "0.1:0.8:0", "0.8:0.1:0.1", "", "x", "0.1:0.5:0.1:2"):
        with pytest.raises(UserError, match="malformed"):
            parse_loads(bad)
    for bad in ("1.0", "0", "0.5,1.2", "0.0:0.4:0.2"):
        with pytest.raises(UserError, match=r"outside \(0, 1\)"):
            parse_loads(bad)


def test_parse_size():
    assert parse_size("100KB", "f") == 100_000
    assert parse_size("64KiB", "f") == 65_536
    assert parse_size("1460B", "f") == 1460
    with pytest.raises(UserError, match=r"^f 1460: give a unit, e.g. 1460B$"):
        parse_size(1460, "f")  # a bare number has no unit (issue 52)
    with pytest.raises(UserError, match="field"):
        parse_size("12 parsecs", "field")


def test_cli_writes_table_and_figures(tmp_path, capsys):
    out = tmp_path / "m"
    rc = main(["model", "--workload", "websearch,datamining", "--loads", "0.1:0.3:0.1",
               "--out", str(out)])  # fmt: skip
    assert rc == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(
        f"model-{w}.{e}" for w in ("websearch", "datamining") for e in ("csv", "png", "svg")
    )
    assert (out / "model-websearch.png").read_bytes()[:4] == b"\x89PNG"
    assert b"<svg" in (out / "model-websearch.svg").read_bytes()[:2000]
    csv = pd.read_csv(out / "model-websearch.csv")
    ref = fct_table("websearch", [0.1, 0.2, 0.3])
    assert np.allclose(csv["tcp_short_mean"], ref["tcp_short_mean"])
    assert np.allclose(csv["repflow_short_p99"], ref["repflow_short_p99"])
    text = capsys.readouterr().out
    assert f"{ref['tcp_short_mean'].iloc[1]:.3f}" in text
    assert "workload datamining" in text


def test_cli_reports_undefined_without_crashing(tmp_path, capsys):
    rc = main(["model", "--loads", "0.5", "--eps", "1.0", "--out", str(tmp_path / "u")])
    assert rc == 0
    text = capsys.readouterr().out
    assert "undefined (effective load ≥ 1)" in text
    assert "| 0.500 |" in text and "undefined |" in text


@pytest.mark.parametrize(
    "argv, msg",
    [
        (["--loads", "0.1:0.9"], "--loads"),
        (["--loads", "1.5"], "outside (0, 1)"),
        (["--workload", "nosuch"], "neither a built-in workload"),
        (["--threshold", "lots"], "--threshold"),
        (["--collision-p", "2"], "hash-collision"),
    ],
)
def test_cli_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, argv, msg):
    out = tmp_path / "never"
    rc = main(["model", *argv, "--out", str(out)])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("repflow: error: ") and msg in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert [p for p in tmp_path.iterdir()] == []  # no temp directory left behind


# ---------------------------------------------------------------- overlay (synthetic runs)
SYNTHETIC_NOTE = "synthetic test data: not a simulation"
COLUMNS = ["id", "src", "dst", "size", "start", "finish", "fct", "ideal_fct", "slowdown",
           "copies", "winner", "bytes_sent", *TCP_COUNTER_COLUMNS]  # fmt: skip


def _write_run(d: Path, scheme: str, load: float, seed: int, workload: str = "websearch"):
    """A tiny run directory with made-up flows (clearly synthetic) in the shared format."""
    rng = np.random.default_rng(seed)
    n = 40
    size = np.where(np.arange(n) % 2 == 0, 20 * 1460, 500 * 1460).astype(np.int64)
    slow = 1.0 + rng.exponential(2.0 if scheme == "tcp" else 1.0, n)
    slow[-1] = np.nan  # one unfinished flow
    ideal = size * 8 / 1e9
    df = pd.DataFrame({
        "id": np.arange(n), "src": 0, "dst": 1, "size": size, "start": 0.0,
        "finish": ideal * slow, "fct": ideal * slow, "ideal_fct": ideal, "slowdown": slow,
        "copies": 2 if scheme == "repflow" else 1, "winner": 0, "bytes_sent": size,
        **{c: 0 for c in TCP_COUNTER_COLUMNS},
    })[COLUMNS]  # fmt: skip
    d.mkdir(parents=True)
    df.to_parquet(d / "flows.parquet")
    cfg = {"seed": seed, "scheme": {"name": scheme, "threshold": "100KB"},
           "workload": {"cdf": workload, "load": load, "cdf_text": None},
           "tcp": {"mss": 1460, "init_cwnd": 12, "max_window": None}}  # fmt: skip
    (d / "run.json").write_text(
        json.dumps(
            {
                "version": "test",
                "config": cfg,
                "counters": {},
                "summary": {},
                "note": SYNTHETIC_NOTE,
            }
        )  # fmt: skip
    )
    return df


def test_overlay_pools_runs_and_sets_model_beside(tmp_path):
    runs = {}
    for scheme in ("tcp", "repflow", "dctcp"):
        for load in (0.2, 0.5):
            for seed in (1, 2):
                d = tmp_path / "sweep" / scheme / f"load{load}" / f"seed{seed}"  # nested
                runs.setdefault((scheme, load), []).append(_write_run(d, scheme, load, seed))
    table, curves = overlay_table(tmp_path / "sweep")
    assert set(curves) == {"websearch"}
    assert len(table) == 6
    ref = fct_table("websearch", [0.2, 0.5]).set_index("load")
    for (scheme, load), parts in runs.items():
        f = pd.concat(parts)
        r = table[(table.scheme == scheme) & (table.load == load)].iloc[0]
        short = f[f["size"] <= 100_000]["slowdown"].dropna()
        large = f[f["size"] > 100_000]["slowdown"].dropna()
        assert r.runs == 2 and r.unfinished == 2
        assert r.sim_short_mean == pytest.approx(short.mean())
        assert r.sim_short_p99 == pytest.approx(np.percentile(short, 99))
        assert r.sim_large_mean == pytest.approx(large.mean())
        if scheme in ("tcp", "repflow"):
            assert r.model_short_mean == pytest.approx(ref.loc[load, f"{scheme}_short_mean"])
            assert r.ratio_short_mean == pytest.approx(r.sim_short_mean / r.model_short_mean)
        else:
            assert math.isnan(r.model_short_mean)


def test_overlay_cli_writes_figure_and_csv(tmp_path, capsys):
    for scheme in ("tcp", "repflow"):
        for load in (0.3, 0.6):
            _write_run(tmp_path / "sweep" / f"{scheme}-{load}", scheme, load, 7)
    out = tmp_path / "ov"
    assert main(["model", "--overlay", str(tmp_path / "sweep"), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "overlay-websearch.png",
        "overlay-websearch.svg",
        "overlay.csv",
    ]
    csv = pd.read_csv(out / "overlay.csv")
    assert set(csv.scheme) == {"tcp", "repflow"} and len(csv) == 4
    assert "ratio_short_mean" in capsys.readouterr().out


def test_overlay_errors(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["model", "--overlay", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    assert "no run directories" in capsys.readouterr().err
    assert main(["model", "--overlay", str(tmp_path / "missing")]) == 2
    assert "not a directory" in capsys.readouterr().err
    _write_run(tmp_path / "bad" / "r", "tcp", 0.4, 1, workload="no-such-cdf")
    assert main(["model", "--overlay", str(tmp_path / "bad"), "--out", str(tmp_path / "o")]) == 2
    assert "no-such-cdf" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_overlay_skips_hidden_half_written_points(tmp_path):
    _write_run(tmp_path / "sweep" / "a", "tcp", 0.4, 1)
    _write_run(tmp_path / "sweep" / ".tmp-b", "tcp", 0.4, 2)
    table, _ = overlay_table(tmp_path / "sweep")
    assert table["runs"].tolist() == [1]


def test_cli_sampled_sizes_match_the_api(tmp_path):
    out = tmp_path / "s"
    assert main(["model", "--loads", "0.4", "--sizes", "sampled", "--out", str(out)]) == 0
    csv = pd.read_csv(out / "model-websearch.csv")
    ref = fct_table("websearch", 0.4, sizes="sampled")
    cont = fct_table("websearch", 0.4)
    assert csv["tcp_short_p99"].iloc[0] == pytest.approx(ref["tcp_short_p99"].iloc[0])
    assert csv["tcp_short_p99"].iloc[0] != pytest.approx(cont["tcp_short_p99"].iloc[0])


def test_overlay_on_real_simulated_runs(tmp_path):
    """A tiny real sweep (fat-tree k=4, 150 ms of web search) through the simulator."""
    import repflow
    from repflow.records import write_run

    for scheme in ("tcp", "repflow"):
        cfg = {
            "topology": {"kind": "fat-tree", "k": 4},
            "workload": {"cdf": "websearch", "load": 0.5, "duration": "150ms"},
            "scheme": {"name": scheme},
            "seed": 3,
        }
        try:
            res = repflow.simulate(cfg)
        except UserError as exc:  # simulator not built in this checkout
            pytest.skip(f"simulator unavailable: {exc}")
        write_run(tmp_path / "sweep" / scheme, res.flows,
                  {**res.metadata, "summary": res.summary_record})  # fmt: skip
    table, curves = overlay_table(tmp_path / "sweep")
    assert sorted(table.scheme) == ["repflow", "tcp"]
    ref = fct_table("websearch", [0.5], k=12, M=44)
    for _, r in table.iterrows():
        f = pd.read_parquet(tmp_path / "sweep" / r.scheme / "flows.parquet")
        short = f[f["size"] <= 100_000]["slowdown"].dropna()
        assert r.short_flows == (f["size"] <= 100_000).sum() > 0
        assert r.sim_short_mean == pytest.approx(short.mean())
        assert r.sim_short_mean >= 1.0  # a slowdown is never below the ideal
        assert r.model_short_mean == pytest.approx(ref[f"{r.scheme}_short_mean"].iloc[0])


def test_overlay_models_repflow_with_more_copies_as_n_distinct_paths(tmp_path):
    _write_run(tmp_path / "sweep" / "two", "repflow", 0.5, 1)
    d = tmp_path / "sweep" / "three"
    _write_run(d, "repflow", 0.5, 2)
    meta = json.loads((d / "run.json").read_text())
    meta["config"]["scheme"]["copies"] = 3
    (d / "run.json").write_text(json.dumps(meta))
    table, _ = overlay_table(tmp_path / "sweep")
    assert sorted(table.scheme) == ["repflow", "repflow-3copies"]
    ref = fct_table("websearch", [0.5], n=3).iloc[0]
    r = table[table.scheme == "repflow-3copies"].iloc[0]
    assert r.runs == 1
    assert r.model_short_mean == pytest.approx(ref.smartrep_n_short_mean)
    assert r.model_large_p99 == pytest.approx(ref.smartrep_n_large_p99)


def test_overlay_never_pools_runs_of_different_configurations(tmp_path, capsys):
    # a 4-pod and a 16-pod study of the same workload, scheme and load: two rows, not one
    parts = {}

    def fat_tree(d, k):
        meta = json.loads((d / "run.json").read_text())
        meta["config"]["topology"] = {"kind": "fat-tree", "k": k}
        (d / "run.json").write_text(json.dumps(meta))

    for k in (4, 16):
        for seed in (1, 2):
            d = tmp_path / "sweep" / f"k{k}" / f"s{seed}"
            parts.setdefault(k, []).append(_write_run(d, "tcp", 0.5, seed + 10 * k))
            fat_tree(d, k)
    _write_run(tmp_path / "sweep" / "dctcp", "dctcp", 0.5, 3)
    fat_tree(tmp_path / "sweep" / "dctcp", 4)
    table, curves = overlay_table(tmp_path / "sweep")
    rows = table[table.scheme == "tcp"].set_index("config")
    assert sorted(rows.index) == ["topology.k=16", "topology.k=4"]
    for k in (4, 16):
        short = pd.concat(parts[k]).query("size <= 100000")["slowdown"].dropna()
        assert rows.loc[f"topology.k={k}", "runs"] == 2
        assert rows.loc[f"topology.k={k}", "sim_short_p99"] == pytest.approx(
            np.percentile(short, 99)
        )
    assert "websearch [topology.k=4]" in curves and "websearch [topology.k=16]" in curves
    out = tmp_path / "ov"
    assert main(["model", "--overlay", str(tmp_path / "sweep"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    dctcp = next(line for line in text.splitlines() if "| dctcp |" in line)
    assert "no model" in dctcp and "undefined" not in dctcp


def test_overlay_says_undefined_only_where_the_effective_load_reaches_one(tmp_path, capsys):
    _write_run(tmp_path / "sweep" / "r", "repflow", 0.99, 1)
    assert main(["model", "--overlay", str(tmp_path / "sweep"), "--out", str(tmp_path / "o")]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if "| repflow |" in ln)
    assert "undefined (load ≥ 1)" in row and "no model" not in row
