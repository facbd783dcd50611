"""Figures of a sweep (matplotlib, Agg backend; every figure saved as PNG and SVG).

Per workload:

* ``<w>_fct`` — FCT against load per scheme: (0,100KB] mean and 99th percentile, (100KB,∞) mean,
  overall mean (the RepFlow paper's Figs. 8, 9 and 12), error bars = 95 % confidence intervals
  (a mean's across seeds, Student t; a pooled p99's from its order statistics);
* ``<w>_slowdown`` — the same, normalized by each flow's ideal FCT (slowdown), with the
  analytical model's curves beside them when :mod:`repflow.model` provides them;
* ``<w>_gain`` — reduction of short-flow mean and 99th-percentile FCT against the baseline;
* ``<w>_cdf`` — CDFs of short-flow FCT at chosen loads (seeds pooled);
* ``<w>_ccdf`` — the same flows as a CCDF (1 − CDF) on log-log axes, where the tail is visible;
* ``<w>_retx`` — retransmitted packets per 100 data segments by cause (fast retransmit, RTO,
  MPTCP-L's fast detection and aggressive timer), per scheme and load (MPTCP-L's Fig. 4), when
  the sweep has a scheme with its own loss detection.

Short flows are those of at most ``figures.short_max_bytes`` (100 KB unless the spec says
otherwise); titles say which edge.

Presentation rules (tested): every figure is at most :data:`MAX_WIDTH_PX` pixels wide, the
width the report's HTML shows it at, so its text is never scaled down (tick labels
:data:`TICK_PT` pt at :data:`DPI` dpi); legends sit outside the axes, never over data; a y axis
whose values span more than :data:`LOG_SPAN` × is logarithmic.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from repflow.experiments.analysis import (  # noqa: E402
    Loaded,
    aggregate,
    metric_titles,
    series_order,
    size_label,
)

_KNOWN_COLORS = {
    "tcp": "#444444",
    "repflow": "#1f77b4",
    "dctcp": "#ff7f0e",
    "repflow-dctcp": "#2ca02c",
    "pfabric": "#d62728",
    "smartrep": "#9467bd",
    "fullrep": "#8c564b",
    "mptcp": "#e377c2",
    "mptcp-l": "#bcbd22",
    "l2dct": "#17becf",
    "fa-dctcp": "#7f7f7f",
}
_MARKERS = "osD^v<>ph*"
#: Resolution of the PNGs and the widest figure, in pixels (the report's HTML column is 1250 px
#: wide: a figure no wider is shown at its own size, so its fonts keep their size).
DPI = 110
MAX_WIDTH_PX = 1200
#: Font sizes, points (at DPI 110: 11 pt ≈ 17 px).
TICK_PT = 11
LABEL_PT = 12
TITLE_PT = 13
#: Characters per line of a figure's title (longer titles wrap: at 13 pt, ~100 fit 1,200 px).
TITLE_CHARS = 95
#: A y axis whose positive values span more than this ratio is drawn on a log scale.
LOG_SPAN = 20.0
_STYLE = {
    "font.size": LABEL_PT,
    "axes.titlesize": LABEL_PT,
    "axes.labelsize": LABEL_PT,
    "xtick.labelsize": TICK_PT,
    "ytick.labelsize": TICK_PT,
    "legend.fontsize": TICK_PT,
    "figure.titlesize": TITLE_PT,
}
#: Widest figure, inches.
_W = MAX_WIDTH_PX / DPI - 0.3


@dataclass
class Figure:
    """A saved figure."""

    name: str
    title: str
    png: Path
    svg: Path
    workload: str


def _color(series: str, i: int) -> str:
    base = series.split(" (")[0]
    if base in _KNOWN_COLORS and base == series:
        return _KNOWN_COLORS[base]
    return plt.get_cmap("tab10")(i % 10)


def workload_title(w: str, labels: dict[str, str]) -> str:
    """Display name of a workload."""
    if w in labels:
        return labels[w]
    return {"websearch": "Web search", "datamining": "Data mining",
            "trace": "Trace"}.get(w, w)  # fmt: skip


def _log_if_wide(ax, values) -> bool:  # noqa: ANN001
    """Log y scale when the positive finite ``values`` span more than :data:`LOG_SPAN` ×."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    v = np.asarray([x for x in values if np.isfinite(x) and x > 0], dtype=float)
    if len(v) and v.max() / v.min() > LOG_SPAN:
        ax.set_yscale("log")
        # plain numbers at 1, 2, 5 × 10^n, not 4×10^1 on every minor tick
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        return True
    return False


#: Fewest seeds for which a mean's Student t interval across seeds is drawn.
T_BARS_MIN_SEEDS = 3


