"""From stored points to tables: per-point FCT metrics, then one row per (workload, series,
load) across seeds.

Aggregation across seeds (docs/metrics.md): a **mean** is the mean of the per-seed means, with
the standard deviation across seeds (``*_seed_std``); a **percentile** is computed once over the
flows of every seed pooled together (never an average of per-seed percentiles), and
``short_p99_flows`` says how many flows it rests on — fewer than :data:`P99_MIN_FLOWS` and the
report warns that the p99 is little more than the largest few flows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from repflow.experiments import stats as _stats
from repflow.experiments.spec import LOAD_AXIS, SCHEME_AXIS, SEED_AXIS, WORKLOAD_AXIS
from repflow.experiments.store import Store

#: A p99 resting on fewer flows than this is marked (its top 1 % is about ten flows or fewer).
P99_MIN_FLOWS = _stats.P99_MIN_FLOWS

def size_label(n: int) -> str:
    """A byte count as the papers write a size bin's edge: 100KB, 1MB, 1500B."""
    for unit, div in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n}B"


def metric_titles(short_max: int = 100_000) -> list[tuple[str, str]]:
    """The four FCT metrics of every point with their titles, for short flows of at most
    ``short_max`` bytes (``figures.short_max_bytes`` of the spec)."""
    edge = size_label(short_max)
    return [
        ("short_mean", f"(0, {edge}]: mean"),
        ("short_p99", f"(0, {edge}]: 99th percentile"),
        ("large_mean", f"({edge}, ∞): mean"),
        ("all_mean", "all flows: mean"),
    ]


#: Metrics computed for every point (column, title) with the default 100 KB short-flow edge.
METRICS: list[tuple[str, str]] = metric_titles()


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
    #: Short-flow slowdowns pooled over seeds, per (workload, series, load).
    short_slowdowns: dict[tuple[str, str, float], np.ndarray] = field(default_factory=dict)
    #: Every seed's flows per (workload, series, load), for the claims' intervals.
    samples: dict[tuple[str, str, float], _stats.Sample] = field(default_factory=dict)
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


#: The workload label of points whose flows come from ``workload.trace`` (not a CDF).
TRACE_WORKLOAD = "trace"

#: Retransmission columns and the metric (% of the workload's data segments) each becomes.
RETX_METRICS = (
    ("retransmissions", "retx_pct"),
    ("fast_retransmits", "retx_fast_pct"),
    ("timeout_retransmits", "retx_timeout_pct"),
    ("detect_retransmits", "retx_detect_pct"),
    ("atimer_retransmits", "retx_atimer_pct"),
)
#: The deadline of ``short_within_deadline`` (MPTCP-L's Fig. 3: "completed within 50 ms").
SHORT_DEADLINE_S = 0.050


