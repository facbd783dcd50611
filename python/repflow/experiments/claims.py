"""The seed papers' quantitative claims (each with its paper and section), checked against a sweep.

Each claim names the scheme labels and the scenario it needs. A claim is evaluated on the means
across seeds and gets one verdict:

* **holds** — every measured value lies in the claimed range widened by the stated tolerance;
* **direction only** — the effect has the claimed sign everywhere but not the claimed size;
* **does not hold** — the effect has the wrong sign (or, for "unaffected" claims, is too big);
* **not measured** — a scheme or the scenario the claim needs is not in this sweep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

HOLDS = "holds"
DIRECTION = "direction only"
FAILS = "does not hold"
NOT_MEASURED = "not measured"

#: Scenario tag of the RepFlow paper's NS-3 study (fat-tree, web search / data mining, loads).
NS3 = "repflow-ns3"
#: Scenario tag of SmartRep's NS-2 study (10-pod fat-tree, 10 Gb/s, CRC16 ECMP).
SR = "smartrep-ns2"


@dataclass
class Outcome:
    """The measured value of a claim and its verdict."""

    measured: str
    verdict: str


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
    #: How the verdict is decided (shown in the report).
    criterion: str
    evaluate: Callable[[pd.DataFrame], Outcome] | None = None


@dataclass
class ClaimResult:
    """A claim with its outcome."""

    claim: Claim
    measured: str
    verdict: str


_WL = {"websearch": "web search", "datamining": "data mining"}


def _pairs(agg: pd.DataFrame, a: str, b: str, metric: str, workload: str | None = None):
    """(workload, load, value of a, value of b) for loads where both schemes were measured."""
    out: list[tuple[str, float, float, float]] = []
    if metric not in agg.columns:
        return out
    for w in sorted(agg["workload"].unique()):
        if workload and w != workload:
            continue
        sa = agg[(agg["workload"] == w) & (agg["series"] == a)].set_index("load")[metric]
        sb = agg[(agg["workload"] == w) & (agg["series"] == b)].set_index("load")[metric]
        for load in sorted(set(sa.index) & set(sb.index)):
            if np.isfinite(sa[load]) and np.isfinite(sb[load]) and sb[load] > 0:
                out.append((w, float(load), float(sa[load]), float(sb[load])))
    return out


def _describe(values: dict[str, list[tuple[float, float]]], fmt: Callable[[float], str]) -> str:
    parts = []
    for w, vals in values.items():
        if not vals:
            continue
        loads = [x for x, _ in vals]
        v = [y for _, y in vals]
        lo, hi = min(v), max(v)
        rng = fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)} … {fmt(hi)}"
        where = (
            f"load {loads[0]:g}"
            if min(loads) == max(loads)
            else f"loads {min(loads):g}–{max(loads):g}"
        )
        parts.append(f"{_WL.get(w, w)}: {rng} ({where})")
    return "; ".join(parts)


def _no_minus_zero(text: str) -> str:
    """``-0 %`` / ``+0 %`` / ``-0.00 %`` (a value that rounds to zero) lose their sign."""
    num, sep, rest = text.partition(" ")
    if float(num) == 0:
        num = num.lstrip("+-")
    return num + sep + rest


def _pct(x: float) -> str:
    return _no_minus_zero(f"{x:.0f} %")


def _pct2(x: float) -> str:
    return _no_minus_zero(f"{x:.2f} %")


def _signed_pct(x: float) -> str:
    return _no_minus_zero(f"{x:+.0f} %")


def reduction_claim(
    a: str, b: str, metric: str, lo: float, hi: float, tol: float = 10.0,
    workload: str | None = None, load_min: float = 0.0, load_max: float = 1.0,
) -> Callable[[pd.DataFrame], Outcome]:  # fmt: skip
    """Claim "a's metric is lo–hi % lower than b's" at every selected load."""

    def run(agg: pd.DataFrame) -> Outcome:
        got: dict[str, list[tuple[float, float]]] = {}
        for w, load, va, vb in _pairs(agg, a, b, metric, workload):
            if load_min <= load <= load_max:
                got.setdefault(w, []).append((load, 100.0 * (1.0 - va / vb)))
        vals = [r for v in got.values() for _, r in v]
        if not vals:
            return Outcome("no load in range measured", NOT_MEASURED)
        measured = _describe(got, _pct)
        if all(lo - tol <= r <= hi + tol for r in vals):
            return Outcome(measured, HOLDS)
        if all(r > 0 for r in vals):
            return Outcome(measured, DIRECTION)
        return Outcome(measured, FAILS)

    return run


def ratio_claim(
    a: str, b: str, metric: str, at_least: float, workload: str | None, load_max: float
) -> Callable[[pd.DataFrame], Outcome]:
    """Claim "b's metric is up to ~N× a's" below a load: the best ratio must reach at_least."""

    def run(agg: pd.DataFrame) -> Outcome:
        got: dict[str, list[tuple[float, float]]] = {}
        for w, load, va, vb in _pairs(agg, a, b, metric, workload):
            if load < load_max and va > 0:
                got.setdefault(w, []).append((load, vb / va))
        vals = [r for v in got.values() for _, r in v]
        if not vals:
            return Outcome(f"no load below {load_max:g} measured", NOT_MEASURED)
        measured = _describe(got, lambda x: f"{x:.1f}×")
        if max(vals) >= at_least:
            return Outcome(measured, HOLDS)
        if all(r > 1 for r in vals):
            return Outcome(measured, DIRECTION)
        return Outcome(measured, FAILS)

    return run


def unaffected_claim(a: str, b: str, metric: str, within: float) -> Callable[..., Outcome]:
    """Claim "a's metric is barely different from b's": |change| ≤ within % at every load."""

    def run(agg: pd.DataFrame) -> Outcome:
        got: dict[str, list[tuple[float, float]]] = {}
        for w, load, va, vb in _pairs(agg, a, b, metric):
            got.setdefault(w, []).append((load, 100.0 * (va / vb - 1.0)))
        vals = [r for v in got.values() for _, r in v]
        if not vals:
            return Outcome("no load measured", NOT_MEASURED)
        measured = _describe(got, _signed_pct)
        return Outcome(measured, HOLDS if all(abs(r) <= within for r in vals) else FAILS)

    return run


def overhead_claim(a: str, lo: float, hi: float, tol: float) -> Callable[..., Outcome]:
    """Claim "replication overhead is lo–hi % of bytes"."""

    def run(agg: pd.DataFrame) -> Outcome:
        sub = agg[agg["series"] == a]
        got: dict[str, list[tuple[float, float]]] = {}
        for _, r in sub.iterrows():
            if np.isfinite(r["overhead"]):
                got.setdefault(r["workload"], []).append((float(r["load"]), 100 * r["overhead"]))
        vals = [v for x in got.values() for _, v in x]
        if not vals:
            return Outcome("overhead not recorded", NOT_MEASURED)
        measured = _describe(got, _pct2)
        if "short_bytes_frac" in sub.columns:
            share: dict[str, list[tuple[float, float]]] = {}
            for _, r in sub.iterrows():
                share.setdefault(r["workload"], []).append(
                    (float(r["load"]), 100 * r["short_bytes_frac"])
                )
            measured += "; bytes in short flows: " + _describe(share, _pct2)
        ok = all(lo - tol <= v <= hi + tol for v in vals)
        return Outcome(measured, HOLDS if ok else FAILS)

    return run


def collision_claim(a: str, at_least: float) -> Callable[..., Outcome]:
    """Claim "at least N % of a's replicated flows collide" (copies sharing a link)."""

    def run(agg: pd.DataFrame) -> Outcome:
        if "collision_frac" not in agg.columns:
            return Outcome("collisions not recorded", NOT_MEASURED)
        sub = agg[agg["series"] == a]
        got: dict[str, list[tuple[float, float]]] = {}
        for _, r in sub.iterrows():
            if np.isfinite(r["collision_frac"]):
                got.setdefault(r["workload"], []).append(
                    (float(r["load"]), 100 * r["collision_frac"])
                )
        vals = [v for x in got.values() for _, v in x]
        if not vals:
            return Outcome("collisions not recorded", NOT_MEASURED)
        measured = _describe(got, _pct)
        return Outcome(measured, HOLDS if min(vals) >= at_least else FAILS)

    return run


def toy_claim(metric: str) -> Callable[..., Outcome]:
    """Table I: short flows alone, beside a large flow, and replicated beside it."""

    def run(agg: pd.DataFrame) -> Outcome:
        vals = {}
        for s in ("tcp-alone", "tcp", "repflow"):
            v = agg[agg["series"] == s][metric]
            if v.empty or not np.isfinite(v.iloc[0]):
                return Outcome(f"{s} not measured", NOT_MEASURED)
            vals[s] = float(v.iloc[0])
        alone, beside, rep = vals["tcp-alone"], vals["tcp"], vals["repflow"]
        measured = f"alone {alone:.4f} s, beside {beside:.4f} s, replicated {rep:.4f} s"
        if beside >= 3 * alone and rep <= 0.8 * beside:
            return Outcome(measured, HOLDS)
        if beside > alone and rep < beside:
            return Outcome(measured, DIRECTION)
        return Outcome(measured, FAILS)

    return run


def slower_claim(
    a: str, b: str, metric: str, lo: float, hi: float, workload: str
) -> Callable[..., Outcome]:
    """Claim "a is lo–hi % slower than b" (on one workload)."""

    def run(agg: pd.DataFrame) -> Outcome:
        got: dict[str, list[tuple[float, float]]] = {}
        for w, load, va, vb in _pairs(agg, a, b, metric, workload):
            got.setdefault(w, []).append((load, 100.0 * (va / vb - 1.0)))
        vals = [r for v in got.values() for _, r in v]
        if not vals:
            return Outcome("not measured on this workload", NOT_MEASURED)
        measured = _describe(got, _signed_pct)
        if all(lo <= v <= hi for v in vals):
            return Outcome(measured, HOLDS)
        return Outcome(measured, DIRECTION if all(v > 0 for v in vals) else FAILS)

    return run


def all_of(*parts: tuple[str, Callable[[pd.DataFrame], Outcome]]) -> Callable[..., Outcome]:
    """A claim made of several labelled parts: the weakest part's verdict (does not hold <
    not measured < direction only < holds), every part's measurement."""
    rank = {FAILS: 0, NOT_MEASURED: 1, DIRECTION: 2, HOLDS: 3}

    def run(agg: pd.DataFrame) -> Outcome:
        outs = [(label, f(agg)) for label, f in parts]
        measured = " | ".join(f"{label}: {o.measured}" for label, o in outs)
        return Outcome(measured, min((o.verdict for _, o in outs), key=rank.__getitem__))

    return run