def _ci_bars(s: pd.DataFrame, col: str, y: np.ndarray, scale: float) -> np.ndarray | None:
    """Error bars of ``col``: the 95 % interval of a mean across seeds (Student t), or of a
    pooled percentile (order statistics; an unbounded upper end is drawn to the axis edge)."""
    if f"{col}_ci95" in s:
        if "seeds" in s and float(s["seeds"].min()) < T_BARS_MIN_SEEDS:
            return None  # a t interval over two seeds (t = 12.7) says nothing but its width
        half = s[f"{col}_ci95"].fillna(0).to_numpy(dtype=float) * scale
        return half if np.any(half > 0) else None
    if f"{col}_ci_lo" in s:
        lo = s[f"{col}_ci_lo"].to_numpy(dtype=float) * scale
        hi = s[f"{col}_ci_hi"].to_numpy(dtype=float) * scale
        top = np.nanmax(np.where(np.isfinite(hi), hi, y)) * 1.5 if len(y) else 0.0
        hi = np.where(np.isfinite(hi), hi, top)
        bars = np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)])
        bars = np.nan_to_num(bars)
        return bars if np.any(bars > 0) else None
    return None


def _legend_below(fig: plt.Figure, axes, ncol_max: int = 6) -> None:  # noqa: ANN001
    """One legend for the figure, below the axes (never over data)."""
    handles, labels = [], []
    for ax in np.ravel(axes):
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if labels:
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=min(ncol_max, len(labels)), frameon=False)  # fmt: skip


def _wrap_title(text: str) -> str:
    """``text`` with every line wrapped at :data:`TITLE_CHARS` characters."""
    import textwrap

    return "\n".join(w for ln in text.split("\n") for w in textwrap.wrap(ln, TITLE_CHARS))


def _suptitle(fig: plt.Figure, text: str) -> None:
    """The figure's title, wrapped before the layout is computed (wrapping it afterwards
    would cost a second tight_layout)."""
    fig.suptitle(_wrap_title(text))


def _fit_width(fig: plt.Figure) -> None:
    """Fewer legend columns until the saved figure is at most :data:`MAX_WIDTH_PX` wide (a
    legend of long labels would otherwise widen it past the report's column)."""
    sup = fig._suptitle  # noqa: SLF001 - matplotlib keeps no public getter
    if sup is not None:
        wrapped = _wrap_title(sup.get_text())
        if wrapped != sup.get_text():
            sup.set_text(wrapped)
            fig.tight_layout()
    for _ in range(8):
        if not fig.legends:
            return
        lg = fig.legends[0]
        ncol = lg._ncols  # noqa: SLF001 - matplotlib keeps no public getter
        legend_px = lg.get_window_extent(fig.canvas.get_renderer()).width * DPI / fig.dpi
        if ncol <= 1 or legend_px <= MAX_WIDTH_PX - 60:
            return  # the legend is not what makes the figure wide
        # Only now the whole figure's width: a layout pass (text extents, every tick), no pixels
        fig.draw_without_rendering()
        width = fig.get_tightbbox(fig.canvas.get_renderer()).width * DPI
        # the saved PNG adds savefig's padding and renders text a little wider: keep a margin
        if width <= MAX_WIDTH_PX - 60:
            return
        handles, labels = lg.legend_handles, [t.get_text() for t in lg.get_texts()]
        lg.remove()
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=max(1, ncol - 1), frameon=False)  # fmt: skip


def _save(fig: plt.Figure, out: Path, name: str) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    _fit_width(fig)
    # The tight bounding box (what bbox_inches="tight" computes), once, at the PNG's
    # resolution, for both files: "tight" would lay the figure out again (text extents, every
    # tick) in a pass without pixels before each file, and so would the placeholder layout
    # engine that tight_layout() leaves behind. That pass changes nothing here (no layout
    # engine, no aspect-constrained axes): get_tightbbox measures the same artists.
    fig.set_dpi(DPI)
    bbox = fig.get_tightbbox(fig.canvas.get_renderer()).padded(
        plt.rcParams["savefig.pad_inches"])
    fig.set_layout_engine(None)
    png, svg = out / f"{name}.png", out / f"{name}.svg"
    fig.savefig(png, dpi=DPI, bbox_inches=bbox)
    fig.savefig(svg, bbox_inches=bbox, metadata={"Date": None})
    plt.close(fig)
    return png, svg


