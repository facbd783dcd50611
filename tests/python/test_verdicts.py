"""Verdicts from intervals: the bootstrap over seeds and flows, and the rules that turn intervals
into reproduced / not reproduced (smaller, opposite sign, larger, sign open) / open, family-wise
over a claim's points (synthetic samples, no simulation)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from repflow.experiments import claims as cl
from repflow.experiments import stats
from repflow.experiments.stats import Sample


def _flows(fct: np.ndarray, sizes: np.ndarray | None = None) -> pd.DataFrame:
    n = len(fct)
    size = np.full(n, 20_000) if sizes is None else sizes
    # a flow that took a second or more waited out a timeout (the 3 s SYN timer here)
    return pd.DataFrame({"size": size, "start": np.arange(n) * 1e-4, "fct": fct,
                         "bytes_sent": size, "copies": np.ones(n, dtype=int),
                         "timeouts": (fct >= 1.0).astype(int)})  # fmt: skip


def _evidence(base: list[np.ndarray], rep: list[np.ndarray], workload: str = "websearch",
              load: float = 0.5) -> cl.Evidence:  # fmt: skip
    """Evidence with series ``tcp`` (``base``, one array per seed) and ``repflow``."""
    samples = {}
    rows = []
    for series, arrays in (("tcp", base), ("repflow", rep)):
        s = Sample()
        for seed, a in enumerate(arrays, start=1):
            s.add(seed, _flows(a))
        samples[(workload, series, load)] = s
        means = [float(np.mean(a)) for a in arrays]
        pooled = np.concatenate(arrays)
        rows.append({"workload": workload, "series": series, "scheme": series, "load": load,
                     "short_mean": float(np.mean(means)),
                     "short_p99": float(np.percentile(pooled, 99)), "seeds": len(arrays)})
    return cl.Evidence(pd.DataFrame(rows), samples, resamples=400)


def _rf1(ev: cl.Evidence) -> cl.Outcome:
    return cl.reduction_claim("repflow", "tcp", "short_mean", 50, 70)(ev)


def _lognormal(rng: np.random.Generator, n: int, median: float) -> np.ndarray:
    return median * rng.lognormal(0.0, 0.5, n)


def test_an_effect_well_inside_the_range_holds() -> None:
    rng = np.random.default_rng(1)
    base = [_lognormal(rng, 2000, 1e-3) for _ in range(3)]
    rep = [b * 0.4 for b in base]  # 60 % lower on the same flows
    out = _rf1(_evidence(base, rep))
    assert out.verdict == cl.REPRODUCED, (out.measured, out.reason)
    p = out.points[0]
    assert p.interval.lo <= 60 <= p.interval.hi and p.interval.paired
    assert p.interval.flows == (6000, 6000) and p.interval.seeds == 3


def test_an_effect_of_the_wrong_sign_does_not_hold() -> None:
    rng = np.random.default_rng(2)
    base = [_lognormal(rng, 2000, 1e-3) for _ in range(3)]
    rep = [b * 1.3 for b in base]
    out = _rf1(_evidence(base, rep))
    assert out.verdict == cl.OPPOSITE and out.points[0].interval.hi < 0


def test_a_positive_effect_short_of_the_range_is_not_reproduced_smaller() -> None:
    rng = np.random.default_rng(3)
    base = [_lognormal(rng, 2000, 1e-3) for _ in range(3)]
    rep = [b * 0.85 for b in base]
    out = _rf1(_evidence(base, rep))
    assert out.verdict == cl.SMALLER


def test_an_effect_beyond_the_range_says_which_side() -> None:
    rng = np.random.default_rng(31)
    base = [_lognormal(rng, 2000, 1e-3) for _ in range(3)]
    out = _rf1(_evidence(base, [b * 0.1 for b in base]))  # 90 % lower: above 50–70 ± 10
    assert out.verdict == cl.LARGER, out.measured
    # an interval over both the range and beyond it is reproduced (at least as large)
    out = cl.reduction_claim("repflow", "tcp", "short_mean", 50, 80)(
        _evidence(base, [b * 0.12 for b in base]))  # 88 % ± noise, range up to 90
    assert out.verdict in (cl.REPRODUCED, cl.LARGER)


def test_an_interval_straddling_a_boundary_is_inconclusive_and_says_what_settles_it() -> None:
    rng = np.random.default_rng(4)
    # independent flows (no pairing), 40 % vs 60 % boundary: estimate ~40 %, wide interval
    base = [_lognormal(rng, 60, 1e-3) for _ in range(2)]
    rep = [_lognormal(rng, 61, 0.6e-3) for _ in range(2)]
    out = _rf1(_evidence(base, rep))
    assert out.verdict == cl.OPEN, out.measured
    assert "web search, load 0.5: [" in out.reason and "2 seeds" in out.reason
    assert "straddles 40 %" in out.reason
    assert "the flows would settle it" in out.reason or "boundary" in out.reason
    iv = out.points[0].interval
    assert iv.lo < 40 < iv.hi and not iv.paired


def test_one_outlier_among_many_flows_does_not_flip_the_verdict() -> None:
    rng = np.random.default_rng(5)
    base = [_lognormal(rng, 5000, 1e-3) for _ in range(3)]
    rep = [b * 0.4 for b in base]
    rep[1] = rep[1].copy()
    rep[1][17] = 0.05  # one flow waits 50 ms (a timeout) where TCP took ~1 ms
    out = _rf1(_evidence(base, rep))
    assert out.verdict == cl.REPRODUCED, (out.measured, out.reason)


def test_a_single_3s_timeout_among_few_flows_makes_the_mean_inconclusive() -> None:
    # The finding that prompted the intervals: one SYN timeout among ~200 short flows moves
    # TCP's mean by ~15 ms; the old rule read a reduction off it, the interval must not.
    rng = np.random.default_rng(6)
    base = [_lognormal(rng, 100, 1e-3) for _ in range(2)]
    base[0] = base[0].copy()
    base[0][3] = 3.0
    rep = [b * 0.9 for b in base]
    rep[0] = rep[0].copy()
    rep[0][3] = 1e-3
    out = _rf1(_evidence(base, rep))
    assert out.verdict not in cl.CONCLUSIVE, out.measured
    # the old point-estimate rule (a table without flows) calls it reproduced or beyond
    bare = cl.Evidence(_evidence(base, rep).agg)
    assert _rf1(bare).verdict in cl.REPRODUCED_KINDS
    # and the page names the rare event: TCP's mean is carried by its one timeout
    p = out.points[0]
    assert p.mean_note is not None and p.mean_note.dominated()
    assert any("tcp 93 % of its mean from 1 of 200 flows with a timeout" in n
               and "effect without them +10.0 %" in n for n in out.notes), out.notes


def test_the_bootstrap_is_deterministic() -> None:
    rng = np.random.default_rng(7)
    base = [_lognormal(rng, 300, 1e-3) for _ in range(2)]
    rep = [_lognormal(rng, 300, 0.5e-3) for _ in range(2)]
    a = _rf1(_evidence(base, rep)).points[0].interval
    b = _rf1(_evidence(base, rep)).points[0].interval
    assert (a.lo, a.hi, a.estimate) == (b.lo, b.hi, b.estimate)


def test_the_p99_interval_covers_the_truth_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(8)
    true = float(np.exp(0.5 * 2.3263478740408408))  # p99 of lognormal(0, 0.5)
    hits = 0
    trials = 60
    for t in range(trials):
        s = Sample()
        for seed in range(2):
            s.add(seed, _flows(rng.lognormal(0.0, 0.5, 1500)))
        iv = stats.level_interval(s, "short_p99", 100_000, key=t, resamples=300)
        hits += iv.lo <= true <= iv.hi
        assert iv.tail_flows == 3000 and not iv.thin()
    assert hits / trials >= 0.85


def test_the_estimate_equals_the_tables() -> None:
    rng = np.random.default_rng(9)
    arrays = [_lognormal(rng, 400, 1e-3) for _ in range(3)]
    s = Sample()
    for seed, a in enumerate(arrays):
        s.add(seed, _flows(a))
    mean = stats.level_interval(s, "short_mean", 100_000, resamples=50).estimate
    p99 = stats.level_interval(s, "short_p99", 100_000, resamples=50).estimate
    assert mean == pytest.approx(np.mean([a.mean() for a in arrays]))
    assert p99 == pytest.approx(np.percentile(np.concatenate(arrays), 99))
    # the resampled quantile with every count 1 is numpy's linear percentile
    v = np.sort(np.concatenate(arrays))
    got = stats._expanded_quantile(v, np.ones((1, len(v)), dtype=np.int64), 0.99)[0]
    assert got == pytest.approx(np.percentile(v, 99))


def test_combining_points() -> None:
    from repflow.experiments import verdicts as vd

    r, big, s, o = vd.REPRODUCED, vd.LARGER, vd.SMALLER, vd.OPPOSITE
    fs = frozenset

    def all_(*k: frozenset[str]) -> str:
        return vd.decide_all(list(k), list(k)).verdict

    assert all_(fs({r}), fs({r})) == r
    assert all_(fs({r}), fs({big})) == r and all_(fs({big}), fs({big})) == big
    assert all_(fs({r, big}), fs({r})) == r  # at least as large as published: reproduced
    assert all_(fs({r}), fs({s})) == s
    # one point shown outside decides, whatever the others admit
    assert all_(fs({r, s}), fs({o})) == o
    assert all_(fs({s, o}), fs({r})) == vd.SIGN_OPEN  # refuted, its sign open
    assert all_(fs({r, s}), fs({r})) == vd.OPEN
    # family-wise: a refutation needs the wider interval, a reproduction the 95 % one
    assert vd.decide_all([fs({s})], [fs({r, s})]).verdict == vd.OPEN
    assert vd.decide_all([fs({r})], [fs({r, s})]).verdict == r
    # "up to": one point suffices to reproduce, all must fail to refute
    assert vd.decide_any([fs({r}), fs({s})], [fs({r}), fs({s})]).verdict == r
    assert vd.decide_any([fs({s}), fs({o})], [fs({s}), fs({o})]).verdict == o
    assert vd.decide_any([fs({s}), fs({r, s})], [fs({s}), fs({r, s})]).verdict == vd.OPEN
    assert vd.headline_line(vd.headline([r, big, s, vd.OPEN, vd.SIGN_OPEN])) == (
        "2 reproduced, 2 not reproduced, 1 open")


def test_a_bound_never_rounds_across_its_boundary() -> None:
    from repflow.experiments.claimtext import decided

    assert decided(49.61, [50.0]) == "49.6" and decided(49.996, [50.0]) == "49.996"
    assert decided(50.0, [50.0]) == "50" and decided(63.2, [50.0]) == "63"
    assert decided(-0.004, [0.0]) == "−0.004" and decided(9.999, [10.0]) == "9.999"


def test_more_replicates_near_a_boundary_and_no_generator_dependence() -> None:
    """An interval whose bound sits near a boundary gets replicates added until the
    generator cannot move it across; its verdict is then the same for other generator
    keys."""
    rng = np.random.default_rng(13)
    base = [_lognormal(rng, 400, 1e-3) for _ in range(3)]
    rep = [b * rng.lognormal(np.log(0.62), 0.55, len(b)) for b in base]
    got = set()
    reps = []
    for key in range(6):
        ev = _evidence(base, rep)
        ev = cl.Evidence(ev.agg, ev.samples, resamples=400, generator_key=key)
        out = _rf1(ev)
        got.add(out.verdict)
        reps.append(out.points[0].replicates)
    assert len(got) == 1, got
    assert max(reps) >= 400


def test_claim_points_rows_are_tidy() -> None:
    rng = np.random.default_rng(10)
    base = [_lognormal(rng, 500, 1e-3) for _ in range(2)]
    ev = _evidence(base, [b * 0.4 for b in base])
    res = [r for r in cl.evaluate_claims(ev, ["repflow-ns3"]) if r.claim.id == "RF-1"][0]
    rows = cl.point_rows(res, "dc")
    assert len(rows) == 1 and set(rows[0]) == set(cl.POINT_COLUMNS)
    r = rows[0]
    assert r["published_lo"] == 40 and r["published_hi"] == 80
    assert r["ci_lo"] <= r["measured"] <= r["ci_hi"] and r["seeds"] == 2
    assert r["flows_a"] == 1000 and r["flows_b"] == 1000  # per series, not summed
    assert r["fw_lo"] <= r["ci_lo"] and r["ci_hi"] <= r["fw_hi"]


def test_the_testbed_table_i_pools_trials_into_intervals_and_verdicts() -> None:
    from repflow.testbed.toyexp import Scenario, format_trials, summarize_trials

    rng = np.random.default_rng(11)
    trials = []
    for _ in range(3):
        alone = list(0.0025 * rng.lognormal(0, 0.2, 300))
        large = list(0.014 * rng.lognormal(0, 0.6, 300))
        rep = list(np.asarray(large) * 0.5)
        trials.append([Scenario("alone", alone, 0, float("nan"), 0.0),
                       Scenario("large", large, 0, 0.5, 0.0),
                       Scenario("replicated", rep, 1, 0.25, 0.0)])  # fmt: skip
    summary = summarize_trials(trials, resamples=300)
    mean, (lo, hi), p99, (plo, phi), flows, k = summary.rows["large"]
    assert lo <= mean <= hi and plo <= p99 <= phi and flows == 900 and k == 3
    assert summary.rows["replicated"][4] == 903  # unfinished flows are counted, not timed
    assert summary.verdicts["RF-T1"][0] == cl.REPRODUCED, summary.verdicts["RF-T1"]
    text = format_trials(summary, 50_000_000, [1, 2, 3])
    assert "3 trials, seeds 1, 2, 3" in text and "RF-T2:" in text
    # one trial and a replication that does nothing: RF-T1 cannot hold
    same = [[Scenario("alone", trials[0][0].fct, 0, float("nan"), 0.0),
             Scenario("large", trials[0][1].fct, 0, 0.5, 0.0),
             Scenario("replicated", trials[0][1].fct, 0, 0.5, 0.0)]]  # fmt: skip
    assert summarize_trials(same, resamples=300).verdicts["RF-T1"][0] != cl.REPRODUCED


def test_a_workload_table_overrides_only_its_own_points() -> None:
    from repflow.errors import UserError
    from repflow.experiments.spec import parse_spec

    text = """