def share_claim(
    a: str, b: str, metric: str, want_a: float, want_b: float, tol: float, scale: float = 100.0
) -> Callable[[pd.DataFrame], Outcome]:
    """Claim "a's metric is about want_a where b's is about want_b" (percentages, ``scale``
    turning the metric into one): holds when both lie within ``tol`` points of the published
    values at every load; direction only when a's value is on the published side of b's
    everywhere (above it when want_a > want_b, below otherwise)."""

    def run(agg: pd.DataFrame) -> Outcome:
        got: dict[str, list[tuple[float, tuple[float, float]]]] = {}
        for w, load, va, vb in _pairs(agg, a, b, metric):
            got.setdefault(w, []).append((load, (scale * va, scale * vb)))
        vals = [v for x in got.values() for _, v in x]
        if not vals:
            return Outcome("no load measured", NOT_MEASURED)
        measured = "; ".join(
            f"{_WL.get(w, w)}: " + ", ".join(
                f"{x:.1f} % vs {y:.1f} % (load {ld:g})" for ld, (x, y) in v
            ) for w, v in got.items()
        )  # fmt: skip
        if all(abs(x - want_a) <= tol and abs(y - want_b) <= tol for x, y in vals):
            return Outcome(measured, HOLDS)
        if all((x > y) == (want_a > want_b) and x != y for x, y in vals):
            return Outcome(measured, DIRECTION)
        return Outcome(measured, FAILS)

    return run


