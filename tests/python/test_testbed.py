"""Testbed pieces that need no root: topology, routing, iproute2 plans, units, summaries, CLI."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from repflow.api import TCP_COUNTER_COLUMNS
from repflow.errors import UserError
from repflow.testbed import netns
from repflow.testbed.topology import fat_tree, port_name, toy
from repflow.units import format_rate, parse_duration, parse_rate, parse_size


def test_fat_tree_k4_shape_and_addresses():
    t = fat_tree(4)
    assert len(t.hosts) == 16
    assert len(t.switches) == 20
    assert len(t.links) == 48
    roles = [s.role for s in t.switches]
    assert roles.count("edge") == 8 and roles.count("agg") == 8 and roles.count("core") == 4
    for s in t.switches:
        assert len(t.neighbours(s.name)) == 4, s.name  # four-port switches
    addrs = [n.addr for n in t.nodes.values()]
    assert len(set(addrs)) == len(addrs)
    assert all(a.startswith("10.") for a in addrs)
    assert t.nodes["h0"].addr == "10.0.0.2" and t.nodes["h15"].addr == "10.3.1.3"
    assert t.nodes["c0"].addr == "10.4.1.1"


@pytest.mark.parametrize("k", [0, 3, 18, -2])
def test_fat_tree_rejects_bad_k(k):
    with pytest.raises(UserError, match="--k"):
        fat_tree(k)


def test_fat_tree_routes_are_shortest_equal_cost():
    t = fat_tree(4)
    r = t.routes()
    assert r["e0"]["h0"] == ("h0",)
    assert r["e0"]["h2"] == ("a0", "a1")  # same pod, other edge: via both aggregation switches
    assert r["e0"]["h15"] == ("a0", "a1")
    assert set(r["a0"]["h15"]) == {"c0", "c1"}  # other pod: up to both of its cores
    assert r["a0"]["h2"] == ("e1",)  # own pod: straight down
    assert len(r["c0"]["h15"]) == 1  # cores have one way down
    # every inter-pod host pair has (k/2)^2 = 4 equal-cost paths
    paths = _count_paths(t, "h0", "h15")
    assert paths == 4


def _count_paths(t, src, dst):
    r = t.routes()
    first = t.neighbours(src)[0]

    def walk(node):
        if node == dst:
            return 1
        return sum(walk(n) for n in r[node][dst])

    return walk(first)


def test_toy_matches_fig3():
    t = toy()
    r = t.routes()
    assert r["s1"]["h3"] == ("s3", "s4")
    assert r["s1"]["h2"] == ("h2",)
    assert r["s3"]["h4"] == ("s2",)
    assert [h.name for h in t.hosts] == ["h1", "h2", "h3", "h4"]


def test_topology_round_trips_through_dict():
    t = fat_tree(4)
    u = type(t).from_dict(t.to_dict())
    assert u.routes() == t.routes()
    assert u.params == {"k": 4}


def test_batches_use_valid_names_and_ecmp_groups():
    t = fat_tree(4)
    veth = netns.veth_batch(t, "rftb-")
    assert len(veth) == 48
    assert veth[0] == "link add to-e0 netns rftb-h0 type veth peer name to-h0 netns rftb-e0"
    for n in t.nodes:
        for nb in t.neighbours(n):
            assert len(port_name(nb)) <= 15
    lines = netns.node_route_batch(t, "e0")
    assert "nexthop add id 1 dev to-h0" in lines
    assert "nexthop add id 3 via 10.0.2.1 dev to-a0 onlink" in lines
    groups = [ln for ln in lines if " group " in ln]
    assert groups == ["nexthop add id 1000 group 3/4"]
    assert "route add 10.3.1.3/32 nhid 1000" in lines
    assert netns.node_route_batch(t, "h0") == ["route add default via 10.0.0.1 dev to-e0 onlink"]
    assert netns.node_route_batch(t, "h0", rto_min_ms=10) == [
        "route add default via 10.0.0.1 dev to-e0 onlink rto_min 10ms"
    ]
    links = netns.node_link_batch(t, "a0")
    assert "address add 10.0.2.1/32 dev to-c0" in links


def test_tc_batch_shapes_every_port_with_droptail_limit():
    t = fat_tree(4)
    lines = netns.node_tc_batch(t, "a0", 20_000_000, 50)
    assert len(lines) == 8
    assert lines[0].startswith("qdisc add dev to-e0 root handle 1: tbf rate 20000000bit burst ")
    assert lines[1] == "qdisc add dev to-e0 parent 1:1 handle 10: pfifo limit 50"
    assert len(netns.node_tc_batch(t, "h0", 20_000_000, 50)) == 2
    assert netns.node_tc_batch(t, "h0", 20_000_000, 50, host_shaping=False) == []
    assert netns.FRAME_BYTES <= netns.tbf_burst(20_000_000) < 2 * netns.FRAME_BYTES


def test_switch_sysctls_hash_five_tuple_with_fixed_distinct_seeds():
    t = fat_tree(4)
    sw = dict(netns.sysctls(t, "a0", seed=7, have_seed=True))
    assert sw["net.ipv4.fib_multipath_hash_policy"] == "3"
    assert sw["net.ipv4.fib_multipath_hash_fields"] == "0x0037"
    assert sw["net.ipv4.icmp_ratelimit"] == "0"
    assert sw["net.ipv4.ip_forward"] == "1"
    assert int(sw["net.ipv4.fib_multipath_hash_seed"]) == netns.hash_seed(7, "a0")
    seeds = {netns.hash_seed(7, s.name) for s in t.switches}
    assert len(seeds) == 20 and 0 not in seeds
    assert netns.hash_seed(7, "a0") == netns.hash_seed(7, "a0") != netns.hash_seed(8, "a0")
    assert "net.ipv4.fib_multipath_hash_seed" not in dict(netns.sysctls(t, "a0", 7, False))
    host = dict(netns.sysctls(t, "h0", 7, True))
    assert "net.ipv4.ip_forward" not in host
    assert host["net.ipv4.tcp_congestion_control"] == "reno"
    assert dict(netns.sysctls(t, "h0", 7, True, "cubic"))["net.ipv4.tcp_congestion_control"] == (
        "cubic"
    )


def test_sysctl_script_names_the_failing_key():
    s = netns.sysctl_script([("net.ipv4.ip_forward", "1")])
    assert "/proc/sys/net/ipv4/ip_forward" in s and "cannot set net.ipv4.ip_forward=1" in s


@pytest.mark.parametrize("prefix", ["", "x", "rftb", "toolong-", "r f-", "rf_-"])
def test_bad_prefix_rejected(prefix):
    with pytest.raises(UserError, match="--prefix"):
        netns.check_prefix(prefix)


def test_units():
    assert parse_rate("20Mbps") == 20_000_000
    assert parse_rate("50mbit") == 50_000_000
    assert parse_rate("1G") == 10**9
    assert format_rate(20_000_000) == "20Mbps"
    assert parse_size("20KB") == 20_000 and parse_size("1KiB") == 1024
    assert parse_duration("500ms") == 0.5 and parse_duration("2min") == 120
    for bad in ("fast", "10 parsecs", ""):
        with pytest.raises(UserError, match="--link-rate"):
            parse_rate(bad)
    with pytest.raises(UserError, match="--duration"):
        parse_duration("0s")


def _records(rows):
    from repflow.api import RECORD_COLUMNS, records_frame

    cols = {c: [] for c in RECORD_COLUMNS}
    for r in rows:
        for c in RECORD_COLUMNS:
            cols[c].append(r.get(c, 0))
    return records_frame(cols)


def test_summarize_bins_and_unfinished():
    from repflow.testbed.workload import summarize

    nan = float("nan")
    flows = _records([
        {"id": 0, "size": 10_000, "fct": 0.001, "slowdown": 2.0, "winner": 0, "bytes_sent": 20_000,
         "copies": 2},
        {"id": 1, "size": 50_000, "fct": 0.003, "slowdown": 3.0, "winner": 1,
         "bytes_sent": 100_000, "copies": 2},
        {"id": 2, "size": 1_000_000, "fct": 0.5, "slowdown": 4.0, "winner": 0,
         "bytes_sent": 1_000_000, "copies": 1},
        {"id": 3, "size": 20_000, "fct": nan, "slowdown": nan, "winner": -1, "bytes_sent": 0,
         "copies": 1},
    ])  # fmt: skip
    s = summarize(flows)
    short = s["bins"][0]
    assert short["bin"] == "(0, 100KB]" and short["count"] == 3 and short["finished"] == 2
    assert short["fct_mean"] == pytest.approx(0.002)
    assert short["fct_p99"] == pytest.approx(np.percentile([0.001, 0.003], 99))
    assert s["bins"][1]["count"] == 1 and math.isnan(s["bins"][2]["fct_mean"])
    assert s["unfinished"] == 1
    # no counters: the simulator's overhead, extra copies' bytes / flow bytes, counted from the
    # records (not the bytes on the wire, which count headers and ACKs too)
    assert s["overhead"] == 60_000 / 1_080_000
    assert summarize(flows, {"flow_bytes": 100, "extra_copy_bytes": 5})["overhead"] == 0.05


def test_merge_host_runs_renumbers_by_start(tmp_path):
    from repflow.records import write_run
    from repflow.testbed.workload import merge_host_runs

    a = _records(
        [
            {"id": 0, "src": 0, "dst": 1, "size": 5, "start": 0.2, "fct": 0.1},
            {"id": 1, "src": 0, "dst": 1, "size": 5, "start": 0.4, "fct": 0.1},
        ]
    )
    b = _records([{"id": 0, "src": 1, "dst": 0, "size": 7, "start": 0.3, "fct": 0.1}])
    write_run(tmp_path / "h0", a, {"config": {}, "counters": {"flows": 2, "flow_bytes": 10}})
    write_run(tmp_path / "h1", b, {"config": {}, "counters": {"flows": 1, "flow_bytes": 7}})
    flows, counters, metas = merge_host_runs([tmp_path / "h0", tmp_path / "h1"])
    assert list(flows["id"]) == [0, 1, 2]
    assert list(flows["src"]) == [0, 1, 0]
    assert list(flows["start"]) == [0.2, 0.3, 0.4]
    assert counters == {"flows": 3, "flow_bytes": 17}
    assert len(metas) == 2
    assert isinstance(flows, pd.DataFrame)


def test_cli_without_root_says_so(monkeypatch, capsys):
    from repflow.cli import main

    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    for argv in (["testbed", "up"], ["testbed", "down"], ["testbed", "toy"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("repflow: error: the testbed needs root"), err


def test_cli_without_iproute2_names_the_package(monkeypatch, capsys, tmp_path):
    from repflow.cli import main

    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda _tool: None)
    monkeypatch.setenv("REPFLOW_TESTBED_STATE_DIR", str(tmp_path))
    assert main(["testbed", "up"]) == 2
    assert "install iproute2" in capsys.readouterr().err


def test_status_and_run_without_testbed(monkeypatch, capsys, tmp_path):
    from repflow.cli import main

    monkeypatch.setenv("REPFLOW_TESTBED_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(netns.shutil, "which", lambda _tool: None)
    assert main(["testbed", "status", "--prefix", "rfzz-"]) == 1
    assert "no testbed recorded" in capsys.readouterr().out
    assert main(["testbed", "run", "--out", str(tmp_path / "r"), "--prefix", "rfzz-"]) == 2
    assert "no testbed is up" in capsys.readouterr().err


def test_hostcmd_parses_like_repflow_and_waits_for_the_start_signal(tmp_path, capsys):
    pytest.importorskip("repflow.cli.net")
    from repflow.testbed import hostcmd

    ready, go = tmp_path / "ready", tmp_path / "go"
    argv = ["--ready", str(ready), "--go", str(go), "--wait", "0.2", "--", "load",
            "--peers", "127.0.0.1:9", "--load", "0.1", "--out", str(tmp_path / "out")]  # fmt: skip
    assert hostcmd.main(argv) == 2
    assert ready.exists()  # announced readiness, then gave up waiting for the signal
    assert "no start signal" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with pytest.raises(SystemExit) as exc:
        hostcmd.main(["--", "load", "--load", "0.1"])  # --peers and --out are required
    assert exc.value.code == 2


# ------------------------------------------------------------- `testbed run`: arguments first
def _no_processes(monkeypatch):
    """Any process start fails the test: `run` must refuse bad arguments before it starts one."""
    import subprocess

    def refuse(*_a, **_k):
        raise AssertionError("a process was started before the arguments were checked")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(subprocess, "run", refuse)


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--workload", "no-such-workload"], "--workload"),
        (["--load", "1.5"], "--load"),
        (["--duration", "soon"], "--duration"),
        (["--drain=-1s"], "--drain"),
        (["--port", "65534"], "--port"),
        (["--flow-timeout", "0s"], "--flow-timeout"),
    ],
)
def test_run_refuses_bad_arguments_before_any_process(monkeypatch, capsys, tmp_path, flags, field):
    from repflow.cli import main

    monkeypatch.setenv("REPFLOW_TESTBED_STATE_DIR", str(tmp_path))
    _no_processes(monkeypatch)
    argv = ["testbed", "run", "--out", str(tmp_path / "r"), "--prefix", "rfzz-", *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"repflow: error: {field}"), err
    assert err.count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_run_refuses_a_bad_workload_file_naming_it(monkeypatch, capsys, tmp_path):
    from repflow.cli import main

    cdf = tmp_path / "bad.cdf"
    cdf.write_text("1000 0.5\n500 0.2\n")
    monkeypatch.setenv("REPFLOW_TESTBED_STATE_DIR", str(tmp_path))
    _no_processes(monkeypatch)
    assert main(["testbed", "run", "--out", str(tmp_path / "r"), "--workload", str(cdf)]) == 2
    assert "--workload" in capsys.readouterr().err


def test_run_out_onto_an_existing_directory_or_file(monkeypatch, capsys, tmp_path):
    from repflow.cli import main

    monkeypatch.setenv("REPFLOW_TESTBED_STATE_DIR", str(tmp_path))
    _no_processes(monkeypatch)
    full = tmp_path / "full"
    full.mkdir()
    (full / "run.json").write_text("{}")
    assert main(["testbed", "run", "--out", str(full)]) == 2
    err = capsys.readouterr().err
    assert "not empty" in err and "--force" not in err  # `run` has no --force
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out in (afile, afile / "sub"):
        assert main(["testbed", "run", "--out", str(out)]) == 2
        assert "--out" in capsys.readouterr().err
    assert (full / "run.json").read_text() == "{}"


def test_sigterm_during_a_command_exits_143(monkeypatch, capsys, tmp_path):
    import os
    import signal

    from repflow.cli import main
    from repflow.testbed import workload

    monkeypatch.setenv("REPFLOW_TESTBED_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(netns, "current", lambda _prefix: object())
    cleaned = []

    def run_cli(_tb, _args, _checked, say):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        finally:
            cleaned.append(True)

    monkeypatch.setattr(workload, "run_cli", run_cli)
    before = signal.getsignal(signal.SIGTERM)
    assert main(["testbed", "run", "--out", str(tmp_path / "r")]) == 143
    assert cleaned == [True]
    assert "terminated" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before  # the command's handler is gone again


def test_merge_marks_failed_and_unfinished_flows_with_reasons(tmp_path):
    import json

    from repflow.records import write_run
    from repflow.testbed.workload import merge_host_runs

    df = pd.DataFrame({
        "id": [0, 1, 2], "src": 0, "dst": 1, "size": [10, 20, 30], "start": [0.1, 0.2, 0.3],
        "finish": [0.2, np.nan, np.nan], "fct": [0.1, np.nan, np.nan], "ideal_fct": 0.05,
        "slowdown": [2.0, np.nan, np.nan], "copies": [1, 0, 0], "winner": [0, -1, -1],
        "bytes_sent": [10, 0, 0], **{c: -1 for c in TCP_COUNTER_COLUMNS},
    })  # fmt: skip
    d = write_run(tmp_path / "h0", df, {"counters": {}})
    (d / "errors.json").write_text(json.dumps({
        "index": [1, 2],
        "error": ["flow 0x1a: every copy failed: copy 0: no reply within 30s (stalled)",
                  "unfinished when the run stopped"],
    }))  # fmt: skip
    flows, _c, _m = merge_host_runs([d])
    assert list(flows["outcome"]) == ["finished", "failed", "unfinished"]
    assert flows["reason"][1].endswith("no reply within 30s (stalled)")
    assert list(flows["reason"][[0, 2]]) == ["", ""]


class _Stop(Exception):
    pass


def _raise_stop(_sig, _frame):
    raise _Stop


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_held_defers_the_handler_until_the_process_is_recorded(sig):
    """A signal that lands between a process start and its record must not unwind before the
    record: the handler runs once the block ends, and the record is there for the cleanup."""
    old = signal.signal(sig, _raise_stop)
    recorded: list[subprocess.Popen] = []
    try:
        with pytest.raises(_Stop):
            with netns.signals_held():
                p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
                os.kill(os.getpid(), sig)  # as a SIGTERM/Ctrl-C would, mid-start
                time.sleep(0.05)  # room for the handler to run, were it not held
                recorded.append(p)
        assert recorded and recorded[0].poll() is None
        assert signal.getsignal(sig) is _raise_stop  # the caller's handler is back
    finally:
        signal.signal(sig, old)
        netns.stop_processes(recorded)


def test_signals_held_without_a_signal_changes_nothing():
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    with netns.signals_held():
        pass
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
