"""``repflow testbed proxy-demo``: the tools' outputs parsed, distributions expanded, intervals
and effects summarized (anywhere), and one short trial on the real kernel with real Redis,
nginx, redis-benchmark and wrk (root only)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from repflow.errors import UserError
from repflow.testbed import proxydemo as pd

# redis-benchmark 7.0's full output (trimmed), as it printed on this testbed
REDIS_BENCHMARK = """\
====== GET ======
  5000 requests completed in 0.22 seconds
  4 parallel clients

Latency by percentile distribution:
0.000% <= 0.047 milliseconds (cumulative count 1)
50.000% <= 0.119 milliseconds (cumulative count 2555)
75.000% <= 0.151 milliseconds (cumulative count 3846)
93.750% <= 0.199 milliseconds (cumulative count 4719)
99.219% <= 0.279 milliseconds (cumulative count 4961)
99.902% <= 0.583 milliseconds (cumulative count 4996)
99.988% <= 0.847 milliseconds (cumulative count 5000)
100.000% <= 0.847 milliseconds (cumulative count 5000)

Cumulative distribution of latencies:
36.540% <= 0.103 milliseconds (cumulative count 1827)
95.380% <= 0.207 milliseconds (cumulative count 4769)
99.560% <= 0.303 milliseconds (cumulative count 4978)
100.000% <= 0.903 milliseconds (cumulative count 5000)

Summary:
  throughput summary: 22321.43 requests per second
"""


def test_redis_benchmark_output_is_parsed_into_a_distribution() -> None:
    n, rps, pts = pd.parse_redis_benchmark(REDIS_BENCHMARK)
    assert (n, rps) == (5000, 22321.43)
    vals = [v for v, _c in pts]
    cums = [c for _v, c in pts]
    assert vals == sorted(vals) and cums == sorted(cums) and cums[-1] == 1.0
    v = pd.expand(pts, n)
    assert len(v) == 5000
    # the median is the bucket holding request 2,500: 0.119 ms; the 4,996th request 0.583 ms
    assert np.isclose(v[2499], 0.119e-3) and np.isclose(v[4995], 0.583e-3)
    assert np.isclose(v[0], 0.047e-3) and np.isclose(v[-1], 0.847e-3)


def test_tool_failures_name_the_tool() -> None:
    with pytest.raises(UserError, match="redis-benchmark printed no latency"):
        pd.parse_redis_benchmark("Could not connect to Redis at 10.3.0.2:6379: refused\n")
    with pytest.raises(UserError, match="wrk printed no latency"):
        pd.parse_wrk("unable to connect to 127.0.0.1:8082 Connection refused\n")


def test_wrk_line_is_parsed_and_capped() -> None:
    q_us = [100 + i for i in range(len(pd.WRK_LEVELS))]
    q_us[500] = 50  # a non-monotone value (rounding) must not make the quantiles fall
    line = json.dumps({"requests": 20000, "duration_us": 2_000_000, "errors": 3, "q_us": q_us})
    n, secs, errors, pts = pd.parse_wrk(f"Running 2s test\nREPFLOW-WRK {line}\n")
    assert (n, secs, errors) == (20000, 2.0, 3)
    assert [v for v, _c in pts] == sorted(v for v, _c in pts)
    v = pd.expand(pts, n)
    assert len(v) == pd.MAX_SAMPLES  # equally spaced quantiles, not 20,000 copies
    assert np.isclose(np.median(v), (100 + 499) / 1e6, rtol=0.01)


def test_ss_output_gives_each_sidecar_connection_its_rtt() -> None:
    text = (
        'ESTAB 0 0 10.0.0.2:52364 10.3.0.2:7001 users:(("repflow",pid=41,fd=9))\n'
        "\t cubic wscale:7,7 rto:204 rtt:11.52/0.8 ato:40 mss:1448\n"
        'ESTAB 0 0 10.0.0.2:58382 10.3.0.2:7000 users:(("repflow",pid=41,fd=8))\n'
        "\t cubic wscale:7,7 rto:201 rtt:0.213/0.05 ato:40 mss:1448\n"
        'ESTAB 0 0 10.0.0.2:40000 10.3.0.2:7000 users:(("repflow",pid=42,fd=8))\n'
        "\t cubic rto:201 rtt:7.5/0.05 mss:1448\n"
    )
    assert pd.parse_ss(text, 41) == [(7000, 0.213), (7001, 11.52)]
    assert pd.parse_ss(text, 42) == [(7000, 7.5)]
    assert pd.parse_ss(text, 99) == []
    assert pd.parse_ss_tuples(text, 41) == [("10.0.0.2", 52364, "10.3.0.2", 7001),
                                            ("10.0.0.2", 58382, "10.3.0.2", 7000)]  # fmt: skip
    assert pd.parse_ss_tuples(text, 99) == []


def _m(via: str, copies: int, trial: int, scale: float, bg: bool = True) -> pd.Measurement:
    rng = np.random.default_rng(trial * 10 + copies)
    v = np.sort(rng.exponential(scale, 2000))
    pts = [(float(x), (i + 1) / len(v)) for i, x in enumerate(v)]
    return pd.Measurement("redis", via, copies, bg, trial, trial + 1, len(v), 0, 1.0,
                          1000.0 + trial, pts)  # fmt: skip


def _snap(**hops: list[int]) -> dict:
    """Counters as a sidecar prints them: each hop's durations (µs) recorded so far."""
    out = {}
    for name, us in hops.items():
        # a bucket per distinct value is enough here: indices only need to be consistent
        buckets: dict[int, int] = {}
        for u in us:
            b = int(np.log2(u * 1000) * 8)
            buckets[b] = buckets.get(b, 0) + 1
        out[name] = {"count": len(us), "sum_ns": sum(us) * 1000,
                     "buckets": sorted([i, c] for i, c in buckets.items())}  # fmt: skip
    return {"hops": out}


