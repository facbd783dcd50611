"""The M/G/1 formulas of RepFlow (section IV) and SmartRep (section II).

Units: one packet of service per unit time, so queueing delays are in packet times and sizes in
packets; a normalized FCT is the completion time divided by the flow's own transmission time.

Every function takes the load (a float or an array) and returns NaN wherever the queue it
describes is unstable (its load is at least 1) -- the model is undefined there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from repflow.model.sizes import SizeDistribution

#: ``2 ln 10 - 1 = ln(100/e)``: extra delay of the 99th-percentile round, in units of E[W].
TAIL_EXTRA = 2.0 * math.log(10.0) - 1.0

ArrayLike = float | np.ndarray


def _arr(x: ArrayLike) -> np.ndarray:
    return np.asarray(x, dtype=float)


def mean_wait(load: ArrayLike, M: float) -> np.ndarray:
    """Pollaczek-Khintchine mean wait with fixed-size bursts of ``M`` packets (eq. 4):
    ``E[W] = load M / (2 (1 - load))``; NaN where ``load >= 1`` or ``load < 0``."""
    r = _arr(load)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = r * M / (2.0 * (1.0 - r))
    return np.where((r >= 0) & (r < 1), w, np.nan)


@dataclass(frozen=True)
class Integrals:
    """The distribution-dependent constants of the model."""

    #: ``F(S_L)``: fraction of flows that are short (size <= S_L).
    short_frac: float
    #: ``∫_0^{S_L} log2(x/k+1)/x f(x)/F(S_L) dx`` (eq. 3/5).
    I: float  # noqa: E741 (the paper's name)
    #: ``∫_0^{S_L} 1/x f(x)/F(S_L) dx``.
    J: float
    #: ``N = I + (2 ln 10 - 1) J`` (eq. 11).
    N: float
    #: ``P = ∫_{S_L}^∞ 1/x f(x)/(1-F(S_L)) dx`` (eq. 13).
    P: float
    #: ``ε`` computed from the distribution: bytes in short flows / all bytes.
    eps: float
    #: ``E[X]`` in packets.
    mean_size: float


def integrals(dist: SizeDistribution, k: float, S_L: float) -> Integrals:
    """Evaluates the model's integrals for ``dist`` (sizes in packets).

    ``k`` is the initial window and ``S_L`` the short/large threshold, both in packets.
    A quantity whose flow class is empty (no short or no large flows) is NaN.
    """
    fs = dist.prob(0.0, S_L)
    fl = 1.0 - fs
    nan = float("nan")
    if fs > 0:
        i_ = dist.partial_log(k, 0.0, S_L) / fs
        j_ = dist.partial_inv(0.0, S_L) / fs
    else:
        i_ = j_ = nan
    p_ = dist.partial_inv(S_L, math.inf) / fl if fl > 1e-15 else nan
    mean = dist.mean()
    eps = dist.partial_mean(0.0, S_L) / mean
    return Integrals(
        short_frac=fs, I=i_, J=j_, N=i_ + TAIL_EXTRA * j_, P=p_, eps=eps, mean_size=mean
    )


# ---------------------------------------------------------------------- effective loads
def repflow_short_load(load: ArrayLike, eps: float) -> np.ndarray:
    """Load of the virtual queue a replicated short flow sees: ``((1+ε) ρ)^2``.

    NaN when a real path is unstable, ``(1+ε) ρ >= 1``."""
    return copies_short_load(load, eps, 2)


def repflow_path_load(load: ArrayLike, eps: float) -> np.ndarray:
    """Load of each path under RepFlow: ``(1+ε) ρ`` (what large flows see)."""
    return copies_path_load(load, eps, 2)


def collision_short_load(load: ArrayLike, eps: float, p: float) -> np.ndarray:
    """SmartRep Theorem 1: probability both copies of a short flow meet a busy path when they
    share a path with probability ``p``: ``(1+ε)ρ [p + (1+ε)ρ (1-p)]``.

    NaN when the path is unstable, ``(1+ε) ρ >= 1``."""
    q = copies_path_load(load, eps, 2)
    return q * (p + q * (1.0 - p))


def copies_path_load(load: ArrayLike, eps: float, n: int) -> np.ndarray:
    """Path load with ``n - 1`` extra copies of every short flow: ``(1 + (n-1) ε) ρ``;
    NaN where it reaches 1."""
    q = (1.0 + (n - 1) * eps) * _arr(load)
    return np.where(q < 1.0, q, np.nan)


def copies_short_load(load: ArrayLike, eps: float, n: int) -> np.ndarray:
    """Probability that all ``n`` copies on distinct paths meet a busy path:
    ``((1 + (n-1) ε) ρ)^n`` (SmartRep section II-C); NaN where the path load reaches 1."""
    return copies_path_load(load, eps, n) ** n


# ---------------------------------------------------------------------- FCTs
def short_mean(eff_load: ArrayLike, ints: Integrals, M: float) -> np.ndarray:
    """Mean normalized FCT of short flows behind a queue of load ``eff_load`` (eqs. 5, 6)."""
    return mean_wait(eff_load, M) * ints.I + 1.0


def short_p99(eff_load: ArrayLike, ints: Integrals, M: float) -> np.ndarray:
    """99th-percentile normalized FCT of short flows (eqs. 11, 12; RepFlow's ``+ln(100/e)``)."""
    return mean_wait(eff_load, M) * ints.N + 1.0


def large_mean(path_load: ArrayLike) -> np.ndarray:
    """Mean normalized FCT of large flows on a path of load ``path_load`` (eqs. 7, 8)."""
    r = _arr(path_load)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = r / (2.0 * (1.0 - r)) + 1.0
    return np.where((r >= 0) & (r < 1), v, np.nan)


def large_p99(path_load: ArrayLike, ints: Integrals, M: float) -> np.ndarray:
    """99th-percentile normalized FCT of large flows (eqs. 13, 14):
    ``mean + (2 ln 10 - 1) E[W] P``."""
    return large_mean(path_load) + TAIL_EXTRA * mean_wait(path_load, M) * ints.P
