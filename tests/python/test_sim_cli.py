"""`repflow sim`: bad input is one line naming the field, exit 2, nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from repflow.cli import main

BAD_CDF = "10 0.5\n5 1\n"  # sizes decrease


@pytest.mark.parametrize(
    "argv,field",
    [
        (["--scheme", "carrier-pigeon"], "scheme.name"),
        (["--topology", "torus"], "topology.kind"),
        (["--k", "5"], "topology.k"),
        (["--k", "2"], "topology.k"),
        (["--k", "four"], "topology.k"),
        (["--load", "0"], "workload.load"),
        (["--load", "-0.2"], "workload.load"),
        (["--load", "1"], "workload.load"),
        (["--load", "1.5"], "workload.load"),
        (["--load", "half"], "workload.load"),
        (["--workload", "no/such/file.cdf"], "workload.cdf"),
        (["--workload", "{bad_cdf}"], "bad.cdf"),
        (["--link-rate", "0Gbps"], "topology.link_rate"),
        (["--link-rate", "-1Gbps"], "topology.link_rate"),
        (["--link-rate", "fast"], "topology.link_rate"),
        (["--uplink-rate", "0Gbps"], "topology.uplink_rate"),
        (["--duration", "soon"], "workload.duration"),
        (["--duration", "0ms"], "workload.duration"),
        (["--drain", "10 parsecs"], "workload.drain"),
        (["--link-delay", "-1us"], "topology.link_delay"),
        (["--min-rto", "0s"], "tcp.min_rto"),
        (["--buffer", "0"], "queue.limit_packets"),
        (["--hash", "md5"], "routing.hash"),
        (["--pairs", "everyone"], "workload.pairs"),
        (["--copies", "0"], "scheme.copies"),
        (["--topology", "star", "--hosts", "1"], "topology.hosts"),
        (["--set", "tcp.bogus=1"], "tcp.bogus"),
        (["--set", "nonsense"], "--set"),
        (["--set", "tcp.init_cwnd=0"], "tcp.init_cwnd"),
        (["--config", "{missing_toml}"], "missing.toml"),
        (["--config", "{bad_toml}"], "topology.bogus"),
        (["--threads", "0"], "threads"),
        (["--k", "4", "--threads", "5"], "threads"),
    ],
)
def test_bad_input_exits_2_naming_the_field(tmp_path: Path, capsys, argv, field):
    (tmp_path / "bad.cdf").write_text(BAD_CDF)
    (tmp_path / "bad.toml").write_text("[topology]\nbogus = 3\n")
    subst = {"bad_cdf": str(tmp_path / "bad.cdf"), "missing_toml": str(tmp_path / "missing.toml"),
             "bad_toml": str(tmp_path / "bad.toml")}  # fmt: skip
    argv = [a.format(**subst) for a in argv]
    out = tmp_path / "out"
    rc = main(["sim", *argv, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("repflow: error: ") and field in lines[0], err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.cdf", "bad.toml"]


def test_usage_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["sim", "--k"])
    assert ei.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--k" in err[0]


def test_non_empty_out_dir_is_refused_before_running(tmp_path: Path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("keep")
    rc = main(["sim", "--topology", "star", "--hosts", "4", "--out", str(out), "--quiet"])
    assert rc == 2
    assert "--force" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["old.txt"]


def test_no_traceback_from_the_real_command(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-m", "repflow", "sim", "--k", "5", "--out", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "repflow: error: topology.k (--k): fat-tree arity must be an even number ≥ 4, got 5"
    )
    assert "Traceback" not in proc.stderr and not (tmp_path / "o").exists()


def test_dump_config_prints_a_loadable_complete_toml(tmp_path: Path, capsys):
    from repflow import config_io

    rc = main(["sim", "--k", "4", "--scheme", "repflow", "--set", "tcp.min_rto=1ms",
               "--dump-config"])  # fmt: skip
    assert rc == 0
    text = capsys.readouterr().out
    (tmp_path / "run.toml").write_text(text)
    cfg = config_io.validate(config_io.load_toml(tmp_path / "run.toml"))
    assert cfg["topology"]["k"] == 4 and cfg["scheme"]["name"] == "repflow"
    assert cfg["tcp"]["min_rto"] == "1ms"
    assert set(config_io.known_keys()) >= {f"tcp.{k}" for k in cfg["tcp"]}


def test_cli_run_writes_readable_run_dir(tmp_path: Path, capsys):
    import pandas as pd
    from repflow import records

    cdf = tmp_path / "small.cdf"
    cdf.write_text("1000 0\n20000 0.5\n200000 1\n")
    out = tmp_path / "runs" / "a"
    argv = ["sim", "--k", "4", "--workload", str(cdf), "--load", "0.3", "--duration", "3ms",
            "--scheme", "repflow", "--seed", "5", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    for label in ("(0, 100KB]", "(100KB, 10MB]", "(10MB, inf)", "all", "replication overhead",
                  "drops", "events", "packet-hops/s", "peak memory"):  # fmt: skip
        assert label in text, label
    assert sorted(p.name for p in out.iterdir()) == ["flows.parquet", "run.json"]
    assert [p.name for p in out.parent.iterdir()] == ["a"]  # no temp dir left behind
    run = records.load_run(out)
    assert run.config["seed"] == 5 and run.config["topology"]["k"] == 4
    assert run.config["scheme"]["name"] == "repflow"
    assert len(run.flows) == run.counters["flows"] > 0
    assert run.metadata["peak_memory_bytes"] > 0 and "repflow" in run.metadata["command"]
    # The same command again refuses the now non-empty directory; --force replaces it with
    # identical records (same seed).
    assert main(argv + ["--quiet"]) == 2
    assert main(argv + ["--quiet", "--force"]) == 0
    pd.testing.assert_frame_equal(records.load_run(out).flows, run.flows)


def test_threads_give_the_sequential_records(tmp_path: Path, capsys):
    from repflow import records

    base = ["sim", "--k", "4", "--load", "0.5", "--duration", "150ms", "--scheme", "repflow",
            "--seed", "3", "--quiet"]  # fmt: skip
    runs = {}
    for threads in (1, 2):
        out = tmp_path / f"t{threads}"
        assert main([*base, "--threads", str(threads), "--out", str(out)]) == 0
        runs[threads] = records.load_run(out)
    one, two = runs[1], runs[2]
    assert len(one.flows) > 50 and two.metadata["threads"] == 2
    assert one.flows.equals(two.flows)
    for key in ("flows", "events", "packet_hops", "drops", "packets_delivered"):
        assert one.counters[key] == two.counters[key], key


def test_bench_threads_runs_unpinned_on_threads(capsys):
    import json

    argv = ["bench", "--scenario", "k16", "--duration", "20us", "--json", "--quiet",
            "--repeat", "1", "--threads", "2"]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["threads"] == 2 and report["cpu"] is None and report["packet_hops"] > 0
    assert main(["bench", "--threads", "0", "--quiet"]) == 2
    assert "--threads" in capsys.readouterr().err


def test_bench_smoke_json(capsys):
    import json

    assert main(["bench", "--duration", "100us", "--json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["scenario"] == "bench-A" and report["duration"] == "100us"
    assert report["packet_hops"] > 0 and report["events"] > 0 and report["flows"] >= 0
    assert report["peak_memory_bytes"] >= report["baseline_memory_bytes"] > 0
    assert report["reference"]["htsim_packet_hops_per_sec"] == 2.7e6
    # Three runs by default: one run's speed moves with the machine's load.
    assert report["repeat"] == 3 and len(report["runs"]) == 3


def test_bench_scenarios_grow_the_network(capsys):
    import json

    argv = ["bench", "--scenario", "k16", "--duration", "20us", "--json", "--quiet",
            "--repeat", "1"]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["scenario"] == "k16" and report["hosts"] == 1024
    assert report["memory_per_host_bytes"] >= 0 and report["connections"] >= 0
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--scenario", "k99"])
    assert exc.value.code == 2 and "k32" in capsys.readouterr().err


def test_bench_drain_zero_measures_the_loaded_network_alone(capsys):
    import json

    base = ["bench", "--duration", "200us", "--json", "--quiet", "--repeat", "1"]
    assert main(base) == 0
    full = json.loads(capsys.readouterr().out)
    assert main([*base, "--drain", "0s"]) == 0
    loaded = json.loads(capsys.readouterr().out)
    # By default the run drains until every flow ends, long after the last arrival; with
    # no drain it stops at the last arrival, with flows left unfinished.
    assert full["sim_time_s"] > 200e-6 and full["unfinished"] == 0
    assert loaded["drain"] == "0s" and loaded["sim_time_s"] <= 200e-6 + 1e-9
    assert loaded["unfinished"] > 0 and loaded["packet_hops"] < full["packet_hops"]


def test_bench_repflow_point_is_a_point_of_the_paper_study(capsys):
    import json
    import tomllib
    from pathlib import Path

    from repflow.cli.bench import bench_config

    spec = tomllib.loads(
        (Path(__file__).parents[2] / "experiments" / "repflow-paper.toml").read_text()
    )
    base = spec["base"]
    cfg = bench_config(scenario="repflow-point")
    assert cfg["topology"] == {**base["topology"]}
    assert cfg["tcp"] == base["tcp"] and cfg["queue"] == base["queue"]
    assert cfg["workload"]["duration"] == base["workload"]["duration"]
    assert "websearch" in spec["grid"]["workload.cdf"] and "tcp" in spec["grid"]["scheme"]
    argv = ["bench", "--scenario", "repflow-point", "--duration", "200us", "--json", "--quiet",
            "--repeat", "1"]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["hosts"] == 1024 and report["packet_hops"] > 0


def test_bench_repeat_reports_the_median_run_and_every_run(capsys):
    import json

    argv = ["bench", "--duration", "100us", "--json", "--quiet", "--repeat", "3"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    speeds = sorted(r["packet_hops_per_sec"] for r in report["runs"])
    assert report["repeat"] == 3 and len(speeds) == 3
    assert report["packet_hops_per_sec"] == speeds[1]
    assert report["best_packet_hops_per_sec"] == speeds[2]
    assert main(["bench", "--duration", "100us", "--quiet", "--repeat", "2"]) == 0
    text = capsys.readouterr().out
    assert "median of 2" in text and "every run" in text
    assert main(["bench", "--repeat", "0"]) == 2
    assert "--repeat" in capsys.readouterr().err


def test_bench_pins_its_runs_to_one_cpu(capsys):
    import json
    import os

    allowed = sorted(os.sched_getaffinity(0))
    argv = ["bench", "--duration", "100us", "--json", "--quiet", "--repeat", "1"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["cpu"] == allowed[-1]
    assert main([*argv, "--cpu", str(allowed[0])]) == 0
    assert json.loads(capsys.readouterr().out)["cpu"] == allowed[0]
    assert main([*argv, "--cpu", "-1"]) == 0
    assert json.loads(capsys.readouterr().out)["cpu"] is None
    assert main([*argv, "--cpu", "99999"]) == 2
    err = capsys.readouterr().err
    assert "--cpu" in err and "CPU 99999" in err and "allowed" in err


def test_bench_steal_share_reads_the_steal_column():
    from repflow.cli.bench import steal_share

    # user nice system idle iowait irq softirq steal guest guest_nice
    before = [100, 0, 10, 500, 0, 0, 0, 20, 50, 0]
    after = [160, 0, 20, 530, 0, 0, 0, 120, 90, 0]
    # 200 ticks passed, 100 of them stolen; guest time (inside user) is not counted twice.
    assert steal_share(before, after) == 0.5
    assert steal_share(before, before) is None  # no time passed
    assert steal_share(before[:7], after[:7]) is None  # an old kernel: no steal column
    assert steal_share(None, after) is None
    assert steal_share(after, before) is None  # counters going backwards: not a reading


def test_bench_reports_cpu_time_and_stolen_time(capsys):
    import json
    import os

    from repflow.cli.bench import cpu_ticks

    cpu = sorted(os.sched_getaffinity(0))[-1]
    ticks = cpu_ticks(cpu)
    # Long enough (about 0.1 s) for /proc/stat's 10 ms ticks to move.
    argv = ["bench", "--duration", "2ms", "--json", "--quiet", "--repeat", "2"]
    assert main([*argv, "--cpu", str(cpu)]) == 0
    report = json.loads(capsys.readouterr().out)
    for run in report["runs"]:
        assert 0 < run["cpu_time_s"]
        if ticks is not None and len(ticks) > 7:
            assert run["steal_share"] is not None and 0 <= run["steal_share"] <= 1
    assert report["packet_hops_per_cpu_sec"] > 0
    # Not pinned: no one CPU's stolen time to read.
    assert main([*argv, "--cpu", "-1"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert all(run["steal_share"] is None for run in report["runs"])
    assert main(["bench", "--duration", "100us", "--quiet", "--repeat", "1"]) == 0
    assert "CPU time" in capsys.readouterr().out


def test_interrupted_run_writes_nothing(tmp_path: Path, monkeypatch, capsys):
    from repflow.cli import sim

    calls = []

    def stop(self, *progress):
        calls.append(progress)
        return False  # what Ctrl-C amounts to: the core stops the run

    monkeypatch.setattr(sim.SimProgress, "__call__", stop)
    out = tmp_path / "out"
    argv = ["sim", "--k", "4", "--link-rate", "10Gbps", "--duration", "200ms", "--out", str(out)]
    assert main(argv) == 130
    assert calls, "the progress callback was never called"
    assert "interrupted" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_closed_reader_of_the_output_stops_the_command_quietly():
    import subprocess
    import sys

    # As in `repflow bench | head -1`, when the reader has gone before the output comes.
    proc = subprocess.Popen(
        [sys.executable, "-m", "repflow", "bench", "--duration", "100us", "--repeat", "1",
         "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait() == 141, err
    assert "Traceback" not in err
