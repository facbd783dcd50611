"""Flow-size distributions in packets, as the analytical model sees them.

A workload CDF (either format: ``bytes`` or ns-2 ``packets``) is turned into the distribution of
the flow size ``X`` in packets of ``mss`` bytes, with every flow at least one packet. Two readings
are offered:

``"continuous"`` (the paper's reading, the default)
    the piecewise-linear CDF itself: a vertical step is a point mass, a sloped segment is a
    uniform density; sizes below one packet are moved to exactly one packet.
``"sampled"``
    exactly what the simulator draws: the interpolated value is rounded up to a whole unit
    (byte or packet) and is at least one unit; then sizes below one packet count as one packet.
    This is a distribution on a lattice.

Every expectation the model needs (``P``, ``E[X]``, ``E[1/X]``, ``E[log2(X/k+1)/X]`` restricted
to a size range) is computed exactly, segment by segment: closed forms on uniform segments
(the last one through the dilogarithm), closed forms or exact sums on lattice segments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.special import digamma, spence

from repflow.errors import UserError, require_core
from repflow.model.defaults import DEFAULT_MSS  # payload bytes of one packet (re-exported)

#: Built-in workload names accepted by :func:`load_cdf` (see ``repflow._core.builtin_workloads``).
BUILTIN_WORKLOADS: tuple[str, ...] = (
    "websearch",
    "datamining",
    "websearch-bytes",
    "datamining-vl2",
    "fb-hadoop",
    "google-rpc",
    "ali-storage",
)

# Lattice sums of the log term are enumerated up to this many terms; beyond it the remaining
# (very large, hence very smooth) terms are summed with Euler-Maclaurin (see _lattice_log_sum).
_ENUM_LIMIT = 1_000_000
_LN2 = math.log(2.0)


def _core():
    return require_core()


def load_cdf(workload: str) -> dict:
    """Loads and parses a workload CDF: a built-in name or a path to a CDF file.

    Returns ``repflow._core.parse_cdf``'s dict (``points``, ``unit``, ``unit_bytes``,
    ``mean_bytes``) plus ``name``. Raises :class:`UserError` on an unknown name, a missing file
    or a malformed CDF.
    """
    core = _core()
    text = core.workload_text(workload)
    if text is None:
        path = Path(workload)
        if not path.is_file():
            names = ", ".join(BUILTIN_WORKLOADS)
            raise UserError(
                f"workload '{workload}' is neither a built-in workload ({names}) nor a CDF file"
            )
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"workload file '{workload}' cannot be read: {exc}") from None
    return parse_cdf_text(text, name=workload)


def parse_cdf_text(text: str, name: str = "<cdf>") -> dict:
    """Parses CDF text (either format) with the simulator's own parser."""
    core = _core()
    try:
        parsed = dict(core.parse_cdf(text))
    except core.ConfigError as exc:
        raise UserError(f"workload '{name}': {exc}") from None
    parsed["name"] = name
    return parsed


