"""The seed papers' quantitative claims (each with its paper and section), decided with
confidence intervals against a sweep.

Every claim is decided on *effects* measured per (workload, load) — one scheme's metric
against another's, or one scheme's level — each with a 95 % bootstrap interval over seeds and
flows (:mod:`repflow.experiments.stats`). One sign convention holds everywhere: an effect of
``a`` against ``b`` is the **reduction** of a's metric relative to b's, in percent of b's
(positive: a lower, i.e. faster; "a is 10× lower" is a 90 % reduction, "a is 30 % slower" a
−30 % reduction); a level (overhead, a share, collisions, retransmissions) is a percentage of
what it names.

Each point's interval says which point verdicts it admits:

* **holds** — the effect lies in the claimed range (widened by the stated tolerance);
* **direction only** — on the claimed side of zero, outside the claimed range;
* **does not hold** — on the wrong side of zero (or, for "barely changes" and level claims,
  outside the range).

A claim covering several points takes a verdict only when every combination of its points'
admitted verdicts gives the same one (holds: all points hold; direction only: all hold or
direction, one at least direction; does not hold: one point at least does not hold);
otherwise it is **inconclusive**, with the points that keep it open and about how many more
flows would settle them. **not measured**: a scheme or the scenario is not in the sweep.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from repflow.experiments import stats
from repflow.experiments.stats import Interval, Sample

HOLDS = "holds"
DIRECTION = "direction only"
FAILS = "does not hold"
INCONCLUSIVE = "inconclusive"
NOT_MEASURED = "not measured"
#: Verdicts that are conclusive statements about the claim.
CONCLUSIVE = (HOLDS, DIRECTION, FAILS)

#: Scenario tag of the RepFlow paper's NS-3 study (fat-tree, web search / data mining, loads).
NS3 = "repflow-ns3"
#: Scenario tag of SmartRep's NS-2 study (10-pod fat-tree, 10 Gb/s, CRC16 ECMP).
SR = "smartrep-ns2"

_WL = {"websearch": "web search", "datamining": "data mining"}


@dataclass
class Point:
    """One decided effect: where, what, the published range, the measurement, what it admits."""

    part: str
    workload: str
    load: float
    metric: str
    published_lo: float
    published_hi: float
    interval: Interval
    #: Point verdicts the interval admits (a subset of :data:`CONCLUSIVE`).
    admits: frozenset[str]
    #: Decision boundaries of the point (to say how far the interval is from settling).
    boundaries: tuple[float, ...] = ()
    unit: str = "%"

    @property
    def verdict(self) -> str:
        """The point's own verdict: the one it admits, or inconclusive."""
        return next(iter(self.admits)) if len(self.admits) == 1 else INCONCLUSIVE

    def where(self) -> str:
        """``data mining, load 0.5`` (with the part's label when the claim has parts)."""
        w = f"{_WL.get(self.workload, self.workload)}, load {self.load:g}"
        if self.workload == "trace":
            w = "the trace"
        return f"{self.part}: {w}" if self.part else w

    def needed(self) -> float | None:
        """Times the sample must grow to settle the point (None: cannot say)."""
        iv = self.interval
        best: float | None = None
        for b in self.boundaries:
            if not (iv.lo < b < iv.hi):
                continue
            side = iv.estimate - iv.lo if b < iv.estimate else iv.hi - iv.estimate
            d = abs(iv.estimate - b)
            if d <= 1e-9 or not math.isfinite(side):
                return None
            k = max(1.0, (side / d) ** 2)
            best = k if best is None else max(best, k)
        return best


@dataclass
class Outcome:
    """The measured values of a claim, its verdict, and why."""

    measured: str
    verdict: str
    reason: str = ""
    points: list[Point] = field(default_factory=list)
    #: Verdicts the claim's points admit together (one element: conclusive).
    admits: frozenset[str] = frozenset()


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


@dataclass
class ClaimResult:
    """A claim with its outcome."""

    claim: Claim
    measured: str
    verdict: str
    reason: str = ""
    points: list[Point] = field(default_factory=list)