[base]
workload = { duration = "10ms" }
[grid]
scheme = ["tcp"]
"workload.cdf" = ["websearch", "datamining"]
[workloads.datamining]
"workload.duration" = "30ms"
"""
    pts = parse_spec(text, "t.toml").points()
    got = {p.config["workload"]["cdf"]: p.config["workload"]["duration"] for p in pts}
    assert got == {"websearch": "10ms", "datamining": "30ms"}
    with pytest.raises(UserError, match=r"t.toml:\d+: \[workloads.datamning\]: no point runs"):
        parse_spec(text.replace("[workloads.datamining]", "[workloads.datamning]"), "t.toml")


def test_a_reused_report_keeps_every_point_of_its_claims() -> None:
    from repflow.experiments import uptodate

    rng = np.random.default_rng(12)
    base = [_lognormal(rng, 300, 1e-3) for _ in range(2)]
    out = _rf1(_evidence(base, [b * 0.4 for b in base]))
    p = out.points[0]
    back = uptodate._point_of(json.loads(json.dumps(uptodate._point_json(p))))
    assert back == p
    # a change to the code that decides a report makes its stamp stale
    assert "claims" in uptodate.REPORT_CODE and "stats" in uptodate.REPORT_CODE


def test_a_p99_on_a_timeout_plateau_is_decided_on_the_share_beyond_it() -> None:
    """TCP's p99 is 3 s when more than 1 % of its flows wait out the 3 s SYN timer, and
    ~0.5 s otherwise: with ~1 % measured the percentile interval is meaningless, and the claim
    turns on the share beyond the plateau, which the page prints with its interval."""
    rng = np.random.default_rng(14)

    def tcp_seed(n: int, k: int) -> np.ndarray:
        a = 0.1 * rng.lognormal(0.0, 0.6, n)
        a[rng.choice(n, k, replace=False)] = 3.0 + 0.01 * rng.random(k)
        return a

    base = [tcp_seed(1000, 10), tcp_seed(1000, 11), tcp_seed(1000, 10)]
    rep = [np.minimum(b, 0.2) * 0.5 for b in base]
    claim = cl.reduction_claim("repflow", "tcp", "short_p99", 85, 100, tol=0.0)
    out = claim(_evidence(base, rep))
    p = out.points[0]
    assert p.plateau is not None and p.plateau.series == "tcp", out.measured
    assert p.plateau.side() == "open" and p.plateau.beyond == 31
    assert out.verdict == cl.OPEN and "undecidable" in out.reason, out.reason
    assert any("timeout plateau" in n for n in out.notes)
    # far more than 1 % beyond the plateau: TCP's p99 is the timeout, and the claim decided
    many = [tcp_seed(1000, 40) for _ in range(3)]
    out = claim(_evidence(many, [np.minimum(b, 0.2) * 0.5 for b in many]))
    assert out.verdict in cl.REPRODUCED_KINDS, (out.verdict, out.reason)


def test_every_csv_column_and_verdict_is_documented() -> None:
    from pathlib import Path

    from repflow.experiments import verdicts as vd
    from repflow.experiments.reproduce import CLAIM_COLUMNS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    for col in (*CLAIM_COLUMNS, *cl.POINT_COLUMNS):
        assert f"`{col}`" in doc, col
    for v in vd.VERDICTS:
        assert f"**{v}**" in doc, v
