"""Every command that writes files checks its output location before computing: one line,
exit 2, no traceback, nothing created — against an existing regular file, a path under a
regular file and a path in /proc (unwritable even for root, unlike a chmod'ed directory)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SPEC = """
[experiment]
name = "tiny"
[base]
topology = { kind = "star", hosts = 4 }
workload = { duration = "1ms" }
[grid]
scheme = ["tcp"]
"workload.load" = [0.2]
"""


def _commands(target: str, spec: Path) -> dict[str, list[str]]:
    return {
        "sim": ["sim", "--out", target],
        "model": ["model", "--out", target],
        "model --overlay": ["model", "--overlay", str(spec.parent), "--out", target],
        "sweep": ["sweep", str(spec), "--out", target],
        "sweep --dry-run": ["sweep", str(spec), "--out", target, "--dry-run"],
        "reproduce --quick": ["reproduce", "--quick", "--out", target],
        "report": ["report", target],
        "testbed run": ["testbed", "run", "--out", target],
        "testbed toy": ["testbed", "toy", "--out", target, "--prefix", "rfoo-"],
        "send": ["send", "--to", "127.0.0.1:9", "--count", "1", "--out", target],
        "load": ["load", "--peers", "127.0.0.1:9", "--load", "0.1", "--duration", "1s",
                 "--out", target],
    }


def _snapshot(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("where", ["file", "under-file", "proc"])
def test_every_command_refuses_an_unwritable_output_before_computing(tmp_path, where):
    spec = tmp_path / "tiny.toml"
    spec.write_text(SPEC)
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    target = {
        "file": str(afile),
        "under-file": str(afile / "out"),
        "proc": "/proc/repflow-no-such-dir/out",
    }[where]
    env = {**os.environ, "REPFLOW_TESTBED_STATE_DIR": str(tmp_path / "state")}
    before = _snapshot(tmp_path)
    for name, argv in _commands(target, spec).items():
        proc = subprocess.run(
            [sys.executable, "-m", "repflow", *argv],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
        )  # fmt: skip
        err = proc.stderr.strip()
        assert proc.returncode == 2, (name, proc.stdout, err)
        assert "Traceback" not in err, (name, err)
        assert err.startswith("repflow: error:") and "\n" not in err, (name, err)
        assert proc.stdout == "", (name, proc.stdout)
        assert _snapshot(tmp_path) == before, name
        assert afile.read_text() == "keep me"


def test_sweep_into_another_specs_directory_is_refused(tmp_path):
    from repflow.cli import main

    spec = tmp_path / "tiny.toml"
    spec.write_text(SPEC)
    other = tmp_path / "other"
    other.mkdir()
    (other / "sweep.json").write_text('{"name": "another-study", "points": []}')
    assert main(["sweep", str(spec), "--out", str(other), "--no-report", "-q"]) == 2
    assert '{"name": "another-study"' in (other / "sweep.json").read_text()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert main(["sweep", str(spec), "--out", str(foreign), "--no-report", "-q"]) == 2
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_sweep_resumes_its_own_directory(tmp_path, capsys):
    from repflow.cli import main

    spec = tmp_path / "tiny.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--no-report", "-q", "-j", "1"]) == 0
    assert main(["sweep", str(spec), "--out", str(out), "--no-report", "-q", "-j", "1"]) == 0
    assert "1 already stored" in capsys.readouterr().err


def test_model_out_refuses_a_foreign_directory_and_bad_eps(tmp_path, capsys):
    from repflow.cli import main

    foreign = tmp_path / "f"
    foreign.mkdir()
    (foreign / "flows.parquet").write_text("x")
    assert main(["model", "--out", str(foreign), "--loads", "0.5"]) == 2
    assert "not empty" in capsys.readouterr().err
    for eps in ("2", "0", "-0.1", "nan"):
        assert main(["model", "--out", str(tmp_path / "m"), "--eps", eps]) == 2
        assert "--eps" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()
    out = tmp_path / "m2"
    assert main(["model", "--out", str(out), "--loads", "0.5"]) == 0
    assert main(["model", "--out", str(out), "--loads", "0.5"]) == 0  # its own files: replaced


def test_refused_or_failed_runs_create_nothing(tmp_path):
    spec = tmp_path / "tiny.toml"
    spec.write_text(SPEC)
    cases = {
        # the full study without --yes and without a terminal to ask on
        "reproduce": ["reproduce", "--out", str(tmp_path / "full")],
        # a Ray cluster that is not there
        "ray": ["sweep", str(spec), "--out", str(tmp_path / "ray"), "--executor", "ray",
                "--address", "127.0.0.1:9"],
    }  # fmt: skip
    for name, argv in cases.items():
        proc = subprocess.run(
            [sys.executable, "-m", "repflow", *argv], capture_output=True, text=True,
            stdin=subprocess.DEVNULL, cwd=tmp_path, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 2, (name, proc.stderr)
        assert "Traceback" not in proc.stderr, (name, proc.stderr)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.toml"], name