def model_curves(
    workload: str, loads: list[float], short_max: int, init_cwnd: float = 12, mss: int = 1460,
    schemes: list[str] | None = None,
) -> dict[str, pd.DataFrame] | None:
    """The analytical model's normalized FCTs per scheme (columns load, short_mean, short_p99,
    large_mean), or ``None`` when :mod:`repflow.model` is absent or cannot evaluate them."""
    try:
        from repflow.model import fct_table
    except ImportError:
        return None
    try:
        table = fct_table(workload, loads, k=init_cwnd, S_L=short_max / mss, mss=mss)
    except Exception:  # noqa: BLE001 - the model is an optional overlay
        return None
    out = {}
    for scheme in ("tcp", "repflow"):
        if schemes is not None and scheme not in schemes:
            continue
        cols = {m: f"{scheme}_{m}" for m in ("short_mean", "short_p99", "large_mean")}
        if not all(c in table.columns for c in cols.values()):
            continue
        df = pd.DataFrame({"load": table["load"]})
        for m, c in cols.items():
            df[m] = table[c]
        out[scheme] = df
    return out or None


def _offsets(order: list[str], loads: list[float]) -> dict[str, float]:
    """A sideways offset per series so that intervals do not hide each other, never more
    than about a marker's width (1.2 % of the load axis's span)."""
    span = (max(loads) - min(loads)) if len(loads) > 1 else 1.0
    mid = (len(order) - 1) / 2
    step = 0.012 * span / max(mid, 1.0)
    return {s: step * (i - mid) for i, s in enumerate(order)}


def identical_series(sub: pd.DataFrame, order: list[str], cols: list[str]) -> list[tuple[str, str]]:
    """(hidden, shown) pairs of series whose values equal an earlier series' in every one of
    ``cols`` at every load: drawn on top of each other, the later one would be invisible."""
    out = []
    for j, b in enumerate(order):
        sb = sub[sub["series"] == b].sort_values("load")
        if sb.empty:
            continue
        for a in order[:j]:
            sa = sub[sub["series"] == a].sort_values("load")
            if len(sa) != len(sb) or list(sa["load"]) != list(sb["load"]):
                continue
            va = sa[cols].to_numpy(dtype=float)
            vb = sb[cols].to_numpy(dtype=float)
            if np.allclose(va, vb, rtol=1e-12, atol=0, equal_nan=True):
                out.append((b, a))
                break
    return out


def _hidden_note(pairs: list[tuple[str, str]]) -> str:
    # the later series is drawn last, over the earlier one
    return "; ".join(f"{a} is hidden under {b}: the same values here (summary.csv)"
                     for b, a in pairs)  # fmt: skip


def _linear_top(y: np.ndarray, hi: np.ndarray | None) -> float | None:
    """Top of a linear axis from the data, not from one runaway interval: the largest value
    × 1.25, or an interval's top where it stays within 3× of that."""
    y = y[np.isfinite(y)]
    if not len(y):
        return None
    top = float(y.max()) * 1.25
    if hi is not None:
        h = hi[np.isfinite(hi)]
        h = h[h <= 3 * float(y.max())]
        if len(h):
            top = max(top, float(h.max()) * 1.05)
    return top if top > 0 else None