def test_hops_between_two_snapshots_are_the_runs_own() -> None:
    pytest.importorskip("repflow._core")
    before = _snap(client_call=[100] * 10)
    after = _snap(client_call=[100] * 10 + [400] * 4)
    run = pd.hops_between(before, after)["client_call"]
    assert run["count"] == 4 and run["mean_us"] == 400.0
    assert run["p50_us"] > 200  # the earlier 100 µs calls are not in this run
    assert pd.hops_between({}, after)["client_call"]["count"] == 14


def test_the_idle_breakdown_parts_are_the_hops() -> None:
    pytest.importorskip("repflow._core")
    ms = [_m("direct", 0, t, 1e-4, bg=False) for t in range(3)]
    for t in range(3):
        m = _m("proxy", 1, t, 4e-4, bg=False)
        m.hops = {h: {"count": 10, "mean_us": v, "p50_us": v, "p99_us": v}
                  for h, v in zip(pd.HOPS, (2.0, 250.0, 10.0, 5.0, 4.0, 60.0), strict=True)}
        ms.append(m)
    (row,) = pd.hop_breakdown(ms)
    assert (row["protocol"], row["copies"], row["runs"]) == ("redis", 1, 3)
    assert row["wire"] == 250.0 - 5.0 - 4.0 - 60.0
    assert row["outside"] == pytest.approx(row["proxy_p50_us"] - 262.0, rel=0.05)
    assert row["direct_p50_us"] < row["proxy_p50_us"]
    assert "redis, proxy, 1 copy (3 runs)" in pd.format_hops([row])
    assert pd.hop_breakdown(ms, background=True) == []