def point_metrics(
    flows: pd.DataFrame, short_max: int, mss: int | None = None
) -> dict[str, float]:
    """FCT and slowdown statistics of one run's records (unfinished flows excluded and counted).

    With ``mss``, retransmissions as a percentage of the workload's data segments
    (``Σ ceil(size / mss)``, each flow counted once: redundant copies are not retransmissions),
    by cause (:data:`RETX_METRICS`); NaN where the records cannot see them (real sockets: −1).
    """
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
    n_short = int((flows["size"] <= short_max).sum())
    retx: dict[str, float] = {}
    segments = float(np.maximum(np.ceil(sizes / mss), 1).sum()) if mss and len(sizes) else 0.0
    for col, name in RETX_METRICS:
        v = flows[col].to_numpy(dtype=float) if col in flows else np.array([-1.0])
        ok = segments > 0 and bool((v >= 0).all())
        retx[name] = float(100.0 * v.sum() / segments) if ok else float("nan")
    return {
        **retx,
        # Unfinished short flows count as late.
        "short_within_deadline": (
            float((short["fct"] <= SHORT_DEADLINE_S).sum() / n_short) if n_short else float("nan")
        ),
        "short_mean": mean(short["fct"]),
        "short_p99": p99(short["fct"]),
        "large_mean": mean(large["fct"]),
        "all_mean": mean(done["fct"]),
        "short_mean_slowdown": mean(short["slowdown"]),
        "short_p99_slowdown": p99(short["slowdown"]),
        "large_mean_slowdown": mean(large["slowdown"]),
        "all_mean_slowdown": mean(done["slowdown"]),
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
        mss = ((run.get("config") or {}).get("tcp") or {}).get("mss")
        m = point_metrics(flows, short_max, int(mss) if isinstance(mss, int | float) else None)
        summary = run.get("summary") or {}
        ov = summary.get("overhead") if isinstance(summary, dict) else None
        m["overhead"] = float(ov) if isinstance(ov, int | float) else m["bytes_ratio"]
        counters = run.get("counters") or {}
        rep, col = counters.get("replicated_flows"), counters.get("copy_collisions")
        m["collision_frac"] = float(col) / rep if rep and col is not None else float("nan")
        m["replicated_flows"] = float(rep) if rep is not None else float("nan")
        m["copy_collisions"] = float(col) if col is not None else float("nan")
        wcfg = (run.get("config") or {}).get("workload") or {}
        workload = str(labels.get(WORKLOAD_AXIS, wcfg.get("cdf")))
        if wcfg.get("trace") and WORKLOAD_AXIS not in labels:
            # a trace replaces the arrivals: its CDF and load are unused defaults
            workload = TRACE_WORKLOAD
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
        seed = labels.get(SEED_AXIS, run.get("config", {}).get("seed"))
        out.samples.setdefault(k, _stats.Sample()).add(
            seed, flows, int(mss) if isinstance(mss, int | float) else None,
            _min_rto(run.get("config") or {}),
        )
        sd = flows["slowdown"].to_numpy(dtype=float)[sel]
        prev = out.short_fcts.get(k)
        out.short_fcts[k] = fct[sel] if prev is None else np.concatenate([prev, fct[sel]])
        prev = out.short_slowdowns.get(k)
        out.short_slowdowns[k] = sd if prev is None else np.concatenate([prev, sd])
    out.points = pd.DataFrame(rows)
    for sample in out.samples.values():
        sample.sort()
    return out


def _min_rto(cfg: dict[str, Any]) -> float | None:
    """The run's ``tcp.min_rto`` in seconds (None when absent or unreadable)."""
    from repflow.units import seconds

    v = (cfg.get("tcp") or {}).get("min_rto")
    try:
        return float(seconds(v)) if v is not None else None
    except (ValueError, TypeError):
        return None


def aggregate(points: pd.DataFrame, loaded: Loaded | None = None) -> pd.DataFrame:
    """One row per (workload, series, scheme, load): means across seeds with ``*_seed_std``
    and ``seeds``; with ``loaded``, ``short_p99`` and ``short_p99_slowdown`` are percentiles of
    the seeds' short flows pooled, and ``short_p99_flows`` counts those flows."""
    if points.empty:
        return pd.DataFrame()
    value_cols = [c for c in points.columns if points[c].dtype.kind == "f" and c != "load"]
    g = points.groupby(["workload", "series", "scheme", "load"], sort=True)[value_cols]
    mean = g.mean()
    std = g.std(ddof=1).add_suffix("_seed_std")
    n = g.size().rename("seeds")
    out = pd.concat([mean, std, n], axis=1).reset_index()
    for m in MEAN_METRICS:
        if m in out:
            out[f"{m}_ci95"] = [
                mean_ci95(sd, int(k)) for sd, k in zip(out[f"{m}_seed_std"], out["seeds"],
                                                        strict=True)
            ]  # fmt: skip
    out["short_p99_flows"] = np.nan
    for c in ("short_p99", "short_p99_slowdown"):
        out[f"{c}_ci_lo"] = np.nan
        out[f"{c}_ci_hi"] = np.nan
    if loaded is not None:
        for i, r in out.iterrows():
            k = (r["workload"], r["series"], r["load"])
            for col, pooled in (("short_p99", loaded.short_fcts.get(k)),
                                ("short_p99_slowdown", loaded.short_slowdowns.get(k))):  # fmt: skip
                if pooled is None:
                    continue
                v = np.sort(np.asarray(pooled, dtype=float))
                if col == "short_p99":
                    out.at[i, "short_p99_flows"] = float(len(v))
                out.at[i, col] = float(np.percentile(v, 99)) if len(v) else np.nan
                lo, hi = quantile_ci95(v, 0.99)
                out.at[i, f"{col}_ci_lo"] = lo
                out.at[i, f"{col}_ci_hi"] = hi
    return out


#: Means whose confidence interval across seeds ``aggregate`` adds (``<metric>_ci95``).
MEAN_METRICS = (
    "short_mean", "large_mean", "all_mean",
    "short_mean_slowdown", "large_mean_slowdown", "all_mean_slowdown",
)  # fmt: skip


def mean_ci95(seed_std: float, seeds: int) -> float:
    """Half-width of the 95 % confidence interval of a mean over ``seeds`` per-seed values
    (Student t; NaN with fewer than two seeds)."""
    from scipy.stats import t

    if seeds < 2 or not np.isfinite(seed_std):
        return float("nan")
    return float(t.ppf(0.975, seeds - 1) * seed_std / np.sqrt(seeds))


def quantile_ci95(sorted_values: np.ndarray, q: float) -> tuple[float, float]:
    """Distribution-free 95 % confidence interval of the ``q`` quantile from the order
    statistics of ``sorted_values`` (the number of values below the true quantile is
    Binomial(n, q)). The upper end is +inf when the sample is too small to bound it."""
    from scipy.stats import binom

    n = len(sorted_values)
    if n == 0:
        return float("nan"), float("nan")
    lo = int(binom.ppf(0.025, n, q))  # order-statistic ranks, 1-based
    hi = int(binom.ppf(0.975, n, q)) + 1
    low = float(sorted_values[lo - 1]) if lo >= 1 else float(sorted_values[0])
    high = float(sorted_values[hi - 1]) if hi <= n else float("inf")
    return low, high


def thin_p99_rows(agg: pd.DataFrame) -> pd.DataFrame:
    """Rows whose pooled short-flow p99 rests on fewer than :data:`P99_MIN_FLOWS` flows."""
    if agg.empty or "short_p99_flows" not in agg:
        return agg.iloc[0:0]
    n = agg["short_p99_flows"]
    return agg[n.notna() & (n < P99_MIN_FLOWS)]


def series_order(points: pd.DataFrame, baseline: str | None = None) -> list[str]:
    """Series in the order their schemes first appear, baseline first."""
    if points.empty:
        return []
    order = list(dict.fromkeys(points["series"]))
    if baseline:
        order.sort(key=lambda s: 0 if s.split(" (")[0] == baseline else 1)
    return order
