"""Sweeps with the real simulator on tiny configurations: resuming, idempotence, executors,
failures, reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from repflow.experiments import build_report, parse_spec, run_sweep
from repflow.experiments.executors import run_point
from repflow.experiments.store import Store

REPO = Path(__file__).resolve().parents[2]

TINY = """
[experiment]
name = "tiny"
claims = ["repflow-ns3"]
[base]
topology = { kind = "fat-tree", k = 4 }
workload = { duration = "100ms", drain = "2s" }
[grid]
scheme = ["tcp", "repflow"]
"workload.cdf" = ["websearch"]
"workload.load" = [0.3, 0.6]
seed = [1, 2]
"""


def tiny_spec(text: str = TINY):
    return parse_spec(text, "tiny.toml")


def store_snapshot(root: Path) -> dict[str, tuple[pd.DataFrame, dict]]:
    """Every finished point: records and run.json (timing.json is the only volatile file)."""
    store = Store(root)
    out = {}
    for d in sorted(store.points_dir.iterdir()):
        if d.name.startswith("."):
            continue
        assert (d / "run.json").exists(), f"{d} is incomplete"
        run = json.loads((d / "run.json").read_text())
        out[d.name] = (pd.read_parquet(d / "flows.parquet"), run)
    return out


def assert_same_store(a: Path, b: Path) -> None:
    sa, sb = store_snapshot(a), store_snapshot(b)
    assert sorted(sa) == sorted(sb)
    for k in sa:
        pd.testing.assert_frame_equal(sa[k][0], sb[k][0], check_exact=True)
        assert sa[k][1] == sb[k][1], k


def stored_at(root: Path) -> dict[str, float]:
    return {
        d.name: json.loads((d / "timing.json").read_text())["stored_at"]
        for d in (root / "points").iterdir()
        if not d.name.startswith(".")
    }


def test_sweep_twice_computes_each_point_once(tmp_path):
    out = tmp_path / "s"
    first = run_sweep(tiny_spec(), out, jobs=2, progress=False)
    assert (first.total, first.computed, first.reused, first.failed) == (8, 8, 0, [])
    for _, (flows, run) in store_snapshot(out).items():
        assert len(flows) > 0 and run["config"]["topology"]["k"] == 4
    stamps = stored_at(out)
    second = run_sweep(tiny_spec(), out, jobs=2, progress=False)
    assert (second.computed, second.reused) == (0, 8)
    assert stored_at(out) == stamps  # nothing was rewritten
    # Growing the grid computes only the new points.
    grown = tiny_spec(TINY.replace("seed = [1, 2]", "seed = [1, 2, 3]"))
    third = run_sweep(grown, out, jobs=2, progress=False)
    assert (third.computed, third.reused) == (4, 8)


def failing_runner(key, config):
    """Fails every point of seed 2; runs the others for real."""
    if config["seed"] == 2:
        raise RuntimeError("injected failure for seed 2")
    return run_point(key, config)


def test_failing_point_is_recorded_and_others_complete(tmp_path):
    out = tmp_path / "s"
    s = run_sweep(tiny_spec(), out, jobs=2, progress=False, runner=failing_runner)
    assert s.computed == 8 and len(s.failed) == 4
    store = Store(out)
    sweep = store.read_sweep()
    for pt in sweep["points"]:
        status = store.status(pt["key"])
        if pt["labels"]["seed"] == 2:
            assert status == "failed"
            err = store.read_error(pt["key"])
            assert "injected failure for seed 2" in err["error"]
            assert "Traceback" in err["traceback"]
        else:
            assert status == "done"
    # The report is built from the points that finished and lists the failed ones.
    rep = build_report(out)
    assert rep.points == 4 and rep.failures == 4
    assert "injected failure for seed 2" in (out / "report.md").read_text()
    # A plain rerun keeps the failures; --retry-failed recomputes exactly those.
    again = run_sweep(tiny_spec(), out, jobs=2, progress=False)
    assert again.computed == 0 and again.skipped_failed == 4
    retry = run_sweep(tiny_spec(), out, jobs=2, progress=False, retry_failed=True)
    assert retry.computed == 4 and not retry.failed
    assert all(store.status(pt["key"]) == "done" for pt in sweep["points"])


def children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (Linux /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _sweep_cmd(spec: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "repflow", "sweep", str(spec), "--out", str(out),
            "--jobs", "1", "--no-report", "--no-progress"]  # fmt: skip


def test_killed_sweep_resumes_to_the_same_store(tmp_path):
    spec = tmp_path / "tiny.toml"
    # Twelve points of ~0.2 s each on one worker: the kill lands mid-way.
    text = TINY.replace("seed = [1, 2]", "seed = [1, 2, 3]").replace('"100ms"', '"200ms"')
    spec.write_text(text)
    killed = tmp_path / "killed"
    proc = subprocess.Popen(_sweep_cmd(spec, killed), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    points = killed / "points"
    while time.monotonic() < deadline:
        done = [d for d in points.glob("[!.]*")] if points.exists() else []
        if len(done) >= 2:
            break
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    workers = children(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = [d for d in points.iterdir() if not d.name.startswith(".")]
    assert 2 <= len(partial) < 12, "the sweep should have been killed mid-way"
    # No orphan worker keeps simulating after the driver died.
    deadline = time.monotonic() + 10
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in workers)
    resumed = subprocess.run(_sweep_cmd(spec, killed), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(partial)} already stored" in resumed.stderr
    clean = tmp_path / "clean"
    full = subprocess.run(_sweep_cmd(spec, clean), capture_output=True, text=True)
    assert full.returncode == 0, full.stderr
    assert_same_store(killed, clean)
    assert not list(points.glob(".tmp-*"))


def test_ray_and_local_executors_store_identical_results(tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'repflow[ray]')")
    from repflow.experiments.executors import RayExecutor

    local = tmp_path / "local"
    run_sweep(tiny_spec(), local, jobs=2, progress=False)
    ex = RayExecutor(local_cpus=2)
    try:
        assert ex.name == "ray" and ex.workers == 2
        s = run_sweep(tiny_spec(), tmp_path / "ray", executor=ex, progress=False)
    finally:
        ex.close()
    assert s.computed == 8 and not s.failed
    timing = json.loads(next((tmp_path / "ray" / "points").glob("*/timing.json")).read_text())
    assert timing["executor"]
    assert_same_store(local, tmp_path / "ray")


def test_report_builds_from_store_without_simulating(tmp_path, monkeypatch):
    out = tmp_path / "s"
    run_sweep(tiny_spec(), out, jobs=2, progress=False)

    def no_sim(*a, **k):
        raise AssertionError("report must not simulate")

    import repflow.api

    monkeypatch.setattr(repflow.api, "simulate", no_sim)
    from repflow.cli import main

    assert main(["report", str(out)]) == 0
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert html.count("data:image/png;base64,") >= 4  # self-contained
    assert "src=\"figures/" not in html
    for needle in ("Published claims", "RF-1", "Replication overhead", "tcp", "repflow"):
        assert needle in html and needle in md
    for name in ("websearch_fct", "websearch_slowdown", "websearch_cdf", "websearch_gain"):
        assert (out / "figures" / f"{name}.png").stat().st_size > 1000
        assert (out / "figures" / f"{name}.svg").read_text().lstrip().startswith("<?xml")
        assert f"figures/{name}.png" in md
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary["series"]) == {"tcp", "repflow"}
    assert set(summary["load"]) == {0.3, 0.6}
    assert (summary["seeds"] == 2).all()
    assert not list(out.glob(".report-*"))


def test_cli_errors_are_one_line(tmp_path, capsys):
    from repflow.cli import main

    assert main(["report", str(tmp_path)]) == 2
    assert "not an experiment directory" in capsys.readouterr().err
    assert main(["sweep", str(tmp_path / "nope.toml")]) == 2
    assert "cannot read experiment spec" in capsys.readouterr().err
    spec = tmp_path / "s.toml"
    spec.write_text(TINY)
    args = ["sweep", str(spec), "--out", str(tmp_path / "o"), "--address", "auto"]
    assert main(args) == 2
    assert "--address only applies" in capsys.readouterr().err
    try:
        import ray  # noqa: F401
    except ImportError:
        return
    # An unreachable cluster is reported at once (Ray alone would retry for minutes).
    args = ["sweep", str(spec), "--out", str(tmp_path / "o"), "--executor", "ray",
            "--address", "127.0.0.1:1"]  # fmt: skip
    assert main(args) == 2
    assert "no Ray cluster reachable at 127.0.0.1:1" in capsys.readouterr().err


def test_full_reproduce_asks_before_a_long_run(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "repflow", "reproduce", "--out", str(tmp_path / "full")],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=REPO,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "expected duration" in r.stderr and "--yes" in r.stderr
    assert not list((tmp_path / "full" / "points").glob("*"))


def test_dry_run_plans_the_quick_study_without_running_it(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "repflow", "reproduce", "--quick", "--dry-run",
         "--out", str(tmp_path / "q")],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "repflow-paper-quick under" in r.stdout and "to compute" in r.stdout
    # every seed paper's studies, each under the paper's profile and under dc
    for spec in ("repflow-toy", "smartrep-quick", "l2dct", "fa-dctcp"):
        assert f"{spec} under dc:" in r.stdout, r.stdout
    assert "expected: ~" in r.stdout
    assert not (tmp_path / "q").exists()


def test_workers_for_a_deadline_agree_with_the_wall_time_estimate():
    from repflow.experiments.sweep import PlannedPoint, estimate_wall, workers_for

    def pts(*estimates: float) -> list[PlannedPoint]:
        return [PlannedPoint({}, {}, str(i), "todo", e) for i, e in enumerate(estimates)]

    points = pts(*([1000.0] * 36))  # 10 h of single-core simulation
    n = workers_for(points, 7200.0)
    assert n == 6  # five would need exactly 2 h of simulation, plus the workers' start
    assert estimate_wall(points, n) <= 7200.0 < estimate_wall(points, n - 1)
    # no number of workers beats the longest point
    assert workers_for(pts(100.0, 8000.0), 7200.0) is None
    assert workers_for([], 60.0) == 1


def test_dry_run_of_a_long_study_says_how_many_workers_would_take_an_hour_and_two(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "repflow", "reproduce", "repflow", "--profiles", "paper",
         "--dry-run", "--out", str(tmp_path / "full")],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "workers for 1 h" in r.stdout and "workers for 2 h" in r.stdout, r.stdout
    assert "--executor ray --address" in r.stdout
    assert not (tmp_path / "full").exists()


def test_estimates_follow_this_machines_speed_until_points_are_stored(tmp_path, monkeypatch):
    """Before any point is stored a plan scales the cost model by the speed probe (bench-A's
    traffic for a few ms: this machine's packet-hops per second now against the reference);
    `REPFLOW_SPEED_PROBE=0` keeps the constants; stored timings then take over."""
    from repflow.experiments import plan_sweep, sweep

    spec = tiny_spec()
    store = Store(tmp_path / "s")
    monkeypatch.setattr(sweep, "_MACHINE_FACTOR", None)
    monkeypatch.setenv(sweep.PROBE_ENV, "0")
    off = plan_sweep(spec, store)
    assert (off.basis, off.calibration) == ("model", 1.0)
    monkeypatch.setattr(sweep, "_MACHINE_FACTOR", None)
    monkeypatch.delenv(sweep.PROBE_ENV)
    on = plan_sweep(spec, store)
    assert 0.25 <= on.calibration <= 4.0 and on.basis in ("probe", "model")
    assert sweep.machine_factor() == on.calibration  # measured once per process
    for a, b in zip(off.points, on.points, strict=True):
        traffic = a.estimate - sweep.POINT_SECONDS
        assert b.estimate == pytest.approx(traffic * on.calibration + sweep.POINT_SECONDS)
