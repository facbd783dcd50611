"""The evidence a claim is decided on: a sweep's flows, and each measured effect as a
:class:`Point` — where, what, the regions of its line (:mod:`repflow.experiments.verdicts`),
its 95 % and family-wise intervals (:mod:`repflow.experiments.stats`, with replicates added near
a boundary) and its rare events (:mod:`repflow.experiments.rare`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from repflow.experiments import claimtext as tx
from repflow.experiments import rare, stats
from repflow.experiments import verdicts as vd
from repflow.experiments.stats import Interval, Sample
from repflow.experiments.verdicts import OPEN, REPRODUCED

#: Most chunks of :data:`stats.RESAMPLES` replicates an effect gets while a decision boundary
#: lies within the Monte Carlo band of one of its bounds (replicates added near a boundary, so
#: that no verdict depends on the generator).
MAX_CHUNKS = 16
#: Fewest replicates on a timeout plateau's side for its interval to be read off them (fewer:
#: more replicates are drawn, up to :data:`MAX_CHUNKS`).
PLATEAU_SIDE_MIN = 200


# -- estimates: an effect or a level with whatever gives its intervals ------------------------


class Estimate:
    """A point estimate and the means to bound it at any confidence (the base: no sample, a
    zero-width interval at the estimate)."""

    def __init__(self, estimate: float) -> None:
        self.estimate = estimate

    def at(self, confidence: float) -> tuple[float, float]:
        """The two-sided interval at ``confidence``."""
        return self.estimate, self.estimate

    def near(self, confidence: float, cuts: Sequence[float]) -> bool:
        """Whether a cut lies where the generator could move a bound across it."""
        return False

    def extend(self) -> bool:
        """Adds replicates; False when no more can be added."""
        return False

    @property
    def replicates(self) -> int:
        """Bootstrap replicates behind the interval (0: not a bootstrap)."""
        return 0


class WilsonEstimate(Estimate):
    """A proportion of pooled counts (percent) with Wilson intervals."""

    def __init__(self, successes: float, trials: float) -> None:
        super().__init__(100.0 * successes / trials)
        self.successes, self.trials = successes, trials

    def at(self, confidence: float) -> tuple[float, float]:
        lo, hi = stats.wilson_at(self.successes, self.trials, confidence)
        return 100.0 * lo, 100.0 * hi


class RepEstimate(Estimate):
    """Bootstrap replicates of an effect or level, extended chunk by chunk on demand."""

    def __init__(self, estimate: float, draw: Callable[[int], tuple[np.ndarray,
                 dict[str, np.ndarray]]]) -> None:  # fmt: skip
        super().__init__(estimate)
        self._draw = draw
        self.chunks = 1
        self.reps, self.series = draw(1)
        #: The two series' own estimates, their names (a, b) and the effect function, where
        #: the estimate is an effect (:meth:`side_effect`).
        self.levels: dict[str, float] = {}
        self.pair: tuple[str, str] = ("", "")
        self.effect: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None

    def at(self, confidence: float) -> tuple[float, float]:
        return stats.bounds(self.reps, confidence)

    def near(self, confidence: float, cuts: Sequence[float]) -> bool:
        (a0, a1), (b0, b1) = stats.bound_bands(self.reps, confidence)
        return any(a0 < c < a1 or b0 < c < b1 for c in cuts)

    def extend(self) -> bool:
        if self.chunks >= MAX_CHUNKS:
            return False
        self.chunks = min(MAX_CHUNKS, self.chunks * 2)
        self.reps, self.series = self._draw(self.chunks)
        return True

    @property
    def replicates(self) -> int:
        return len(self.reps)

    def side_effect(self, series: str, value: float) -> float | None:
        """The effect with ``series``' metric set to ``value`` and the other series' at its
        estimate (a plateau side the replicates rarely reach); None when unknown."""
        if self.effect is None or series not in self.levels:
            return None
        a, b = self.pair
        va = value if series == a else self.levels[a]
        vb = value if series == b else self.levels[b]
        return float(self.effect(np.array([va]), np.array([vb]))[0])


# -- points --------------------------------------------------------------------------------------


@dataclass
class Point:
    """One measured effect of a claim: where, what, the regions of its line, the interval."""

    part: str
    workload: str
    load: float
    metric: str
    regions: vd.Regions
    #: The 95 % interval and the sample behind it (flows: behind the effect, per series).
    interval: Interval
    unit: str = "%"
    #: The family-wise interval (1 − 0.05/m for a claim of m points), where it decides.
    fw: Interval | None = None
    #: Region kinds the 95 % and the family-wise intervals admit.
    kinds: frozenset[str] = frozenset()
    kinds_fw: frozenset[str] = frozenset()
    #: The point's own verdict within its claim.
    verdict: str = OPEN
    plateau: rare.Plateau | None = None
    mean_note: rare.MeanNote | None = None
    notes: list[str] = field(default_factory=list)
    #: Bootstrap replicates behind the interval (0: not a bootstrap).
    replicates: int = 0
    est: Estimate | None = field(default=None, repr=False, compare=False)
    #: Plateau sources: series name → sample and metric (for :func:`rare.find_plateau`).
    tails: dict[str, Sample] = field(default_factory=dict, repr=False, compare=False)
    short_max: int = 100_000

    @property
    def published_lo(self) -> float:
        """Lower end of the reproduced range (claimed range with its tolerance)."""
        r = [x for x in self.regions.regions if x.kind == REPRODUCED]
        return r[0].lo if r else float("nan")

    @property
    def published_hi(self) -> float:
        """Upper end of the reproduced range."""
        r = [x for x in self.regions.regions if x.kind == REPRODUCED]
        return r[0].hi if r else float("nan")

    def where(self) -> str:
        """``data mining, load 0.5`` (with the part's label when the claim has parts)."""
        w = f"{tx.workload_name(self.workload)}, load {self.load:g}"
        if self.workload == "trace":
            w = "the trace"
        elif self.workload not in ("websearch", "datamining"):
            w = f"load {self.load:g}"  # a study's own workload name is not the claim's label
        return f"{self.part}: {w}" if self.part else w

    def open_boundary(self) -> float | None:
        """The reproduced / not-reproduced cut inside the 95 % interval nearest the estimate
        (the one that keeps the point open), or None."""
        for iv in (self.interval, self.fw):
            if iv is None:
                continue
            cuts = [c for c in self.regions.verdict_boundaries() if iv.lo <= c <= iv.hi]
            if cuts:
                return min(cuts, key=lambda c: abs(c - iv.estimate))
        return None

    def open_on_fw(self) -> bool:
        """Whether only the family-wise interval keeps the point open (its 95 % interval has
        left the reproduced regions, the wider one has not)."""
        iv = self.interval
        return not any(iv.lo <= c <= iv.hi for c in self.regions.verdict_boundaries())

    def needed(self, refute: bool) -> float | None:
        """Times the flows must grow for the deciding interval (family-wise when ``refute``,
        else 95 %) to clear the open boundary, if the estimate stays and the interval narrows
        as 1/√n; None when the estimate sits on the boundary or no bound is finite."""
        cut = self.open_boundary()
        if cut is None:
            return None
        iv = self.fw if (refute and self.fw is not None) else self.interval
        est = self.interval.estimate
        side = est - iv.lo if cut < est else iv.hi - est
        d = abs(est - cut)
        if d <= 1e-9 or not math.isfinite(side):
            return None
        return max(1.0, (side / d) ** 2)

    def settle(self, conf_fw: float) -> None:
        """Computes the intervals at 95 % and at ``conf_fw``, adding replicates while a cut
        lies within a bound's Monte Carlo band, then what they admit (and the plateau)."""
        est = self.est
        if est is None:
            self.kinds = self.kinds_fw = self.regions.admits(self.interval.lo, self.interval.hi)
            self.fw = self.interval
            return
        cuts = self.regions.boundaries()
        levels = sorted({vd.confidence(), conf_fw})
        pl = self._find_plateau(est) if isinstance(est, RepEstimate) and self.tails else None

        def near() -> bool:
            if any(est.near(c, cuts) for c in levels):
                return True
            if pl is None or not isinstance(est, RepEstimate):
                return False
            # a plateau decides on the replicates of one side: they need their own precision
            for conf in levels:
                for _value, mask in self._sides(est, pl, conf):
                    sub = est.reps[mask]
                    if len(sub) < PLATEAU_SIDE_MIN:
                        return True
                    (a0, a1), (b0, b1) = stats.bound_bands(sub, conf)
                    if any(a0 < c < a1 or b0 < c < b1 for c in cuts):
                        return True
            return False

        while near() and est.extend():
            pass
        lo, hi = est.at(vd.confidence())
        flo, fhi = est.at(conf_fw)
        self.interval = replace(self.interval, lo=lo, hi=hi)
        self.fw = replace(self.interval, lo=flo, hi=fhi)
        self.replicates = est.replicates
        self.kinds = self.regions.admits(lo, hi)
        self.kinds_fw = self.regions.admits(flo, fhi)
        if pl is not None and isinstance(est, RepEstimate):
            name = pl.series
            self.plateau = rare.find_plateau(name, est.series[name], self.tails[name],
                                             self._metric_name(), self.short_max) or pl
            self.kinds = self._plateau_kinds(est, self.plateau, vd.confidence())
            self.kinds_fw = self._plateau_kinds(est, self.plateau, conf_fw)

    def _find_plateau(self, est: RepEstimate) -> rare.Plateau | None:
        for name, sample in self.tails.items():
            reps = est.series.get(name)
            if reps is None:
                continue
            pl = rare.find_plateau(name, reps, sample, self._metric_name(), self.short_max)
            if pl is not None:
                return pl
        return None

    @staticmethod
    def _sides(est: RepEstimate, pl: rare.Plateau, conf: float
               ) -> list[tuple[float, np.ndarray]]:  # fmt: skip
        """The plateau's sides the share beyond it admits at ``conf``: the percentile's value
        on that side and the replicates that fell there."""
        high = est.series[pl.series] >= pl.threshold
        lo, hi = stats.wilson_at(pl.beyond, pl.flows, conf)
        sides = []
        if 100 * hi > pl.tail_pct:
            sides.append((pl.above, high))
        if 100 * lo < pl.tail_pct:
            sides.append((pl.below, ~high))
        return sides

    def _plateau_kinds(self, est: RepEstimate, pl: rare.Plateau, conf: float) -> frozenset[str]:
        out: set[str] = set()
        for value, mask in self._sides(est, pl, conf):
            sub = est.reps[mask]
            sub = sub[np.isfinite(sub)]
            if len(sub) >= PLATEAU_SIDE_MIN:
                out |= self.regions.admits(*stats.bounds(sub, conf))
            else:  # a side the replicates rarely reach: the effect at its typical value
                e = est.side_effect(pl.series, value)
                if e is not None and np.isfinite(e):
                    out.add(self.regions.kind_at(e))
        return frozenset(out) or self.regions.admits(*est.at(conf))

    def _metric_name(self) -> str:
        return self.metric.split(" ", 1)[0]

    def to_json(self) -> dict[str, Any]:
        """The point as JSON (a report's stamp keeps its claims' points)."""
        def iv(i: Interval | None) -> dict[str, Any] | None:
            if i is None:
                return None
            return {"estimate": i.estimate, "lo": i.lo, "hi": i.hi, "flows": list(i.flows),
                    "seeds": i.seeds, "paired": i.paired, "tail_flows": i.tail_flows}

        mn = self.mean_note
        return {
            "part": self.part, "workload": self.workload, "load": self.load,
            "metric": self.metric, "unit": self.unit, "side": self.regions.side,
            "regions": [[r.lo, r.hi, r.kind, r.lo_closed, r.hi_closed]
                        for r in self.regions.regions],
            "interval": iv(self.interval), "fw": iv(self.fw), "kinds": sorted(self.kinds),
            "kinds_fw": sorted(self.kinds_fw), "verdict": self.verdict,
            "replicates": self.replicates, "notes": list(self.notes),
            "plateau": asdict(self.plateau) if self.plateau else None,
            "mean_note": ({"parts": [[n, asdict(t)] for n, t in mn.parts],
                           "effect_without": mn.effect_without} if mn else None),
        }  # fmt: skip

    @staticmethod
    def from_json(d: dict[str, Any]) -> Point:
        """The point :meth:`to_json` wrote."""
        def iv(x: dict[str, Any] | None) -> Interval | None:
            if x is None:
                return None
            return Interval(float(x["estimate"]), float(x["lo"]), float(x["hi"]),
                            tuple(x["flows"]), int(x["seeds"]), bool(x["paired"]),
                            x.get("tail_flows"))  # fmt: skip

        regions = vd.Regions(tuple(vd.Region(float(a), float(b), str(k), bool(c), bool(e))
                                   for a, b, k, c, e in d["regions"]), d.get("side", ""))
        mn = d.get("mean_note")
        interval = iv(d["interval"])
        assert interval is not None
        return Point(
            d["part"], d["workload"], float(d["load"]), d["metric"], regions, interval,
            d.get("unit", "%"), iv(d.get("fw")), frozenset(d.get("kinds", ())),
            frozenset(d.get("kinds_fw", ())), d.get("verdict", OPEN),
            rare.Plateau(**d["plateau"]) if d.get("plateau") else None,
            rare.MeanNote(tuple((n, stats.TimeoutShare(**t)) for n, t in mn["parts"]),
                          float(mn["effect_without"])) if mn else None,
            list(d.get("notes", [])), int(d.get("replicates", 0)),
        )  # fmt: skip



# -- the evidence a claim is decided on --------------------------------------------------------


class Evidence:
    """A sweep's aggregated table with, where the flows were loaded, their samples; effects
    and levels with their replicates, each computed once.

    Without samples (a table alone, as some tests build) an effect is its point estimate with
    a zero-width interval and no sample counts: the verdict is then the estimate's.
    ``generator_key`` salts every bootstrap draw (0: the published draws); verdicts must not
    depend on it.
    """

    def __init__(
        self, agg: pd.DataFrame, samples: dict[tuple[str, str, float], Sample] | None = None,
        short_max: int = 100_000, resamples: int = stats.RESAMPLES, generator_key: int = 0,
    ) -> None:  # fmt: skip
        self.agg = agg
        self.samples = samples or {}
        self.short_max = short_max
        self.resamples = resamples
        self.generator_key = generator_key
        self.boot = stats.verdict_bootstrap(resamples, salt=generator_key)

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

    def value(self, series: str, workload: str, load: float, metric: str) -> float:
        """The table's value of ``metric`` (NaN when absent)."""
        agg = self.agg
        r = agg[(agg["series"] == series) & (agg["workload"] == workload) & (agg["load"] == load)]
        return float(r[metric].iloc[0]) if len(r) and metric in r else float("nan")

    def seeds(self, series: str, workload: str, load: float) -> int:
        """Seeds behind a row of the table."""
        agg = self.agg
        if "seeds" not in agg:
            return 0
        r = agg[(agg["series"] == series) & (agg["workload"] == workload) & (agg["load"] == load)]
        return int(r["seeds"].iloc[0]) if len(r) else 0

    def effect_point(self, part: str, a: str, b: str, metric: str, workload: str, load: float,
                     regions: vd.Regions) -> Point:  # fmt: skip
        """The reduction of a's ``metric`` against b's at one point (percent, positive: a
        lower), with its replicates."""
        label = f"{metric} reduction of {a} vs {b}"
        sa, sb = self.samples.get((workload, a, load)), self.samples.get((workload, b, load))
        if sa is None or sb is None or not sa.flows or not sb.flows:
            va, vb = (self.value(a, workload, load, metric),
                      self.value(b, workload, load, metric))  # fmt: skip
            e = float(stats.reduction(np.array([va]), np.array([vb]))[0])
            iv = Interval(e, e, e, (), self.seeds(a, workload, load))
            return Point(part, workload, load, label, regions, iv, est=Estimate(e))
        group = (workload, load)
        sm = self.short_max

        def draw(chunks: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
            _, reps = self.boot.effect_replicates(sa, sb, metric, sm, stats.reduction, group,
                                                  chunks)  # fmt: skip
            ra = self.boot.level_replicates(sa, metric, sm, group, chunks)[1]
            rb = self.boot.level_replicates(sb, metric, sm, group, chunks)[1]
            return reps, {a: ra, b: rb}

        e = self.boot.effect_replicates(sa, sb, metric, sm, stats.reduction, group, 1)[0]
        est = RepEstimate(e, draw)
        est.levels = {a: self.boot.level_replicates(sa, metric, sm, group)[0],
                      b: self.boot.level_replicates(sb, metric, sm, group)[0]}
        est.pair, est.effect = (a, b), stats.reduction
        m = stats.metric(metric, sm, sa.mss or 1)
        tails = None
        if m.kind == "quantile":
            tails = min(stats.metric_flows(metric, sa, sm), stats.metric_flows(metric, sb, sm))
        iv = Interval(e, *est.at(vd.confidence()),
                      (stats.metric_flows(metric, sa, sm), stats.metric_flows(metric, sb, sm)),
                      min(len(sa.seeds), len(sb.seeds)), stats.paired(sa, sb), tails)  # fmt: skip
        p = Point(part, workload, load, label, regions, iv, est=est, short_max=sm)
        if m.kind == "quantile":
            p.tails = {b: sb, a: sa}
        else:
            p.mean_note = rare.mean_note(a, sa, b, sb, metric, sm)
        return p

    def level_point(self, part: str, a: str, metric: str, workload: str, load: float,
                    regions: vd.Regions, scale: float = 100.0) -> Point:  # fmt: skip
        """Series a's ``metric`` (times ``scale``: a fraction in percent) at one point."""
        label = f"{metric} of {a}"
        sa = self.samples.get((workload, a, load))
        if sa is not None and sa.flows:
            try:
                stats.metric(metric, self.short_max, sa.mss)
            except ValueError:
                sa = None
        if sa is None or not sa.flows:
            v = self.value(a, workload, load, metric) * scale
            iv = Interval(v, v, v, (), self.seeds(a, workload, load))
            return Point(part, workload, load, label, regions, iv, est=Estimate(v))
        group = (workload, load)
        sm = self.short_max

        def draw(chunks: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
            return self.boot.level_replicates(sa, metric, sm, group, chunks)[1] * scale, {}

        e = self.boot.level_replicates(sa, metric, sm, group, 1)[0] * scale
        est = RepEstimate(e, draw)
        iv = Interval(e, *est.at(vd.confidence()), (stats.metric_flows(metric, sa, sm),),
                      len(sa.seeds))  # fmt: skip
        return Point(part, workload, load, label, regions, iv, est=est, short_max=sm)

    def proportion_point(self, part: str, a: str, num: str, den: str, label: str,
                         workload: str, load: float, regions: vd.Regions) -> Point:  # fmt: skip
        """A per-run counter ratio (Σ num / Σ den over seeds, percent) with Wilson intervals
        (the table's value alone when the counters are missing)."""
        agg = self.agg
        r = agg[(agg["series"] == a) & (agg["workload"] == workload) & (agg["load"] == load)]
        if num in agg and den in agg and not r.empty:
            seeds = int(r["seeds"].iloc[0]) if "seeds" in r else 1
            n_num = float(r[num].iloc[0]) * seeds
            n_den = float(r[den].iloc[0]) * seeds
            if np.isfinite(n_num) and np.isfinite(n_den) and n_den > 0:
                est = WilsonEstimate(n_num, n_den)
                iv = Interval(est.estimate, *est.at(vd.confidence()), (int(n_den),), seeds)
                return Point(part, workload, load, label, regions, iv, est=est)
        v = 100 * self.value(a, workload, load, "collision_frac")
        iv = Interval(v, v, v, (), self.seeds(a, workload, load))
        return Point(part, workload, load, label, regions, iv, est=Estimate(v))
