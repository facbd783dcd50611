"""The verdict vocabulary and the rules that turn intervals into verdicts (docs/metrics.md,
"Intervals and verdicts").

A claim's effect at one point (a workload and load) is compared with the *published range*
widened by the claim's tolerance. The line of possible effects is cut into regions, each
labelled by what an effect there would mean for the claim:

* ``reproduced`` — inside the published range;
* ``reproduced, larger than published`` — beyond it on the claimed side (a claimed "50–70 %
  lower" measured 85 % lower);
* ``not reproduced — smaller`` — on the claimed side of zero but short of the range (or, for
  a level or an "at least" claim, below it);
* ``not reproduced — opposite sign`` — the other side of zero;
* ``not reproduced — larger`` — above what an "at most" / "negligible" / level claim allows.

A point's interval admits the regions it meets. Its verdict is the one region it admits,
``not reproduced — sign open`` when it admits exactly "smaller" and "opposite sign", and
``open`` while "reproduced" is still possible together with anything else.

A claim over several points combines them at a stated *family-wise* level:

* a claim that must hold at every point ("at every load") is **reproduced** when every
  point's 95 % interval lies in the reproduced regions (an intersection–union rule: each point
  must pass its own 95 % test, so no adjustment is due), and **not reproduced** when one point
  at least lies outside them by its Bonferroni interval at 1 − 0.05/m (m = the claim's points),
  so that the chance of calling a claim refuted while it holds everywhere stays ≤ 5 %;
* a claim that needs one point ("up to 10× lower") swaps the two: reproduced when one point's
  Bonferroni interval lies in the reproduced regions, not reproduced when every point's 95 %
  interval lies outside them;
* anything else is **open**, with the points and the boundary that keep it open.

A claim also states the operating point it is about where the paper's number depends on one
(MPTCP-L's: MPTCP completes about 45 % of short flows within 50 ms); a study that does not
reach it gets **regime not reached** with the measured value instead of a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

REPRODUCED = "reproduced"
LARGER = "reproduced, larger than published"
SMALLER = "not reproduced — smaller"
OPPOSITE = "not reproduced — opposite sign"
EXCEEDS = "not reproduced — larger"
SIGN_OPEN = "not reproduced — sign open"
OPEN = "open"
REGIME = "regime not reached"
NOT_MEASURED = "not measured"

#: Verdicts that say the published claim was reproduced.
REPRODUCED_KINDS = (REPRODUCED, LARGER)
#: Verdicts that say it was not.
NOT_REPRODUCED_KINDS = (SMALLER, OPPOSITE, EXCEEDS, SIGN_OPEN)
#: Every verdict, in the order the reports list them.
VERDICTS = (*REPRODUCED_KINDS, *NOT_REPRODUCED_KINDS, OPEN, REGIME, NOT_MEASURED)
#: Verdicts that decide the claim.
CONCLUSIVE = (*REPRODUCED_KINDS, *NOT_REPRODUCED_KINDS)

#: Family-wise error rate of every claim's verdict.
FAMILY_ALPHA = 0.05

#: The error rate each evaluation of a claim spends: :data:`FAMILY_ALPHA` for one look at the
#: data; a sequential run (``repflow reproduce --budget``) that may look at a claim up to L
#: times spends ``FAMILY_ALPHA / L`` at each look (Bonferroni over looks, docs/metrics.md).
_LOOK_ALPHA: ContextVar[float] = ContextVar("repflow_look_alpha", default=FAMILY_ALPHA)


def alpha() -> float:
    """The error rate of the evaluation under way (:func:`at_alpha`; default
    :data:`FAMILY_ALPHA`)."""
    return _LOOK_ALPHA.get()


def confidence() -> float:
    """The two-sided confidence of a single point's interval: ``1 − alpha()`` (95 % unless a
    sequential run spends less at each look)."""
    return 1.0 - alpha()


def level_text(conf: float | None = None) -> str:
    """``95``, ``99``, ``99.5``: a confidence (default :func:`confidence`) in percent, as the
    reports print it."""
    c = confidence() if conf is None else conf
    return f"{100 * c:.2f}".rstrip("0").rstrip(".")


@contextmanager
def at_alpha(a: float) -> Iterator[None]:
    """Evaluates claims at error rate ``a`` inside the block (0 < a < 1)."""
    if not 0.0 < a < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {a}")
    token = _LOOK_ALPHA.set(float(a))
    try:
        yield
    finally:
        _LOOK_ALPHA.reset(token)

#: Region kinds (a subset of the verdicts).
_REGION_KINDS = (REPRODUCED, LARGER, SMALLER, OPPOSITE, EXCEEDS)


def family(verdict: str) -> str:
    """``reproduced``, ``not reproduced``, or the verdict itself (open, regime not reached,
    not measured): what the headline counts."""
    if verdict in REPRODUCED_KINDS:
        return "reproduced"
    if verdict in NOT_REPRODUCED_KINDS:
        return "not reproduced"
    return verdict


def opposite_kinds(a: str, b: str) -> bool:
    """Whether two verdicts of one claim are of opposite kinds (reproduced against not
    reproduced)."""
    fa, fb = family(a), family(b)
    return {fa, fb} == {"reproduced", "not reproduced"}


@dataclass(frozen=True)
class Region:
    """A stretch of the effect's line and what an effect there means for the claim."""

    lo: float
    hi: float
    kind: str
    lo_closed: bool = False
    hi_closed: bool = False

    def meets(self, lo: float, hi: float) -> bool:
        """Whether the closed interval [lo, hi] meets this region."""
        below_top = lo < self.hi or (lo == self.hi and self.hi_closed)
        above_bottom = hi > self.lo or (hi == self.lo and self.lo_closed)
        return below_top and above_bottom


