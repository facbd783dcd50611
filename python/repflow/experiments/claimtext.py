"""How verdicts read: numbers printed as they were decided, every point's effect with its
interval and the flows behind it, why an open claim is open and what would settle it.

Numbers *as decided*: a bound printed next to a boundary it is tested against never rounds
across it (a lower bound of 49.61 tested against 50 prints as 49.6, not 50).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from repflow.experiments import verdicts as vd
from repflow.experiments.stats import Interval


class Point(Protocol):
    """What rendering reads of a point (:class:`repflow.experiments.evidence.Point`)."""

    part: str
    workload: str
    load: float
    unit: str
    interval: Interval
    fw: Interval | None
    regions: vd.Regions
    plateau: Any
    mean_note: Any
    notes: list[str]

    def where(self) -> str:
        """Where the point is, in words."""
        ...

    def open_boundary(self) -> float | None:
        """The boundary that keeps the point open."""
        ...

    def open_on_fw(self) -> bool:
        """Whether only the family-wise interval keeps the point open."""
        ...

_WL = {"websearch": "web search", "datamining": "data mining"}


def workload_name(w: str) -> str:
    """``web search`` for ``websearch``."""
    return _WL.get(w, w)


def _no_minus_zero(text: str) -> str:
    """``-0 %`` / ``+0 %`` / ``-0.00 %`` (a value that rounds to zero) lose their sign."""
    num, sep, rest = text.partition(" ")
    try:
        if float(num) == 0:
            num = num.lstrip("+-")
    except ValueError:
        pass
    return num + sep + rest


def decided(x: float, boundaries: Iterable[float] = (), digits: int | None = None) -> str:
    """``x`` with as few decimals as the report uses (two below 10, none above), but more
    where fewer would round it onto or across one of ``boundaries``."""
    if not math.isfinite(x):
        return "−∞" if x < 0 else "+∞"
    d = digits if digits is not None else (2 if abs(x) < 10 else 0)
    for _ in range(8):
        txt = f"{x:.{d}f}"
        r = float(txt)
        if all(_same_side(x, r, b) for b in boundaries):
            break
        d += 1
    return _no_minus_zero(f"{x:.{d}f}").replace("-", "−")


def _same_side(x: float, r: float, b: float) -> bool:
    if x == b:
        return r == b
    return (x < b) == (r < b) and r != b


def fmt(x: float, unit: str = "%", boundaries: Iterable[float] = ()) -> str:
    """A value with its unit, decided against ``boundaries``."""
    if not math.isfinite(x):
        return "−∞" if x < 0 else "+∞"
    if unit == "s":
        return f"{x:.4f} s"
    return f"{decided(x, boundaries)} {unit}"


def interval_text(p: Point, lo: float | None = None, hi: float | None = None) -> str:
    """``[lo, hi]`` of a point, each bound decided against the point's boundaries."""
    iv = p.interval
    b = p.regions.boundaries()
    lo = iv.lo if lo is None else lo
    hi = iv.hi if hi is None else hi
    return f"[{fmt(lo, p.unit, b)}, {fmt(hi, p.unit, b)}]"


def flows_text(p: Point) -> str:
    """``639/641 flows, 3 seeds`` — the flows behind the effect, per series."""
    iv = p.interval
    fl = "/".join(f"{n:,}" for n in iv.flows) if iv.flows else "no flow sample"
    return f"{fl} flows, {iv.seeds} seed{'s' if iv.seeds != 1 else ''}"


def point_cell(p: Point, with_load: bool = True) -> str:
    """``0.5: 63.2 % [57.4, 81.0] (reproduced)`` with the rare-event marks."""
    b = p.regions.boundaries()
    est = fmt(p.interval.estimate, p.unit, b)
    head = f"{p.load:g}: " if with_load and p.workload != "trace" else ""
    marks = ""
    if p.interval.thin():
        marks += " ⚠"
    if p.plateau is not None:
        marks += " ⧗"
    if p.mean_note is not None and p.mean_note.dominated():
        marks += " †"
    return f"{head}{est} {interval_text(p)}{marks}"


