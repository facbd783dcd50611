"""The seed papers' quantitative claims (each with its paper and section), measured on a
sweep's flows and decided with intervals (docs/metrics.md, "Intervals and verdicts").

The verdict code is split by concept:

* :mod:`repflow.experiments.verdicts` — the vocabulary (reproduced; reproduced, larger than
  published; not reproduced — smaller / opposite sign / larger / sign open; open; regime not
  reached) and the rules, family-wise across a claim's points;
* :mod:`repflow.experiments.stats` — the interval method (a bootstrap over the flows within
  each seed, chosen by the coverage study :mod:`repflow.experiments.coverage`);
* :mod:`repflow.experiments.rare` — the rare events behind an effect (timeouts carrying a mean,
  a percentile on a timeout plateau);
* :mod:`repflow.experiments.claimtext` — how the verdicts read;
* :mod:`repflow.experiments.evidence` — a sweep's flows, and each measured effect as a point;
* this module — the kinds of claim, how a claim's points combine, and the registry
  :data:`CLAIMS`.

One sign convention holds everywhere: an effect of ``a`` against ``b`` is the **reduction** of
a's metric relative to b's, in percent of b's (positive: a lower, i.e. faster); a level
(overhead, a share, collisions, retransmissions) is a percentage of what it names.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from repflow.experiments import claimtext as tx
from repflow.experiments import coverage
from repflow.experiments import verdicts as vd
from repflow.experiments.evidence import (
    MAX_CHUNKS,
    Estimate,
    Evidence,
    Point,
    RepEstimate,
    WilsonEstimate,
)
from repflow.experiments.verdicts import (
    CONCLUSIVE,
    EXCEEDS,
    LARGER,
    NOT_MEASURED,
    NOT_REPRODUCED_KINDS,
    OPEN,
    OPPOSITE,
    REGIME,
    REPRODUCED,
    REPRODUCED_KINDS,
    SIGN_OPEN,
    SMALLER,
    VERDICTS,
)

__all__ = [
    "CLAIMS", "CONCLUSIVE", "EXCEEDS", "LARGER", "NOT_MEASURED", "NOT_REPRODUCED_KINDS", "OPEN",
    "OPPOSITE", "REGIME", "REPRODUCED", "REPRODUCED_KINDS", "SIGN_OPEN", "SMALLER", "VERDICTS",
    "Claim", "ClaimResult", "Estimate", "Evidence", "MAX_CHUNKS", "Outcome", "Point",
    "RepEstimate", "WilsonEstimate", "evaluate_claims", "point_rows",
]  # fmt: skip

#: Scenario tag of the RepFlow paper's NS-3 study (fat-tree, web search / data mining, loads).
NS3 = "repflow-ns3"
#: Scenario tag of SmartRep's NS-2 study (10-pod fat-tree, 10 Gb/s, CRC16 ECMP).
SR = "smartrep-ns2"

# -- outcomes ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """The measured values of a claim, its verdict, and why."""

    measured: str
    verdict: str
    reason: str = ""
    points: list[Point] = field(default_factory=list)
    #: Rare-event lines, one per point that has any.
    notes: list[str] = field(default_factory=list)


@dataclass
class Claim:
    """One published, quantitative claim."""

    id: str
    source: str
    text: str
    #: Scheme labels the claim compares.
    schemes: tuple[str, ...]
    #: Scenario tag a sweep must declare (``[experiment] claims = [...]``).
    scenario: str
    #: How the verdict is decided, in one line (shown in the reports).
    criterion: str
    evaluate: Callable[[Any], Outcome] | None = None
    #: The operating point the claim is about: (reached? None when it cannot say, the
    #: measured value in words).
    regime: Callable[[Evidence], tuple[bool | None, str]] | None = None


@dataclass
class ClaimResult:
    """A claim with its outcome."""

    claim: Claim
    measured: str
    verdict: str
    reason: str = ""
    points: list[Point] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# -- deciding a claim from its points -------------------------------------------------------------

Collect = Callable[[Evidence], "list[Point] | str"]


def conclude(points: list[Point], mode: str = "all", extra: str = "") -> Outcome:
    """The verdict of a claim over ``points`` (``all``: must hold at every point; ``any``: at
    one), family-wise over the points, with its reason and rare-event notes."""
    m = len(points)
    conf_fw = vd.family_confidence(m)
    for p in points:
        p.settle(conf_fw)
    k95 = [p.kinds for p in points]
    kfw = [p.kinds_fw for p in points]
    dec = vd.decide_all(k95, kfw) if mode == "all" else vd.decide_any(k95, kfw)
    for p in points:
        if mode == "all":
            nfw, n95 = vd.point_verdict(p.kinds_fw), vd.point_verdict(p.kinds)
            p.verdict = nfw if vd.family(nfw) == "not reproduced" else (
                n95 if vd.family(n95) == "reproduced" else OPEN)  # fmt: skip
        else:
            nfw, n95 = vd.point_verdict(p.kinds_fw), vd.point_verdict(p.kinds)
            p.verdict = nfw if vd.family(nfw) == "reproduced" else (
                n95 if vd.family(n95) == "not reproduced" else OPEN)  # fmt: skip
    measured = tx.describe_points(points) + (f"; {extra}" if extra else "")
    if dec.verdict == OPEN:
        reason = tx.why_open(points, dec.open_points, _settle(points, dec.open_points, mode))
    elif vd.family(dec.verdict) == "not reproduced":
        reason = (tx.deciding_text(points, dec.deciding, dec.verdict, m) if mode == "all"
                  else "no point reaches the claim: " + "; ".join(
                      f"{p.where()}: {tx.interval_text(p)}" for p in points))  # fmt: skip
    elif dec.verdict == LARGER:
        reason = "every point beyond the published range, on the claim's side"
    else:
        reason = ""
    notes = tx.notes(points)
    cov = coverage.coverage_note(points)
    if cov:
        notes.append(f"measured coverage: {cov}")
    return Outcome(measured, dec.verdict, reason, points, notes)


def _settle(points: list[Point], open_idx: Sequence[int], mode: str) -> str:
    """What would settle an open claim: the points whose estimates lie on the refuting side
    can each settle it alone (the fewest flows among them); otherwise every open point must
    clear its boundary (the most flows among them)."""
    if any(points[i].plateau is not None and points[i].plateau.side() == "open"
           for i in open_idx):  # fmt: skip
        return ("undecidable at this design: a percentile on a timeout plateau turns on "
                "whether more or fewer flows than the percentile's tail wait out the timer; "
                "the share beyond it is printed in the notes")  # fmt: skip
    refuting, confirming = [], []
    for i in open_idx:
        p = points[i]
        kind = p.regions.kind_at(p.interval.estimate)
        fam = vd.family(kind)
        settles_alone = (fam == "not reproduced") if mode == "all" else (fam == "reproduced")
        k = p.needed(refute=settles_alone if mode == "all" else not settles_alone)
        (refuting if settles_alone else confirming).append(k)
    if refuting and all(k is not None for k in refuting):
        k = min(k for k in refuting if k is not None)
        goal = "not reproduced" if mode == "all" else "reproduced"
    elif confirming and all(k is not None for k in confirming) and not refuting:
        k = max(k for k in confirming if k is not None)
        goal = "reproduced" if mode == "all" else "not reproduced"
    else:
        return "an estimate sits on a boundary: more flows alone may not settle it"
    seeds = max(points[i].interval.seeds for i in open_idx) or 1
    if k > 100:
        return (f"an estimate sits close to the boundary: ~{k:.0f}× the flows would be needed "
                f"(toward {goal})")  # fmt: skip
    return (f"about {k:.1f}× the flows would settle it ({goal}), e.g. {math.ceil(k * seeds)} "
            f"seeds at this duration, if the estimates stay where they are")  # fmt: skip


@dataclass
class Kind:
    """A kind of claim: how its points are collected from the evidence, and how they combine
    (``all`` points must hold, or ``any`` one)."""

    collect: Callable[[Evidence], list[Point] | str]
    mode: str = "all"
    extra: Callable[[Evidence, list[Point]], str] | None = None

    def __call__(self, x: Any) -> Outcome:
        ev = Evidence.of(x)
        pts = self.collect(ev)
        if isinstance(pts, str):
            return Outcome(pts, NOT_MEASURED)
        out = conclude(pts, self.mode)
        if self.extra is not None:
            more = self.extra(ev, pts)
            if more:
                out.measured += f"; {more}"
        return out


# -- claim kinds -------------------------------------------------------------------------------


def reduction_claim(
    a: str, b: str, metric: str, lo: float, hi: float, tol: float = 10.0,
    workload: str | None = None, load_min: float = 0.0, load_max: float = 1.0, part: str = "",
) -> Kind:  # fmt: skip
    """Claim "a's metric is lo–hi % lower than b's" (± tol points) at every selected load.
    Negative bounds claim a is slower ("a is 15–45 % slower": lo = −45, hi = −15)."""
    regions = vd.reduction_regions(lo, hi, tol)

    def collect(ev: Evidence) -> list[Point] | str:
        pts = [ev.effect_point(part, a, b, metric, w, load, regions)
               for w, load in ev.pairs(a, b, metric, workload)
               if load_min <= load <= load_max]  # fmt: skip
        return pts or "no load in range measured"

    return Kind(collect)


def slower_claim(a: str, b: str, metric: str, lo: float, hi: float, workload: str) -> Kind:
    """Claim "a is lo–hi % slower than b" (on one workload): a reduction in [−hi, −lo]."""
    return reduction_claim(a, b, metric, -hi, -lo, tol=0.0, workload=workload)


def best_claim(
    a: str, b: str, metric: str, at_least: float, workload: str | None, load_max: float
) -> Kind:
    """Claim "a's metric is up to N× lower than b's" below a load: reproduced when one point's
    reduction reaches ``at_least`` % (family-wise); not reproduced when every point falls
    short of it."""
    regions = vd.reduction_regions(at_least, 100.0, 0.0)

    def collect(ev: Evidence) -> list[Point] | str:
        pts = [ev.effect_point("", a, b, metric, w, load, regions)
               for w, load in ev.pairs(a, b, metric, workload) if load < load_max]  # fmt: skip
        return pts or f"no load below {load_max:g} measured"

    return Kind(collect, mode="any")


def unaffected_claim(a: str, b: str, metric: str, within: float, part: str = "") -> Kind:
    """Claim "a's metric is barely different from b's": |reduction| ≤ within % at every load
    (an "at most" claim: beyond it either way is "not reproduced — larger")."""
    regions = vd.within_regions(-within, within, f"claimed |effect| ≤ {within:g} %")

    def collect(ev: Evidence) -> list[Point] | str:
        pts = [ev.effect_point(part, a, b, metric, w, load, regions)
               for w, load in ev.pairs(a, b, metric)]  # fmt: skip
        return pts or "no load measured"

    return Kind(collect)


def overhead_claim(a: str, lo: float, hi: float, tol: float) -> Kind:
    """Claim "replication overhead is lo–hi % of bytes" (± tol points at every load). The
    share of bytes in short flows is reported beside it as a separate figure."""
    regions = vd.within_regions(lo - tol, hi + tol, f"claimed {lo:g}–{hi:g} % ± {tol:g}")

    def collect(ev: Evidence) -> list[Point] | str:
        pts = []
        for w, load in ev.levels(a, "overhead"):
            p = ev.level_point("", a, "overhead", w, load, regions)
            p.metric = f"overhead of {a} (extra bytes, % of bytes)"
            pts.append(p)
        return pts or "overhead not recorded"

    def extra(ev: Evidence, pts: list[Point]) -> str:
        if "short_bytes_frac" not in ev.agg.columns:
            return ""
        shares = {(p.workload, p.load): 100 * ev.value(a, p.workload, p.load, "short_bytes_frac")
                  for p in pts}  # fmt: skip
        txt = "; ".join(f"{tx.workload_name(w)} {ld:g}: {tx.fmt(v)}"
                        for (w, ld), v in shares.items())  # fmt: skip
        out = f"bytes in short flows (a separate figure, not the verdict's): {txt}"
        if all(abs(shares[(p.workload, p.load)] - p.interval.estimate) < 1e-6 for p in pts):
            out += (" — equal to the overhead because every short flow gets exactly one "
                    "extra copy, counted at its application size whether or not it finishes")
        return out

    return Kind(collect, extra=extra)


def collision_claim(a: str, at_least: float) -> Kind:
    """Claim "at least N % of a's replicated flows collide" (copies sharing a link); the
    interval is a Wilson interval of the pooled counts (the counters are per run)."""
    regions = vd.at_least_regions(at_least, f"claimed ≥ {at_least:g} %")

    def collect(ev: Evidence) -> list[Point] | str:
        pts = [ev.proportion_point("", a, "copy_collisions", "replicated_flows",
                                   f"replicated flows of {a} with colliding copies (%)", w, load,
                                   regions)
               for w, load in ev.levels(a, "collision_frac")]  # fmt: skip
        return pts or "collisions not recorded"

    return Kind(collect)


def toy_claim(metric: str) -> Kind:
    """Table I: short flows alone, beside a large flow, and replicated beside it. Reproduced
    when "alone" is ≥ 66.7 % below "beside" (beside ≥ 3× alone) and "replicated" ≥ 20 % below
    "beside"."""
    parts = (("beside vs alone", "tcp-alone", "tcp", 100 * (1 - 1 / 3)),
             ("replicated vs beside", "repflow", "tcp", 20.0))  # fmt: skip

    def collect(ev: Evidence) -> list[Point] | str:
        present = ev.series()
        for s in ("tcp-alone", "tcp", "repflow"):
            if s not in present:
                return f"{s} not measured"
        pts = []
        for label, a, b, need in parts:
            regions = vd.reduction_regions(need, 100.0, 0.0)
            pts += [ev.effect_point(label, a, b, metric, w, load, regions)
                    for w, load in ev.pairs(a, b, metric)]  # fmt: skip
        return pts or f"{metric} not measured"

    def extra(ev: Evidence, pts: list[Point]) -> str:
        levels = []
        for s in ("tcp-alone", "tcp", "repflow"):
            for w, load in ev.levels(s, metric)[:1]:
                p = ev.level_point("", s, metric, w, load, vd.at_least_regions(0.0), 1.0)
                lo, hi = p.interval.lo, p.interval.hi
                levels.append(f"{s} {p.interval.estimate:.4f} s [{lo:.4f}, {hi:.4f}]")
        return "levels: " + ", ".join(levels)

    return Kind(collect, extra=extra)


def share_claim(
    a: str, b: str, metric: str, want_a: float, want_b: float, tol: float, scale: float = 100.0,
    part: str = "",
) -> Kind:  # fmt: skip
    """Claim "a's metric is about want_a where b's is about want_b" (percentages; ``scale``
    turns the metric into one): reproduced when both lie within ``tol`` points of the
    published values at every load; each level is a point of the claim."""
    ra = vd.within_regions(want_a - tol, want_a + tol, f"claimed {want_a:g} ± {tol:g}")
    rb = vd.within_regions(want_b - tol, want_b + tol, f"claimed {want_b:g} ± {tol:g}")

    def collect(ev: Evidence) -> list[Point] | str:
        pts = []
        for w, load in ev.pairs(a, b, metric):
            pts.append(ev.level_point(part or f"{a} level", a, metric, w, load, ra, scale))
            pts.append(ev.level_point(part + (" " if part else "") + f"{b} level", b, metric, w,
                                      load, rb, scale))  # fmt: skip
        return pts or "no load measured"

    return Kind(collect)


def retransmission_claim(a: str, b: str, want_a: float, want_b: float, tol: float) -> Kind:
    """MPTCP-L's Fig. 4: the share of packets retransmitted (``retx_pct``), with each scheme's
    breakdown by cause shown beside the verdict of :func:`share_claim`."""
    base = share_claim(a, b, "retx_pct", want_a, want_b, tol, scale=1.0)
    causes = (("retx_detect_pct", "fast detection"), ("retx_atimer_pct", "aggressive timer"),
              ("retx_fast_pct", "fast retransmit"), ("retx_timeout_pct", "RTO"))  # fmt: skip

    def extra(ev: Evidence, pts: list[Point]) -> str:
        parts = []
        agg = ev.agg
        for s in (a, b):
            rows = agg[agg["series"] == s].sort_values("load")
            for _, r in rows.iterrows():
                split = ", ".join(
                    f"{label} {r[c]:.2f}" for c, label in causes
                    if c in r and np.isfinite(r[c]) and r[c] > 0
                )  # fmt: skip
                parts.append(f"{s} at load {r['load']:g}: {split or 'none'}")
        return "by cause (% of packets): " + "; ".join(parts)

    return Kind(base.collect, extra=extra)


def all_of(*parts: tuple[str, Kind]) -> Kind:
    """A claim made of several labelled parts, all of which must hold: every part's points
    form one family (the claim's family-wise level covers them all); a part not measured
    leaves the claim not measured."""

    def collect(ev: Evidence) -> list[Point] | str:
        pts: list[Point] = []
        for label, kind in parts:
            got = kind.collect(ev)
            if isinstance(got, str):
                return f"{label}: {got}"
            for p in got:
                if not p.part.startswith(label):
                    p.part = f"{label}" + (f" {p.part}" if p.part else "")
            pts += got
        return pts

    return Kind(collect)


def _fa_sizes(metric: str, lo: float) -> list[tuple[str, Kind]]:
    """FA-DCTCP vs DCTCP for each short-flow size series of experiments/fa-dctcp.toml."""
    return [
        (f"{metric} {size}", reduction_claim(f"fa-dctcp-{size}", f"dctcp-{size}", metric, lo, lo))
        for size in ("250KB", "500KB", "1MB")
    ]


def mptcp_regime(ev: Evidence) -> tuple[bool | None, str]:
    """ML-1 is about a congested network where MPTCP misses the 50 ms deadline for about
    half its short flows (the paper: 45 % within 50 ms). Reached where MPTCP's share within
    50 ms can be at most :data:`ML_REGIME_MAX` % at some load."""
    got = []
    reached = False
    for w, load in ev.levels("mptcp", "short_within_deadline"):
        p = ev.level_point("", "mptcp", "short_within_deadline", w, load,
                           vd.at_least_regions(0.0))  # fmt: skip
        got.append(f"{p.interval.estimate:.1f} % [{p.interval.lo:.1f}, {p.interval.hi:.1f}] at "
                   f"load {load:g}")  # fmt: skip
        reached |= p.interval.lo <= ML_REGIME_MAX
    if not got:
        return None, ""
    text = (f"MPTCP completes {'; '.join(got)} of its short flows within 50 ms; the claim is "
            f"about a network where it completes ~45 % (reached when ≤ {ML_REGIME_MAX:g} % is "
            "possible at some load)")  # fmt: skip
    if not reached:
        text += (". The study cannot be resized into it: with 10 hosts on 4 uplinks per edge "
                 "switch its edge uplinks saturate near load 0.4 (the full form's highest), "
                 "beyond which the run is overloaded — queues grow for as long as it lasts — "
                 "rather than congested; the paper does not state the link rates and buffers "
                 "that made MPTCP miss 50 ms for half its short flows (docs/experiments.md, "
                 "MPTCP-L)")  # fmt: skip
    return reached, text


#: ML-1's regime: MPTCP's share of short flows within 50 ms at most this (percent).
ML_REGIME_MAX = 65.0


TOL = "±10 points"

CLAIMS: list[Claim] = [
    Claim("RF-1", "RepFlow abstract, §V-C (Figs. 8–9)",
          "RepFlow: 50–70 % lower mean (0,100KB] FCT than TCP at all loads",
          ("repflow", "tcp"), NS3,
          f"mean short-flow FCT reduction vs TCP in 50–70 % {TOL} at every load",
          reduction_claim("repflow", "tcp", "short_mean", 50, 70)),
    Claim("RF-2", "RepFlow abstract, §V-C (Figs. 8–9)",
          "RepFlow: 50–70 % lower 99th-percentile (0,100KB] FCT than TCP at all loads",
          ("repflow", "tcp"), NS3,
          f"p99 short-flow FCT reduction vs TCP in 50–70 % {TOL} at every load",
          reduction_claim("repflow", "tcp", "short_p99", 50, 70)),
    Claim("RF-3", "RepFlow §V-C (Fig. 8a)",
          "Web search: mean short-flow FCT −40–45 % vs TCP at loads 0.4–0.8",
          ("repflow", "tcp"), NS3, f"web search, loads 0.4–0.8: mean reduction in 40–45 % {TOL}",
          reduction_claim("repflow", "tcp", "short_mean", 40, 45, workload="websearch",
                          load_min=0.4, load_max=0.8)),
    Claim("RF-4", "RepFlow §V-C (Fig. 8b)",
          "Web search: 99th-pct short-flow FCT up to ~10× lower than TCP below load 0.4",
          ("repflow", "tcp"), NS3,
          "web search below load 0.4: the best p99 reduction ≥ 80 % (TCP ≥ 5× RepFlow)",
          best_claim("repflow", "tcp", "short_p99", 80.0, "websearch", 0.4)),
    Claim("RF-5", "RepFlow §V-C (Fig. 8b)",
          "Web search: 99th-pct short-flow FCT > 60 % lower than TCP at loads ≥ 0.4",
          ("repflow", "tcp"), NS3, f"web search, loads ≥ 0.4: p99 reduction ≥ 60 % ({TOL})",
          reduction_claim("repflow", "tcp", "short_p99", 60, 100, workload="websearch",
                          load_min=0.4)),
    Claim("RF-6", "RepFlow §V-C (Figs. 8c, 9c)",
          "Large flows (>100KB) barely affected by replication",
          ("repflow", "tcp"), NS3, "mean (100KB,∞) FCT reduction vs TCP within ±10 % at every load",
          unaffected_claim("repflow", "tcp", "large_mean", 10.0)),
    Claim("RF-7", "RepFlow §V-E (Table III)",
          "Replication overhead 1–3.5 % of bytes (web search ~2.8–3.5 %, data mining ~1.1–2.1 %)",
          ("repflow",), NS3, "extra bytes of the copies within 1–3.5 % ± 0.5 points at every load",
          overhead_claim("repflow", 1.0, 3.5, 0.5)),
    Claim("RF-8", "RepFlow §V-D (Fig. 12)",
          "Mean FCT of all flows: RepFlow ~30–50 % below TCP in most cases",
          ("repflow", "tcp"), NS3,
          f"mean FCT (all flows) reduction vs TCP in 30–50 % {TOL} at every load",
          reduction_claim("repflow", "tcp", "all_mean", 30, 50)),
    Claim("RF-9", "RepFlow §V-D (Fig. 10)",
          "RepFlow-DCTCP: −40 % mean short-flow FCT vs DCTCP",
          ("repflow-dctcp", "dctcp"), NS3,
          f"mean short-flow reduction vs DCTCP in 40 % {TOL} at every load",
          reduction_claim("repflow-dctcp", "dctcp", "short_mean", 40, 40)),
    Claim("RF-10", "RepFlow §V-D (Fig. 10b)",
          "RepFlow-DCTCP ~30 % slower than pFabric (mean short-flow FCT, data mining)",
          ("repflow-dctcp", "pfabric"), NS3,
          "data mining: reduction vs pFabric between −45 % and −15 % (15–45 % slower) at "
          "every load",
          slower_claim("repflow-dctcp", "pfabric", "short_mean", 15, 45, "datamining")),
    Claim("RF-11", "RepFlow §V-D (Fig. 11)",
          "RepFlow-DCTCP: 99th-pct short-flow FCT ~35 % below DCTCP",
          ("repflow-dctcp", "dctcp"), NS3,
          f"p99 short-flow reduction vs DCTCP in 35 % {TOL} at every load",
          reduction_claim("repflow-dctcp", "dctcp", "short_p99", 35, 35)),
    Claim("RF-T1", "RepFlow §II (Table I, Mininet toy)",
          "Short-flow mean FCT 0.0135 s alone, 0.175 s beside a large flow, 0.105 s replicated",
          ("tcp-alone", "tcp", "repflow"), "repflow-toy",
          "mean FCT: alone ≥ 66.7 % below beside (beside ≥ 3× alone) and replicated ≥ 20 % below "
          "beside (the published ratios 13× and 40 %, not the absolute times)",
          toy_claim("short_mean")),
    Claim("RF-T2", "RepFlow §II (Table I, Mininet toy)",
          "Short-flow 99th-pct FCT 0.0145 s alone, 0.490 s beside a large flow, 0.212 s replicated",
          ("tcp-alone", "tcp", "repflow"), "repflow-toy",
          "p99 FCT: alone ≥ 66.7 % below beside (beside ≥ 3× alone) and replicated ≥ 20 % below "
          "beside (the published ratios 34× and 57 %, not the absolute times)",
          toy_claim("short_p99")),
    Claim("SR-1", "SmartRep §V (Figs. 4–5)",
          "SmartRep: 25–50 % below RepFlow (mean short-flow FCT)",
          ("smartrep", "repflow"), SR,
          f"mean short-flow reduction vs RepFlow in 25–50 % {TOL} at every load",
          reduction_claim("smartrep", "repflow", "short_mean", 25, 50)),
    Claim("SR-1b", "SmartRep §V (Figs. 4–5)",
          "SmartRep: 25–50 % below RepFlow (99th-pct short-flow FCT)",
          ("smartrep", "repflow"), SR,
          f"p99 short-flow reduction vs RepFlow in 25–50 % {TOL} at every load",
          reduction_claim("smartrep", "repflow", "short_p99", 25, 50)),
    Claim("SR-2", "SmartRep §V (Figs. 4–5)", "HCA alone ~15 % below RepFlow (mean short-flow FCT)",
          ("repflow-hca", "repflow"), SR,
          f"mean short-flow reduction vs RepFlow in 15 % {TOL} at every load",
          reduction_claim("repflow-hca", "repflow", "short_mean", 15, 15)),
    Claim("SR-3", "SmartRep §II", "≥ 25 % of RepFlow copies collide with the original (CRC16)",
          ("repflow",), SR, "≥ 20 % of replicated flows have copies sharing a switch-to-switch "
          "link, at every load (Wilson interval of the pooled counts)",
          collision_claim("repflow", 20.0)),
    Claim("ML-1", "MPTCP-L §IV-A (Fig. 3)",
          "MPTCP-L vs MPTCP, short flows (< 1 MB): mean FCT −23.5 %, 99th −29.8 %; 83 % vs 45 % "
          "of them complete within 50 ms",
          ("mptcp-l", "mptcp"), "mptcp-l",
          f"mean and p99 reductions vs MPTCP each within {TOL} of 23.5 % and 29.8 %, and the "
          "shares within 50 ms within 10 points of 83 % and 45 %, at every load",
          all_of(("mean", reduction_claim("mptcp-l", "mptcp", "short_mean", 23.5, 23.5)),
                 ("99th", reduction_claim("mptcp-l", "mptcp", "short_p99", 29.8, 29.8)),
                 ("within 50 ms", share_claim("mptcp-l", "mptcp", "short_within_deadline",
                                              83.0, 45.0, 10.0))),
          regime=mptcp_regime),
    Claim("ML-2", "MPTCP-L §IV-A (Fig. 4)",
          "MPTCP-L retransmits 3 % of packets (2.61 % fast detection, 0.27 % aggressive timer, "
          "0.02 % RTO) vs 8 % for MPTCP (2.5 % fast retransmit, 5.4 % RTO)",
          ("mptcp-l", "mptcp"), "mptcp-l",
          "retransmissions per data segment within 2 points of 3 % (MPTCP-L) and 8 % (MPTCP) at "
          "every load",
          retransmission_claim("mptcp-l", "mptcp", 3.0, 8.0, 2.0)),
    Claim("L2-1", "L²DCT slides",
          "L²DCT: mean FCT −50 % vs DCTCP, −95 % vs TCP; 99th −37 % vs DCTCP",
          ("l2dct", "dctcp", "tcp"), "l2dct",
          f"query (0,100KB] FCT reductions 50 % (mean vs DCTCP), 95 % (mean vs TCP), 37 % (p99 vs "
          f"DCTCP), each {TOL}, at every load",
          all_of(("mean vs DCTCP", reduction_claim("l2dct", "dctcp", "short_mean", 50, 50)),
                 ("mean vs TCP", reduction_claim("l2dct", "tcp", "short_mean", 95, 95)),
                 ("99th vs DCTCP", reduction_claim("l2dct", "dctcp", "short_p99", 37, 37)))),
    Claim("FA-1", "FA-DCTCP §IV",
          "FA-DCTCP: mean −25.5 %, 99th −32.5 % vs DCTCP; long-flow throughput −0.04 %",
          tuple(f"{s}-{z}" for z in ("250KB", "500KB", "1MB") for s in ("fa-dctcp", "dctcp")),
          "fa-dctcp",
          f"short-flow reductions vs DCTCP 25.5 % (mean) and 32.5 % (p99) {TOL} for 250 KB, 500 KB "
          "and 1 MB flows; long flows' mean FCT within ±2 % of DCTCP's",
          all_of(*_fa_sizes("short_mean", 25.5), *_fa_sizes("short_p99", 32.5),
                 *[(f"long flows {z}", unaffected_claim(f"fa-dctcp-{z}", f"dctcp-{z}",
                                                         "large_mean", 2.0))
                   for z in ("250KB", "500KB", "1MB")])),
]  # fmt: skip




def evaluate_claims(
    data: Evidence | pd.DataFrame, scenarios: list[str], unavailable: dict[str, str] | None = None
) -> list[ClaimResult]:
    """Every claim of :data:`CLAIMS` against a sweep's evidence (or its aggregated table)."""
    ev = Evidence.of(data)
    present = ev.series()
    out = []
    for c in CLAIMS:
        missing = [s for s in c.schemes if s not in present]
        if c.scenario not in scenarios:
            why = f"needs the '{c.scenario}' scenario"
            if missing:
                why += f" and scheme(s) {', '.join(missing)}"
            out.append(ClaimResult(c, why, NOT_MEASURED))
            continue
        if missing:
            notes = []
            for s in missing:
                if unavailable and s in unavailable:
                    notes.append(f"{s} (not in this build)")
                else:
                    notes.append(f"{s} (not in this sweep)")
            out.append(ClaimResult(c, "scheme missing: " + ", ".join(notes), NOT_MEASURED))
            continue
        if c.evaluate is None:
            out.append(ClaimResult(c, c.criterion, NOT_MEASURED))
            continue
        o = c.evaluate(ev)
        verdict, reason = o.verdict, o.reason
        if c.regime is not None and o.verdict != NOT_MEASURED:
            reached, text = c.regime(ev)
            if reached is False:
                verdict, reason = REGIME, text
        out.append(ClaimResult(c, o.measured, verdict, reason, o.points, o.notes))
    return out


#: Columns of ``claim_points.csv`` (docs/metrics.md).
POINT_COLUMNS = ("claim", "profile", "workload", "load", "metric", "published_lo",
                 "published_hi", "measured", "ci_lo", "ci_hi", "fw_lo", "fw_hi", "fw_level",
                 "flows_a", "flows_b", "seeds", "replicates", "verdict", "timeout_share_a",
                 "timeout_share_b", "timeout_flows_a", "timeout_flows_b", "effect_without_timeouts",
                 "plateau", "plateau_share", "plateau_share_lo", "plateau_share_hi")  # fmt: skip


def point_rows(result: ClaimResult, profile: str) -> list[dict[str, Any]]:
    """``claim_points.csv`` rows of one claim under one profile."""
    rows = []
    m = len(result.points)
    for p in result.points:
        iv = p.interval
        fw = p.fw or iv
        metric = f"{p.part}: {p.metric}" if p.part else p.metric
        mn = p.mean_note
        ta = mn.parts[0][1] if mn is not None else None
        tb = mn.parts[1][1] if mn is not None else None
        pl = p.plateau
        rows.append({
            "claim": result.claim.id, "profile": profile, "workload": p.workload,
            "load": p.load, "metric": metric, "published_lo": p.published_lo,
            "published_hi": p.published_hi, "measured": iv.estimate, "ci_lo": iv.lo,
            "ci_hi": iv.hi, "fw_lo": fw.lo, "fw_hi": fw.hi,
            "fw_level": vd.family_confidence(m),
            "flows_a": iv.flows[0] if iv.flows else "",
            "flows_b": iv.flows[1] if len(iv.flows) > 1 else "", "seeds": iv.seeds,
            "replicates": p.replicates, "verdict": p.verdict,
            "timeout_share_a": 100 * ta.share if ta else "",
            "timeout_share_b": 100 * tb.share if tb else "",
            "timeout_flows_a": ta.with_timeout if ta else "",
            "timeout_flows_b": tb.with_timeout if tb else "",
            "effect_without_timeouts": mn.effect_without if mn else "",
            "plateau": f"{pl.series} ≥ {pl.threshold:.3g} s" if pl else "",
            "plateau_share": pl.share if pl else "", "plateau_share_lo": pl.share_lo if pl else "",
            "plateau_share_hi": pl.share_hi if pl else "",
        })  # fmt: skip
    return rows