@dataclass(frozen=True)
class Regions:
    """The regions of one point's line, low to high, and which side the claim is on."""

    regions: tuple[Region, ...]
    #: How the claim reads, for the report: e.g. "claimed: 40–80 % (50–70 ± 10)".
    side: str = ""

    def admits(self, lo: float, hi: float) -> frozenset[str]:
        """Region kinds an interval [lo, hi] meets (every kind when it is unbounded)."""
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return frozenset(r.kind for r in self.regions)
        return frozenset(r.kind for r in self.regions if r.meets(lo, hi))

    def boundaries(self) -> tuple[float, ...]:
        """Every finite cut between two regions."""
        return tuple(r.hi for r in self.regions[:-1] if math.isfinite(r.hi))

    def verdict_boundaries(self) -> tuple[float, ...]:
        """Cuts between a reproduced and a not-reproduced region: the ones a claim's verdict
        can turn on."""
        out = []
        for a, b in zip(self.regions, self.regions[1:], strict=False):
            if family(a.kind) != family(b.kind) and math.isfinite(a.hi):
                out.append(a.hi)
        return tuple(out)

    def kind_at(self, x: float) -> str:
        """The kind of the region holding ``x``."""
        for r in self.regions:
            if r.meets(x, x):
                return r.kind
        return self.regions[-1].kind


_INF = float("inf")


def reduction_regions(lo: float, hi: float, tol: float) -> Regions:
    """"a is lo–hi % lower than b" (± tol points); negative bounds claim a is slower
    ("15–45 % slower": lo = −45, hi = −15): larger in magnitude than published is
    "reproduced, larger", closer to zero "smaller", across zero "opposite sign"."""
    rlo, rhi = lo - tol, hi + tol
    side = f"claimed {_num(lo)}–{_num(hi)} %" if lo != hi else f"claimed {_num(lo)} %"
    if tol:
        side += f" ± {_num(tol)}"
    if hi > 0:  # a reduction; no effect at all (0) counts as smaller, not opposite
        rlo = max(rlo, 0.0)
        regs = [Region(-_INF, 0.0, OPPOSITE)]
        if rlo > 0:
            regs.append(Region(0.0, rlo, SMALLER, lo_closed=True))
        regs.append(Region(rlo, rhi, REPRODUCED, lo_closed=True, hi_closed=True))
        regs.append(Region(rhi, _INF, LARGER))
        return Regions(tuple(regs), side + " (lower is the claim's side)")
    rhi = min(rhi, 0.0)
    regs = [Region(-_INF, rlo, LARGER),
            Region(rlo, rhi, REPRODUCED, lo_closed=True, hi_closed=True)]  # fmt: skip
    if rhi < 0:
        regs.append(Region(rhi, 0.0, SMALLER, hi_closed=True))
    regs.append(Region(0.0, _INF, OPPOSITE))
    return Regions(tuple(regs), side + " (slower is the claim's side)")


def within_regions(lo: float, hi: float, what: str = "") -> Regions:
    """"the value lies in [lo, hi]": below is "smaller", above "larger" (levels, and "barely
    changes" claims, whose both sides are "larger" in magnitude when ``lo`` = −``hi``)."""
    below = EXCEEDS if lo < 0 < hi and lo == -hi else SMALLER
    side = what or f"claimed {_num(lo)} … {_num(hi)}"
    return Regions((Region(-_INF, lo, below),
                    Region(lo, hi, REPRODUCED, lo_closed=True, hi_closed=True),
                    Region(hi, _INF, EXCEEDS)), side)  # fmt: skip