def describe_points(points: Sequence[Point]) -> str:
    """Every point's estimate with its interval, grouped by part and workload, with the flows
    behind each effect per series."""
    out = []
    for part, pts in itertools.groupby(points, key=lambda p: p.part):
        by_w: dict[str, list[Point]] = {}
        for p in pts:
            by_w.setdefault(p.workload, []).append(p)
        txt = []
        for w, ps in by_w.items():
            cells = ", ".join(point_cell(p) for p in ps)
            n = ps[0].interval
            head = "effect" if w == "trace" else "load: effect"
            # a study's own workload (FA-DCTCP's "short-flows") is not a claim's label
            name = f"{workload_name(w)} " if w in _WL else ""
            txt.append(f"{name}({head} [{vd.level_text()} % interval]; {_counts_short(ps)}): "
                       f"{cells}"
                       if n.flows else f"{name}{cells}")  # fmt: skip
        out.append((f"{part}: " if part else "") + "; ".join(txt))
    return " | ".join(out)


def _counts_short(ps: Sequence[Point]) -> str:
    per = [min(p.interval.flows) for p in ps if p.interval.flows]
    seeds = max(p.interval.seeds for p in ps)
    if not per:
        return f"{seeds} seed{'s' if seeds != 1 else ''}"
    lo, hi = min(per), max(per)
    span = f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"
    return f"{span} flows per series, {seeds} seed{'s' if seeds != 1 else ''}"


#: A mean effect's timeout line is printed when flows that waited for a timeout carry at least
#: this share of either series' mean (``claim_points.csv`` has every point's figures).
NOTE_SHARE = 0.10


def notes(points: Sequence[Point]) -> list[str]:
    """The rare-event lines of a claim's points, one per point that has any: a mean carried
    for :data:`NOTE_SHARE` or more by flows that waited for a timeout, a percentile on a
    timeout plateau."""
    out = []
    for p in points:
        parts = []
        if p.mean_note is not None and p.mean_note.dominated(NOTE_SHARE):
            parts.append(p.mean_note.text())
        if p.plateau is not None:
            parts.append(p.plateau.text())
        parts += p.notes
        if parts:
            out.append(f"{p.where()}: " + "; ".join(parts))
    return out


def deciding_text(points: Sequence[Point], idx: Sequence[int], verdict: str, m: int) -> str:
    """The point(s) that decide a not-reproduced verdict, with the family-wise interval they
    were decided on."""
    if not idx:
        return ""
    p = points[idx[0]]
    fw = p.fw
    level = vd.level_text(vd.family_confidence(m))
    span = interval_text(p, fw.lo, fw.hi) if fw is not None else interval_text(p)
    more = f" (and {len(idx) - 1} more point{'s' if len(idx) > 2 else ''})" if len(idx) > 1 else ""
    how = f"{level} % interval over {m} points" if m > 1 else f"{vd.level_text()} % interval"
    return (f"{p.where()}: {fmt(p.interval.estimate, p.unit, p.regions.boundaries())} "
            f"{span} ({how}; {flows_text(p)}){more}")  # fmt: skip


def why_open(points: Sequence[Point], open_idx: Sequence[int], settle: str) -> str:
    """Why a claim is open: every point that keeps it open, with the boundary that keeps it
    open, and what would settle it."""
    parts = []
    m = len(points)
    for i in open_idx:
        p = points[i]
        cut = p.open_boundary()
        at = (f" straddles {f'{cut:g}'.replace('-', '−')} {p.unit}" if cut is not None
              else "")  # fmt: skip
        span = interval_text(p)
        if p.open_on_fw() and p.fw is not None:
            level = vd.level_text(vd.family_confidence(m))
            span = f"{span}, at {level} % {interval_text(p, p.fw.lo, p.fw.hi)}"
        if p.plateau is not None and p.plateau.side() == "open":
            at = " sits on a knife edge (timeout plateau)"
        parts.append(f"{p.where()}: {span}{at} ({flows_text(p)})")
    return ("reproduced or not: " + "; ".join(parts) + (f"; {settle}" if settle else ""))
