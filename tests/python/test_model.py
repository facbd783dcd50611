"""The analytical model against hand-computed values, quadrature and its limits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from repflow.errors import UserError
from repflow.model import (
    SizeDistribution,
    collision_short_load,
    copies_short_load,
    fct_table,
    integrals,
    large_mean,
    large_p99,
    load_cdf,
    mean_wait,
    parse_cdf_text,
    short_mean,
    short_p99,
)
from scipy import integrate

LN10 = math.log(10.0)
K, M, SL = 12, 44, 100_000 / 1460

# Two point masses: half the flows are 12 packets (short), half 1200 packets (large).
TWO_POINTS = "12 1 0\n12 1 0.5\n1200 1 0.5\n1200 1 1\n"
# One uniform short segment [24, 48] and one uniform large segment [100, 300], half each.
TWO_UNIFORM = "24 1 0\n48 1 0.5\n100 1 0.5\n300 1 1\n"


def dist_of(text: str, reading: str = "continuous") -> SizeDistribution:
    return SizeDistribution.from_cdf(parse_cdf_text(text, "test"), reading=reading)


def row(text: str, load: float, **kw):
    return fct_table(dist_of(text), [load], **kw).iloc[0]


# ---------------------------------------------------------------- point masses, by hand
def test_point_masses_every_formula_by_hand():
    d = dist_of(TWO_POINTS)
    ints = integrals(d, K, SL)
    assert ints.short_frac == pytest.approx(0.5)
    assert ints.I == pytest.approx(1 / 12)  # log2(12/12 + 1) / 12
    assert ints.J == pytest.approx(1 / 12)
    assert ints.N == pytest.approx(2 * LN10 / 12)  # (1 - 1 + 2 ln 10) / 12
    assert ints.P == pytest.approx(1 / 1200)
    assert ints.mean_size == pytest.approx(606)
    assert ints.eps == pytest.approx(6 / 606)  # = 1/101

    r = row(TWO_POINTS, 0.5, p=0.25, n=3)
    # TCP: E[W] = 0.5*44/(2*0.5) = 22
    assert r.tcp_short_mean == pytest.approx(22 / 12 + 1)  # eq. 5
    assert r.tcp_short_p99 == pytest.approx(22 * 2 * LN10 / 12 + 1)  # eq. 11
    assert r.tcp_large_mean == pytest.approx(1.5)  # eq. 7
    assert r.tcp_large_p99 == pytest.approx(1.5 + (2 * LN10 - 1) * 22 / 1200)  # eq. 13
    # RepFlow: path load (1 + 1/101) * 0.5 = 51/101, short flows see (51/101)^2 = 2601/10201
    q = 2601 / 10201
    w_rep = q * 44 / (2 * (1 - q))  # = 22*2601/7600
    assert w_rep == pytest.approx(22 * 2601 / 7600)
    assert r.repflow_busy_prob == pytest.approx(q)
    assert r.repflow_short_mean == pytest.approx(w_rep / 12 + 1)  # eq. 6
    assert r.repflow_short_p99 == pytest.approx(w_rep * 2 * LN10 / 12 + 1)  # eq. 12
    assert r.repflow_large_mean == pytest.approx(1.51)  # eq. 8: (51/101)/(2*50/101) + 1
    w_l = (51 / 101) * 44 / (2 * 50 / 101)  # = 22*51/50
    assert r.repflow_large_p99 == pytest.approx(1.51 + (2 * LN10 - 1) * w_l / 1200)  # eq. 14
    # SmartRep Theorem 1, p = 0.25: (51/101) * (0.25 + 0.75 * 51/101)
    hc = (51 / 101) * (0.25 + 0.75 * 51 / 101)
    assert r.smartrep_hc_busy_prob == pytest.approx(hc)
    assert r.smartrep_hc_short_mean == pytest.approx(22 * hc / (1 - hc) / 12 + 1)
    assert r.smartrep_hc_short_p99 == pytest.approx(22 * hc / (1 - hc) * 2 * LN10 / 12 + 1)
    assert r.smartrep_hc_large_mean == pytest.approx(1.51)
    # n = 3 copies on distinct paths: path load (1 + 2/101) * 0.5 = 103/202, busy (103/202)^3
    pn = 103 / 202
    assert r.smartrep_n_busy_prob == pytest.approx(pn**3)
    assert r.smartrep_n_short_mean == pytest.approx(22 * pn**3 / (1 - pn**3) / 12 + 1)
    assert r.smartrep_n_large_mean == pytest.approx(pn / (2 * (1 - pn)) + 1)
    w_n = pn * 44 / (2 * (1 - pn))
    assert r.smartrep_n_large_p99 == pytest.approx(
        pn / (2 * (1 - pn)) + 1 + (2 * LN10 - 1) * w_n / 1200
    )


def test_eps_override_is_used():
    r = row(TWO_POINTS, 0.5, eps=0.2)
    q = (1.2 * 0.5) ** 2
    assert r.eps == 0.2
    assert r.repflow_short_mean == pytest.approx(22 * q / (1 - q) / 12 + 1)
    assert r.repflow_large_mean == pytest.approx(0.6 / 0.8 + 1)


# ---------------------------------------------------------------- uniform segments
def _li2_series(z: float, terms: int = 60) -> float:
    """Li2(z) = sum z^n / n^2 for |z| < 1 (hand-written power series)."""
    return sum(z**n / n**2 for n in range(1, terms + 1))


def test_uniform_segment_by_hand():
    # Uniform on [1, 24] packets with k = 24:
    # ∫_1^24 ln(1 + x/24)/x dx = Li2(-1/24) - Li2(-1) = Li2(-1/24) + π²/12.
    d = dist_of("1 1 0\n24 1 1\n")
    ints = integrals(d, 24, SL)
    hand_i = (_li2_series(-1 / 24) + math.pi**2 / 12) / math.log(2) / 23
    assert ints.I == pytest.approx(hand_i, rel=1e-12)
    assert ints.J == pytest.approx(math.log(24) / 23, rel=1e-12)
    assert ints.N == pytest.approx(hand_i + (2 * LN10 - 1) * math.log(24) / 23, rel=1e-12)
    assert ints.mean_size == pytest.approx(12.5)
    assert ints.eps == pytest.approx(1.0)
    assert math.isnan(ints.P)  # no large flows
    r = fct_table(d, [0.3], k=24).iloc[0]
    w = 0.3 * 44 / 1.4
    assert r.tcp_short_mean == pytest.approx(w * hand_i + 1)
    assert math.isnan(r.tcp_large_mean) and math.isnan(r.tcp_large_p99)


def test_two_uniform_segments_by_hand_and_quadrature():
    d = dist_of(TWO_UNIFORM)
    ints = integrals(d, K, SL)
    assert ints.short_frac == pytest.approx(0.5)
    assert ints.J == pytest.approx(math.log(2) / 24)
    assert ints.P == pytest.approx(math.log(3) / 200)
    assert ints.mean_size == pytest.approx(0.5 * 36 + 0.5 * 200)
    assert ints.eps == pytest.approx(18 / 118)
    quad_i, _ = integrate.quad(lambda x: math.log2(x / K + 1) / x / 24, 24, 48, epsabs=1e-13)
    assert ints.I == pytest.approx(quad_i, rel=1e-10)
    r = fct_table(d, [0.4], p=0.0, n=2).iloc[0]
    e = 18 / 118
    w = 0.4 * 44 / 1.2
    assert r.tcp_large_p99 == pytest.approx(0.4 / 1.2 + 1 + (2 * LN10 - 1) * w * math.log(3) / 200)
    q = (1 + e) * 0.4
    wl = q * 44 / (2 * (1 - q))
    assert r.repflow_large_p99 == pytest.approx(
        q / (2 * (1 - q)) + 1 + (2 * LN10 - 1) * wl * math.log(3) / 200
    )


def test_sub_packet_sizes_become_one_packet():
    # bytes CDF uniform on [0, 2920] B = [0, 2] packets: half the flows are below one packet.
    d = dist_of("0 0\n2920 1\n")
    assert d.prob(0, 1.0) == pytest.approx(0.5)
    assert d.partial_inv() == pytest.approx(0.5 + 0.5 * math.log(2))
    assert d.mean() == pytest.approx(0.5 * 1 + 0.5 * 1.5)


# ---------------------------------------------------------------- the sampled reading
def test_sampled_reading_rounds_up_like_the_simulator():
    # U uniform on [1, 3] packets -> ceil: 2 or 3 packets, half each.
    d = dist_of("1 1 0\n3 1 1\n", reading="sampled")
    assert d.prob(1.5, 2) == pytest.approx(0.5) and d.prob(2, 3) == pytest.approx(0.5)
    ints = integrals(d, K, SL)
    assert ints.I == pytest.approx(
        0.5 * math.log2(2 / 12 + 1) / 2 + 0.5 * math.log2(3 / 12 + 1) / 3
    )
    assert ints.J == pytest.approx(0.5 / 2 + 0.5 / 3)
    # bytes: n uniform on 1..2920 B; n <= 1460 is one packet.
    d = dist_of("0 0\n2920 1\n", reading="sampled")
    assert d.prob(0, 1.0) == pytest.approx(0.5)
    hand = 0.5 + sum(1460 / n for n in range(1461, 2921)) / 2920
    assert d.partial_inv() == pytest.approx(hand, rel=1e-12)
    assert d.partial_log(K) == pytest.approx(
        0.5 * math.log2(1 / 12 + 1)
        + sum(math.log2(n / 1460 / 12 + 1) / (n / 1460) for n in range(1461, 2921)) / 2920,
        rel=1e-12,
    )


@pytest.mark.parametrize("name", ["websearch", "datamining"])
def test_sampled_mean_matches_the_simulators_exact_mean(name):
    cdf = load_cdf(name)
    d = SizeDistribution.from_cdf(cdf, reading="sampled")
    assert d.mean() * 1460 == pytest.approx(cdf["mean_bytes"], rel=1e-12)


def test_large_lattice_sums_match_enumeration():
    # A byte CDF with a long segment: digamma and Euler-Maclaurin paths vs brute force.
    d = dist_of("0 0\n3000000 1\n", reading="sampled")
    n = np.arange(1461, 3_000_001, dtype=float)
    x = n / 1460
    assert d.partial_inv(1.0) == pytest.approx(np.sum(1 / x) / 3e6, rel=1e-10)
    assert d.partial_log(K, 1.0) == pytest.approx(np.sum(np.log2(x / K + 1) / x) / 3e6, rel=1e-10)


@pytest.mark.parametrize("name", ["websearch-bytes", "datamining-vl2", "google-rpc"])
def test_closed_forms_match_adaptive_quadrature_on_real_cdfs(name):
    """Per-segment quadrature (scipy.quad, epsabs 1e-14) of the raw integrands."""
    d = SizeDistribution.from_workload(name)

    def quad(g, lo, hi):
        tot = sum(p * g(x) for x, p in zip(d.atom_x, d.atom_p, strict=True) if lo < x <= hi)
        for a, b, p in zip(d.seg_a, d.seg_b, d.seg_p, strict=True):
            a2, b2 = max(a, lo), min(b, hi)
            if b2 > a2:
                tot += p / (b - a) * integrate.quad(g, a2, b2, epsabs=1e-14, limit=200)[0]
        return tot

    assert d.partial_log(K, 0, SL) == pytest.approx(
        quad(lambda x: math.log2(x / K + 1) / x, 0, SL), rel=1e-9
    )
    assert d.partial_inv(SL) == pytest.approx(quad(lambda x: 1 / x, SL, math.inf), rel=1e-9)
    assert d.partial_mean(0, SL) == pytest.approx(quad(lambda x: x, 0, SL), rel=1e-9)


# ---------------------------------------------------------------- limits
@pytest.mark.parametrize("name", ["websearch", "datamining", "fb-hadoop"])
def test_zero_load_gives_normalized_fct_one(name):
    df = fct_table(name, [1e-9])
    fcts = [c for c in df.columns if c.endswith(("_mean", "_p99"))]
    for c in fcts:
        assert df[c].iloc[0] == pytest.approx(1.0, abs=1e-6), c
    df = fct_table(name, [0.3])
    for c in fcts:
        assert df[c].iloc[0] > 1.0 + 1e-6, c


def test_repflow_short_better_exactly_when_effective_load_is_lower():
    loads = np.linspace(0.01, 0.99, 99)
    for eps in (0.0, 0.01, 0.05, 0.2, 0.5):
        df = fct_table(TWO_POINTS_DIST, loads, eps=eps)
        for _, r in df.iterrows():
            c = (1 + eps) ** 2 * r.load
            if abs(c - 1) < 1e-9:
                continue
            if (1 + eps) * r.load >= 1:  # the paths themselves are unstable
                assert math.isnan(r.repflow_short_mean) and math.isnan(r.repflow_short_p99)
                assert "undefined" in r.note
                continue
            assert (r.repflow_short_mean < r.tcp_short_mean) == (c < 1), (eps, r.load)
            assert (r.repflow_short_p99 < r.tcp_short_p99) == (c < 1), (eps, r.load)
    # the region where RepFlow is defined but worse exists: eps = 0.2, load 0.75
    r = fct_table(TWO_POINTS_DIST, [0.75], eps=0.2).iloc[0]
    assert r.repflow_short_mean > r.tcp_short_mean


TWO_POINTS_DIST = SizeDistribution.from_cdf(parse_cdf_text(TWO_POINTS, "two points"))


@pytest.mark.parametrize("name", ["websearch", "datamining", "websearch-bytes", "ali-storage"])
def test_large_flows_never_gain_from_replication(name):
    df = fct_table(name, np.linspace(0.05, 0.95, 19))
    for c in ("large_mean", "large_p99"):
        tcp, rep = df[f"tcp_{c}"], df[f"repflow_{c}"]
        ok = np.isfinite(rep)
        assert ok.sum() >= 15
        assert (rep[ok] >= tcp[ok]).all()
        assert (rep[ok] > tcp[ok]).any()


def test_undefined_where_effective_load_reaches_one():
    assert math.isnan(float(mean_wait(1.0, 44)))
    assert math.isnan(float(large_mean(1.0)))
    assert math.isnan(float(copies_short_load(0.5, 1.0, 2)))  # (1+1)*0.5 = 1
    ints = integrals(TWO_POINTS_DIST, K, SL)
    assert math.isnan(float(short_mean(1.2, ints, M)))
    assert math.isnan(float(short_p99(1.0, ints, M)))
    assert math.isnan(float(large_p99(1.0, ints, M)))
    df = fct_table(TWO_POINTS_DIST, [0.5, 0.9], eps=1.0)  # (1+eps)*0.5 = 1: undefined
    r = df.iloc[0]
    assert np.isfinite(r.tcp_short_mean) and np.isfinite(r.tcp_large_p99)
    for c in ("repflow_short_mean", "repflow_short_p99", "repflow_large_mean",
              "repflow_large_p99", "smartrep_hc_short_mean", "smartrep_n_short_mean"):  # fmt: skip
        assert df[c].isna().all(), c
    assert "undefined (effective load ≥ 1)" in r.note


def test_smartrep_special_cases():
    rho = np.linspace(0.05, 0.9, 18)
    eps = 0.04
    q2 = ((1 + eps) * rho) ** 2
    assert np.allclose(collision_short_load(rho, eps, 0.0), q2)  # no collisions = RepFlow
    assert np.allclose(collision_short_load(rho, eps, 1.0), (1 + eps) * rho)  # always collide
    assert np.allclose(copies_short_load(rho, eps, 1), rho)  # one copy = TCP
    assert np.allclose(copies_short_load(rho, eps, 2), q2)
    a = collision_short_load(rho, eps, 0.25)
    b = collision_short_load(rho, eps, 0.5)
    assert (a < b).all() and (q2 < a).all()
    df = fct_table("websearch", rho, p=0.0, n=2)
    assert np.allclose(df.smartrep_hc_short_mean, df.repflow_short_mean)
    assert np.allclose(df.smartrep_n_short_p99, df.repflow_short_p99)
    assert np.allclose(df.smartrep_n_large_mean, df.repflow_large_mean)


# ---------------------------------------------------------------- input checking
@pytest.mark.parametrize("loads", [[0.0], [1.0], [1.5], [-0.1], ["x"], []])
def test_bad_loads_are_user_errors(loads):
    with pytest.raises(UserError, match="load"):
        fct_table("websearch", loads)


def test_bad_parameters_and_workloads_are_user_errors():
    with pytest.raises(UserError, match="neither a built-in"):
        fct_table("no-such-workload", [0.5])
    with pytest.raises(UserError, match="k "):
        fct_table("websearch", [0.5], k=0)
    with pytest.raises(UserError, match="p "):
        fct_table("websearch", [0.5], p=1.5)
    with pytest.raises(UserError, match="eps"):
        fct_table("websearch", [0.5], eps=-0.1)
    with pytest.raises(UserError, match="sizes reading"):
        fct_table("websearch", [0.5], sizes="rounded")
    with pytest.raises(UserError, match="workload"):
        parse_cdf_text("10 1 0\nfoo 1 1\n", "bad.cdf")


@pytest.mark.parametrize("reading", ["continuous", "sampled"])
def test_flow_exactly_at_threshold_is_short(reading):
    # a point mass at exactly 100,000 B: short, like the simulator's size <= threshold
    d = dist_of("100000 0\n100000 0.5\n200000 0.5\n200000 1\n", reading=reading)
    assert integrals(d, K, SL).short_frac == pytest.approx(0.5)
    d = dist_of("68 1 0\n68 1 0.5\n69 1 0.5\n69 1 1\n", reading=reading)
    assert integrals(d, K, SL).short_frac == pytest.approx(0.5)
