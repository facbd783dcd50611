"""The model beside a stored simulation sweep.

A sweep directory holds run directories (at any depth), each with ``run.json`` and
``flows.parquet`` in the shared run format. Runs are grouped by workload, scheme
(``config.scheme.name``) and load (``config.workload.load``); flows of all runs (seeds) of a
group are pooled. A flow's normalized FCT is its ``slowdown``; unfinished flows (NaN) are left
out of the statistics and counted.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from repflow.errors import UserError
from repflow.model.sizes import DEFAULT_MSS, SizeDistribution, load_cdf, parse_cdf_text
from repflow.model.table import DEFAULT_K, fct_table

#: Schemes the model describes, and the model's column prefix for each.
MODELLED = {"tcp": "tcp", "repflow": "repflow"}

def parse_size(value: Any, field: str, like: object = None) -> float:
    """Bytes from a string such as ``"100KB"`` (KB = 1000 B, KiB = 1024 B), read by the Rust
    core's grammar (``docs/configuration.md``); a bare number is refused, suggesting the unit
    nearest ``like`` (see :func:`repflow.units.parse_size`)."""
    from repflow import units

    return float(units.parse_size(value, field, like))


def find_runs(root: Path) -> list[Path]:
    """Run directories under ``root`` (any depth): those holding run.json and flows.parquet."""
    if not root.is_dir():
        raise UserError(f"--overlay: '{root}' is not a directory")
    runs = sorted(
        p.parent
        for p in root.rglob("run.json")
        if (p.parent / "flows.parquet").is_file()
        # skip hidden directories (e.g. a store's temporary, half-written points)
        and not any(part.startswith(".") for part in p.parent.relative_to(root).parts)
    )
    if not runs:
        raise UserError(
            f"--overlay: no run directories (run.json + flows.parquet) found under '{root}'"
        )
    return runs


def _get(d: dict, *keys: str, default: Any = None) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def read_run(run_dir: Path) -> tuple[dict, pd.DataFrame]:
    """``(config, flows)`` of one run directory."""
    try:
        meta = json.loads((run_dir / "run.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{run_dir / 'run.json'}: not readable JSON ({exc})") from None
    cfg = meta.get("config") if isinstance(meta, dict) else None
    if not isinstance(cfg, dict):
        raise UserError(f"{run_dir / 'run.json'}: has no 'config' object")
    try:
        flows = pq.read_table(run_dir / "flows.parquet", columns=["size", "slowdown"]).to_pandas()
    except Exception as exc:  # pyarrow raises several types for bad files
        raise UserError(f"{run_dir / 'flows.parquet'}: cannot read size/slowdown ({exc})") from None
    return cfg, flows


def _run_params(cfg: dict, where: Path) -> dict:
    scheme = _get(cfg, "scheme", "name")
    load = _get(cfg, "workload", "load")
    wl = _get(cfg, "workload", "cdf")
    text = _get(cfg, "workload", "cdf_text")
    if scheme is None or load is None or (wl is None and text is None):
        raise UserError(
            f"{where / 'run.json'}: config lacks scheme.name, workload.load or workload.cdf"
        )
    mss = int(_get(cfg, "tcp", "mss", default=DEFAULT_MSS) or DEFAULT_MSS)
    threshold = parse_size(_get(cfg, "scheme", "threshold", default="100KB"), "scheme.threshold")
    mw = _get(cfg, "tcp", "max_window")
    max_window = parse_size(mw, "tcp.max_window") if mw is not None else 65_536.0
    name = str(scheme).lower()
    copies = _get(cfg, "scheme", "copies", default=2)
    if name == "repflow" and copies not in (None, 2):
        # RepFlow with n copies: modelled as n copies on distinct paths (SmartRep II-C)
        name = f"repflow-{int(copies)}copies"
    return {
        "scheme": name,
        "load": float(load),
        # the CDF's name (built-in name or path); its text, when stored, is what gets modelled
        "workload": str(wl) if wl else "inline-cdf",
        "cdf_text": text,
        "k": float(_get(cfg, "tcp", "init_cwnd", default=DEFAULT_K) or DEFAULT_K),
        "mss": mss,
        "threshold_bytes": threshold,
        "max_window_bytes": max_window,
    }


def _stats(slow: np.ndarray) -> tuple[float, float]:
    fin = slow[np.isfinite(slow)]
    if fin.size == 0:
        return float("nan"), float("nan")
    return float(np.mean(fin)), float(np.percentile(fin, 99))


#: Configuration fields that do not split runs into groups: the group's own axes (workload,
#: scheme, load), the seed, and the scheme's other fields (its label already says ``copies``).
_NOT_GROUPING = ("seed", "workload.load", "workload.cdf", "workload.cdf_text")


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}{k}."))
    else:
        out[prefix[:-1]] = d
    return out


def _signature(cfg: dict) -> dict[str, str]:
    """The fields that make two runs of one workload, scheme and load different experiments
    (e.g. ``topology.k``): everything but :data:`_NOT_GROUPING` and ``scheme.*`` (except its
    threshold, which the model uses)."""
    return {
        k: json.dumps(v, sort_keys=True)
        for k, v in _flat(cfg).items()
        if k not in _NOT_GROUPING and (not k.startswith("scheme.") or k == "scheme.threshold")
    }


def _group_label(sig: dict[str, str], varying: list[str]) -> str:
    return ", ".join(f"{k}={json.loads(sig[k]) if k in sig else '-'}" for k in varying)


def simulated_stats(root: Path) -> tuple[pd.DataFrame, dict[str, dict]]:
    """Per (workload, configuration, scheme, load): pooled normalized-FCT statistics of the runs
    under ``root`` (seeds pooled; runs that differ in any other field — e.g. a 16-pod and a
    4-pod fat-tree — are never pooled: the ``config`` column names what differs).

    Returns the table and, per group (``group`` column: workload plus configuration), the model
    parameters taken from the runs' configs.
    """
    found = []
    for run in find_runs(root):
        cfg, flows = read_run(run)
        found.append((_run_params(cfg, run), _signature(cfg), flows))
    keys = sorted({k for _, sig, _ in found for k in sig})
    varying = [k for k in keys if len({sig.get(k) for _, sig, _ in found}) > 1]
    groups: dict[tuple[str, str, str, float], list[pd.DataFrame]] = {}
    params: dict[str, dict] = {}
    nruns: dict[tuple[str, str, str, float], int] = {}
    for rp, sig, flows in found:
        label = _group_label(sig, varying)
        group = rp["workload"] + (f" [{label}]" if label else "")
        key = (group, label, rp["scheme"], rp["load"])
        groups.setdefault(key, []).append(flows)
        nruns[key] = nruns.get(key, 0) + 1
        params.setdefault(group, rp)
    rows = []
    for (group, label, scheme, load), parts in sorted(groups.items()):
        f = pd.concat(parts, ignore_index=True)
        thr = params[group]["threshold_bytes"]
        size = f["size"].to_numpy(dtype=float)
        slow = f["slowdown"].to_numpy(dtype=float)
        short = size <= thr
        sm, sp = _stats(slow[short])
        lm, lp = _stats(slow[~short])
        rows.append(
            {
                "group": group,
                "workload": params[group]["workload"],
                "config": label,
                "scheme": scheme,
                "load": load,
                "runs": nruns[(group, label, scheme, load)],
                "short_flows": int(short.sum()),
                "large_flows": int((~short).sum()),
                "unfinished": int((~np.isfinite(slow)).sum()),
                "sim_short_mean": sm,
                "sim_short_p99": sp,
                "sim_large_mean": lm,
                "sim_large_p99": lp,
            }  # fmt: skip
        )
    return pd.DataFrame(rows), params


def has_model(scheme: str) -> bool:
    """Whether the model describes ``scheme`` (else its model columns are "no model")."""
    return scheme in MODELLED or re.fullmatch(r"repflow-(\d+)copies", scheme) is not None


def _model_value(scheme, load, stat, pts, dist, loads, kw) -> float:
    if scheme in MODELLED:
        return float(pts.loc[load, f"{MODELLED[scheme]}_{stat}"])
    m = re.fullmatch(r"repflow-(\d+)copies", scheme)
    if m:
        t = fct_table(dist, [load], n=int(m.group(1)), **kw)
        return float(t[f"smartrep_n_{stat}"].iloc[0])
    return float("nan")


def overlay_table(root: Path, sizes: str = "continuous") -> tuple[pd.DataFrame, dict]:
    """Simulated statistics beside the model's values for the same workload, scheme and load.

    Adds ``model_<stat>`` and ``ratio_<stat>`` (= simulated / model) columns for the schemes
    the model describes (:data:`MODELLED`, and ``repflow`` with ``scheme.copies = n != 2``,
    labelled ``repflow-<n>copies`` and modelled as n copies on distinct paths); others get NaN
    and ``modelled = False`` (a NaN with ``modelled`` means the effective load is ≥ 1). Also
    returns, per group (workload and configuration), the model's table at a fine load grid.
    """
    sim, params = simulated_stats(root)
    curves: dict[str, pd.DataFrame] = {}
    out = []
    for group, g in sim.groupby("group", sort=True):
        p = params[group]
        wl = p["workload"]
        if p.get("cdf_text"):
            cdf = parse_cdf_text(p["cdf_text"], name=wl)
        else:
            cdf = load_cdf(wl)
        dist = SizeDistribution.from_cdf(cdf, mss=p["mss"], reading=sizes)
        kw = dict(
            k=p["k"],
            M=math.floor(p["max_window_bytes"] / p["mss"]),
            S_L=p["threshold_bytes"] / p["mss"],
            mss=p["mss"],
        )
        loads = sorted(set(g["load"]))
        bad = [x for x in loads if not 0 < x < 1]
        if bad:
            raise UserError(f"--overlay: workload.load {bad[0]} is outside (0, 1)")
        # curves over the simulated range (plus a margin), so the model's blow-up near 1
        # does not flatten the comparison
        top = min(0.98, max(loads) + 0.1)
        grid = np.unique(np.concatenate([np.linspace(0.02, top, 49), loads]))
        curves[group] = fct_table(dist, grid, **kw)
        pts = fct_table(dist, loads, **kw).set_index("load")
        g = g.copy()
        for stat in ("short_mean", "short_p99", "large_mean", "large_p99"):
            model_vals = [
                _model_value(s, ld, stat, pts, dist, loads, kw)
                for s, ld in zip(g["scheme"], g["load"], strict=True)
            ]
            g[f"model_{stat}"] = model_vals
            g[f"ratio_{stat}"] = g[f"sim_{stat}"] / g[f"model_{stat}"]
        g["modelled"] = [has_model(s) for s in g["scheme"]]
        out.append(g)
    return pd.concat(out, ignore_index=True), curves
