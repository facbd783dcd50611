"""`repflow testbed run` under faults, on the real kernel (needs root): a killed run's orphans,
a port held by another process, a server killed mid-run, flows that hit the flow timeout, and
SIGTERM. A k = 2 fat-tree (2 hosts, 5 switches) under its own prefix and state directory keeps
each case to a few seconds.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import require_net_commands
from repflow.testbed import netns
from repflow.testbed.topology import fat_tree

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, veth, tc)"),
    pytest.mark.skipif(
        shutil.which("ip") is None or shutil.which("tc") is None or shutil.which("ss") is None,
        reason="iproute2 (ip, tc, ss) is not installed",
    ),
]

PREFIX = "rftw-"



@pytest.fixture(scope="module")
def env(testbed_state):
    require_net_commands()
    return {**os.environ}


@pytest.fixture(scope="module")
def tb(env):
    t = netns.up(fat_tree(2), rate_bps=20_000_000, buffer=50, seed=1, prefix=PREFIX)
    try:
        yield t
    finally:
        netns.down(PREFIX)


def _host_pids(tb) -> dict[str, list[int]]:
    return {h: p for h, p in tb.pids().items() if tb.topo.nodes[h].kind == "host" and p}


def _wait_for(pred, timeout: float) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


def _run_cmd(out: Path, port: int, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "repflow", "testbed", "run", "--prefix", PREFIX, "--out", str(out),
        "--port", str(port), "--load", "0.3", "--drain", "2s", *extra,
    ]  # fmt: skip


def _listeners(tb, host: str, port: int) -> list[int]:
    """PIDs listening on ``port`` inside ``host`` (read with ``ss`` here, independently of the
    code under test)."""
    out = tb.run_in(host, ["ss", "-Hltnp", f"sport = :{port}"])
    return [int(x) for x in re.findall(r"pid=(\d+)", out)]


def _serving(tb, port: int) -> bool:
    return all(_listeners(tb, h.name, port) for h in tb.topo.hosts)


def _alive(pid: int) -> bool:
    return netns._alive(pid)


def test_sigterm_exits_143_and_stops_every_host_process(tb, env, tmp_path):
    p = subprocess.Popen(
        _run_cmd(tmp_path / "r", 7300, "--duration", "60s"),
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert _wait_for(lambda: _serving(tb, 7300), 60)
        p.send_signal(signal.SIGTERM)
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 143, err
    assert "terminated" in err
    assert _host_pids(tb) == {}
    assert not (tmp_path / "r").exists()


def test_next_run_after_a_killed_one_stops_its_orphans(tb, env, tmp_path):
    p = subprocess.Popen(
        _run_cmd(tmp_path / "killed", 7400, "--duration", "60s"),
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert _wait_for(lambda: _serving(tb, 7400), 60)
    p.kill()  # SIGKILL: no cleanup; its servers live on in the host namespaces
    p.wait()
    orphans = [pid for pids in _host_pids(tb).values() for pid in pids]
    assert orphans, "a killed run should leave its servers behind (else this test tests nothing)"
    # same port: without cleanup the new servers could not bind, or readiness would see orphans
    done = subprocess.run(
        _run_cmd(tmp_path / "next", 7400, "--duration", "2s"),
        env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert re.search(r"stopped \d+ processes an earlier run left on h0, h1", done.stderr)
    assert not any(_alive(pid) for pid in orphans)
    assert (tmp_path / "next" / "run.json").exists()
    assert (tmp_path / "next" / "logs" / "serve-h0.log").exists()
    assert _host_pids(tb) == {}


def test_a_port_held_by_another_process_is_an_error_naming_the_host(tb, tmp_path):
    from repflow.errors import UserError
    from repflow.testbed.workload import servers

    h1 = tb.topo.nodes["h1"]
    code = (
        "import socket, time; s = socket.socket(); "
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
        f"s.bind(('{h1.addr}', 7500)); s.listen(); print('up', flush=True); time.sleep(60)"
    )
    squatter = tb.popen_in("h1", [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert squatter.stdout.readline().strip() == "up"
        with pytest.raises(UserError, match=r"on h1\b") as exc, servers(tb, 7500, tmp_path):
            pass
        assert "Address already in use" in str(exc.value) or "another process" in str(exc.value)
    finally:
        squatter.kill()
        squatter.wait()
    assert _host_pids(tb) == {}  # our own servers were stopped


def test_a_server_killed_mid_run_fails_the_run_naming_the_host(tb, env, tmp_path):
    out = tmp_path / "r"
    p = subprocess.Popen(
        _run_cmd(out, 7600, "--duration", "30s"),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # generators running: each host holds its server and its `repflow load`
        assert _wait_for(
            lambda: _serving(tb, 7600) and all(len(v) >= 2 for v in _host_pids(tb).values())
            and len(_host_pids(tb)) == 2,
            90,
        )
        time.sleep(2.0)
        (pid,) = set(_listeners(tb, "h1", 7600))
        os.kill(pid, signal.SIGKILL)
        stdout, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("repflow: error")]
    assert len(lines) == 1, err
    assert "`repflow serve` on h1 died during the run (killed by signal 9)" in lines[0]
    assert "testbed run:" not in stdout  # no normal table
    assert not out.exists()
    kept = tmp_path / "r.failed-logs"
    assert str(kept) in lines[0]
    assert (kept / "serve-h1.log").exists() and (kept / "load-h0.log").exists()
    assert _host_pids(tb) == {}


def test_flows_whose_copies_all_time_out_are_failed_with_the_reason(tb, tmp_path):
    import pyarrow.parquet as pq
    from repflow.testbed.workload import run_workload

    # 20 Mb/s: a 1 MB flow needs 0.4 s, so a 0.2 s flow timeout fails every large flow
    path, meta = run_workload(
        tb, scheme="repflow", workload="websearch", load=0.5, duration=4.0, drain=2.0, seed=3,
        out=tmp_path / "r", port=7700, flow_timeout=0.2, show_progress=False,
    )  # fmt: skip
    table = pq.read_table(path / "flows.parquet").to_pandas()
    failed = table[table["outcome"] == "failed"]
    assert len(failed) > 0
    assert failed["reason"].str.contains("every copy failed").all()
    assert failed["reason"].str.contains("no reply within 200ms").any()
    assert (table.loc[table["outcome"] == "finished", "reason"] == "").all()
    assert meta["summary"]["failed"] == len(failed)
    assert meta["summary"]["unfinished"] == int((table["outcome"] == "unfinished").sum())
    assert sum(meta["summary"]["failure_reasons"].values()) == len(failed)
    assert meta["config"]["flow_timeout"] == 0.2