def plot_workload(
    agg: pd.DataFrame,
    workload: str,
    order: list[str],
    out: Path,
    title: str,
    normalized: bool,
    model: dict[str, pd.DataFrame] | None = None,
    short_max: int = 100_000,
) -> Figure:
    """The four-panel FCT-against-load figure of one workload; with a single load, schemes
    side by side on a category axis instead of a load axis."""
    sub = agg[agg["workload"] == workload]
    loads = sorted(sub["load"].unique().tolist())
    single = len(loads) == 1
    fig, axes2 = plt.subplots(2, 2, figsize=(_W, 7.6))
    axes = axes2.ravel()
    suffix = "_slowdown" if normalized else ""
    offsets = _offsets(order, loads)
    any_bars = False
    metrics = metric_titles(short_max)
    hidden = identical_series(sub, order, [m + suffix for m, _ in metrics])
    present = [s for s in order if not sub[sub["series"] == s].empty]
    for ax, (metric, mtitle) in zip(axes, metrics, strict=True):
        col = metric + suffix
        shown: list[float] = []
        his: list[float] = []
        lows: list[float] = []
        drawn = 0
        for i, series in enumerate(order):
            s = sub[sub["series"] == series].sort_values("load")
            if s.empty:
                continue
            scale = 1.0 if normalized else 1e3
            y = s[col].to_numpy(dtype=float) * scale
            if not np.isfinite(y).any():
                continue
            drawn += 1
            err = _ci_bars(s, col, y, scale)
            if err is not None:
                any_bars = True
                e = np.atleast_2d(err)
                lo_e, hi_e = (e[0], e[-1]) if e.shape[0] == 2 else (e[0], e[0])
                his += list(y + hi_e)
                lows += list(y - lo_e)
            shown += list(y)
            x = (np.array([present.index(series)], dtype=float) if single
                 else s["load"].to_numpy(dtype=float) + offsets[series])  # fmt: skip
            ax.errorbar(
                x, y, yerr=err,
                label=series, color=_color(series, i), marker=_MARKERS[i % len(_MARKERS)],
                markersize=6 if single else 5, capsize=3, linewidth=0 if single else 1.6,
                elinewidth=1.4,
            )  # fmt: skip
        if normalized and model and not single:
            for scheme, m in model.items():
                if metric in m.columns:
                    shown += list(m[metric].to_numpy(dtype=float))
                    ax.plot(
                        m["load"], m[metric], linestyle="--", linewidth=1.2,
                        color=_color(scheme, order.index(scheme) if scheme in order else 0),
                        label=f"model: {scheme}",
                    )  # fmt: skip
        ax.set_title(mtitle)
        if single:
            ax.set_xticks(range(len(present)), present, rotation=20, ha="right")
            ax.set_xlim(-0.6, len(present) - 0.4)
            ax.set_xlabel("scheme" if workload == "trace" else f"scheme (load {loads[0]:g})")
        else:
            ax.set_xlabel("load")
        unit = "slowdown (FCT / ideal FCT)" if normalized else "FCT (ms)"
        if drawn == 0:
            ax.text(0.5, 0.5, "no finished flow in this size range\n(e.g. a large flow still "
                    "running when the run ended)", ha="center", va="center",
                    transform=ax.transAxes, color="#555", fontsize=TICK_PT)  # fmt: skip
            ax.set_ylabel(unit)
        elif _log_if_wide(ax, shown):
            ax.set_ylabel(f"{unit}, log")
            pos = [v for v in shown + lows if np.isfinite(v) and v > 0]
            if pos:
                # every positive interval end and its cap stay in view; an interval reaching
                # zero or below is cut at the axis' bottom
                ax.set_ylim(bottom=min(pos) / 1.5)
        else:
            ax.set_ylabel(unit)
            top = _linear_top(np.asarray(shown, dtype=float), np.asarray(his, dtype=float)
                              if his else None)  # fmt: skip
            ax.set_ylim(bottom=0, top=top)
            if top is not None and his and max(h for h in his if np.isfinite(h)) > top:
                ax.annotate("↑ interval continues", xy=(0.99, 0.98), xycoords="axes fraction",
                            ha="right", va="top", fontsize=TICK_PT - 2, color="#555")  # fmt: skip
        ax.margins(y=0.06)
        ax.grid(True, which="both", alpha=0.3)
    kind = "normalized FCT (slowdown)" if normalized else "FCT"
    against = f"per scheme at load {loads[0]:g}" if single else "against load"
    if workload == "trace":
        against = "per scheme"
    few_seeds = "seeds" in sub and float(sub["seeds"].min()) < T_BARS_MIN_SEEDS
    if not any_bars:
        bars = "; no interval drawn"
    elif few_seeds:
        bars = (f"; bars: 95 % intervals of the p99s (order statistics of the pooled flows); "
                f"none for means (fewer than {T_BARS_MIN_SEEDS} seeds)")
    else:
        bars = ("; bars: 95 % intervals (means: Student t across seeds; p99s: order "
                "statistics of the pooled flows)")
    note = _hidden_note(hidden)
    _suptitle(fig, f"{title}: {kind} {against}{bars}" + (f"\n{note}" if note else ""))
    fig.tight_layout()
    _legend_below(fig, axes)
    name = f"{workload}_{'slowdown' if normalized else 'fct'}"
    png, svg = _save(fig, out, name)
    caption = f"{title}: {kind} {against}" + (f" ({note})" if note else "")
    return Figure(name, caption, png, svg, workload)


#: A reduction plot's axis stops here; series beyond are named, not drawn off the scale.
REDUCTION_FLOOR = -100.0


#: ``(a, b, metric, workload, load) -> (lo, hi)``: the verdicts' 95 % interval of a reduction
#: (:class:`repflow.experiments.claims.Evidence`), drawn as the reduction plots' error bars.
ReductionIntervals = Callable[[str, str, str, str, float], "tuple[float, float] | None"]