@dataclass(frozen=True)
class SizeDistribution:
    """The flow size ``X`` in packets: point masses, uniform segments and lattice segments.

    Masses sum to one. All sizes are at least one packet.
    """

    #: Point masses: sizes (packets) and probabilities.
    atom_x: np.ndarray
    atom_p: np.ndarray
    #: Uniform segments ``[a, b]`` (packets, ``a < b``) and their total probabilities.
    seg_a: np.ndarray
    seg_b: np.ndarray
    seg_p: np.ndarray
    #: Lattice segments: sizes ``n * step`` for integers ``n`` in ``[lo, hi]``, each with
    #: probability ``each``.
    lat_lo: np.ndarray
    lat_hi: np.ndarray
    lat_each: np.ndarray
    #: Packets per lattice unit (1 for a packet CDF, ``1/mss`` for a byte CDF).
    step: float = 1.0
    name: str = "<cdf>"
    reading: str = "continuous"
    extra: dict = field(default_factory=dict, compare=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_cdf(
        cls, cdf: dict, mss: int = DEFAULT_MSS, reading: str = "continuous"
    ) -> SizeDistribution:
        """Builds the distribution from a parsed CDF (see :func:`load_cdf`)."""
        if mss <= 0:
            raise UserError(f"mss must be a positive number of bytes, got {mss}")
        pts = [(float(u), float(c)) for u, c in cdf["points"]]
        unit_bytes = float(cdf["unit_bytes"])
        name = str(cdf.get("name", "<cdf>"))
        if reading == "continuous":
            return cls._continuous(pts, unit_bytes, mss, name)
        if reading == "sampled":
            return cls._sampled(pts, unit_bytes, mss, name)
        raise UserError(f"sizes reading '{reading}' is unknown (accepted: continuous, sampled)")

    @classmethod
    def from_workload(
        cls, workload: str, mss: int = DEFAULT_MSS, reading: str = "continuous"
    ) -> SizeDistribution:
        """Loads a built-in workload or CDF file and builds its distribution."""
        return cls.from_cdf(load_cdf(workload), mss=mss, reading=reading)

    @classmethod
    def _continuous(
        cls, pts: list[tuple[float, float]], unit_bytes: float, mss: int, name: str
    ) -> SizeDistribution:
        # u * unit_bytes / mss (not u * s): a size exactly at a byte threshold T converts to
        # exactly T / mss, the value thresholds are given as.
        def pk(u: float) -> float:
            return u * unit_bytes / mss

        atoms: dict[float, float] = {}
        sa: list[float] = []
        sb: list[float] = []
        sp: list[float] = []
        # Mass at the first point (cumulative value of the first point).
        if pts and pts[0][1] > 0:
            x = max(1.0, pk(pts[0][0]))
            atoms[x] = atoms.get(x, 0.0) + pts[0][1]
        for (u0, c0), (u1, c1) in zip(pts, pts[1:], strict=False):
            mass = c1 - c0
            if mass <= 0:
                continue
            a, b = pk(u0), pk(u1)
            if b <= a:  # vertical step: point mass
                x = max(1.0, a)
                atoms[x] = atoms.get(x, 0.0) + mass
                continue
            if a < 1.0:  # the part below one packet becomes one packet
                below = mass * (min(b, 1.0) - a) / (b - a)
                atoms[1.0] = atoms.get(1.0, 0.0) + below
                mass -= below
                a = 1.0
                if b <= 1.0:
                    continue
            sa.append(a)
            sb.append(b)
            sp.append(mass)
        return cls._make(atoms, sa, sb, sp, [], [], [], 1.0, name, "continuous")

    @classmethod
    def _sampled(
        cls, pts: list[tuple[float, float]], unit_bytes: float, mss: int, name: str
    ) -> SizeDistribution:
        s = unit_bytes / mss  # packets per unit
        # Integer units n >= 1 with P(N = n) = F(n) - F(n-1) (N = max(1, ceil U)).
        unit_atoms: dict[int, float] = {}
        lo_l: list[int] = []
        hi_l: list[int] = []
        each_l: list[float] = []

        def add(n: int, m: float) -> None:
            n = max(1, n)
            unit_atoms[n] = unit_atoms.get(n, 0.0) + m

        if pts and pts[0][1] > 0:
            add(math.ceil(pts[0][0]), pts[0][1])
        for (u0, c0), (u1, c1) in zip(pts, pts[1:], strict=False):
            mass = c1 - c0
            if mass <= 0:
                continue
            if u1 <= u0:
                add(math.ceil(u0), mass)
                continue
            d = mass / (u1 - u0)  # probability per unit
            # Everything at or below one unit rounds to one unit.
            if u0 < 1.0:
                below = d * (min(u1, 1.0) - u0)
                add(1, below)
                u0 = 1.0
                if u1 <= 1.0:
                    continue
            c_lo = math.ceil(u0)
            if c_lo >= u1:  # the whole segment lies in one unit interval
                add(math.ceil(u1), d * (u1 - u0))
                continue
            # Piece (u0, ceil(u0)] -> ceil(u0) (empty when u0 is an integer).
            if c_lo > u0:
                add(c_lo, d * (c_lo - u0))
            f_hi = math.floor(u1)
            # Whole unit intervals (n-1, n] for n in [c_lo+1, f_hi] -> n, probability d each.
            if f_hi >= c_lo + 1:
                lo_l.append(c_lo + 1)
                hi_l.append(f_hi)
                each_l.append(d)
            # Piece (floor(u1), u1] -> floor(u1)+1 (empty when u1 is an integer).
            if u1 > f_hi:
                add(f_hi + 1, d * (u1 - f_hi))
        # Units to packets, at least one packet.
        atoms: dict[float, float] = {}
        for n, m in unit_atoms.items():
            x = max(1.0, n * unit_bytes / mss)
            atoms[x] = atoms.get(x, 0.0) + m
        one_pkt_units = math.ceil(1.0 / s - 1e-9)  # smallest n with n*s >= 1
        lo2: list[int] = []
        hi2: list[int] = []
        each2: list[float] = []
        for lo, hi, e in zip(lo_l, hi_l, each_l, strict=True):
            if lo < one_pkt_units:
                top = min(hi, one_pkt_units - 1)
                atoms[1.0] = atoms.get(1.0, 0.0) + e * (top - lo + 1)
                lo = top + 1
                if lo > hi:
                    continue
            lo2.append(lo)
            hi2.append(hi)
            each2.append(e)
        return cls._make(atoms, [], [], [], lo2, hi2, each2, s, name, "sampled")

    @classmethod
    def _make(cls, atoms, sa, sb, sp, lo, hi, each, step, name, reading) -> SizeDistribution:
        ax = np.array(sorted(atoms), dtype=float)
        ap = np.array([atoms[x] for x in sorted(atoms)], dtype=float)
        dist = cls(
            atom_x=ax,
            atom_p=ap,
            seg_a=np.asarray(sa, dtype=float),
            seg_b=np.asarray(sb, dtype=float),
            seg_p=np.asarray(sp, dtype=float),
            lat_lo=np.asarray(lo, dtype=np.int64),
            lat_hi=np.asarray(hi, dtype=np.int64),
            lat_each=np.asarray(each, dtype=float),
            step=float(step),
            name=name,
            reading=reading,
        )
        total = dist.prob()
        if not (abs(total - 1.0) < 1e-6):
            raise UserError(f"workload '{name}': CDF does not reach 1 (total mass {total:.6g})")
        return dist

    # ------------------------------------------------------------------ expectations
    def prob(self, lo: float = 0.0, hi: float = math.inf) -> float:
        """``P(lo < X <= hi)``."""
        return self._expect("one", lo, hi)

    def partial_mean(self, lo: float = 0.0, hi: float = math.inf) -> float:
        """``E[X; lo < X <= hi]`` in packets."""
        return self._expect("x", lo, hi)

    def partial_inv(self, lo: float = 0.0, hi: float = math.inf) -> float:
        """``E[1/X; lo < X <= hi]`` (per packet)."""
        return self._expect("inv", lo, hi)

    def partial_log(self, k: float, lo: float = 0.0, hi: float = math.inf) -> float:
        """``E[log2(X/k + 1) / X; lo < X <= hi]`` -- the slow-start rounds per packet."""
        if k <= 0:
            raise UserError(f"initial window k must be positive, got {k}")
        return self._expect("log", lo, hi, k)

    def mean(self) -> float:
        """``E[X]`` in packets."""
        return self.partial_mean()

    def _expect(self, kind: str, lo: float, hi: float, k: float = 1.0) -> float:
        total = 0.0
        # Point masses.
        if self.atom_x.size:
            m = (self.atom_x > lo) & (self.atom_x <= hi)
            x = self.atom_x[m]
            p = self.atom_p[m]
            total += float(np.sum(p * _g(kind, x, k)))
        # Uniform segments.
        for a, b, p in zip(self.seg_a, self.seg_b, self.seg_p, strict=True):
            a2, b2 = max(a, lo), min(b, hi)
            if b2 <= a2:
                continue
            total += p / (b - a) * _g_integral(kind, a2, b2, k)
        # Lattice segments.
        s = self.step
        for n_lo, n_hi, e in zip(self.lat_lo, self.lat_hi, self.lat_each, strict=True):
            # integers n with lo < n*s <= hi (small tolerance against rounding of lo/s, hi/s)
            first = int(n_lo)
            if lo > 0:
                first = max(first, math.floor(lo / s * (1 + 1e-12)) + 1)
            last = int(n_hi)
            if hi != math.inf:
                last = min(last, math.floor(hi / s * (1 + 1e-12)))
            if last < first:
                continue
            total += e * _lattice_sum(kind, first, last, s, k)
        return total


def _g(kind: str, x: np.ndarray, k: float) -> np.ndarray:
    if kind == "one":
        return np.ones_like(x)
    if kind == "x":
        return x
    if kind == "inv":
        return 1.0 / x
    if kind == "log":
        return np.log2(x / k + 1.0) / x
    raise ValueError(kind)


def _li2_neg(u: float) -> float:
    """``Li2(-u)`` for ``u >= 0`` (scipy's ``spence(z) = Li2(1 - z)``)."""
    return float(spence(1.0 + u))


def _g_integral(kind: str, a: float, b: float, k: float) -> float:
    """``∫_a^b g(x) dx`` in closed form (``0 < a < b``)."""
    if kind == "one":
        return b - a
    if kind == "x":
        return (b * b - a * a) / 2.0
    if kind == "inv":
        return math.log(b / a)
    if kind == "log":
        # d/dx[-Li2(-x/k)] = ln(1 + x/k)/x
        return (_li2_neg(a / k) - _li2_neg(b / k)) / _LN2
    raise ValueError(kind)


def _lattice_sum(kind: str, first: int, last: int, s: float, k: float) -> float:
    """``sum_{n=first}^{last} g(n*s)``, exact (closed form or enumeration)."""
    count = last - first + 1
    if kind == "one":
        return float(count)
    if kind == "x":
        return s * (first + last) * count / 2.0
    if kind == "inv":
        if count <= 100_000:
            n = np.arange(first, last + 1, dtype=float)
            return float(np.sum(1.0 / n)) / s
        return float(digamma(last + 1.0) - digamma(float(first))) / s
    if kind == "log":
        return _lattice_log_sum(first, last, s, k)
    raise ValueError(kind)


def _lattice_log_sum(first: int, last: int, s: float, k: float) -> float:
    """``sum_n log2(n s / k + 1) / (n s)``: exact enumeration of the first ``_ENUM_LIMIT``
    terms; any remainder by Euler-Maclaurin with two correction terms (relative error far
    below 1e-12 there, since the summand varies by < 1e-6 of itself per step)."""
    total = 0.0
    top = min(last, first + _ENUM_LIMIT - 1)
    for start in range(first, top + 1, 200_000):
        stop = min(top, start + 199_999)
        x = np.arange(start, stop + 1, dtype=float) * s
        total += float(np.sum(np.log2(x / k + 1.0) / x))
    if top < last:
        a, b = float(top + 1), float(last)

        def g(n: float) -> float:
            x = n * s
            return math.log2(x / k + 1.0) / x

        def dg(n: float) -> float:  # d/dn g(n s)
            x = n * s
            return s * (1.0 / ((x + k) * x * _LN2) - math.log2(x / k + 1.0) / (x * x))

        integral = _g_integral("log", a * s, b * s, k) / s
        total += integral + (g(a) + g(b)) / 2.0 + (dg(b) - dg(a)) / 12.0
    return total