# -- the evidence a claim is decided on --------------------------------------------------------


class Evidence:
    """A sweep's aggregated table with, where the flows were loaded, their samples; effects
    and levels with intervals, each computed once.

    Without samples (a table alone, as some tests build) an effect is its point estimate with
    a zero-width interval and no sample counts: the verdict is then the estimate's.
    """

    def __init__(
        self, agg: pd.DataFrame, samples: dict[tuple[str, str, float], Sample] | None = None,
        short_max: int = 100_000, resamples: int = stats.RESAMPLES,
    ) -> None:  # fmt: skip
        self.agg = agg
        self.samples = samples or {}
        self.short_max = short_max
        self.resamples = resamples
        self._cache: dict[tuple[Any, ...], Interval | None] = {}
        self.boot = stats.Bootstrap(resamples)

    @staticmethod
    def of(x: Evidence | pd.DataFrame) -> Evidence:
        """``x`` as evidence (a bare table becomes evidence without samples)."""
        return x if isinstance(x, Evidence) else Evidence(x)

    def series(self) -> set[str]:
        """Series present."""
        return set(self.agg["series"].unique()) if not self.agg.empty else set()

    def pairs(self, a: str, b: str, metric: str, workload: str | None = None
              ) -> list[tuple[str, float]]:  # fmt: skip
        """(workload, load) where both series have a finite, positive-baseline ``metric``."""
        agg = self.agg
        out: list[tuple[str, float]] = []
        if agg.empty or metric not in agg.columns:
            return out
        for w in sorted(agg["workload"].unique()):
            if workload and w != workload:
                continue
            sa = agg[(agg["workload"] == w) & (agg["series"] == a)].set_index("load")[metric]
            sb = agg[(agg["workload"] == w) & (agg["series"] == b)].set_index("load")[metric]
            for load in sorted(set(sa.index) & set(sb.index)):
                va, vb = float(sa[load]), float(sb[load])
                if np.isfinite(va) and np.isfinite(vb) and vb > 0:
                    out.append((w, float(load)))
        return out

    def levels(self, a: str, metric: str) -> list[tuple[str, float]]:
        """(workload, load) where series ``a`` has a finite ``metric``."""
        agg = self.agg
        if agg.empty or metric not in agg.columns:
            return []
        sub = agg[agg["series"] == a]
        return [(str(r["workload"]), float(r["load"])) for _, r in sub.iterrows()
                if np.isfinite(float(r[metric]))]  # fmt: skip

    def _value(self, series: str, workload: str, load: float, metric: str) -> float:
        agg = self.agg
        r = agg[(agg["series"] == series) & (agg["workload"] == workload) & (agg["load"] == load)]
        return float(r[metric].iloc[0]) if len(r) else float("nan")

    def _seeds(self, series: str, workload: str, load: float) -> int:
        agg = self.agg
        if "seeds" not in agg:
            return 0
        r = agg[(agg["series"] == series) & (agg["workload"] == workload) & (agg["load"] == load)]
        return int(r["seeds"].iloc[0]) if len(r) else 0

    def reduction(self, a: str, b: str, metric: str, workload: str, load: float) -> Interval:
        """How much lower a's ``metric`` is than b's, percent (positive: a lower)."""
        key = ("red", a, b, metric, workload, load)
        if key not in self._cache:
            sa, sb = self.samples.get((workload, a, load)), self.samples.get((workload, b, load))
            if sa is not None and sb is not None and sa.flows and sb.flows:
                self._cache[key] = self.boot.effect(sa, sb, metric, self.short_max,
                                                    stats.reduction, (workload, load))
            else:
                va, vb = self._value(a, workload, load, metric), self._value(b, workload, load,
                                                                           metric)  # fmt: skip
                e = float(stats.reduction(np.array([va]), np.array([vb]))[0])
                self._cache[key] = Interval(e, e, e, (), self._seeds(a, workload, load))
        iv = self._cache[key]
        assert iv is not None
        return iv

    def level(self, a: str, metric: str, workload: str, load: float, scale: float = 100.0
              ) -> Interval:  # fmt: skip
        """Series a's ``metric`` (times ``scale``: a fraction in percent)."""
        key = ("lvl", a, metric, workload, load, scale)
        if key not in self._cache:
            sa = self.samples.get((workload, a, load))
            iv: Interval | None = None
            if sa is not None and sa.flows:
                try:
                    got = self.boot.level(sa, metric, self.short_max, (workload, load))
                    f = scale  # the bootstrap gives the table's units
                    iv = Interval(got.estimate * f, got.lo * f, got.hi * f, got.flows, got.seeds,
                                  tail_flows=got.tail_flows)  # fmt: skip
                except (ValueError, KeyError):
                    iv = None
            if iv is None:
                v = self._value(a, workload, load, metric) * scale
                iv = Interval(v, v, v, (), self._seeds(a, workload, load))
            self._cache[key] = iv
        out = self._cache[key]
        assert out is not None
        return out

    def proportion(self, a: str, num: str, den: str, workload: str, load: float
                   ) -> Interval | None:  # fmt: skip
        """A per-run counter ratio (Σ num / Σ den over seeds, percent) with a Wilson interval;
        None when the counters are not in the table."""
        agg = self.agg
        if num not in agg or den not in agg:
            return None
        r = agg[(agg["series"] == a) & (agg["workload"] == workload) & (agg["load"] == load)]
        if r.empty:
            return None
        seeds = int(r["seeds"].iloc[0]) if "seeds" in r else 1
        n_num = float(r[num].iloc[0]) * seeds
        n_den = float(r[den].iloc[0]) * seeds
        if not (np.isfinite(n_num) and np.isfinite(n_den)) or n_den <= 0:
            return None
        lo, hi = stats.wilson(n_num, n_den)
        return Interval(100 * n_num / n_den, 100 * lo, 100 * hi, (int(n_den),), seeds)


