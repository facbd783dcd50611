"""``fct_table``: every quantity of the model for one workload at a list of loads."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from repflow.errors import UserError
from repflow.model import formulas as fm
from repflow.model.defaults import (
    DEFAULT_K,
    DEFAULT_M,
    DEFAULT_MSS,
    DEFAULT_N,
    DEFAULT_P,
    DEFAULT_S_L,
)
from repflow.model.sizes import SizeDistribution

UNDEFINED = "undefined (effective load ≥ 1)"

#: Columns of :func:`fct_table`, in order.
TABLE_COLUMNS: tuple[str, ...] = (
    "load",
    "eps",
    "short_frac",
    "tcp_short_mean",
    "tcp_short_p99",
    "repflow_short_mean",
    "repflow_short_p99",
    "tcp_large_mean",
    "tcp_large_p99",
    "repflow_large_mean",
    "repflow_large_p99",
    "repflow_busy_prob",
    "smartrep_hc_busy_prob",
    "smartrep_hc_short_mean",
    "smartrep_hc_short_p99",
    "smartrep_hc_large_mean",
    "smartrep_hc_large_p99",
    "smartrep_n_busy_prob",
    "smartrep_n_short_mean",
    "smartrep_n_short_p99",
    "smartrep_n_large_mean",
    "smartrep_n_large_p99",
    "note",
)


def as_distribution(
    workload: str | SizeDistribution | dict, mss: int = DEFAULT_MSS, sizes: str = "continuous"
) -> SizeDistribution:
    """A :class:`SizeDistribution` from a built-in name / file path, a parsed CDF dict or
    an existing distribution."""
    if isinstance(workload, SizeDistribution):
        return workload
    if isinstance(workload, dict):
        return SizeDistribution.from_cdf(workload, mss=mss, reading=sizes)
    return SizeDistribution.from_workload(str(workload), mss=mss, reading=sizes)


def check_loads(loads: Iterable[float] | float) -> list[float]:
    """Validates loads: finite numbers strictly between 0 and 1 (a single number is allowed)."""
    if isinstance(loads, int | float | np.floating | str):
        loads = [loads]
    out = []
    for x in loads:
        try:
            v = float(x)
        except (TypeError, ValueError):
            raise UserError(f"load '{x}' is not a number (accepted: 0 < load < 1)") from None
        if not (0.0 < v < 1.0):
            raise UserError(f"load {x} is outside (0, 1) (accepted: 0 < load < 1)")
        out.append(v)
    if not out:
        raise UserError("no loads given (accepted: one or more numbers in (0, 1))")
    return out


def model_params(k: float, M: float, S_L: float, eps: float | None, p: float, n: int) -> None:
    """Validates the model's parameters (raises :class:`UserError`)."""
    if not (k > 0 and math.isfinite(k)):
        raise UserError(f"k (initial window, packets) must be positive, got {k}")
    if not (M > 0 and math.isfinite(M)):
        raise UserError(f"M (maximum window, packets) must be positive, got {M}")
    if not (S_L > 0 and math.isfinite(S_L)):
        raise UserError(f"S_L (short-flow threshold, packets) must be positive, got {S_L}")
    if eps is not None and not (0.0 <= eps and math.isfinite(eps)):
        raise UserError(f"eps must be a number >= 0, got {eps}")
    if not (0.0 <= p <= 1.0):
        raise UserError(f"p (hash-collision probability) must be in [0, 1], got {p}")
    if int(n) != n or n < 1:
        raise UserError(f"n (copies per short flow) must be an integer >= 1, got {n}")


