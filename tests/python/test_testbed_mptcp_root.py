"""`repflow testbed run --scheme mptcp` on the real kernel's Multipath TCP (needs root and a
kernel with MPTCP): a short run whose records have the tcp run's columns, subflows that exist
and take different core/aggregation links, and the refusal when a host namespace has MPTCP
disabled. A k = 4 fat-tree (four core switches) under its own prefix and state directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_net_commands
from repflow.testbed import mptcp, netns
from repflow.testbed.topology import fat_tree, toy

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, veth, tc)"),
    pytest.mark.skipif(
        shutil.which("ip") is None or shutil.which("tc") is None or shutil.which("ss") is None,
        reason="iproute2 (ip, tc, ss) is not installed",
    ),
    pytest.mark.skipif(
        not Path("/proc/sys/net/mptcp/enabled").exists(),
        reason="this kernel has no MPTCP (no net.mptcp.enabled sysctl)",
    ),
]

PREFIX = "rftm-"



@pytest.fixture(scope="module")
def env(testbed_state):
    return {**os.environ}


@pytest.fixture(scope="module")
def tb(env):
    t = netns.up(fat_tree(4), rate_bps=20_000_000, buffer=50, seed=1, prefix=PREFIX)
    try:
        yield t
    finally:
        netns.down(PREFIX)


def _run(env, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "repflow", "testbed", "run", "--prefix", PREFIX, "--out", str(out),
         "--load", "0.3", "--duration", "4s", "--drain", "6s", "--seed", "2", "-q", *extra],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip


def _limits(tb, host: str) -> str:
    return tb.run_in(host, ["ip", "mptcp", "limits", "show"]).strip()


def test_kernel_offers_only_the_default_scheduler(tb):
    s = mptcp.schedulers(tb, "h0")
    # MPTCP-L would need a redundant scheduler: if one appears, docs/testbed.md must change
    assert s["available_schedulers"].split() == ["default"], s


def test_mptcp_run_has_the_tcp_records_columns_and_joined_subflows(tb, env, tmp_path):
    require_net_commands()
    import pyarrow.parquet as pq

    runs = {}
    for scheme, extra in (("tcp", []), ("mptcp", ["--subflows", "4"])):
        proc = _run(env, tmp_path / scheme, "--scheme", scheme, *extra)
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs[scheme] = tmp_path / scheme
    cols = {s: pq.read_schema(p / "flows.parquet").names for s, p in runs.items()}
    assert cols["mptcp"] == cols["tcp"]
    flows = pq.read_table(runs["mptcp"] / "flows.parquet").to_pandas()
    done = int((flows["outcome"] == "finished").sum())
    assert len(flows) > 10 and done > 5, flows["reason"].value_counts()
    meta = json.loads((runs["mptcp"] / "run.json").read_text())
    assert meta["config"]["scheme"]["name"] == "mptcp"
    assert meta["config"]["scheme"]["subflows"] == 4
    c = meta["counters"]
    mp = {k: v for k, v in c.items() if k.startswith("mptcp_")}
    # every finished flow's connection negotiated MPTCP, or (rarely, on this congested
    # network: 1 of 39 handshakes in 2 of 5 CI runs) the server fell back to TCP because
    # the ACK that completed the handshake carried no MP_CAPABLE (`MPCapableFallbackACK`;
    # a lost third ACK is the likely start); none was opened as TCP (blackhole detection is
    # off during runs), and subflows joined. At most a tenth: one in three runs with one
    # fallback would fail a bound of one about once in 20 runs, this one about never.
    fallbacks = c["mptcp_MPCapableFallbackACK"] + c["mptcp_MPCapableFallbackSYNACK"]
    assert fallbacks <= max(1, done // 10), mp
    assert c["mptcp_MPCapableACKRX"] + fallbacks >= done, mp
    assert c["mptcp_MPCapableSYNTXDisabled"] == 0, mp
    assert c["mptcp_MPJoinAckRx"] > 0, mp
    # the run removed its endpoints and restored the kernel's default limits
    assert tb.run_in("h0", ["ip", "mptcp", "endpoint", "show"]).strip() == ""
    assert "add_addr_accepted 0" in _limits(tb, "h0")
    assert tb.run_in("h0", ["sysctl", "-n", "net.mptcp.blackhole_timeout"]).strip() == "3600"


def test_subflows_exist_and_take_different_core_and_aggregation_links(tb):
    spread = mptcp.path_spread(tb, "h0", "h15", subflows=8)
    subflows = spread.subflows
    assert len(subflows) > 1, spread
    assert len({s[3] for s in subflows}) == len(subflows)  # one destination port each
    used = spread.links_used()
    up_to_core = [k for k in used if k.startswith("a")]
    assert len(up_to_core) >= 2, spread  # at least two aggregation->core links carried it
    # control: one subflow takes one path (one aggregation switch, one core link)
    single = mptcp.path_spread(tb, "h0", "h15", subflows=1)
    assert len(single.subflows) == 1
    assert len([k for k in single.links_used() if k.startswith("a")]) == 1, single


def test_disabled_mptcp_in_a_host_namespace_is_one_line_exit_2(tb, env, tmp_path):
    tb.run_in("h3", ["sysctl", "-qw", "net.mptcp.enabled=0"])
    try:
        proc = _run(env, tmp_path / "off", "--scheme", "mptcp")
    finally:
        tb.run_in("h3", ["sysctl", "-qw", "net.mptcp.enabled=1"])
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "net.mptcp.enabled = 0" in lines[0] and "h3" in lines[0]
    assert not (tmp_path / "off").exists()


@pytest.mark.parametrize("extra", [["--subflows", "0"], ["--subflows", "65"],
                                   ["--scheme", "tcp", "--subflows", "4"]])  # fmt: skip
def test_bad_subflows_is_one_line_exit_2(tb, env, tmp_path, extra):
    proc = _run(env, tmp_path / "bad", *(["--scheme", "mptcp"] if "tcp" not in extra else []),
                *extra)  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--subflows" in lines[0]


def test_toy_with_mptcp(env):
    from repflow.testbed.toyexp import run_toy

    tb = netns.up(toy(), rate_bps=50_000_000, buffer=50, seed=1, prefix="rftq-",
                  host_shaping=False)  # fmt: skip
    try:
        res = {r.name: r for r in run_toy(tb, flows=30, seed=1, warmup=0.5, mptcp_subflows=4)}
    finally:
        netns.down("rftq-")
    assert list(res) == ["alone", "large", "replicated", "mptcp"]
    assert res["mptcp"].unfinished == 0 and len(res["mptcp"].fct) == 30
