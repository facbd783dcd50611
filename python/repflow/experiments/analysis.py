"""From stored points to tables: per-point FCT metrics, then means and spreads across seeds."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from repflow.experiments.spec import LOAD_AXIS, SCHEME_AXIS, SEED_AXIS, WORKLOAD_AXIS
from repflow.experiments.store import Store

#: Metrics computed for every point: (column, title, unit) — unit "s" for times, "" for slowdown.
METRICS: list[tuple[str, str]] = [
    ("short_mean", "(0, 100KB]: mean"),
    ("short_p99", "(0, 100KB]: 99th percentile"),
    ("large_mean", "(100KB, ∞): mean"),
    ("all_mean", "all flows: mean"),
]


@dataclass
class Loaded:
    """A stored sweep, loaded for figures and the report."""

    sweep: dict[str, Any]
    #: One row per finished point: axis labels, series name, metrics.
    points: pd.DataFrame
    #: Failed points: labels and error.
    failures: list[dict[str, Any]] = field(default_factory=list)
    #: Points listed in the sweep but absent from the store.
    missing: list[dict[str, Any]] = field(default_factory=list)
    #: Short-flow FCTs (s) pooled over seeds, per (workload, series, load).
    short_fcts: dict[tuple[str, str, float], np.ndarray] = field(default_factory=dict)
    #: Total wall seconds of the stored simulations.
    compute_seconds: float = 0.0
    #: Resolved configuration of one finished point (representative of the base).
    example_config: dict[str, Any] | None = None


def _series_name(labels: dict[str, Any]) -> str:
    """Scheme label plus any axis that is not scheme/workload/load/seed."""
    extra = [
        f"{k.split('.')[-1]}={v}"
        for k, v in labels.items()
        if k not in (SCHEME_AXIS, WORKLOAD_AXIS, LOAD_AXIS, SEED_AXIS)
    ]
    base = str(labels.get(SCHEME_AXIS, "run"))
    return base + (f" ({', '.join(extra)})" if extra else "")


def point_metrics(flows: pd.DataFrame, short_max: int) -> dict[str, float]:
    """FCT and slowdown statistics of one run's records (unfinished flows excluded and counted)."""
    done = flows[np.isfinite(flows["fct"].to_numpy(dtype=float))]
    short = done[done["size"] <= short_max]
    large = done[done["size"] > short_max]

    def mean(s: pd.Series) -> float:
        return float(s.mean()) if len(s) else float("nan")

    def p99(s: pd.Series) -> float:
        return float(np.percentile(s.to_numpy(dtype=float), 99)) if len(s) else float("nan")

    sizes = flows["size"].to_numpy(dtype=float)
    sent = flows["bytes_sent"].to_numpy(dtype=float)
    total = sizes.sum()
    return {
        "short_mean": mean(short["fct"]),
        "short_p99": p99(short["fct"]),
        "large_mean": mean(large["fct"]),
        "all_mean": mean(done["fct"]),
        "short_mean_sd": mean(short["slowdown"]),
        "short_p99_sd": p99(short["slowdown"]),
        "large_mean_sd": mean(large["slowdown"]),
        "all_mean_sd": mean(done["slowdown"]),
        "flows": float(len(flows)),
        "short_flows": float((flows["size"] <= short_max).sum()),
        "unfinished": float(len(flows) - len(done)),
        "bytes_ratio": float(sent.sum() / total - 1.0) if total > 0 else float("nan"),
        "short_bytes_frac": (
            float(sizes[sizes <= short_max].sum() / total) if total > 0 else float("nan")
        ),
    }


def load_sweep(store: Store, short_max: int | None = None, progress=None) -> Loaded:
    """Reads every point of the sweep in ``store`` and computes its metrics; ``progress(msg)``
    hears about every tenth of the points read."""
    import time

    sweep = store.read_sweep()
    listed = sweep.get("points", [])
    last = time.monotonic()
    figs = sweep.get("spec", {}).get("figures", {})
    short_max = int(short_max or figs.get("short_max_bytes", 100_000))
    rows = []
    out = Loaded(sweep=sweep, points=pd.DataFrame())
    seen: set[str] = set()
    for i, pt in enumerate(listed):
        if progress is not None and (time.monotonic() - last > 1.0 or i == 0):
            progress(f"reading points: {i}/{len(listed)}")
            last = time.monotonic()
        key, labels = pt["key"], pt["labels"]
        status = store.status(key)
        if status == "failed":
            err = store.read_error(key)
            out.failures.append({"labels": labels, "key": key, "error": err.get("error")})
            continue
        if status != "done":
            out.missing.append({"labels": labels, "key": key})
            continue
        flows = store.read_flows(key)
        run = store.read_run(key)
        if out.example_config is None:
            out.example_config = run.get("config")
        if key not in seen:
            seen.add(key)
            t = store.read_timing(key)
            out.compute_seconds += float((t or {}).get("wall_seconds", 0.0))
        m = point_metrics(flows, short_max)
        summary = run.get("summary") or {}
        ov = summary.get("overhead") if isinstance(summary, dict) else None
        m["overhead"] = float(ov) if isinstance(ov, int | float) else m["bytes_ratio"]
        counters = run.get("counters") or {}
        rep, col = counters.get("replicated_flows"), counters.get("copy_collisions")
        m["collision_frac"] = float(col) / rep if rep and col is not None else float("nan")
        wcfg = (run.get("config") or {}).get("workload") or {}
        workload = str(labels.get(WORKLOAD_AXIS, wcfg.get("cdf")))
        load = float(labels.get(LOAD_AXIS, wcfg.get("load")))
        series = _series_name(labels)
        rows.append(
            {
                "key": key,
                "scheme": str(labels.get(SCHEME_AXIS, "run")),
                "series": series,
                "workload": workload,
                "load": load,
                "seed": labels.get(SEED_AXIS, run.get("config", {}).get("seed")),
                "labels": json.dumps(labels, sort_keys=True),
                **m,
            }
        )
        fct = flows["fct"].to_numpy(dtype=float)
        sel = (flows["size"].to_numpy() <= short_max) & np.isfinite(fct)
        k = (workload, series, load)
        prev = out.short_fcts.get(k)
        out.short_fcts[k] = fct[sel] if prev is None else np.concatenate([prev, fct[sel]])
    out.points = pd.DataFrame(rows)
    return out


def aggregate(points: pd.DataFrame) -> pd.DataFrame:
    """Mean, standard deviation and count across seeds per (workload, series, load)."""
    if points.empty:
        return pd.DataFrame()
    value_cols = [c for c in points.columns if points[c].dtype.kind == "f" and c != "load"]
    g = points.groupby(["workload", "series", "scheme", "load"], sort=True)[value_cols]
    mean = g.mean()
    std = g.std(ddof=1).add_suffix("_std")
    n = g.size().rename("seeds")
    return pd.concat([mean, std, n], axis=1).reset_index()


def series_order(points: pd.DataFrame, baseline: str | None = None) -> list[str]:
    """Series in the order their schemes first appear, baseline first."""
    if points.empty:
        return []
    order = list(dict.fromkeys(points["series"]))
    if baseline:
        order.sort(key=lambda s: 0 if s.split(" (")[0] == baseline else 1)
    return order
