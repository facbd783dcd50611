"""Rare events behind an effect: how much of a mean the flows that waited for a timeout carry,
and whether a percentile sits on a timeout *plateau* (docs/metrics.md, "Rare events").

A 3 s SYN timer among a few thousand one-millisecond flows makes a mean a count of lost SYNs,
and makes a 99th percentile jump between two values — the ordinary tail and the timeout —
depending on whether more or fewer than 1 % of the flows waited it out. Neither is visible in
an interval: this module names both.

* :func:`mean_note` — per series, the share of its mean carried by flows with a timeout (SYN
  or data), with counts, and the effect recomputed without those flows.
* :func:`find_plateau` — a percentile whose neighbouring order statistics (those a resample
  can put at its rank) have a gap of at least :data:`PLATEAU_GAP`× between them: the
  percentile is then a
  question of *how many* flows lie beyond the gap, which is answered with the share of flows
  beyond it and its interval, not with a percentile interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from repflow.experiments import stats
from repflow.experiments.stats import Sample

#: A gap of this factor between neighbouring flows' values, among the order statistics a
#: resample can put at the percentile's rank, marks a plateau.
PLATEAU_GAP = 2.0
#: Those order statistics: the rank q·(n − 1) ± this many binomial standard deviations.
PLATEAU_SPREAD = 3.0
#: Fewest flows beyond the gap for a plateau (fewer: a thin tail, not a timeout plateau).
PLATEAU_MIN_FLOWS = 5


@dataclass(frozen=True)
class Plateau:
    """A percentile whose replicates split at ``threshold`` seconds."""

    series: str
    threshold: float
    #: The percentile's typical value below and above the gap (medians of the replicates).
    below: float
    above: float
    #: Flows beyond the threshold, among ``flows`` behind the percentile.
    beyond: int
    flows: int
    #: The share beyond, with its interval (Wilson, pooled flows), in percent.
    share: float
    share_lo: float
    share_hi: float
    #: The share the percentile reads (100 − q: 1 % for the 99th).
    tail_pct: float

    def side(self) -> str:
        """``above`` when the share is shown to exceed the tail, ``below`` when it is shown
        to fall short, ``open`` (a knife edge) otherwise."""
        if self.share_lo > self.tail_pct:
            return "above"
        if self.share_hi < self.tail_pct:
            return "below"
        return "open"

    def text(self) -> str:
        """One line for the report."""
        return (f"{self.series}'s p{100 - self.tail_pct:g} sits on a timeout plateau: "
                f"{self.beyond:,} of {self.flows:,} flows ({self.share:.2f} % "
                f"[{self.share_lo:.2f}, {self.share_hi:.2f}]) took ≥ {self.threshold:.3g} s, "
                f"against the {self.tail_pct:g} % the percentile reads; it is "
                f"~{self.above:.3g} s when more than {self.tail_pct:g} % do, "
                f"~{self.below:.3g} s otherwise")  # fmt: skip


def find_plateau(series: str, reps: np.ndarray, sample: Sample, name: str, short_max: int,
                 confidence: float = stats.CONFIDENCE) -> Plateau | None:  # fmt: skip
    """The plateau of one series' percentile ``name`` from its replicates, or None."""
    m = stats.metric(name, short_max, sample.mss or 1)
    if m.kind != "quantile" or not sample.flows:
        return None
    values = np.sort(np.concatenate([m.value(f, short_max)[m.mask(f, short_max)]  # type: ignore[misc]
                                     for f in sample.flows]))  # fmt: skip
    n = len(values)
    if n < 20 or values[0] <= 0:
        return None
    # the order statistics a resample can put at the percentile's rank
    center = m.q * (n - 1)
    sd = float(np.sqrt(n * m.q * (1 - m.q)))
    lo_i = int(max(0, np.floor(center - PLATEAU_SPREAD * sd)))
    hi_i = int(min(n - 1, np.ceil(center + PLATEAU_SPREAD * sd)))
    window = values[lo_i:hi_i + 1]
    if len(window) < 2:
        return None
    ratios = window[1:] / window[:-1]
    j = int(np.argmax(ratios))
    if ratios[j] < PLATEAU_GAP:
        return None
    threshold = float(np.sqrt(window[j] * window[j + 1]))
    beyond = int((values >= threshold).sum())
    if beyond < PLATEAU_MIN_FLOWS:
        return None  # a thin tail, not a plateau (the ⚠ of a thin percentile says so)
    lo, hi = stats.wilson_at(beyond, n, confidence)
    # the percentile's value on either side: the order statistics at its rank when the
    # flows beyond the gap are more, or fewer, than its tail
    rank = int(round(center))
    return Plateau(series, threshold, float(values[min(rank, n - beyond - 1)]),
                   float(values[max(rank, n - beyond)]), beyond, n, 100.0 * beyond / n,
                   100.0 * lo, 100.0 * hi, 100.0 * (1.0 - m.q))  # fmt: skip


@dataclass(frozen=True)
class MeanNote:
    """The rare-event line of a mean effect."""

    parts: tuple[tuple[str, stats.TimeoutShare], ...]
    #: The effect recomputed without each series' flows with a timeout.
    effect_without: float

    def text(self) -> str:
        """``tcp: 97 % of the mean from 4 of 1,641 flows with a timeout; repflow: 0 % …;
        without them: −9 %``."""
        cells = []
        for s, t in self.parts:
            cells.append(f"{s} {100 * t.share:.0f} % of its mean from {t.with_timeout:,} of "
                         f"{t.flows:,} flows with a timeout")  # fmt: skip
        eff = "n/a" if not np.isfinite(self.effect_without) else (
            f"{self.effect_without:+.1f} %".replace("-", "−"))  # fmt: skip
        return "; ".join(cells) + f"; effect without them {eff}"

    def dominated(self, share: float = 0.5) -> bool:
        """Whether one series' mean is carried mostly (≥ ``share``) by flows with a
        timeout."""
        return any(t.share >= share for _, t in self.parts)


def mean_note(a: str, sa: Sample, b: str, sb: Sample, name: str, short_max: int
              ) -> MeanNote | None:  # fmt: skip
    """The timeout share of both series' means and the effect without those flows (a
    reduction of a against b, percent); None when the records carry no timeout counts."""
    ta, tb = stats.timeout_share(name, sa, short_max), stats.timeout_share(name, sb, short_max)
    if ta is None or tb is None:
        return None
    eff = float(stats.reduction(np.array([ta.mean_without]), np.array([tb.mean_without]))[0])
    return MeanNote(((a, ta), (b, tb)), eff)