def at_least_regions(x: float, what: str = "") -> Regions:
    """"the value is at least x": below is "smaller"."""
    return Regions((Region(-_INF, x, SMALLER),
                    Region(x, _INF, REPRODUCED, lo_closed=True)),
                   what or f"claimed ≥ {_num(x)}")  # fmt: skip


def _num(x: float) -> str:
    return f"{x:g}".replace("-", "−")


def point_verdict(kinds: Iterable[str]) -> str:
    """The verdict of a set of admitted region kinds."""
    k = frozenset(kinds)
    if not k:
        return OPEN
    if k <= set(REPRODUCED_KINDS):
        return LARGER if k == {LARGER} else REPRODUCED
    if k <= {SMALLER, OPPOSITE, EXCEEDS}:
        if len(k) == 1:
            return next(iter(k))
        return SIGN_OPEN
    return OPEN


def _strongest_not(verdicts: Sequence[str]) -> str:
    """The not-reproduced verdict a claim takes from its refuting points: opposite sign if
    one point is shown opposite, else larger, else smaller, else sign open."""
    for v in (OPPOSITE, EXCEEDS, SMALLER):
        if v in verdicts:
            return v
    return SIGN_OPEN


@dataclass(frozen=True)
class Decision:
    """A claim's verdict and the indices of the points that decide or keep it open."""

    verdict: str
    deciding: tuple[int, ...]
    #: Points that keep an open claim open.
    open_points: tuple[int, ...] = ()


def decide_all(kinds95: Sequence[frozenset[str]], kinds_fw: Sequence[frozenset[str]]
               ) -> Decision:  # fmt: skip
    """A claim that must hold at every point: reproduced when every point's 95 % interval is
    reproduced; not reproduced when one point's family-wise interval is not; else open."""
    if not kinds95:
        return Decision(NOT_MEASURED, ())
    refuting = [i for i, k in enumerate(kinds_fw)
                if family(point_verdict(k)) == "not reproduced"]  # fmt: skip
    if refuting:
        v = _strongest_not([point_verdict(kinds_fw[i]) for i in refuting])
        return Decision(v, tuple(i for i in refuting if point_verdict(kinds_fw[i]) == v))
    verdicts = [point_verdict(k) for k in kinds95]
    if all(family(v) == "reproduced" for v in verdicts):
        v = LARGER if all(x == LARGER for x in verdicts) else REPRODUCED
        return Decision(v, ())
    open_pts = tuple(i for i, v in enumerate(verdicts) if family(v) != "reproduced")
    return Decision(OPEN, (), open_pts)


def decide_any(kinds95: Sequence[frozenset[str]], kinds_fw: Sequence[frozenset[str]]
               ) -> Decision:  # fmt: skip
    """A claim that needs one point ("up to N× lower"): reproduced when one point's
    family-wise interval is reproduced; not reproduced when every point's 95 % interval is
    not; else open."""
    if not kinds95:
        return Decision(NOT_MEASURED, ())
    winning = [i for i, k in enumerate(kinds_fw) if family(point_verdict(k)) == "reproduced"]
    if winning:
        v = LARGER if all(point_verdict(kinds_fw[i]) == LARGER for i in winning) else REPRODUCED
        return Decision(v, tuple(winning))
    verdicts = [point_verdict(k) for k in kinds95]
    if all(family(v) == "not reproduced" for v in verdicts):
        return Decision(_strongest_not(verdicts), ())
    open_pts = tuple(i for i, v in enumerate(verdicts) if family(v) != "not reproduced")
    return Decision(OPEN, (), open_pts)


def family_confidence(points: int) -> float:
    """The two-sided confidence of each point's interval that keeps a claim over ``points``
    points at :func:`alpha` family-wise (Bonferroni; :data:`FAMILY_ALPHA` unless a sequential
    run spends less per look)."""
    return 1.0 - alpha() / max(points, 1)


def headline(verdicts: Iterable[str]) -> dict[str, int]:
    """Counts per family: reproduced, not reproduced, open, regime not reached, not
    measured."""
    out: dict[str, int] = {}
    for v in verdicts:
        f = family(v)
        out[f] = out.get(f, 0) + 1
    return out


def headline_line(counts: dict[str, int]) -> str:
    """``9 reproduced, 8 not reproduced, 4 open`` (and the rest, where any)."""
    if not counts:
        return "not run"
    parts = [f"{counts.get('reproduced', 0)} reproduced",
             f"{counts.get('not reproduced', 0)} not reproduced",
             f"{counts.get(OPEN, 0)} open"]  # fmt: skip
    for k in (REGIME, NOT_MEASURED):
        if counts.get(k):
            parts.append(f"{counts[k]} {k}")
    return ", ".join(parts)