# -- point verdicts ----------------------------------------------------------------------------


def _admits_range(iv: Interval, lo: float, hi: float, sign: int) -> frozenset[str]:
    """What an effect interval admits for "the effect lies in [lo, hi]" where the claimed
    direction is ``sign`` (+1: positive effects, −1: negative)."""
    out = set()
    if iv.hi >= lo and iv.lo <= hi:
        out.add(HOLDS)
    # the claimed side of zero, outside the range
    if sign > 0:
        if (iv.hi > 0 and iv.lo < lo) or iv.hi > hi:
            out.add(DIRECTION)
        if iv.lo <= 0:
            out.add(FAILS)
    else:
        if (iv.lo < 0 and iv.hi > hi) or iv.lo < lo:
            out.add(DIRECTION)
        if iv.hi >= 0:
            out.add(FAILS)
    if not math.isfinite(iv.lo) or not math.isfinite(iv.hi):
        out = {HOLDS, DIRECTION, FAILS}
    return frozenset(out)


def _admits_within(iv: Interval, lo: float, hi: float) -> frozenset[str]:
    """What an interval admits for "the value lies in [lo, hi]" (no direction to fall back
    on: outside the range does not hold)."""
    out = set()
    if iv.hi >= lo and iv.lo <= hi:
        out.add(HOLDS)
    if iv.lo < lo or iv.hi > hi:
        out.add(FAILS)
    return frozenset(out)


def combine(admitted: Iterable[frozenset[str]]) -> frozenset[str]:
    """Verdicts a claim admits when every one of its points must hold (universal claims):
    holds if all hold; direction only if all hold or direction and one at least direction;
    does not hold if one at least does not hold."""
    sets = list(admitted)
    if not sets:
        return frozenset()
    out = set()
    if all(HOLDS in s for s in sets):
        out.add(HOLDS)
    if all(s & {HOLDS, DIRECTION} for s in sets) and any(DIRECTION in s for s in sets):
        out.add(DIRECTION)
    if any(FAILS in s for s in sets):
        out.add(FAILS)
    return frozenset(out)