def retransmission_claim(a: str, b: str, want_a: float, want_b: float, tol: float):
    """MPTCP-L's Fig. 4: the share of packets retransmitted (``retx_pct``), with each scheme's
    breakdown by cause shown beside the verdict of :func:`share_claim`."""
    base = share_claim(a, b, "retx_pct", want_a, want_b, tol, scale=1.0)
    causes = (("retx_detect_pct", "fast detection"), ("retx_atimer_pct", "aggressive timer"),
              ("retx_fast_pct", "fast retransmit"), ("retx_timeout_pct", "RTO"))  # fmt: skip

    def run(agg: pd.DataFrame) -> Outcome:
        out = base(agg)
        if out.verdict == NOT_MEASURED:
            return out
        parts = []
        for s in (a, b):
            rows = agg[agg["series"] == s].sort_values("load")
            for _, r in rows.iterrows():
                split = ", ".join(
                    f"{label} {r[c]:.2f}" for c, label in causes
                    if c in r and np.isfinite(r[c]) and r[c] > 0
                )  # fmt: skip
                parts.append(f"{s} at load {r['load']:g}: {split or 'none'}")
        return Outcome(out.measured + " | by cause (% of packets): " + "; ".join(parts),
                       out.verdict)

    return run


def _fa_sizes(metric: str, lo: float) -> list[tuple[str, Callable[[pd.DataFrame], Outcome]]]:
    """FA-DCTCP vs DCTCP for each short-flow size series of experiments/fa-dctcp.toml."""
    return [
        (f"{metric} {size}", reduction_claim(f"fa-dctcp-{size}", f"dctcp-{size}", metric, lo, lo))
        for size in ("250KB", "500KB", "1MB")
    ]