def test_summary_intervals_hold_their_estimates_and_effects_have_the_right_sign() -> None:
    ms = [_m("direct", 0, t, 0.010) for t in range(3)]
    ms += [_m("proxy", 1, t, 0.010) for t in range(3)]
    ms += [_m("proxy", 2, t, 0.002) for t in range(3)]
    rows, effects = pd.summarize(ms, resamples=200)
    assert [r.path for r in rows] == ["direct", "proxy, 1 copy", "proxy, 2 copies"]
    for r in rows:
        for est, lo, hi in (r.mean, r.p50, r.p99, r.p999, r.rps):
            assert lo <= est <= hi
        assert (r.requests, r.trials) == (6000, 3)
    eff = {what: v for _p, what, v in effects}
    for what in ("mean", "p99"):
        e, lo, hi = eff[f"{what}, proxy, 2 copies against proxy, 1 copy"]
        assert 60 < e < 95 and lo > 0  # five times faster: a reduction of ~80 %, clearly > 0
        e, lo, hi = eff[f"{what}, proxy, 1 copy against direct"]
        assert lo < 0 < hi  # same distribution: the interval holds no effect
    table = pd.format_table(rows, effects, pd.DemoConfig(seeds=[1, 2, 3]))
    assert "p99.9" in table and "proxy, 2 copies" in table


def test_trials_count_the_sidecar_connections_behind_the_large_flow() -> None:
    a = _m("proxy", 2, 0, 0.01)
    a.conns = [(7000, 8.5), (7001, 0.4)]
    b = _m("proxy", 2, 1, 0.01)
    b.conns = [(7000, 15.4), (7001, 15.1)]
    c = _m("proxy", 1, 0, 0.01)
    c.conns = [(7000, 10.7)]
    idle = _m("proxy", 1, 1, 0.01, bg=False)
    idle.conns = [(7000, 20.0)]  # not beside the large flow: not counted
    assert pd.behind_counts([a, b, c, idle]) == {("redis", 2): (1, 2), ("redis", 1): (1, 1)}
    text = pd.format_trials([a, b, c])
    assert "(RTT 8.5*, 0.4)" in text and "every connection behind the large flow in 1 of 2" in text
    # By the kernel's routes instead of RTTs: b's connections both took the large flow's uplink.
    a.uplinks, a.large_uplink = [(52000, "to-a0"), (52001, "to-a1")], "to-a1"
    b.uplinks, b.large_uplink = [(52000, "to-a0"), (52001, "to-a0")], "to-a0"
    c.uplinks = [(52002, "to-a1")]  # no large flow recorded: not counted
    assert pd.route_counts([a, b, c, idle]) == {("redis", 2): (1, 2, 3, 4)}
    assert "on the large flow's uplink in 1 of 2 trials; 3 of 4 connections" in pd.format_trials(
        [a, b, c])


def test_paths_are_drawn_apart_and_trials_together() -> None:
    """Expanded values are sorted quantiles: two paths drawn on the same request indices would
    be paired by rank, and their effect's interval far too narrow."""
    from repflow.experiments import stats

    a = pd._samples([_m("proxy", 2, t, 0.01) for t in range(3)], 2)
    b = pd._samples([_m("proxy", 1, t, 0.01) for t in range(3)], 1)
    assert a.seeds == b.seeds and not stats.paired(a, b)