def _conclude(admits: frozenset[str]) -> str:
    return next(iter(admits)) if len(admits) == 1 else INCONCLUSIVE


def _why_open(points: list[Point], admits: frozenset[str]) -> str:
    """Why a claim is inconclusive, and what would settle it."""
    open_pts = [p for p in points if len(p.admits) > 1]
    if not open_pts:
        return ""
    parts = []
    needs = []
    for p in open_pts[:4]:
        iv = p.interval
        parts.append(f"{p.where()}: interval {_fmt(iv.lo, p.unit)} … {_fmt(iv.hi, p.unit)}, "
                     f"{_counts(iv)}")  # fmt: skip
        k = p.needed()
        needs.append(k)
    more = f" (and {len(open_pts) - 4} more points)" if len(open_pts) > 4 else ""
    between = " or ".join(v for v in (HOLDS, DIRECTION, FAILS) if v in admits)
    known = [k for k in needs if k is not None]
    if known and len(known) == len(needs):
        k = max(known)
        seeds = max(p.interval.seeds for p in open_pts) or 1
        settle = (f"about {k:.0f}× the flows would settle it (e.g. {math.ceil(k * seeds)} seeds "
                  f"at this duration), if the estimates stay where they are")  # fmt: skip
        if k > 100:
            settle = (f"the estimate sits close to a boundary: ~{k:.0f}× the flows would be "
                      "needed")  # fmt: skip
    else:
        settle = "an estimate sits on a boundary: more flows alone may not settle it"
    return f"between {between}: " + "; ".join(parts) + more + f"; {settle}"


def _counts(iv: Interval) -> str:
    fl = "/".join(f"{n:,}" for n in iv.flows) if iv.flows else "no flow sample"
    out = f"{fl} flows, {iv.seeds} seed{'s' if iv.seeds != 1 else ''}"
    if iv.tail_flows is not None:
        out += f", p99 on {iv.tail_flows:,}" + (" ⚠" if iv.thin() else "")
    return out


def _no_minus_zero(text: str) -> str:
    """``-0 %`` / ``+0 %`` / ``-0.00 %`` (a value that rounds to zero) lose their sign."""
    num, sep, rest = text.partition(" ")
    try:
        if float(num) == 0:
            num = num.lstrip("+-")
    except ValueError:
        pass
    return num + sep + rest


def _fmt(x: float, unit: str = "%") -> str:
    if not math.isfinite(x):
        return "−∞" if x < 0 else "+∞"
    if unit == "s":
        return f"{x:.4f} s"
    digits = 2 if abs(x) < 10 and unit == "%" else 0
    return _no_minus_zero(f"{x:.{digits}f} {unit}").replace("-", "−")


def _pct(x: float) -> str:
    return _no_minus_zero(f"{x:.0f} %")


def _pct2(x: float) -> str:
    return _no_minus_zero(f"{x:.2f} %")


def _signed_pct(x: float) -> str:
    return _no_minus_zero(f"{x:+.0f} %")


def _describe(values: dict[str, list[tuple[float, float]]], fmt: Callable[[float], str]) -> str:
    """Per workload, the range of values over loads."""
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


def describe_points(points: list[Point]) -> str:
    """Every point's estimate with its interval, grouped by part and workload."""
    out = []
    for part, pts in itertools.groupby(points, key=lambda p: p.part):
        by_w: dict[str, list[Point]] = {}
        for p in pts:
            by_w.setdefault(p.workload, []).append(p)
        txt = []
        for w, ps in by_w.items():
            cells = ", ".join(
                ("" if w == "trace" else f"{p.load:g}: ")
                + f"{_fmt(p.interval.estimate, p.unit)} "
                f"[{_fmt(p.interval.lo, p.unit)}, {_fmt(p.interval.hi, p.unit)}]"
                + (" ⚠" if p.interval.thin() else "")
                for p in ps
            )
            n = ps[0].interval
            head = "effect" if w == "trace" else "load: effect"
            txt.append(f"{_WL.get(w, w)} ({head} [95 % interval]; {_counts_short(ps)}): "
                       f"{cells}" if n.flows else f"{_WL.get(w, w)}: {cells}")  # fmt: skip
        out.append((f"{part}: " if part else "") + "; ".join(txt))
    return " | ".join(out)


