"""Differential validation against htsim and ns-3 (docs/validation.md): every committed trace
is replayed in this simulator with TCP set to what the reference's does, and its figures are
compared with the reference's results stored as fixtures (tests/fixtures/refs/, with
provenance): htsim on three fat-tree traces, ns-3 on an incast on a star, and htsim's MPTCP
on two k = 4 fat-tree scenarios (the tests at the end of this file).

Tolerance, per figure: the difference between the two simulators' means over seeds (the seed
picks the ECMP paths: a hash salt here, a random path choice in htsim) must not exceed the mean
of their seed-to-seed ranges (max − min over seeds). In words: the simulators may differ by no
more than re-drawing the paths changes either of them. The packet-count queues of an earlier
setting (a 40-byte ACK taking a full packet's slot) fail this test on drops; see
docs/validation.md for the figures and the differences that remain.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("refs", REPO / "validation" / "refs.py")
refs = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(refs)  # type: ignore[union-attr]

METRICS = ("short_mean", "short_p99", "large_mean", "drops", "flows_with_timeout")


@pytest.fixture(scope="module")
def star() -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.DataFrame(refs.ns3_figures()), pd.DataFrame(
        [refs.ours_star(s) for s in refs.NS3_SEEDS]
    )


@pytest.fixture(scope="module")
def results() -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    out = {}
    for name in refs.SCENARIOS:
        ref = pd.DataFrame(refs.htsim_figures(name))
        ours = pd.DataFrame([refs.ours(name, s) for s in refs.OUR_SEEDS])
        out[name] = (ref, ours)
    return out


def _assert_within_seed_spread(a: pd.Series, b: pd.Series, label: str, reference: str) -> None:
    """The tolerance of every comparison here: the two simulators' means over the seeds differ
    by no more than the mean of their seed-to-seed ranges."""
    diff = abs(a.mean() - b.mean())
    spread = ((a.max() - a.min()) + (b.max() - b.min())) / 2
    assert diff <= spread, (
        f"{label}: {reference} {a.mean():.6g} (range {a.min():.6g}–{a.max():.6g}), "
        f"ours {b.mean():.6g} (range {b.min():.6g}–{b.max():.6g})"
    )


@pytest.mark.parametrize("metric", METRICS)
def test_the_star_incast_agrees_with_ns3_within_the_seed_spread(star, metric):
    ref, ours = star
    assert (ref["unfinished"] == 0).all() and (ours["unfinished"] == 0).all()
    _assert_within_seed_spread(ref[metric], ours[metric], f"incast-star {metric}", "ns-3")


def test_fixtures_carry_their_provenance():
    for name in refs.SCENARIOS:
        d = refs.FIXTURES / name
        prov = (d / "provenance.json").read_text()
        assert "csg-htsim" in prov and "trace_tcp" in prov and "commit" in prov
        for seed in refs.HTSIM_SEEDS:
            assert (d / f"htsim-seed{seed}.csv").is_file()
    prov = (refs.FIXTURES / "incast-star" / "provenance.json").read_text()
    assert "ns-3" in prov and "trace-tcp.cc" in prov and "commit" in prov
    for seed in refs.NS3_SEEDS:
        assert (refs.FIXTURES / "incast-star" / f"ns3-seed{seed}.csv").is_file()


@pytest.mark.parametrize("name", list(refs.SCENARIOS))
def test_every_flow_finishes_in_both(results, name):
    ref, ours = results[name]
    assert (ref["unfinished"] == 0).all() and (ours["unfinished"] == 0).all()
    assert set(ref["flows"]) == set(ours["flows"]) and len(set(ours["flows"])) == 1


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("name", list(refs.SCENARIOS))
def test_figures_agree_within_the_seed_spread(results, name, metric):
    ref, ours = results[name]
    a, b = ref[metric], ours[metric]
    if a.isna().all() and b.isna().all():
        pytest.skip(f"{name} has no flow for {metric}")
    assert math.isfinite(abs(a.mean() - b.mean()))
    _assert_within_seed_spread(a, b, f"{name} {metric}", "htsim")


# MPTCP against htsim (docs/validation.md, "MPTCP against htsim"): htsim's MultipathTcpSrc
# (LIA = COUPLED_INC, or UNCOUPLED) driven by validation/htsim/trace_mptcp.cpp, its results
# stored under tests/fixtures/refs/mptcp-*/. Figures per run: per-flow goodput (packets ×
# 1,500 B over the FCT, as a fraction of the 100 Mb/s host link), its mean and 10th
# percentile, drops and retransmission timeouts.

MPTCP_METRICS = ("goodput_mean", "goodput_p10", "drops", "timeouts")

#: Figures of the permutation that disagree with htsim beyond the seed spread, measured and
#: investigated in docs/validation.md (not tuned away): with 4 and 8 subflows this simulator's
#: mean goodput is 0.08–0.11 of capacity below htsim's, with 1.5–1.7 times its drops and up to
#: 2.2 times its timeouts. LIA × 4's mean (−0.076, tolerance 0.086) is at the edge and passes
#: since ties between simultaneous events go by ancestry. Strict: a change that makes them
#: agree must update the docs.
MPTCP_KNOWN = {
    ("mptcp-permutation-k4", 8, "lia", "goodput_mean"),
    ("mptcp-permutation-k4", 8, "lia", "goodput_p10"),
    ("mptcp-permutation-k4", 8, "uncoupled", "goodput_mean"),
    ("mptcp-permutation-k4", 8, "uncoupled", "goodput_p10"),
}


@pytest.fixture(scope="module")
def mptcp() -> dict[tuple[str, int, str], tuple[pd.DataFrame, pd.DataFrame]]:
    out = {}
    for name, (_, _, runs, _, our_seeds) in refs.MPTCP_SCENARIOS.items():
        for subflows, coupling in runs:
            ref = pd.DataFrame(refs.htsim_mptcp_figures(name, subflows, coupling))
            ours = pd.DataFrame([refs.ours_mptcp(name, subflows, coupling, s) for s in our_seeds])
            out[(name, subflows, coupling)] = (ref, ours)
    return out


def _mptcp_cases() -> list:
    cases = []
    for name, (_, _, runs, _, _) in refs.MPTCP_SCENARIOS.items():
        if name == "mptcp-pair-k4":
            continue
        for subflows, coupling in runs:
            for metric in MPTCP_METRICS:
                marks = []
                if (name, subflows, coupling, metric) in MPTCP_KNOWN:
                    marks = [pytest.mark.xfail(strict=True, reason="htsim's ssthresh from cwnd and "
                                               "its FairPriorityQueue hosts (docs/validation.md, "
                                               "'The MPTCP goodput gap, separated')")]  # fmt: skip
                cases.append(pytest.param(name, subflows, coupling, metric, marks=marks))
    return cases


def test_mptcp_fixtures_carry_their_provenance():
    for name, (_, queue, runs, seeds, _) in refs.MPTCP_SCENARIOS.items():
        d = refs.FIXTURES / name
        prov = (d / "provenance.json").read_text()
        assert "csg-htsim" in prov and "trace_mptcp" in prov and "commit" in prov
        assert f"-queue {queue}" in prov
        for subflows, coupling in runs:
            for seed in seeds:
                assert refs.mptcp_fixture(name, subflows, coupling, seed).is_file()


def test_every_mptcp_flow_finishes_in_both(mptcp):
    for (name, subflows, coupling), (ref, ours) in mptcp.items():
        assert (ref["unfinished"] == 0).all(), (name, subflows, coupling)
        assert (ours["unfinished"] == 0).all(), (name, subflows, coupling)
        assert set(ref["flows"]) == set(ours["flows"])


@pytest.mark.parametrize(("name", "subflows", "coupling", "metric"), _mptcp_cases())
def test_mptcp_figures_agree_within_the_seed_spread(mptcp, name, subflows, coupling, metric):
    ref, ours = mptcp[(name, subflows, coupling)]
    label = f"{name} {coupling} ×{subflows} {metric}"
    _assert_within_seed_spread(ref[metric], ours[metric], label, "htsim")


@pytest.mark.parametrize(("subflows", "coupling"), list(refs.MPTCP_SCENARIOS["mptcp-pair-k4"][2]))
def test_mptcp_pair_matches_htsim_flow_by_flow(mptcp, subflows, coupling):
    # One shared DropTail port, no path choice: the two simulators run the same mechanics,
    # so each flow's FCT must agree within 5 % and its timeouts within 2 (+ 10 %).
    ref, ours = mptcp[("mptcp-pair-k4", subflows, coupling)]
    for i in range(2):
        a, b = ref[f"fct{i}"].mean(), ours[f"fct{i}"].mean()
        assert abs(a - b) <= 0.05 * a, f"×{subflows} {coupling} flow {i}: FCT {a:.4f} vs {b:.4f}"
        ta, tb = ref[f"timeouts{i}"].mean(), ours[f"timeouts{i}"].mean()
        assert abs(ta - tb) <= 2 + 0.1 * ta, f"×{subflows} {coupling} flow {i}: {ta} vs {tb}"


def test_more_subflows_lift_permutation_throughput_in_both(mptcp):
    # MPTCP's headline (Raiciu et al., SIGCOMM 2011): on a fat-tree permutation, more subflows
    # find more of the idle paths. In each simulator (means over seeds), LIA's mean goodput
    # rises from 1 to 2 to 4 subflows, 8 subflows beat 1 by at least 10 % of capacity and are
    # no worse than 4 (within 0.02); uncoupled, 8 beat 2.
    for sim in (0, 1):
        g = {
            (n, cc): mptcp[("mptcp-permutation-k4", n, cc)][sim]["goodput_mean"].mean()
            for n, cc in refs.MPTCP_SCENARIOS["mptcp-permutation-k4"][2]
        }
        who = ("htsim", "ours")[sim]
        assert g[(1, "lia")] < g[(2, "lia")] < g[(4, "lia")], (who, g)
        assert g[(8, "lia")] >= g[(1, "lia")] + 0.10, (who, g)
        assert g[(8, "lia")] >= g[(4, "lia")] - 0.02, (who, g)
        assert g[(8, "uncoupled")] > g[(2, "uncoupled")], (who, g)


def _aligned_figures() -> pd.DataFrame:
    """htsim on websearch-k8 with its two mechanisms that differ from ours aligned to ours
    (DropTail instead of RandomQueue, ssthresh after a loss from the flight size; FIFO host
    queues and our packets per flow): tests/fixtures/refs/websearch-k8-aligned."""
    d = refs.FIXTURES / "websearch-k8-aligned"
    out = []
    for seed in refs.HTSIM_SEEDS:
        f = pd.read_csv(d / f"htsim-seed{seed}.csv")
        fct = f.fct.to_numpy(dtype=float, copy=True)
        fct[fct < 0] = float("nan")
        out.append(refs.figures(f["bytes"].to_numpy(), fct, f.timeouts.to_numpy(),
                                f.drops.sum()))  # fmt: skip
    return pd.DataFrame(out)


@pytest.mark.parametrize("metric", ["drops", "flows_with_timeout"])
def test_websearch_k8_timeout_excess_is_htsims_queue_and_ssthresh(results, metric):
    """The +14 % drops and +41 % flows with a timeout on websearch-k8 (docs/validation.md, "The
    websearch-k8 timeout excess"): with htsim's RandomQueue replaced by DropTail and its
    ssthresh after a loss taken from the flight size (as ours), htsim's figures come within a
    quarter of the mean seed range of ours — where the committed comparison differs by more."""
    ref, ours = results["websearch-k8"]
    aligned = _aligned_figures()
    assert (aligned["unfinished"] == 0).all()
    spread = ((aligned[metric].max() - aligned[metric].min())
              + (ours[metric].max() - ours[metric].min())) / 2  # fmt: skip
    diff = abs(aligned[metric].mean() - ours[metric].mean())
    assert diff <= spread / 4, (metric, aligned[metric].mean(), ours[metric].mean(), spread)
    assert abs(ref[metric].mean() - ours[metric].mean()) > diff


def _mptcp_aligned_cases() -> list:
    name = "mptcp-permutation-k4"
    return [(s, c, m) for s, c in refs.MPTCP_SCENARIOS[name][2] for m in MPTCP_METRICS]


@pytest.mark.parametrize(("subflows", "coupling", "metric"), _mptcp_aligned_cases())
def test_mptcp_gap_is_htsims_ssthresh_and_host_queues(mptcp, subflows, coupling, metric):
    """The MPTCP goodput gap (the strict xfails above; docs/validation.md, "The MPTCP goodput
    gap, separated"): with htsim's subflows taking ssthresh after a loss from the flight size
    and its hosts queueing FIFO (both as ours; fixtures mptcp-permutation-k4-aligned), every
    figure of the permutation agrees with ours within the seed spread."""
    name = "mptcp-permutation-k4"
    d = refs.FIXTURES / f"{name}-aligned"
    rows = []
    for seed in refs.MPTCP_SCENARIOS[name][3]:
        f = pd.read_csv(d / f"htsim-{coupling}-n{subflows}-seed{seed}.csv")
        fct = f.fct.to_numpy(dtype=float, copy=True)
        fct[fct < 0] = float("nan")
        rows.append(refs.mptcp_figures((f["size"] // 1500).to_numpy(), fct,
                                       f.timeouts.to_numpy(), f.drops.sum(),
                                       refs.MPTCP_NETWORK["gbps"] * 1e9))  # fmt: skip
    aligned = pd.DataFrame(rows)
    _, ours = mptcp[(name, subflows, coupling)]
    label = f"{name} (htsim aligned) {coupling} ×{subflows} {metric}"
    _assert_within_seed_spread(aligned[metric], ours[metric], label, "htsim aligned")


# websearch-k8 under ns-3 (docs/validation.md, "websearch-k8 under ns-3"): the same trace
# replayed by ns-3-dev on the same fat-tree with per-flow ECMP (validation/ns3/
# trace-fattree.cc), in two TCP settings; 4 ns-3 seeds (hash salts) against our 10.

#: (variant, figure) → the measured cause of a difference beyond the seed spread.
KNOWN_WS_NS3: dict[tuple[str, str], str] = {}


@pytest.fixture(scope="module")
def ws_ns3() -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    return {v: (pd.DataFrame(refs.ns3_ws_figures(v)),
                pd.DataFrame([refs.ours_ws_ns3(v, s) for s in spec["our_seeds"]]))
            for v, spec in refs.WS_NS3_VARIANTS.items()}  # fmt: skip


def test_websearch_k8_ns3_fixtures_carry_their_provenance():
    import json

    d = refs.FIXTURES / refs.WS_NS3 / "ns3"
    prov = json.loads((d / "provenance.json").read_text())
    assert prov["commit"].startswith("1406464") and "trace-fattree" in prov["driver"]
    assert "per-flow ECMP" in prov["network"]
    runs = prov["commands (each in a temporary directory holding trace.txt; output gzipped here)"]
    assert len(runs) == sum(len(v["seeds"]) for v in refs.WS_NS3_VARIANTS.values())
    for v, spec in refs.WS_NS3_VARIANTS.items():
        for seed in spec["seeds"]:
            assert (d / f"{v}-seed{seed}.csv.gz").is_file()


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("variant", list(refs.WS_NS3_VARIANTS))
def test_websearch_k8_agrees_with_ns3_within_the_seed_spread(ws_ns3, variant, metric):
    ref, ours = ws_ns3[variant]
    assert (ref["unfinished"] == 0).all() and (ours["unfinished"] == 0).all()
    assert set(ref["flows"]) == set(ours["flows"]) and len(set(ours["flows"])) == 1
    tolerance = refs.WS_NS3_VARIANTS[variant].get("tolerance")
    if tolerance is not None:
        # ours' mean over its seeds within a stated fraction of ns-3's mean over its seeds
        ratio = ours[metric].mean() / ref[metric].mean()
        assert abs(ratio - 1) <= tolerance[metric], (
            f"{variant} {metric}: ours / ns-3 = {ratio:.3f}, beyond ±{tolerance[metric]:.0%} "
            f"(ns-3 {ref[metric].mean():.6g}, ours {ours[metric].mean():.6g})")
    elif (variant, metric) in KNOWN_WS_NS3:
        with pytest.raises(AssertionError):
            _assert_within_seed_spread(ref[metric], ours[metric], f"{variant} {metric}", "ns-3")
    else:
        _assert_within_seed_spread(ref[metric], ours[metric], f"{variant} {metric}", "ns-3")


# The ns3-2014 large-flow gap (docs/validation.md, "The ns3-2014 large-flow gap, found"): ours
# against ns-3 on the RepFlow subset's web-search points, pooled over the 12 points (a single
# point's large-flow mean moves by 1.3-2.1x between path draws); and the fixtures behind it
# are this build's runs.

#: figure → tolerance of ours / ns-3, pooled (before the fix: large mean 1.55, flows with a
#: timeout 5.0).
NS3_2014_POOLED = {"large_mean": 0.20, "drops": 0.25, "large_flows_with_timeout": 0.25}


@pytest.mark.parametrize("figure", list(NS3_2014_POOLED))
def test_ns3_2014_web_search_large_flows_agree_with_ns3_pooled(figure):
    pooled = refs.ns3_2014_websearch_pooled()
    ratio = pooled["ours"][figure] / pooled["ns-3"][figure]
    assert abs(ratio - 1) <= NS3_2014_POOLED[figure], (
        f"{figure}: ours / ns-3 = {ratio:.3f} (ours {pooled['ours'][figure]:.6g}, "
        f"ns-3 {pooled['ns-3'][figure]:.6g})")


@pytest.mark.parametrize(("scheme", "point"), [("tcp", "websearch-0.8-seed1"),
                                               ("repflow", "websearch-0.2-seed2")])
def test_our_ns3_2014_fixtures_are_this_builds_runs(scheme, point):
    """A web-search point of the fixtures rerun now gives the same per-flow FCTs: the
    agreement above is this build's."""
    import numpy as np
    from repflow import api

    w, load, seed = point.split("-")
    (p,) = [q for q in refs.rq_points("ns3-2014") if q.labels["scheme"] == scheme
            and q.labels["workload.cdf"] == w and q.labels["workload.load"] == float(load)
            and q.labels["seed"] == int(seed.removeprefix("seed"))]  # fmt: skip
    f = api.simulate(p.config).flows.sort_values("id")
    stored = pd.read_csv(refs.FIXTURES / refs.RQ / "ns3-2014" / f"ours-{scheme}-{point}.csv.gz")
    np.testing.assert_allclose(f.fct.to_numpy(float), stored.fct.to_numpy(float), rtol=1e-9)
    assert (f.timeouts.to_numpy() == stored.timeouts.to_numpy()).all()