TOL = "±10 percentage points"

CLAIMS: list[Claim] = [
    Claim("RF-1", "RepFlow abstract, §V-C (Figs. 8–9)",
          "RepFlow: 50–70 % lower mean (0,100KB] FCT than TCP at all loads",
          ("repflow", "tcp"), NS3, f"reduction in 50–70 % {TOL} at every load",
          reduction_claim("repflow", "tcp", "short_mean", 50, 70)),
    Claim("RF-2", "RepFlow abstract, §V-C (Figs. 8–9)",
          "RepFlow: 50–70 % lower 99th-percentile (0,100KB] FCT than TCP at all loads",
          ("repflow", "tcp"), NS3, f"reduction in 50–70 % {TOL} at every load",
          reduction_claim("repflow", "tcp", "short_p99", 50, 70)),
    Claim("RF-3", "RepFlow §V-C (Fig. 8a)",
          "Web search: mean short-flow FCT −40–45 % vs TCP at loads 0.4–0.8",
          ("repflow", "tcp"), NS3, f"reduction in 40–45 % {TOL} at loads 0.4–0.8",
          reduction_claim("repflow", "tcp", "short_mean", 40, 45, workload="websearch",
                          load_min=0.4, load_max=0.8)),
    Claim("RF-4", "RepFlow §V-C (Fig. 8b)",
          "Web search: 99th-pct short-flow FCT up to ~10× lower than TCP below load 0.4",
          ("repflow", "tcp"), NS3, "best TCP/RepFlow ratio below load 0.4 ≥ 5×",
          ratio_claim("repflow", "tcp", "short_p99", 5.0, "websearch", 0.4)),
    Claim("RF-5", "RepFlow §V-C (Fig. 8b)",
          "Web search: 99th-pct short-flow FCT > 60 % lower than TCP at loads ≥ 0.4",
          ("repflow", "tcp"), NS3, f"reduction ≥ 60 % ({TOL}) at loads ≥ 0.4",
          reduction_claim("repflow", "tcp", "short_p99", 60, 100, workload="websearch",
                          load_min=0.4)),
    Claim("RF-6", "RepFlow §V-C (Figs. 8c, 9c)",
          "Large flows (>100KB) barely affected by replication",
          ("repflow", "tcp"), NS3, "mean (100KB,∞) FCT within ±10 % of TCP at every load",
          unaffected_claim("repflow", "tcp", "large_mean", 10.0)),
    Claim("RF-7", "RepFlow §V-E (Table III)",
          "Replication overhead 1–3.5 % of bytes (web search ~2.8–3.5 %, data mining ~1.1–2.1 %)",
          ("repflow",), NS3, "every load within 1–3.5 % ± 0.5 points",
          overhead_claim("repflow", 1.0, 3.5, 0.5)),
    Claim("RF-8", "RepFlow §V-D (Fig. 12)",
          "Mean FCT of all flows: RepFlow ~30–50 % below TCP in most cases",
          ("repflow", "tcp"), NS3, f"reduction in 30–50 % {TOL} at every load",
          reduction_claim("repflow", "tcp", "all_mean", 30, 50)),
    Claim("RF-9", "RepFlow §V-D (Fig. 10)",
          "RepFlow-DCTCP: −40 % mean short-flow FCT vs DCTCP",
          ("repflow-dctcp", "dctcp"), NS3, f"reduction in 40 % {TOL} at every load",
          reduction_claim("repflow-dctcp", "dctcp", "short_mean", 40, 40)),
    Claim("RF-10", "RepFlow §V-D (Fig. 10b)",
          "RepFlow-DCTCP ~30 % slower than pFabric (mean short-flow FCT, data mining)",
          ("repflow-dctcp", "pfabric"), NS3, "slower by 15–45 % at every load",
          slower_claim("repflow-dctcp", "pfabric", "short_mean", 15, 45, "datamining")),
    Claim("RF-11", "RepFlow §V-D (Fig. 11)",
          "RepFlow-DCTCP: 99th-pct short-flow FCT ~35 % below DCTCP",
          ("repflow-dctcp", "dctcp"), NS3, f"reduction in 35 % {TOL} at every load",
          reduction_claim("repflow-dctcp", "dctcp", "short_p99", 35, 35)),
    Claim("RF-T1", "RepFlow §II (Table I, Mininet toy)",
          "Short-flow mean FCT 0.0135 s alone, 0.175 s beside a large flow, 0.105 s replicated",
          ("tcp-alone", "tcp", "repflow"), "repflow-toy",
          "beside ≥ 3× alone, and replicated ≥ 20 % below beside (mean FCT)",
          toy_claim("short_mean")),
    Claim("RF-T2", "RepFlow §II (Table I, Mininet toy)",
          "Short-flow 99th-pct FCT 0.0145 s alone, 0.490 s beside a large flow, 0.212 s replicated",
          ("tcp-alone", "tcp", "repflow"), "repflow-toy",
          "beside ≥ 3× alone, and replicated ≥ 20 % below beside (99th percentile)",
          toy_claim("short_p99")),
    Claim("SR-1", "SmartRep §V (Figs. 4–5)",
          "SmartRep: 25–50 % below RepFlow (mean short-flow FCT)",
          ("smartrep", "repflow"), SR, f"reduction in 25–50 % {TOL} at every load",
          reduction_claim("smartrep", "repflow", "short_mean", 25, 50)),
    Claim("SR-1b", "SmartRep §V (Figs. 4–5)",
          "SmartRep: 25–50 % below RepFlow (99th-pct short-flow FCT)",
          ("smartrep", "repflow"), SR, f"reduction in 25–50 % {TOL} at every load",
          reduction_claim("smartrep", "repflow", "short_p99", 25, 50)),
    Claim("SR-2", "SmartRep §V (Figs. 4–5)", "HCA alone ~15 % below RepFlow (mean short-flow FCT)",
          ("repflow-hca", "repflow"), SR, f"reduction in 15 % {TOL} at every load",
          reduction_claim("repflow-hca", "repflow", "short_mean", 15, 15)),
    Claim("SR-3", "SmartRep §II", "≥ 25 % of RepFlow copies collide with the original (CRC16)",
          ("repflow",), SR, "≥ 20 % of replicated flows have copies sharing a switch-to-switch "
          "link, at every load", collision_claim("repflow", 20.0)),
    Claim("ML-1", "MPTCP-L §IV-A (Fig. 3)",
          "MPTCP-L vs MPTCP, short flows (< 1 MB): mean FCT −23.5 %, 99th −29.8 %; 83 % vs 45 % "
          "of them complete within 50 ms",
          ("mptcp-l", "mptcp"), "mptcp-l",
          f"mean and 99th-pct reductions each within {TOL} of the paper's, and the shares "
          "within 50 ms each within 10 points of 83 % and 45 %, at every load",
          all_of(("mean", reduction_claim("mptcp-l", "mptcp", "short_mean", 23.5, 23.5)),
                 ("99th", reduction_claim("mptcp-l", "mptcp", "short_p99", 29.8, 29.8)),
                 ("within 50 ms", share_claim("mptcp-l", "mptcp", "short_within_deadline",
                                              83.0, 45.0, 10.0)))),
    Claim("ML-2", "MPTCP-L §IV-A (Fig. 4)",
          "MPTCP-L retransmits 3 % of packets (2.61 % fast detection, 0.27 % aggressive timer, "
          "0.02 % RTO) vs 8 % for MPTCP (2.5 % fast retransmit, 5.4 % RTO)",
          ("mptcp-l", "mptcp"), "mptcp-l",
          "retransmissions per data segment of the workload within 2 points of 3 % (MPTCP-L) "
          "and 8 % (MPTCP) at every load",
          retransmission_claim("mptcp-l", "mptcp", 3.0, 8.0, 2.0)),
    Claim("L2-1", "L²DCT slides",
          "L²DCT: mean FCT −50 % vs DCTCP, −95 % vs TCP; 99th −37 % vs DCTCP",
          ("l2dct", "dctcp", "tcp"), "l2dct",
          f"query (0,100KB] FCT reductions, each within {TOL}, at every load",
          all_of(("mean vs DCTCP", reduction_claim("l2dct", "dctcp", "short_mean", 50, 50)),
                 ("mean vs TCP", reduction_claim("l2dct", "tcp", "short_mean", 95, 95)),
                 ("99th vs DCTCP", reduction_claim("l2dct", "dctcp", "short_p99", 37, 37)))),
    Claim("FA-1", "FA-DCTCP §IV",
          "FA-DCTCP: mean −25.5 %, 99th −32.5 % vs DCTCP; long-flow throughput −0.04 %",
          tuple(f"{s}-{z}" for z in ("250KB", "500KB", "1MB") for s in ("fa-dctcp", "dctcp")),
          "fa-dctcp",
          f"short-flow FCT reductions for 250 KB, 500 KB and 1 MB flows, each within {TOL}; "
          "long flows' mean FCT within 2 % of DCTCP's",
          all_of(*_fa_sizes("short_mean", 25.5), *_fa_sizes("short_p99", 32.5),
                 *[(f"long flows {z}", unaffected_claim(f"fa-dctcp-{z}", f"dctcp-{z}",
                                                         "large_mean", 2.0))
                   for z in ("250KB", "500KB", "1MB")])),
]  # fmt: skip


def evaluate_claims(
    agg: pd.DataFrame, scenarios: list[str], unavailable: dict[str, str] | None = None
) -> list[ClaimResult]:
    """Every claim of :data:`CLAIMS` against the aggregated table of a sweep."""
    present = set(agg["series"].unique()) if not agg.empty else set()
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
        o = c.evaluate(agg)
        out.append(ClaimResult(c, o.measured, o.verdict))
    return out
