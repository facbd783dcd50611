"""`repflow testbed run|toy --scheme mptcp`: argument checks and parsing, without root (every
refusal here happens before any namespace is touched)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from repflow.errors import UserError
from repflow.testbed import mptcp
from repflow.testbed.toyexp import check_toy_scheme
from repflow.testbed.workload import DEFAULT_SUBFLOWS, SCHEMES, check_run_args

ARGS = dict(workload="websearch", load=0.3, duration=5.0, drain=5.0, port=7000)


def test_mptcp_is_a_run_scheme_with_eight_subflows_by_default():
    assert "mptcp" in SCHEMES and "mptcp-l" not in SCHEMES
    assert DEFAULT_SUBFLOWS == 8 == mptcp.MAX_SUBFLOWS
    assert check_run_args(scheme="mptcp", **ARGS) == "websearch"
    for n in (1, 4, 8):
        assert check_run_args(scheme="mptcp", subflows=n, **ARGS) == "websearch"


@pytest.mark.parametrize("n", [0, -1, 9, 64, 65, 1000])
def test_subflows_outside_1_to_8_are_refused_naming_the_option(n):
    with pytest.raises(UserError, match=r"^--subflows: must be between 1 and 8"):
        check_run_args(scheme="mptcp", subflows=n, **ARGS)


@pytest.mark.parametrize("scheme", ["tcp", "repflow", "smartrep"])
def test_subflows_on_another_scheme_is_refused(scheme):
    with pytest.raises(UserError, match=rf"^--subflows: only with --scheme mptcp, not {scheme}"):
        check_run_args(scheme=scheme, subflows=4, **ARGS)


def test_mptcp_l_is_refused_with_the_reason():
    with pytest.raises(UserError) as e:
        check_run_args(scheme="mptcp-l", **ARGS)
    msg = str(e.value)
    assert "\n" not in msg and "scheduler" in msg and "default" in msg


def test_server_ports_may_not_overlap_the_announced_ports():
    with pytest.raises(UserError, match=r"^--port: ports 7900\.\.7903 overlap"):
        check_run_args(scheme="mptcp", **{**ARGS, "port": 7900})
    # with 2 subflows only 7901 is announced: 7902.. is free
    check_run_args(scheme="mptcp", subflows=2, **{**ARGS, "port": 7902})
    # other schemes announce nothing
    check_run_args(scheme="tcp", **{**ARGS, "port": 7900})


def test_signal_ports():
    assert mptcp.signal_ports(1) == []
    assert mptcp.signal_ports(3) == [7901, 7902]
    assert len(mptcp.signal_ports(8)) == 7


def test_toy_scheme():
    assert check_toy_scheme(None, None) is None
    assert check_toy_scheme("tcp", None) is None
    assert check_toy_scheme("mptcp", None) == 8
    assert check_toy_scheme("mptcp", 2) == 2
    with pytest.raises(UserError, match="^--subflows: only with --scheme mptcp"):
        check_toy_scheme(None, 4)
    with pytest.raises(UserError, match="^--subflows: must be between 1 and 8"):
        check_toy_scheme("mptcp", 0)
    with pytest.raises(UserError, match="^--scheme mptcp-l: MPTCP-L cannot run on the kernel"):
        check_toy_scheme("mptcp-l", None)
    with pytest.raises(UserError, match="^--scheme: "):
        check_toy_scheme("smartrep-x", None)


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--scheme", "mptcp", "--subflows", "0"], "--subflows"),
        (["--scheme", "mptcp", "--subflows", "65"], "--subflows"),
        (["--scheme", "tcp", "--subflows", "4"], "--subflows"),
        (["--scheme", "mptcp-l"], "MPTCP-L"),
    ],
)
def test_cli_refusals_are_one_line_and_exit_2(tmp_path, extra, needle):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "repflow", "testbed", "run", "--prefix", "rfnone-",
         "--duration", "2s", "--out", str(out), *extra],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr
    assert not out.exists()


def test_toy_cli_refuses_mptcp_l(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "repflow", "testbed", "toy", "--prefix", "rfnone-",
         "--scheme", "mptcp-l"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "MPTCP-L" in proc.stderr


SS_OUTPUT = """\
0 0 10.0.0.2:48535 10.3.1.3:7901
\t reno wscale:10,10 rto:204 tcp-ulp-mptcp flags:Jjec token:cc9fcc57(id:1)/ded5fd60(id:1) seq:1
0 0 10.0.0.2:54678 10.3.1.3:6501
\t reno wscale:10,10 rto:204 tcp-ulp-mptcp flags:Mmec token:0000(id:0)/ded5fd60(id:0) seq:1
0 0 10.0.0.2:40000 10.1.0.2:7000
\t reno wscale:10,10 rto:204 cwnd:10
0 0 10.0.0.2:41000 10.2.0.2:7000
\t reno tcp-ulp-mptcp flags:Mmec token:0000(id:0)/abcdef01(id:0) seq:1
"""


class _FakeTb:
    def run_in(self, host, argv, timeout=60.0):
        assert argv[0] == "ss"
        return SS_OUTPUT


def test_connections_group_subflows_by_token():
    conns = {c.token: c for c in mptcp.connections(_FakeTb(), "h0")}  # type: ignore[arg-type]
    assert set(conns) == {"ded5fd60", "abcdef01"}  # the plain TCP connection is left out
    assert conns["ded5fd60"].subflows == [
        ("10.0.0.2", 48535, "10.3.1.3", 7901),
        ("10.0.0.2", 54678, "10.3.1.3", 6501),
    ]
    assert len(conns["abcdef01"].subflows) == 1


def test_counter_delta_sums_hosts():
    before = {"h0": {"MPJoinAckRx": 2}, "h1": {}}
    after = {"h0": {"MPJoinAckRx": 5}, "h1": {"MPJoinAckRx": 4, "AddAddr": 1}}
    d = mptcp.counter_delta(before, after)
    assert d["mptcp_MPJoinAckRx"] == 7 and d["mptcp_AddAddr"] == 1
    assert set(d) == {f"mptcp_{k}" for k in mptcp.RUN_COUNTERS}