def _reduction_panels(
    sub: pd.DataFrame, lines: list[tuple[str, str, str, int]], short_max: int,
    band: tuple[float, float, float, str] | None = None,
    intervals: ReductionIntervals | None = None,
) -> tuple[plt.Figure, np.ndarray, list[str]]:  # fmt: skip
    """Two panels (short-flow mean, p99) of FCT reductions, one line per (label, a, b, index)
    of ``lines``, each point with the verdicts' 95 % interval where ``intervals`` gives it;
    with one load, the pairs side by side on a category axis. The axis is scaled to the values
    above :data:`REDUCTION_FLOOR`; lower ones are listed (returned as notes). ``band``: the
    published range, its tolerance and its label, drawn as two shades."""
    loads = sorted(sub["load"].unique().tolist())
    single = len(loads) == 1
    fig, axes = plt.subplots(1, 2, figsize=(_W, 4.4))
    notes: list[str] = []
    for ax, metric, mtitle in (
        (axes[0], "short_mean", f"(0, {size_label(short_max)}] mean"),
        (axes[1], "short_p99", f"(0, {size_label(short_max)}] 99th percentile"),
    ):
        vals: list[float] = []
        for j, (label, a, b, i) in enumerate(lines):
            sa = sub[sub["series"] == a].set_index("load")[metric]
            sb = sub[sub["series"] == b].set_index("load")[metric]
            common = sorted(set(sa.index) & set(sb.index))
            red = np.array([100.0 * (1 - sa[x] / sb[x]) for x in common], dtype=float)
            if not len(red):
                continue
            off = red < REDUCTION_FLOOR
            if off.any():
                notes.append(f"{label} ({'mean' if metric == 'short_mean' else 'p99'}) "
                             f"{red[off].max():.0f} … {red[off].min():.0f} %, below the axis")
            shown = np.where(off, np.nan, red)
            vals += [v for v in shown if np.isfinite(v)]
            x = [j] if single else common
            err = None
            if intervals is not None:
                w = str(sub["workload"].iloc[0]) if len(sub) else ""
                ivs = [intervals(a, b, metric, w, float(ld)) for ld in common]
                if any(iv is not None for iv in ivs):
                    lo_e = [max(0.0, y - max(iv[0], REDUCTION_FLOOR)) if iv and np.isfinite(y)
                            else 0.0 for y, iv in zip(shown, ivs, strict=True)]
                    hi_e = [max(0.0, min(iv[1], 100.0) - y) if iv and np.isfinite(y) else 0.0
                            for y, iv in zip(shown, ivs, strict=True)]
                    err = np.nan_to_num(np.array([lo_e, hi_e], dtype=float))
                    vals += [y - lo for y, lo in zip(shown, lo_e, strict=True) if np.isfinite(y)]
                    vals += [y + hi for y, hi in zip(shown, hi_e, strict=True) if np.isfinite(y)]
            ax.errorbar(x, shown, yerr=err, marker=_MARKERS[i % len(_MARKERS)],
                        color=_color(a, i), label=label, linewidth=0 if single else 1.6,
                        markersize=7 if single else 5, capsize=3, elinewidth=1.2)  # fmt: skip
        if band is not None:
            lo_b, hi_b, tol, blabel = band
            ax.axhspan(lo_b - tol, hi_b + tol, color="#2ca02c", alpha=0.06,
                       label=f"{blabel} ± {tol:g} (the verdict's range)")
            ax.axhspan(lo_b, hi_b, color="#2ca02c", alpha=0.14,
                       label=f"{blabel} {lo_b:g}–{hi_b:g} %")
            vals += [lo_b - tol, hi_b + tol]
        ax.axhline(0, color="black", linewidth=0.8)
        lo = min(vals + [0.0])
        hi = max(vals + [0.0])
        pad = 0.08 * max(hi - lo, 10.0)
        ax.set_ylim(max(lo - pad, REDUCTION_FLOOR - pad), min(hi + pad, 100.0 + pad))
        ax.set_title(f"{mtitle}: reduction")
        if single:
            ax.set_xticks(range(len(lines)), [lb for lb, *_ in lines], rotation=20, ha="right")
            ax.set_xlim(-0.6, len(lines) - 0.4)
            ax.set_xlabel(f"load {loads[0]:g}")
        else:
            ax.set_xlabel("load")
        ax.set_ylabel("FCT reduction (%)")
        ax.grid(True, alpha=0.3)
    return fig, axes, notes


def plot_gain(
    agg: pd.DataFrame, workload: str, order: list[str], baseline: str, out: Path, title: str,
    short_max: int = 100_000, intervals: ReductionIntervals | None = None,
) -> Figure | None:
    """Reduction of short-flow FCT against the baseline scheme (percent; higher is better)."""
    sub = agg[agg["workload"] == workload]
    base = sub[sub["series"] == baseline]
    others = [s for s in order if s != baseline and not sub[sub["series"] == s].empty]
    if base.empty or not others:
        return None
    lines = [(s, s, baseline, order.index(s)) for s in others]
    band = (50.0, 70.0, 10.0, "paper: RepFlow vs TCP") if baseline == "tcp" and \
        "repflow" in others else None  # fmt: skip
    fig, axes, notes = _reduction_panels(sub, lines, short_max, band, intervals)
    sup = f"{title}: short-flow FCT reduction against {baseline}"
    if intervals is not None:
        sup += " (bars: the verdicts' 95 % intervals)"
    if notes:
        sup += "\n" + "; ".join(notes)
    _suptitle(fig, sup)
    fig.tight_layout()
    _legend_below(fig, axes)
    png, svg = _save(fig, out, f"{workload}_gain")
    cap = f"{title}: reduction against {baseline}" + (f" ({'; '.join(notes)})" if notes else "")
    return Figure(f"{workload}_gain", cap, png, svg, workload)