def fct_table(
    workload: str | SizeDistribution | dict,
    loads: Iterable[float] | float,
    k: float = DEFAULT_K,
    M: float = DEFAULT_M,
    S_L: float = DEFAULT_S_L,
    eps: float | None = None,
    p: float = DEFAULT_P,
    n: int = DEFAULT_N,
    mss: int = DEFAULT_MSS,
    sizes: str = "continuous",
) -> pd.DataFrame:
    """The model's normalized FCTs for ``workload`` at each load (one row per load).

    Parameters are in packets of ``mss`` bytes: ``k`` initial window, ``M`` maximum window,
    ``S_L`` short-flow threshold (flows ``<= S_L`` are short). ``eps`` overrides the fraction
    of bytes in short flows computed from the CDF. ``p`` is the hash-collision probability of
    SmartRep's Theorem 1 (two copies) and ``n`` the number of copies on distinct paths of the
    SmartRep n-copies variant. ``sizes`` is ``"continuous"`` (the piecewise-linear CDF, as in the
    paper) or ``"sampled"`` (the simulator's rounding to whole units).

    Columns: :data:`TABLE_COLUMNS`. Where a queue's load reaches 1 the value is NaN and
    ``note`` names what is undefined. ``df.attrs`` holds the parameters and the integrals.
    """
    model_params(k, M, S_L, eps, p, n)
    rho = np.array(check_loads(loads))
    dist = as_distribution(workload, mss=mss, sizes=sizes)
    ints = fm.integrals(dist, k, S_L)
    e = ints.eps if eps is None else float(eps)

    q_rep = fm.repflow_short_load(rho, e)
    q_path = fm.repflow_path_load(rho, e)
    q_hc = fm.collision_short_load(rho, e, p)
    q_n = fm.copies_short_load(rho, e, n)
    q_npath = fm.copies_path_load(rho, e, n)

    cols: dict[str, object] = {
        "load": rho,
        "eps": np.full_like(rho, e),
        "short_frac": np.full_like(rho, ints.short_frac),
        "tcp_short_mean": fm.short_mean(rho, ints, M),
        "tcp_short_p99": fm.short_p99(rho, ints, M),
        "repflow_short_mean": fm.short_mean(q_rep, ints, M),
        "repflow_short_p99": fm.short_p99(q_rep, ints, M),
        "tcp_large_mean": _if(ints.short_frac < 1, fm.large_mean(rho)),
        "tcp_large_p99": fm.large_p99(rho, ints, M),
        "repflow_large_mean": _if(ints.short_frac < 1, fm.large_mean(q_path)),
        "repflow_large_p99": fm.large_p99(q_path, ints, M),
        "repflow_busy_prob": q_rep,
        "smartrep_hc_busy_prob": q_hc,
        "smartrep_hc_short_mean": fm.short_mean(q_hc, ints, M),
        "smartrep_hc_short_p99": fm.short_p99(q_hc, ints, M),
        "smartrep_hc_large_mean": _if(ints.short_frac < 1, fm.large_mean(q_path)),
        "smartrep_hc_large_p99": fm.large_p99(q_path, ints, M),
        "smartrep_n_busy_prob": q_n,
        "smartrep_n_short_mean": fm.short_mean(q_n, ints, M),
        "smartrep_n_short_p99": fm.short_p99(q_n, ints, M),
        "smartrep_n_large_mean": _if(ints.short_frac < 1, fm.large_mean(q_npath)),
        "smartrep_n_large_p99": fm.large_p99(q_npath, ints, M),
    }
    notes = []
    for r, qp, qn in zip(rho, q_path, q_npath, strict=True):
        parts = []
        if not np.isfinite(qp):
            parts.append(f"RepFlow/SmartRep-hc {UNDEFINED}: (1+eps)*load = {(1 + e) * r:.3f}")
        if not np.isfinite(qn):
            parts.append(
                f"SmartRep-n {UNDEFINED}: (1+(n-1)*eps)*load = {(1 + (n - 1) * e) * r:.3f}"
            )
        notes.append("; ".join(parts))
    cols["note"] = notes
    df = pd.DataFrame(cols, columns=list(TABLE_COLUMNS))
    df.attrs.update(
        workload=dist.name,
        sizes=dist.reading,
        k=k,
        M=M,
        S_L=S_L,
        mss=mss,
        p=p,
        n=int(n),
        eps_from_cdf=ints.eps,
        eps_used=e,
        I=ints.I,
        J=ints.J,
        N=ints.N,
        P=ints.P,
        mean_size_packets=ints.mean_size,
    )
    return df


def _if(cond: bool, values: np.ndarray) -> np.ndarray:
    return values if cond else np.full_like(values, np.nan)


def format_table(df: pd.DataFrame, columns: Iterable[str] | None = None, digits: int = 3) -> str:
    """A plain-text (Markdown) table of ``df``; NaN shows as ``undefined``."""
    cols = list(columns) if columns is not None else [c for c in df.columns if c != "note"]
    head = "| " + " | ".join(cols) + " |"
    sep = "|" + "|".join("---:" for _ in cols) + "|"
    rows = [head, sep]
    for _, row in df.iterrows():
        cells = []
        for c in cols:
            v = row[c]
            if isinstance(v, float | np.floating):
                cells.append("undefined" if not np.isfinite(v) else f"{v:.{digits}f}")
            else:
                cells.append(str(v))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