def test_summarize_a_stored_run_without_running_anything(tmp_path: Path) -> None:
    ms = [_m(via, c, t, 0.01) for via, c in pd.PATHS for t in range(2)]
    ms[0].conns = [(7000, 0.3)]
    cfg = pd.DemoConfig(seeds=[1, 2], protocols=["redis"])
    pd.save_measurements(tmp_path / "measurements.json", cfg, ms)
    cfg2, ms2 = pd.load_measurements(tmp_path / "measurements.json")
    assert cfg2 == cfg and ms2 == ms
    out = tmp_path / "again"
    r = subprocess.run([sys.executable, "-m", "repflow", "testbed", "proxy-demo", "--summarize",
                        str(tmp_path / "measurements.json"), "--out", str(out)],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "proxy, 2 copies" in r.stdout and (out / "proxy-demo.png").exists()
    (tmp_path / "bad.json").write_text('{"config": {}}')
    r = subprocess.run([sys.executable, "-m", "repflow", "testbed", "proxy-demo", "--summarize",
                        str(tmp_path / "bad.json")], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "is not a proxy-demo measurements.json" in r.stderr
    assert "Traceback" not in r.stderr


def test_bad_flags_are_refused_before_anything_runs(tmp_path: Path) -> None:
    base = [sys.executable, "-m", "repflow", "testbed", "proxy-demo"]
    for flags, needle in (
        (["--k", "5"], "--k must be 4, 6 or 8"),
        (["--trials", "0"], "--trials must be between 1 and 20"),
        (["--requests", "10"], "--requests must be between 100"),
        (["--http-duration", "fast"], "--http-duration"),
    ):
        r = subprocess.run([*base, *flags], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and needle in r.stderr, (flags, r.stderr)
        assert "Traceback" not in r.stderr


ROOT = os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("tc") is not None
TOOLS = all(shutil.which(t) or Path(f"/usr/sbin/{t}").exists()
            for t in ("redis-server", "redis-benchmark", "nginx", "wrk"))  # fmt: skip


@pytest.mark.root
@pytest.mark.skipif(not ROOT, reason="needs root (network namespaces, veth, tc)")
@pytest.mark.skipif(not TOOLS, reason="needs redis-server, redis-tools, nginx and wrk (apt-get)")
def test_one_trial_on_the_fat_tree(tmp_path: Path, testbed_state: Path) -> None:
    """Real Redis and nginx behind the real sidecars on the k = 4 fat tree: every path gives
    a distribution, the sidecars' connections are found (one per copy), nothing is left up."""
    out = tmp_path / "demo"
    r = subprocess.run(
        [sys.executable, "-m", "repflow", "testbed", "proxy-demo", "--trials", "1",
         "--requests", "300", "--http-duration", "1s", "--out", str(out),
         "--prefix", "rfpt-"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert "beside the large flow, p99, proxy, 2 copies against proxy, 1 copy" in r.stdout
    assert "every connection behind the large flow in" in r.stdout
    d = json.loads((out / "measurements.json").read_text())
    assert d["config"]["seeds"] == [1] and d["config"]["k"] == 4
    ms = d["measurements"]
    assert len(ms) == 2 * 3 * 2  # protocols × paths × with/without the large flow
    for m in ms:
        assert m["requests"] > 0 and m["errors"] == 0, m
        lat = [v for v, _c in m["points"]]
        assert 0 < lat[0] <= lat[-1] < 10, m["points"][:3]
        if m["via"] == "proxy":
            # The client sidecar's path pool: up to 8 connections, all to the server sidecar's
            # first port (a slot being reopened in the background may be missing when `ss`
            # reads); two copies use both uplinks of the client's edge switch.
            ports = [p for p, _r in m["conns"]]
            assert 2 <= len(ports) <= 8, m["conns"]
            assert set(ports) == {7000 + 100 * (m["protocol"] == "http")}, m["conns"]
            if m["copies"] == 2:
                assert len({u for _p, u in m["uplinks"]}) == 2, m["uplinks"]
            # the sidecars' hops, snapshotted around this run: every request timed once per
            # hop (a hop ends after the one before it: when `wrk` stops, a call still in
            # flight has its first hops counted and not yet its last)
            assert set(m["hops"]) == set(pd.HOPS), m["hops"]
            calls = [h["count"] for h in m["hops"].values()]
            assert min(calls) > 0 and max(calls) - min(calls) <= 4, m["hops"]
            call, server = m["hops"]["client_call"], m["hops"]["server_upstream"]
            assert call["mean_us"] > server["mean_us"] > 0, m["hops"]
        else:
            assert m["hops"] == {}, m
        if m["background"]:
            assert m["queue_port"].startswith("e0:") and m["queue_before"] >= 0, m
        else:
            assert m["queue_before"] == -1 and m["queue_port"] == "", m
    for background in (False, True):
        order = sorted(m["order"] for m in ms if m["background"] == background)
        assert order == list(range(6)), order
    assert (out / "proxy-demo.png").stat().st_size > 10_000
    assert "idle network, where a request's median time goes" in r.stdout
    hops = json.loads((out / "proxy-demo.json").read_text())["hops_idle"]
    assert {(h["protocol"], h["copies"]) for h in hops} == {(p, c) for p in ("redis", "http")
                                                             for c in (1, 2)}  # fmt: skip
    assert not [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                          text=True).stdout.split() if n.startswith("rfpt-")]


@pytest.mark.root
@pytest.mark.skipif(not ROOT, reason="needs root (network namespaces, veth, tc)")
@pytest.mark.skipif(not shutil.which("redis-server") or not shutil.which("redis-benchmark"),
                    reason="needs redis-server and redis-tools (apt-get)")  # fmt: skip
def test_two_copies_of_each_request_leave_on_different_uplinks(tmp_path: Path,
                                                              testbed_state: Path) -> None:
    """The client sidecar's path pool on the real kernel's ECMP: every request's two copies go
    up different uplinks of the client's edge switch, read from the uplinks' tc counters (each
    carries at least one packet per request), and the sidecar says every request's copies
    were on different paths. Without the pool (one connection per copy) both copies share an
    uplink whenever the two five-tuples hash alike."""
    from repflow.testbed import netns
    from repflow.testbed.topology import fat_tree

    prefix, n = "rftu-", 400
    tb = netns.up(fat_tree(4), rate_bps=50_000_000, buffer=50, seed=3, prefix=prefix,
                  progress=None, host_shaping=False)  # fmt: skip
    procs: list[subprocess.Popen] = []
    h = pd.hosts_of(4)
    try:
        srv = tb.topo.nodes[h.server].addr
        pd._start(tb, procs, h.server, [pd._exe("redis-server"), "--port", "6379", "--bind",
                                        "0.0.0.0", "--protected-mode", "no", "--save", "",
                                        "--appendonly", "no", "--dir", str(tmp_path)],
                  6379, "redis-server", tmp_path / "redis.log")  # fmt: skip
        pd._start(tb, procs, h.server, [*pd.REPFLOW, "proxy", "server", "--listen", ":7000",
                                        "--ports", "2", "--upstream", "127.0.0.1:6379",
                                        "--protocol", "redis", "--no-journal"],
                  7000, "proxy server", tmp_path / "ps.log")  # fmt: skip
        pd._start(tb, procs, h.client, [*pd.REPFLOW, "proxy", "client", "--listen",
                                        "127.0.0.1:6380", "--to", f"{srv}:7000", "--protocol",
                                        "redis", "--copies", "2", "--stats", "1s"],
                  6380, "proxy client", tmp_path / "pc.log")  # fmt: skip
        bench = [pd._exe("redis-benchmark"), "-h", "127.0.0.1", "-p", "6380", "-t", "get",
                 "-c", "1", "-P", "1"]  # fmt: skip
        tb.run_in(h.client, [*bench, "-n", "20"], timeout=60)  # fills the pool
        edge = pd.edge_of(tb, h.client)
        before = tb.qdisc_stats([edge])
        tb.run_in(h.client, [*bench, "-n", str(n)], timeout=120)
        after = tb.qdisc_stats([edge])
    finally:
        netns.stop_processes(procs, timeout=10)
        netns.down(prefix)
    uplinks = [k for k in before if k[1] in {pd.port_name(a) for a in ("a0", "a1")}]
    assert len(uplinks) == 2 and all(k[0] == edge for k in uplinks), sorted(before)
    sent = {k: after[k]["packets"] - before[k]["packets"] for k in uplinks}
    # redis-benchmark with one connection: one request at a time, each copy at least one
    # packet up its connection's uplink (the request; ACKs of the reply ride on later ones).
    assert all(v >= n for v in sent.values()), sent
    log = (tmp_path / "pc.log").read_text()
    counts = [line for line in log.splitlines() if "requests on different paths" in line]
    assert counts, log[-2000:]
    picked = counts[-1].split("paths: ")[1].split(" requests")[0]
    distinct, total = (int(x) for x in picked.split(" of "))
    assert total >= n + 20 and distinct == total, counts[-1]


def test_the_client_sidecars_counts_of_a_run_are_what_grew() -> None:
    before = {"net": {"connections": 8, "copies_failed": 0, "flows": 100}, "paths": {"picks": 5}}
    after = {"net": {"connections": 9, "copies_failed": 0, "flows": 180},
             "paths": {"picks": 85, "replaced": 1}}  # fmt: skip
    assert pd.counted_between(before, after) == {
        "net.connections": 1, "net.flows": 80, "paths.picks": 80, "paths.replaced": 1}