def _counts_short(ps: list[Point]) -> str:
    fl = [sum(p.interval.flows) // max(len(p.interval.flows), 1) for p in ps]
    seeds = max(p.interval.seeds for p in ps)
    lo, hi = min(fl), max(fl)
    span = f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"
    return f"{span} flows per series, {seeds} seed{'s' if seeds != 1 else ''}"


def _outcome(points: list[Point], admits: frozenset[str], extra: str = "") -> Outcome:
    measured = describe_points(points) + (f"; {extra}" if extra else "")
    verdict = _conclude(admits)
    reason = _why_open(points, admits) if verdict == INCONCLUSIVE else _settled(points, verdict)
    return Outcome(measured, verdict, reason, points, admits)


def _settled(points: list[Point], verdict: str) -> str:
    """The point that decides a conclusive "does not hold" or "direction only"."""
    if verdict not in (FAILS, DIRECTION):
        return ""
    deciding = [p for p in points if p.admits == frozenset({verdict})]
    if not deciding:
        return ""
    p = deciding[0]
    iv = p.interval
    span = f"[{_fmt(iv.lo, p.unit)}, {_fmt(iv.hi, p.unit)}]"
    if verdict == FAILS:
        return f"{p.where()}: {_fmt(iv.estimate, p.unit)} {span}"
    return f"outside the claimed range at {p.where()}: {span}"


# -- claim kinds -------------------------------------------------------------------------------


def reduction_claim(
    a: str, b: str, metric: str, lo: float, hi: float, tol: float = 10.0,
    workload: str | None = None, load_min: float = 0.0, load_max: float = 1.0, part: str = "",
) -> Callable[[Any], Outcome]:  # fmt: skip
    """Claim "a's metric is lo–hi % lower than b's" (± tol points) at every selected load.
    Negative bounds claim a is slower ("a is 15–45 % slower": lo = −45, hi = −15)."""
    sign = 1 if hi > 0 else -1
    rlo, rhi = lo - tol, hi + tol

    def run(x: Any) -> Outcome:
        ev = Evidence.of(x)
        pts = []
        for w, load in ev.pairs(a, b, metric, workload):
            if not load_min <= load <= load_max:
                continue
            iv = ev.reduction(a, b, metric, w, load)
            pts.append(Point(part, w, load, f"{metric} reduction of {a} vs {b}", rlo, rhi, iv,
                             _admits_range(iv, rlo, rhi, sign), (0.0, rlo, rhi)))  # fmt: skip
        if not pts:
            return Outcome("no load in range measured", NOT_MEASURED)
        return _outcome(pts, combine(p.admits for p in pts))

    return run


def slower_claim(
    a: str, b: str, metric: str, lo: float, hi: float, workload: str
) -> Callable[[Any], Outcome]:
    """Claim "a is lo–hi % slower than b" (on one workload): a reduction in [−hi, −lo]."""
    return reduction_claim(a, b, metric, -hi, -lo, tol=0.0, workload=workload)


def best_claim(
    a: str, b: str, metric: str, at_least: float, workload: str | None, load_max: float
) -> Callable[[Any], Outcome]:
    """Claim "a's metric is up to N× lower than b's" below a load: holds when the best
    point's reduction reaches ``at_least`` %; direction only when every point is a reduction
    short of it; does not hold when none reaches it and one is no reduction at all."""

    def run(x: Any) -> Outcome:
        ev = Evidence.of(x)
        pts = []
        for w, load in ev.pairs(a, b, metric, workload):
            if load >= load_max:
                continue
            iv = ev.reduction(a, b, metric, w, load)
            cats = set()
            if iv.hi >= at_least:
                cats.add("high")
            if iv.lo < at_least and iv.hi > 0:
                cats.add("mid")
            if iv.lo <= 0:
                cats.add("low")
            if not (math.isfinite(iv.lo) and math.isfinite(iv.hi)):
                cats = {"high", "mid", "low"}
            adm = {HOLDS: "high" in cats, DIRECTION: "mid" in cats, FAILS: "low" in cats}
            pts.append(Point("", w, load, f"{metric} reduction of {a} vs {b}", at_least, 100.0,
                             iv, frozenset(k for k, v in adm.items() if v),
                             (0.0, at_least), ))  # fmt: skip
        if not pts:
            return Outcome(f"no load below {load_max:g} measured", NOT_MEASURED)
        out = set()
        sets = [p.admits for p in pts]
        if any(HOLDS in s for s in sets):
            out.add(HOLDS)
        if all(s - {HOLDS} for s in sets) and all(DIRECTION in s for s in sets):
            out.add(DIRECTION)
        if all(s - {HOLDS} for s in sets) and any(FAILS in s for s in sets):
            out.add(FAILS)
        return _outcome(pts, frozenset(out))

    return run


def unaffected_claim(
    a: str, b: str, metric: str, within: float, part: str = ""
) -> Callable[[Any], Outcome]:
    """Claim "a's metric is barely different from b's": |reduction| ≤ within % at every load."""

    def run(x: Any) -> Outcome:
        ev = Evidence.of(x)
        pts = []
        for w, load in ev.pairs(a, b, metric):
            iv = ev.reduction(a, b, metric, w, load)
            pts.append(Point(part, w, load, f"{metric} reduction of {a} vs {b}", -within, within,
                             iv, _admits_within(iv, -within, within),
                             (-within, within)))  # fmt: skip
        if not pts:
            return Outcome("no load measured", NOT_MEASURED)
        return _outcome(pts, combine(p.admits for p in pts))

    return run


def overhead_claim(a: str, lo: float, hi: float, tol: float) -> Callable[[Any], Outcome]:
    """Claim "replication overhead is lo–hi % of bytes" (± tol points at every load). The
    share of bytes in short flows is reported beside it as a separate figure."""

    def run(x: Any) -> Outcome:
        ev = Evidence.of(x)
        pts = []
        for w, load in ev.levels(a, "overhead"):
            iv = ev.level(a, "overhead", w, load)
            pts.append(Point("", w, load, f"overhead of {a} (extra bytes, % of bytes)", lo - tol,
                             hi + tol, iv, _admits_within(iv, lo - tol, hi + tol),
                             (lo - tol, hi + tol)))  # fmt: skip
        if not pts:
            return Outcome("overhead not recorded", NOT_MEASURED)
        extra = ""
        shares = {(p.workload, p.load): ev.level(a, "short_bytes_frac", p.workload, p.load)
                  for p in pts} if "short_bytes_frac" in ev.agg.columns else {}  # fmt: skip
        if shares:
            txt = "; ".join(f"{_WL.get(w, w)} {ld:g}: {_fmt(iv.estimate)}"
                            for (w, ld), iv in shares.items())  # fmt: skip
            same = all(abs(shares[(p.workload, p.load)].estimate - p.interval.estimate) < 1e-6
                       for p in pts)  # fmt: skip
            extra = f"bytes in short flows (a separate figure, not the verdict's): {txt}"
            if same:
                extra += (" — equal to the overhead because every short flow gets exactly one "
                          "extra copy, counted at its application size whether or not it "
                          "finishes")  # fmt: skip
        return _outcome(pts, combine(p.admits for p in pts), extra)

    return run


def collision_claim(a: str, at_least: float) -> Callable[[Any], Outcome]:
    """Claim "at least N % of a's replicated flows collide" (copies sharing a link); the
    interval is a Wilson interval of the pooled counts (the counters are per run)."""

    def run(x: Any) -> Outcome:
        ev = Evidence.of(x)
        pts = []
        for w, load in ev.levels(a, "collision_frac"):
            iv = ev.proportion(a, "copy_collisions", "replicated_flows", w, load)
            if iv is None:
                v = 100 * ev._value(a, w, load, "collision_frac")
                iv = Interval(v, v, v, (), ev._seeds(a, w, load))
            pts.append(Point("", w, load, f"replicated flows of {a} with colliding copies (%)",
                             at_least, 100.0, iv, _admits_within(iv, at_least, 100.0),
                             (at_least,)))  # fmt: skip
        if not pts:
            return Outcome("collisions not recorded", NOT_MEASURED)
        return _outcome(pts, combine(p.admits for p in pts))

    return run


def toy_claim(metric: str) -> Callable[[Any], Outcome]:
    """Table I: short flows alone, beside a large flow, and replicated beside it. Holds when
    "alone" is ≥ 66.7 % below "beside" (beside ≥ 3× alone) and "replicated" ≥ 20 % below
    "beside"; direction only when both are reductions."""
    parts = (("beside vs alone", "tcp-alone", "tcp", 100 * (1 - 1 / 3)),
             ("replicated vs beside", "repflow", "tcp", 20.0))  # fmt: skip

    def run(x: Any) -> Outcome:
        ev = Evidence.of(x)
        present = ev.series()
        for s in ("tcp-alone", "tcp", "repflow"):
            if s not in present:
                return Outcome(f"{s} not measured", NOT_MEASURED)
        pts = []
        for label, a, b, need in parts:
            for w, load in ev.pairs(a, b, metric):
                iv = ev.reduction(a, b, metric, w, load)
                pts.append(Point(label, w, load, f"{metric} reduction of {a} vs {b}", need,
                                 100.0, iv, _admits_range(iv, need, 100.0, 1), (0.0, need)))
        if not pts:
            return Outcome(f"{metric} not measured", NOT_MEASURED)
        levels = []
        for s in ("tcp-alone", "tcp", "repflow"):
            for w, load in ev.levels(s, metric)[:1]:
                iv = ev.level(s, metric, w, load, scale=1.0)
                levels.append(f"{s} {iv.estimate:.4f} s [{iv.lo:.4f}, {iv.hi:.4f}]")
        return _outcome(pts, combine(p.admits for p in pts), "levels: " + ", ".join(levels))

    return run


def share_claim(
    a: str, b: str, metric: str, want_a: float, want_b: float, tol: float, scale: float = 100.0,
    part: str = "",
) -> Callable[[Any], Outcome]:  # fmt: skip
    """Claim "a's metric is about want_a where b's is about want_b" (percentages; ``scale``
    turns the metric into one): holds when both lie within ``tol`` points of the published
    values at every load; direction only when a's value is on the published side of b's."""

    def run(x: Any) -> Outcome:
        ev = Evidence.of(x)
        pts = []
        for w, load in ev.pairs(a, b, metric):
            ia = ev.level(a, metric, w, load, scale)
            ib = ev.level(b, metric, w, load, scale)
            diff = Interval(ia.estimate - ib.estimate, ia.lo - ib.hi, ia.hi - ib.lo,
                            ia.flows + ib.flows, min(ia.seeds, ib.seeds))  # fmt: skip
            in_a = _admits_within(ia, want_a - tol, want_a + tol)
            in_b = _admits_within(ib, want_b - tol, want_b + tol)
            up = want_a > want_b
            right = (diff.hi > 0) if up else (diff.lo < 0)
            wrong = (diff.lo <= 0) if up else (diff.hi >= 0)
            adm = set()
            if HOLDS in in_a and HOLDS in in_b:
                adm.add(HOLDS)
            if right and (FAILS in in_a or FAILS in in_b):
                adm.add(DIRECTION)
            if wrong:
                adm.add(FAILS)
            pts.append(Point(part or f"{a} level", w, load, f"{metric} of {a}", want_a - tol,
                             want_a + tol, ia, frozenset(adm),
                             (want_a - tol, want_a + tol)))  # fmt: skip
            pts.append(Point(part + (" " if part else "") + f"{b} level", w, load,
                             f"{metric} of {b}", want_b - tol, want_b + tol, ib, frozenset(adm),
                             (want_b - tol, want_b + tol)))  # fmt: skip
        if not pts:
            return Outcome("no load measured", NOT_MEASURED)
        return _outcome(pts, combine(p.admits for p in pts[::2]))

    return run


def retransmission_claim(a: str, b: str, want_a: float, want_b: float, tol: float):
    """MPTCP-L's Fig. 4: the share of packets retransmitted (``retx_pct``), with each scheme's
    breakdown by cause shown beside the verdict of :func:`share_claim`."""
    base = share_claim(a, b, "retx_pct", want_a, want_b, tol, scale=1.0)
    causes = (("retx_detect_pct", "fast detection"), ("retx_atimer_pct", "aggressive timer"),
              ("retx_fast_pct", "fast retransmit"), ("retx_timeout_pct", "RTO"))  # fmt: skip

    def run(x: Any) -> Outcome:
        ev = Evidence.of(x)
        out = base(ev)
        if out.verdict == NOT_MEASURED:
            return out
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
        out.measured += " | by cause (% of packets): " + "; ".join(parts)
        return out

    return run


def all_of(*parts: tuple[str, Callable[[Any], Outcome]]) -> Callable[[Any], Outcome]:
    """A claim made of several labelled parts, all of which must hold: a part that does not
    hold decides it; otherwise a part not measured leaves it not measured; otherwise the parts'
    admitted verdicts combine as points do."""

    def run(x: Any) -> Outcome:
        ev = Evidence.of(x)
        outs = [(label, f(ev)) for label, f in parts]
        measured = " | ".join(f"{label}: {o.measured}" for label, o in outs)
        pts: list[Point] = []
        for label, o in outs:
            for p in o.points:
                if not p.part.startswith(label):
                    p.part = f"{label}" + (f" {p.part}" if p.part else "")
                pts.append(p)
        if any(o.verdict == FAILS for _, o in outs):
            bad = next(o for _, o in outs if o.verdict == FAILS)
            return Outcome(measured, FAILS, bad.reason, pts, frozenset({FAILS}))
        if any(o.verdict == NOT_MEASURED for _, o in outs):
            return Outcome(measured, NOT_MEASURED, "", pts)
        admits = combine(o.admits for _, o in outs)
        verdict = _conclude(admits)
        reason = _why_open(pts, admits) if verdict == INCONCLUSIVE else ""
        return Outcome(measured, verdict, reason, pts, admits)

    return run


def _fa_sizes(metric: str, lo: float) -> list[tuple[str, Callable[[Any], Outcome]]]:
    """FA-DCTCP vs DCTCP for each short-flow size series of experiments/fa-dctcp.toml."""
    return [
        (f"{metric} {size}", reduction_claim(f"fa-dctcp-{size}", f"dctcp-{size}", metric, lo, lo))
        for size in ("250KB", "500KB", "1MB")
    ]


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
                                              83.0, 45.0, 10.0)))),
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
        out.append(ClaimResult(c, o.measured, o.verdict, o.reason, o.points))
    return out


#: Columns of ``claim_points.csv`` (docs/metrics.md).
POINT_COLUMNS = ("claim", "profile", "workload", "load", "metric", "published_lo",
                 "published_hi", "measured", "ci_lo", "ci_hi", "flows", "seeds",
                 "verdict")  # fmt: skip


def point_rows(result: ClaimResult, profile: str) -> list[dict[str, Any]]:
    """``claim_points.csv`` rows of one claim under one profile."""
    rows = []
    for p in result.points:
        iv = p.interval
        metric = f"{p.part}: {p.metric}" if p.part else p.metric
        rows.append({
            "claim": result.claim.id, "profile": profile, "workload": p.workload,
            "load": p.load, "metric": metric, "published_lo": p.published_lo,
            "published_hi": p.published_hi, "measured": iv.estimate, "ci_lo": iv.lo,
            "ci_hi": iv.hi, "flows": sum(iv.flows), "seeds": iv.seeds, "verdict": p.verdict,
        })  # fmt: skip
    return rows