#: (scheme, reference) pairs whose ratio the papers discuss: replication over its transport,
#: SmartRep's refinements over RepFlow.
PAIRS: list[tuple[str, str]] = [
    ("repflow", "tcp"),
    ("repflow-dctcp", "dctcp"),
    ("repflow-hca", "repflow"),
    ("smartrep", "repflow"),
    ("fullrep", "repflow"),
]


def plot_pairs(
    agg: pd.DataFrame, workload: str, order: list[str], out: Path, title: str,
    short_max: int = 100_000, intervals: ReductionIntervals | None = None,
):  # fmt: skip
    """Short-flow FCT reduction of each scheme over its reference (:data:`PAIRS`)."""
    sub = agg[agg["workload"] == workload]
    pairs = [(a, b) for a, b in PAIRS if a in order and b in order]
    if not pairs:
        return None
    lines = [(f"{a} vs {b}", a, b, order.index(a)) for a, b in pairs]
    fig, axes, notes = _reduction_panels(sub, lines, short_max, intervals=intervals)
    sup = f"{title}: what replication adds to its transport"
    if intervals is not None:
        sup += " (bars: the verdicts' 95 % intervals)"
    hidden = identical_series(sub, order, ["short_mean", "short_p99"])
    extra = notes + ([_hidden_note(hidden)] if hidden else [])
    if extra:
        sup += "\n" + "; ".join(extra)
    _suptitle(fig, sup)
    fig.tight_layout()
    _legend_below(fig, axes)
    png, svg = _save(fig, out, f"{workload}_pairs")
    cap = f"{title}: reduction of each scheme over its reference"
    if extra:
        cap += f" ({'; '.join(extra)})"
    return Figure(f"{workload}_pairs", cap, png, svg, workload)


