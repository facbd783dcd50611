"""Issue 39, the testbed's items: the congestion-control check a namespace really needs (16),
`run` stopping only what an earlier run of this tool started (17), messages that keep the
user's --prefix (18), how soon a killed server fails the run (19), and what `kill -9` leaves
behind (20). The first tests need neither root nor a testbed; the rest build a k = 2 fat-tree
(2 hosts) under their own prefix and state directory, as root."""

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
from repflow.errors import UserError
from repflow.testbed import netns
from repflow.testbed.topology import fat_tree

PREFIX = "rfte-"

needs_root = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, veth, tc)"),
    pytest.mark.skipif(
        shutil.which("ip") is None or shutil.which("tc") is None or shutil.which("ss") is None,
        reason="iproute2 (ip, tc, ss) is not installed",
    ),
]


@pytest.fixture
def fake_kernel(tmp_path, monkeypatch):
    """A /proc/sys of our own (every sysctl the testbed checks exists), a state directory of
    our own, and no root or iproute2 needed: ``up`` stops before building anything, or the
    test fails at ``_locked``."""
    root = tmp_path / "proc-sys"

    def sysctl(key: str) -> Path:
        return root / key.replace(".", "/")

    for key in ("net.ipv4.fib_multipath_hash_policy", "net.ipv4.fib_multipath_hash_fields",
                "net.ipv4.fib_multipath_hash_seed", "net.ipv4.icmp_ratelimit"):  # fmt: skip
        sysctl(key).parent.mkdir(parents=True, exist_ok=True)
        sysctl(key).write_text("0\n")
    sysctl("net.ipv4.tcp_available_congestion_control").write_text("reno bbr cubic\n")
    sysctl("net.ipv4.tcp_allowed_congestion_control").write_text("reno bbr\n")
    monkeypatch.setattr(netns, "sysctl_path", sysctl)
    monkeypatch.setattr(netns, "require_root", lambda: None)
    monkeypatch.setattr(netns, "require_tools", lambda: None)
    monkeypatch.setenv("REPFLOW_TESTBED_STATE_DIR", str(tmp_path / "state"))
    return sysctl


# -- item 16: the namespace's list of congestion controls, checked up front --------------------


def test_a_congestion_control_namespaces_may_not_use_is_refused_up_front(fake_kernel,
                                                                          monkeypatch):
    def too_far(*_a, **_k):
        raise AssertionError("got past the up-front checks: namespaces would be built")

    monkeypatch.setattr(netns, "_locked", too_far)
    with pytest.raises(UserError) as e:
        netns.up(fat_tree(2), rate_bps=10**7, buffer=50, seed=1, prefix=PREFIX, tcp_cc="cubic")
    msg = str(e.value)
    assert msg.startswith("--tcp:") and "\n" not in msg
    assert "net.ipv4.tcp_allowed_congestion_control" in msg
    assert 'sysctl -w net.ipv4.tcp_allowed_congestion_control="reno bbr cubic"' in msg
    with pytest.raises(UserError, match="not available in this kernel"):
        netns.up(fat_tree(2), rate_bps=10**7, buffer=50, seed=1, prefix=PREFIX, tcp_cc="vegas")


# -- item 18: messages a user follows literally keep the --prefix ------------------------------


def test_already_up_names_the_users_prefix(fake_kernel, monkeypatch):
    import json

    state = Path(os.environ["REPFLOW_TESTBED_STATE_DIR"])
    state.mkdir(parents=True)
    (state / f"{PREFIX.rstrip('-')}.json").write_text(json.dumps({"status": "up"}))
    monkeypatch.setattr(netns, "list_netns", lambda: [])
    with pytest.raises(UserError) as e:
        netns.up(fat_tree(2), rate_bps=10**7, buffer=50, seed=1, prefix=PREFIX)
    assert f"`repflow testbed down --prefix {PREFIX}`" in str(e.value)
    with pytest.raises(UserError) as e:
        netns.current("rfnone-")
    assert "`repflow testbed up --prefix rfnone-`" in str(e.value)
    # the default prefix needs no --prefix
    assert netns.command("down", netns.DEFAULT_PREFIX) == "repflow testbed down"


# -- item 20 (no root needed): what makes a work directory provably stale ----------------------


def test_only_a_dead_runs_work_directory_is_stale(tmp_path, monkeypatch):
    from repflow.testbed import stale

    monkeypatch.setenv("REPFLOW_TESTBED_STATE_DIR", str(tmp_path / "state"))
    out = tmp_path / "runs" / "r1"
    out.parent.mkdir()
    live = out.parent / ".r1.hosts-live"
    dead = out.parent / ".r1.hosts-dead"
    foreign = out.parent / ".r1.hosts-nolock"  # not provably ours: left alone
    for d in (live, dead, foreign):
        d.mkdir()
    (dead / stale.OWNER).write_text("")
    with stale.owned_workdir(live, PREFIX):
        assert not stale.stale_workdir(live) and stale.stale_workdir(dead)
        # a run killed with -9 holds its lock in a process that is gone: here, a child
        code = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); "
                "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)")
        holder = subprocess.Popen([sys.executable, "-c", code, str(dead / stale.OWNER)],
                                  stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert holder.stdout.readline().strip() == "held"
        assert not stale.stale_workdir(dead)
        holder.kill()
        holder.wait()
        assert stale.clean(PREFIX, near=out) == [dead]
        assert live.is_dir() and foreign.is_dir() and not dead.exists()
    # the registry forgets a directory once its run ends
    reg = Path(os.environ["REPFLOW_TESTBED_STATE_DIR"]) / f"{PREFIX.rstrip('-')}.workdirs"
    assert not reg.exists() or str(live) not in reg.read_text()


# -- the root tests: a k = 2 testbed ------------------------------------------------------------


@pytest.fixture(scope="module")
def env(testbed_state):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, veth, tc)")
    require_net_commands()
    return {**os.environ}


