"""A real two-node Ray cluster on one machine (issue 39, item 13): a head and a second node
started as separate `ray start` processes on 127.0.0.1, as docs/experiments.md tells a user to,
then `repflow sweep --executor ray --address 127.0.0.1:PORT`; its records equal a local
sweep's. Skipped where Ray is not installed; slow (Ray takes ~10-20 s per node to start).

Teardown stops exactly the processes this test started: each `ray start --block` runs in a
session of its own and stops its Ray processes on SIGTERM (the test then kills what is left of
that process group). `ray stop` would stop every Ray on the machine, other users' too."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow

SPEC = """
[experiment]
name = "ray-two-nodes"
[base]
topology = { kind = "fat-tree", k = 4 }
workload = { duration = "100ms", drain = "2s" }
[grid]
scheme = ["tcp", "repflow"]
"workload.load" = [0.3, 0.6]
"""


def _ray_bin() -> str:
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'repflow[ray]')")
    here = Path(sys.executable).parent / "ray"
    found = str(here) if here.exists() else shutil.which("ray")
    if not found:
        pytest.skip("the `ray` command is not on PATH")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the `ray start --block` process group we started (it stops its own Ray
    processes), then SIGKILL to whatever of that group is left."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


def _alive_nodes(address: str, env: dict[str, str]) -> int:
    code = (f"import ray; ray.init(address={address!r}, log_to_driver=False); "
            "print(sum(1 for n in ray.nodes() if n['Alive']))")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    lines = r.stdout.strip().splitlines()
    return int(lines[-1]) if r.returncode == 0 and lines and lines[-1].isdigit() else 0


def _records(root: Path) -> dict[str, tuple[pd.DataFrame, dict]]:
    out = {}
    for d in sorted((root / "points").glob("[!.]*")):
        run = json.loads((d / "run.json").read_text())
        out[d.name] = (pd.read_parquet(d / "flows.parquet"), run)
    return out


def test_a_two_node_ray_cluster_on_one_machine_stores_a_local_sweeps_records(tmp_path):
    ray = _ray_bin()
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    port = _free_port()
    address = f"127.0.0.1:{port}"
    # The commands of docs/experiments.md: one token for every process of the cluster and
    # the driver (Ray 2.60 refuses a node whose auth mode differs from the head's).
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
           "RAY_USAGE_STATS_ENABLED": "0"}  # fmt: skip
    # Ray's unix sockets live under --temp-dir: keep its path short
    temp = Path(tempfile.mkdtemp(prefix="rf-ray-", dir="/tmp"))
    common = ["--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
              "--temp-dir", str(temp)]  # fmt: skip
    procs: list[subprocess.Popen] = []
    try:
        with open(tmp_path / "head.log", "w") as log:
            procs.append(subprocess.Popen(
                [ray, "start", "--head", "--port", str(port), "--include-dashboard", "false",
                 *common], env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True))  # fmt: skip
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert procs[0].poll() is None, (tmp_path / "head.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        with open(tmp_path / "node.log", "w") as log:
            procs.append(subprocess.Popen(
                [ray, "start", "--address", address, *common], env=env, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True))  # fmt: skip
        deadline = time.monotonic() + 180
        while _alive_nodes(address, env) < 2:
            assert procs[1].poll() is None, (tmp_path / "node.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "node.log").read_text()
            time.sleep(1)
        r = subprocess.run(
            [sys.executable, "-m", "repflow", "sweep", str(spec), "--out", str(tmp_path / "ray"),
             "--executor", "ray", "--address", address, "--no-report", "-q"],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert "on ray (2 workers)" in r.stderr, r.stderr
    finally:
        for p in reversed(procs):
            _stop(p)
        shutil.rmtree(temp, ignore_errors=True)
    local = subprocess.run(
        [sys.executable, "-m", "repflow", "sweep", str(spec), "--out", str(tmp_path / "local"),
         "-j", "2", "--no-report", "-q"], capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr
    on_ray, here = _records(tmp_path / "ray"), _records(tmp_path / "local")
    assert sorted(on_ray) == sorted(here) and len(here) == 4
    for key in here:
        pd.testing.assert_frame_equal(on_ray[key][0], here[key][0], check_exact=True)
        assert on_ray[key][1] == here[key][1], key
