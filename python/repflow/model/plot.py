"""Figures of the model (matplotlib, Agg backend): model curves alone, or over simulated runs."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

#: (panel title, column suffix) of the four panels.
PANELS: tuple[tuple[str, str], ...] = (
    ("short flows (≤ S_L): mean", "short_mean"),
    ("short flows (≤ S_L): 99th pct", "short_p99"),
    ("large flows (> S_L): mean", "large_mean"),
    ("large flows (> S_L): 99th pct", "large_p99"),
)

#: Curves of the model figure: (column prefix, label, color, line style).
MODEL_CURVES: tuple[tuple[str, str, str, str], ...] = (
    ("tcp", "TCP", "tab:blue", "-"),
    ("repflow", "RepFlow", "tab:orange", "-"),
    ("smartrep_hc", "RepFlow, collisions p", "tab:red", ":"),
    ("smartrep_n", "n copies, distinct paths", "tab:green", "--"),
)

SCHEME_COLORS = {"tcp": "tab:blue", "repflow": "tab:orange", "smartrep": "tab:green"}


def _finish(fig, out_base: Path) -> list[Path]:
    paths = []
    for ext in ("png", "svg"):
        p = out_base.with_suffix(f".{ext}")
        fig.savefig(p, dpi=130 if ext == "png" else None, bbox_inches="tight")
        paths.append(p)
    plt.close(fig)
    return paths


def model_figure(df: pd.DataFrame, out_base: Path, title: str | None = None) -> list[Path]:
    """Draws the four panels of :func:`repflow.model.fct_table`'s output; writes
    ``out_base.png`` and ``out_base.svg``. Undefined points (NaN) are simply not drawn."""
    a = df.attrs
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    for ax, (ptitle, suffix) in zip(axes.flat, PANELS, strict=True):
        for prefix, label, color, style in MODEL_CURVES:
            col = f"{prefix}_{suffix}"
            if col not in df:
                continue
            lab = label
            if prefix == "smartrep_hc":
                lab = f"RepFlow, collisions p={a.get('p')}"
            elif prefix == "smartrep_n":
                lab = f"{a.get('n')} copies, distinct paths"
            ax.plot(df["load"], df[col], style, color=color, marker="o", ms=3, label=lab)
        ax.set_title(ptitle, fontsize=10)
        ax.set_xlabel("load ρ")
        ax.set_ylabel("normalized FCT")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    eps = a.get("eps_used", float("nan"))
    fig.suptitle(
        title
        or (
            f"M/G/1 model, workload {a.get('workload')} ({a.get('sizes')} sizes): "
            f"k={a.get('k')}, M={a.get('M'):.4g}, S_L={a.get('S_L'):.4g} pkts, ε={eps:.4f}"
        ),
        fontsize=10,
    )
    fig.tight_layout()
    return _finish(fig, out_base)


def overlay_figure(
    model: pd.DataFrame, sim: pd.DataFrame, out_base: Path, title: str
) -> list[Path]:
    """Model curves (lines) over simulated points (markers, one colour per scheme).

    ``sim`` has columns ``scheme``, ``load`` and ``sim_<panel suffix>``."""
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    for ax, (ptitle, suffix) in zip(axes.flat, PANELS, strict=True):
        for prefix, label, color, style in MODEL_CURVES[:2]:
            ax.plot(model["load"], model[f"{prefix}_{suffix}"], style, color=color,
                    label=f"model {label}")  # fmt: skip
        for scheme, g in sim.groupby("scheme"):
            g = g.sort_values("load")
            col = f"sim_{suffix}"
            if col not in g or not np.isfinite(g[col]).any():
                continue
            ax.plot(g["load"], g[col], "o--", color=SCHEME_COLORS.get(str(scheme), "tab:gray"),
                    alpha=0.8, ms=5, lw=0.8, label=f"simulated {scheme}")  # fmt: skip
        ax.set_title(ptitle, fontsize=10)
        ax.set_xlabel("load")
        ax.set_ylabel("normalized FCT (slowdown, log scale)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _finish(fig, out_base)