@pytest.fixture(scope="module")
def tb(env):
    t = netns.up(fat_tree(2), rate_bps=20_000_000, buffer=50, seed=1, prefix=PREFIX)
    try:
        yield t
    finally:
        netns.down(PREFIX)


def _run_cmd(out: Path, port: int, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "repflow", "testbed", "run", "--prefix", PREFIX, "--out", str(out),
        "--port", str(port), "--load", "0.3", "--drain", "2s", *extra,
    ]  # fmt: skip


def _wait_for(pred, timeout: float) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


def _listeners(tb, host: str, port: int) -> list[int]:
    out = tb.run_in(host, ["ss", "-Hltnp", f"sport = :{port}"])
    return [int(x) for x in re.findall(r"pid=(\d+)", out)]


def _serving(tb, port: int) -> bool:
    return all(_listeners(tb, h.name, port) for h in tb.topo.hosts)


@needs_root[0]
@needs_root[1]
@needs_root[2]
def test_run_stops_an_earlier_runs_leftovers_but_not_an_observer(tb, tmp_path):
    from repflow.testbed.workload import exclusive_hosts

    # an observer the user started by hand, and a leftover this tool started (tagged)
    observer = subprocess.Popen(tb.exec_argv("h0", ["sleep", "300"]))
    leftover = tb.popen_in("h1", ["sleep", "300"])
    said: list[str] = []
    try:
        assert _wait_for(lambda: netns.process_tag(leftover.pid) == PREFIX, 10)
        with exclusive_hosts(tb, said.append):
            pass
        assert _wait_for(lambda: leftover.poll() is not None, 10)
        assert observer.poll() is None, "the user's observer was killed"
        assert len(said) == 1 and re.search(r"stopped 1 processes an earlier run left on h1$",
                                            said[0]), said  # fmt: skip
    finally:
        for p in (observer, leftover):
            if p.poll() is None:
                p.kill()
            p.wait()


@needs_root[0]
@needs_root[1]
@needs_root[2]
@pytest.mark.slow
def test_a_killed_server_fails_the_run_within_about_a_second(env, tmp_path):
    # k = 4 (16 servers): stopping the others one after the other, each in its orderly way,
    # is what took ~7 s (a k = 2 testbed hid it)
    prefix = "rfte4-"
    tb = netns.up(fat_tree(4), rate_bps=20_000_000, buffer=50, seed=1, prefix=prefix)
    out = tmp_path / "r"
    cmd = [arg if arg != PREFIX else prefix for arg in _run_cmd(out, 7700, "--duration", "30s")]
    p = subprocess.Popen([*cmd, "-q"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)  # fmt: skip
    try:
        assert _wait_for(lambda: _serving(tb, 7700), 120)
        time.sleep(2.0)
        (pid,) = set(_listeners(tb, "h5", 7700))
        os.kill(pid, signal.SIGKILL)
        t_kill = time.monotonic()
        line = ""
        while time.monotonic() - t_kill < 30:
            line = p.stderr.readline()
            if "died" in line or not line:
                break
        took = time.monotonic() - t_kill
        _out, rest = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        netns.down(prefix)
    assert "`repflow serve` on h5 died" in line, line + rest
    # ~1.5 s measured (0.2 s polling, the others killed together); 7.5 s before
    assert took < 3.0, f"the killed server was reported after {took:.1f} s"
    assert p.returncode == 2


@needs_root[0]
@needs_root[1]
@needs_root[2]
@pytest.mark.slow
def test_down_and_the_next_run_remove_what_a_kill_9_left(tb, env, tmp_path):
    from repflow.testbed import stale

    state = Path(env["REPFLOW_TESTBED_STATE_DIR"])
    out = tmp_path / "killed"
    p = subprocess.Popen(_run_cmd(out, 7800, "--duration", "60s", "-q"), env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    assert _wait_for(lambda: _serving(tb, 7800), 90)
    p.kill()
    p.wait()
    left = list(tmp_path.glob(".killed.hosts-*"))
    assert len(left) == 1 and stale.stale_workdir(left[0])
    assert (state / f"{PREFIX.rstrip('-')}.run.lock").exists()
    # the next run (another --out beside it) removes the dead run's directory
    nxt = subprocess.run(_run_cmd(tmp_path / "next", 7800, "--duration", "1s", "-q"), env=env,
                         capture_output=True, text=True, timeout=240)  # fmt: skip
    assert nxt.returncode == 0, nxt.stderr
    assert not left[0].exists()
    assert not list(tmp_path.glob(".*.hosts-*"))
    assert not (state / f"{PREFIX.rstrip('-')}.run.lock").exists()
    # and `down` removes one wherever --out was (registered), and the run lock
    other = tmp_path / "elsewhere"
    other.mkdir()
    p = subprocess.Popen(_run_cmd(other / "k2", 7900, "--duration", "60s", "-q"), env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    assert _wait_for(lambda: _serving(tb, 7900), 90)
    p.kill()
    p.wait()
    left = list(other.glob(".k2.hosts-*"))
    assert len(left) == 1
    removed = stale.clean(PREFIX)  # what `down` calls after the namespaces are gone
    assert removed == [left[0].absolute()] and not left[0].exists()
    assert not (state / f"{PREFIX.rstrip('-')}.run.lock").exists()