def plot_cdfs(
    loaded: Loaded,
    workload: str,
    order: list[str],
    loads: list[float],
    out: Path,
    title: str,
    complementary: bool = False,
    short_max: int = 100_000,
) -> Figure | None:
    """CDFs (or, ``complementary``, CCDFs on log-log axes) of short-flow FCT at the grid loads
    nearest to ``loads``, every seed's flows pooled."""
    avail = sorted({k[2] for k in loaded.short_fcts if k[0] == workload})
    if not avail:
        return None
    wanted = loads or [avail[0], avail[len(avail) // 2], avail[-1]]
    chosen = sorted({min(avail, key=lambda a, x=x: abs(a - x)) for x in wanted})
    width = min(_W, 3.8 * len(chosen) + 0.6)
    fig, axes = plt.subplots(1, len(chosen), figsize=(width, 4.0), squeeze=False)
    for ax, load in zip(axes[0], chosen, strict=True):
        counts = []
        for i, series in enumerate(order):
            v = loaded.short_fcts.get((workload, series, load))
            if v is None or len(v) == 0:
                continue
            x = np.sort(v) * 1e3
            n = len(x)
            counts.append(n)
            if complementary:
                # P(FCT > x) at each distinct value; the last point (0) cannot be drawn on a log
                # axis, so the curve ends at 1/n: the resolution the flow count gives
                y = 1.0 - np.arange(1, n + 1) / n
                keep = y > 0
                ax.step(x[keep], y[keep], where="post", color=_color(series, i),
                        label=series, linewidth=1.5)  # fmt: skip
            else:
                y = np.arange(1, n + 1) / n
                ax.step(x, y, where="post", color=_color(series, i), label=series, linewidth=1.5)
        ax.set_xscale("log")
        flows = (
            f"{min(counts):,} flows" if min(counts) == max(counts)
            else f"{min(counts):,}–{max(counts):,} flows"
        ) if counts else "no flows"  # fmt: skip
        beyond = _bulk_xlim(ax, [loaded.short_fcts.get((workload, s, load)) for s in order])
        head = f"load {load:g} ({flows})" if len(avail) > 1 else flows
        ax.set_title(head + (f"\n{beyond}" if beyond else ""), fontsize=TICK_PT)
        ax.set_xlabel(f"(0, {size_label(short_max)}] FCT (ms, log)")
        if complementary:
            ax.set_yscale("log")
            ax.set_ylabel("P(FCT > x), log")
            ax.axhline(0.01, color="gray", linestyle=":", linewidth=0.8)
        else:
            ax.set_ylabel("CDF")
            ax.axhline(0.99, color="gray", linestyle=":", linewidth=0.8)
        ax.grid(True, which="both", alpha=0.25)
    kind = "CCDF" if complementary else "CDF"
    _suptitle(fig, f"{title}: {kind} of short-flow FCT (seeds pooled)")
    fig.tight_layout()
    _legend_below(fig, axes)
    name = f"{workload}_{kind.lower()}"
    png, svg = _save(fig, out, name)
    return Figure(name, f"{title}: {kind} of short-flow FCT", png, svg, workload)


#: A CDF panel's x axis ends at this many times the largest 99.5th percentile of its series
#: (the bulk); flows beyond are counted in the panel's title, not drawn.
BULK_FACTOR = 2.0


def _bulk_xlim(ax, arrays) -> str:  # noqa: ANN001
    """Sets a CDF panel's x range from the bulk of its flows; returns the note on the flows
    left out ("" when none is)."""
    vals = [np.asarray(a, dtype=float) * 1e3 for a in arrays if a is not None and len(a)]
    if not vals:
        return ""
    top = BULK_FACTOR * max(float(np.percentile(v, 99.5)) for v in vals)
    low = min(float(v.min()) for v in vals)
    biggest = max(float(v.max()) for v in vals)
    if biggest <= top:
        return ""
    ax.set_xlim(low / 1.3, top)
    n = sum(int((v > top).sum()) for v in vals)
    return f"{n} flow{'s' if n != 1 else ''} beyond the axis, up to {biggest:,.0f} ms"


_TICKS = threading.local()


@contextlib.contextmanager
def _ticks_once_per_layout():
    """Within the block (in this thread), an axis recomputes its ticks (locator, formatter,
    one Tick per location) only when something they depend on changed: its view interval,
    scale, locators, formatters or the axes' size in pixels. Matplotlib recomputes them on
    every query instead: several times per axis in each layout pass (each spine, the axis' own
    box, its label's position) — much of the cost of drawing a figure of log axes with minor
    ticks. The result is the same: between two queries with the same key, the ticks are those
    already set. Outside the block (or in another thread) matplotlib behaves as it always
    does."""
    from matplotlib.axis import Axis

    original = getattr(Axis, "_update_ticks", None)
    if original is None:  # another matplotlib: draw as it does
        yield
        return
    if not getattr(original, "_repflow_memo", False):
        Axis._update_ticks = _memo_update_ticks(original)
    depth = getattr(_TICKS, "depth", 0)
    _TICKS.depth = depth + 1
    try:
        yield
    finally:
        _TICKS.depth = depth


def _memo_update_ticks(original):  # noqa: ANN001, ANN202
    def _update_ticks(self):  # noqa: ANN001, ANN202
        if not getattr(_TICKS, "depth", 0):
            self.__dict__.pop("_repflow_ticks", None)
            return original(self)
        major, minor = self.major, self.minor
        key = (
            tuple(self.get_view_interval()), self.axes.bbox.bounds,
            self.get_figure(root=True).dpi, id(self._scale), id(self.get_transform()),
            id(major.locator), id(major.formatter), id(minor.locator), id(minor.formatter),
        )  # fmt: skip
        counts = (len(self.majorTicks), len(self.minorTicks))
        cached = self.__dict__.get("_repflow_ticks")
        if cached is not None and cached[0] == key and cached[1] == counts:
            return list(cached[2])
        ticks = original(self)
        self.__dict__["_repflow_ticks"] = (
            key, (len(self.majorTicks), len(self.minorTicks)), list(ticks))
        return ticks

    _update_ticks._repflow_memo = True
    return _update_ticks


def make_figures(
    loaded: Loaded, out: Path, progress=None, agg: pd.DataFrame | None = None,
    intervals: ReductionIntervals | None = None,
) -> list[Figure]:  # fmt: skip
    """Every figure of a loaded sweep, written under ``out``; ``progress(msg)`` hears of each
    workload as its figures start. ``agg``: ``aggregate(loaded.points, loaded)`` when the
    caller has it already (it is not recomputed); ``intervals``: the verdicts' intervals of
    reductions, drawn on the reduction plots."""
    if loaded.points.empty:
        return []
    with plt.rc_context(_STYLE), _ticks_once_per_layout():
        return _make_figures(loaded, out, progress, agg, intervals)


def _make_figures(
    loaded: Loaded, out: Path, progress=None, agg: pd.DataFrame | None = None,  # noqa: ANN001
    intervals: ReductionIntervals | None = None,
) -> list[Figure]:  # fmt: skip
    figs_cfg: dict[str, Any] = loaded.sweep.get("spec", {}).get("figures", {})
    baseline = str(figs_cfg.get("baseline", "tcp"))
    labels = figs_cfg.get("workload_labels", {}) or {}
    cdf_loads = [float(x) for x in figs_cfg.get("cdf_loads", []) or []]
    short_max = int(figs_cfg.get("short_max_bytes", 100_000))
    if agg is None:
        agg = aggregate(loaded.points, loaded)
    order = series_order(loaded.points, baseline)
    base_series = next((s for s in order if s == baseline), None)
    figures: list[Figure] = []
    workloads = sorted(agg["workload"].unique())
    for i, w in enumerate(workloads):
        if progress is not None:
            progress(f"figures of {w} ({i + 1}/{len(workloads)})")
        title = workload_title(w, labels)
        figures.append(
            plot_workload(agg, w, order, out, title, normalized=False, short_max=short_max)
        )
        model = None
        if figs_cfg.get("model", True):
            loads = sorted(agg[agg["workload"] == w]["load"].unique().tolist())
            cfg = loaded.example_config or {}
            model = model_curves(
                w, loads, short_max,
                init_cwnd=float((cfg.get("tcp") or {}).get("init_cwnd", 12)),
                mss=int((cfg.get("tcp") or {}).get("mss", 1460)),
                schemes=[s for s in order if s in ("tcp", "repflow")],
            )  # fmt: skip
        figures.append(
            plot_workload(agg, w, order, out, title, normalized=True, model=model,
                          short_max=short_max)  # fmt: skip
        )
        if base_series:
            g = plot_gain(agg, w, order, base_series, out, title, short_max, intervals)
            if g:
                figures.append(g)
        # With only RepFlow over TCP the pair figure would repeat the gain figure.
        if not (base_series == "tcp" and len(order) == 2):
            pr = plot_pairs(agg, w, order, out, title, short_max, intervals)
            if pr:
                figures.append(pr)
        for complementary in (False, True):
            c = plot_cdfs(loaded, w, order, cdf_loads, out, title, complementary, short_max)
            if c:
                figures.append(c)
        r = plot_retransmissions(agg, w, order, out, title)
        if r:
            figures.append(r)
    return figures


#: Retransmission causes of the ``<w>_retx`` figure: (column, label, colour).
_RETX_CAUSES = (
    ("retx_detect_pct", "fast detection (PS gap)", "#2ca02c"),
    ("retx_atimer_pct", "aggressive timer", "#98df8a"),
    ("retx_fast_pct", "fast retransmit", "#1f77b4"),
    ("retx_timeout_pct", "RTO", "#d62728"),
)


def plot_retransmissions(
    agg: pd.DataFrame, workload: str, order: list[str], out: Path, title: str
) -> Figure | None:
    """Retransmissions per 100 data segments by cause, stacked, per scheme at every load
    (MPTCP-L's Fig. 4); only when some scheme recovers by MPTCP-L's detection or timer."""
    sub = agg[agg["workload"] == workload]
    cols = [c for c, _, _ in _RETX_CAUSES]
    if not set(cols) <= set(sub.columns):
        return None
    if not (sub[["retx_detect_pct", "retx_atimer_pct"]].fillna(0).to_numpy() > 0).any():
        return None
    loads = sorted(sub["load"].unique().tolist())
    series = [s for s in order if s in set(sub["series"])]
    fig, ax = plt.subplots(figsize=(_W, 4.4))
    width = 0.8 / max(len(series), 1)
    for j, s in enumerate(series):
        rows = sub[sub["series"] == s].set_index("load")
        x = np.arange(len(loads)) + (j - (len(series) - 1) / 2) * width
        bottom = np.zeros(len(loads))
        for c, label, color in _RETX_CAUSES:
            v = np.array([float(rows[c].get(ld, np.nan)) for ld in loads])
            v = np.nan_to_num(v)
            ax.bar(x, v, width * 0.92, bottom=bottom, color=color, edgecolor="white",
                   linewidth=0.5, label=label if j == 0 else None)  # fmt: skip
            bottom += v
        for xi, top in zip(x, bottom, strict=True):
            ax.text(xi, top, s, rotation=90, ha="center", va="bottom", fontsize=TICK_PT - 2)
    ax.set_xticks(np.arange(len(loads)), [f"load {ld:g}" for ld in loads])
    ax.set_ylabel("retransmissions per 100 data segments")
    ax.margins(y=0.35)
    ax.grid(True, axis="y", alpha=0.3)
    _suptitle(fig, f"{title}: retransmissions by cause (bars left to right: {', '.join(series)})")
    fig.tight_layout()
    _legend_below(fig, [ax])
    png, svg = _save(fig, out, f"{workload}_retx")
    return Figure(f"{workload}_retx", f"{title}: retransmissions by cause", png, svg, workload)


def finite(x: float) -> bool:
    """True for a real number (not NaN/inf)."""
    return isinstance(x, int | float) and math.isfinite(x)
