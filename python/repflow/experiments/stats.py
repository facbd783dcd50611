"""Intervals for the effects the claims are decided on: a bootstrap over the flows within each
seed (docs/metrics.md, "Intervals and verdicts"), the method the coverage study chose among
candidates this module also provides (:data:`VERDICT_METHOD`, :data:`STAGES`).

An *effect* compares two series (``a`` against ``b``) on one metric at one (workload, load), or
reads one series' level (overhead, a share). Its 95 % interval comes from
:data:`RESAMPLES` bootstrap replicates (more near a decision boundary); each replicate

1. keeps the seeds (the ``two-stage`` candidate draws them with replacement first; the
   ``seeds`` candidate draws only them), then
2. draws, within every seed, as many flows as the seed has, with replacement,

and recomputes the metric exactly as the tables do — a mean is the mean of the per-seed means,
a percentile is taken over the flows of every drawn seed pooled — then the effect. When both
series ran the same flows in a seed (same sizes and start times: the same workload seed), the
same flows are drawn for both (a *paired* bootstrap), so the interval reflects how the
schemes differ on the same flows rather than which flows happened to arrive. The interval is
the 2.5th–97.5th percentile of the replicates.

Why this suits FCT tails: FCTs are heavy-tailed and a handful of retransmission timeouts
(a 3 s initial RTO among a few hundred 1 ms flows) can carry a mean. A normal or t interval
would treat that mean as precise; resampling the flows makes the replicates where the
timeout is drawn zero, one or two times, so the interval spans what that single event is
worth. Resampling seeds adds the variation of what a seed fixes (ECMP's hash salt, which
flows collide). With one or two seeds the seed stage is crude, which the counts beside every
interval make visible.

Replicates are drawn from a generator seeded from the effect's identity, so the same stored
results give the same intervals, bit for bit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from repflow import records

#: Bootstrap replicates per effect.
RESAMPLES = 1000
#: The interval method of the verdicts, chosen by the coverage study
#: (:mod:`repflow.experiments.coverage`, docs/validation.md): the narrowest of the candidates
#: that covers at least 93 % on every studied effect some method can cover. ``flows``: the
#: flows are redrawn within each seed, the seeds kept as they are; ``two-stage``: the seeds
#: are redrawn first.
VERDICT_METHOD = "flows"
#: (seed stage, flow stage) of each bootstrap method.
STAGES = {"two-stage": (True, True), "flows": (False, True), "seeds": (True, False)}
#: Two-sided confidence of every interval.
CONFIDENCE = 0.95
#: A percentile resting on fewer flows than this is marked (its top 1 % is ~10 flows):
#: :data:`repflow.records.P99_MIN_FLOWS`, defined there so that a run's summary needs no pandas.
P99_MIN_FLOWS = records.P99_MIN_FLOWS
#: The deadline of ``short_within_deadline`` (MPTCP-L's Fig. 3: "completed within 50 ms").
SHORT_DEADLINE_S = 0.050
#: Columns a sample keeps from the per-flow records (the others are not needed here).
SAMPLE_COLUMNS = (
    "size", "start", "fct", "bytes_sent", "copies", "timeouts",
    "retransmissions", "fast_retransmits", "timeout_retransmits", "detect_retransmits",
    "atimer_retransmits",
)  # fmt: skip


@dataclass
class Sample:
    """The flows of one series at one (workload, load): one array set per seed."""

    seeds: list[object] = field(default_factory=list)
    flows: list[pd.DataFrame] = field(default_factory=list)
    #: Maximum segment size of the runs (for retransmissions per data segment).
    mss: int | None = None
    #: The runs' minimum retransmission timeout, seconds: a flow *waited for a timeout* when
    #: it had one and took at least this long (None: any flow with a timeout).
    min_rto: float | None = None

    def add(self, seed: object, flows: pd.DataFrame, mss: int | None = None,
            min_rto: float | None = None) -> None:  # fmt: skip
        """Adds one seed's per-flow records (only :data:`SAMPLE_COLUMNS` are kept)."""
        keep = [c for c in SAMPLE_COLUMNS if c in flows.columns]
        self.seeds.append(seed)
        self.flows.append(flows[keep].reset_index(drop=True))
        if mss:
            self.mss = int(mss)
        if min_rto:
            self.min_rto = float(min_rto)

    def sort(self) -> None:
        """Seeds in a fixed order (so that two series' seeds line up)."""
        order = sorted(range(len(self.seeds)), key=lambda i: (str(type(self.seeds[i])),
                                                              self.seeds[i]))  # fmt: skip
        self.seeds = [self.seeds[i] for i in order]
        self.flows = [self.flows[i] for i in order]

    def n_flows(self) -> int:
        """Flows over every seed."""
        return int(sum(len(f) for f in self.flows))


# -- metrics as sums over flows -------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    """How a metric is computed from one seed's flows.

    ``kind`` ``ratio``: per seed Σ num / Σ den over the drawn flows, then the mean over the drawn
    seeds (a mean of per-seed values, as the tables); ``quantile``: the ``q`` quantile of
    ``value`` over the flows where ``mask`` holds, every drawn seed's flows pooled.
    """

    kind: str
    num: Callable[[pd.DataFrame, int], np.ndarray] | None = None
    den: Callable[[pd.DataFrame, int], np.ndarray] | None = None
    value: Callable[[pd.DataFrame, int], np.ndarray] | None = None
    mask: Callable[[pd.DataFrame, int], np.ndarray] | None = None
    q: float = 0.99
    #: Multiplies the metric (100: a fraction shown in percent).
    scale: float = 1.0


def _fct(f: pd.DataFrame) -> np.ndarray:
    return f["fct"].to_numpy(dtype=float)


def _finished(f: pd.DataFrame) -> np.ndarray:
    return np.isfinite(_fct(f))


def _short(f: pd.DataFrame, short_max: int) -> np.ndarray:
    return f["size"].to_numpy() <= short_max


def _fct_or_zero(f: pd.DataFrame) -> np.ndarray:
    return np.nan_to_num(_fct(f), nan=0.0, posinf=0.0)


def _segments(f: pd.DataFrame, mss: int) -> np.ndarray:
    return np.maximum(np.ceil(f["size"].to_numpy(dtype=float) / mss), 1.0)


def metric(name: str, short_max: int, mss: int | None = None) -> Metric:
    """The :class:`Metric` behind a column of the tables (``short_mean``, ``short_p99`` — and
    ``short_p50``, ``short_p999`` —,
    ``large_mean``, ``all_mean``, ``short_within_deadline``, ``overhead``,
    ``short_bytes_frac``, ``retx_pct``, …)."""
    sm = short_max

    def sel(pred: Callable[[pd.DataFrame], np.ndarray]):  # noqa: ANN202
        return lambda f, _s: pred(f).astype(float)

    if name == "short_mean":
        return Metric("ratio", num=lambda f, s: _fct_or_zero(f) * (_short(f, sm) & _finished(f)),
                      den=sel(lambda f: _short(f, sm) & _finished(f)))  # fmt: skip
    if name == "large_mean":
        return Metric("ratio", num=lambda f, s: _fct_or_zero(f) * (~_short(f, sm) & _finished(f)),
                      den=sel(lambda f: ~_short(f, sm) & _finished(f)))  # fmt: skip
    if name == "all_mean":
        return Metric("ratio", num=lambda f, s: _fct_or_zero(f) * _finished(f), den=sel(_finished))
    quantiles = {"short_p50": 0.5, "short_p99": 0.99, "short_p999": 0.999}
    if name in quantiles:
        return Metric("quantile", value=lambda f, s: _fct_or_zero(f),
                      mask=lambda f, s: _short(f, sm) & _finished(f),
                      q=quantiles[name])  # fmt: skip
    if name == "short_within_deadline":
        return Metric("ratio", num=lambda f, s: (_short(f, sm) & _finished(f)
                                                  & (_fct_or_zero(f) <= SHORT_DEADLINE_S)) * 1.0,
                      den=sel(lambda f: _short(f, sm)))  # fmt: skip
    if name == "overhead":
        # extra application bytes of the copies over application bytes (metrics.rs)
        return Metric("ratio", num=lambda f, s: f["size"].to_numpy(dtype=float)
                      * np.maximum(f["copies"].to_numpy(dtype=float) - 1, 0),
                      den=lambda f, s: f["size"].to_numpy(dtype=float))  # fmt: skip
    if name == "short_bytes_frac":
        return Metric("ratio", num=lambda f, s: f["size"].to_numpy(dtype=float) * _short(f, sm),
                      den=lambda f, s: f["size"].to_numpy(dtype=float))  # fmt: skip
    retx = {"retx_pct": "retransmissions", "retx_fast_pct": "fast_retransmits",
            "retx_timeout_pct": "timeout_retransmits", "retx_detect_pct": "detect_retransmits",
            "retx_atimer_pct": "atimer_retransmits"}  # fmt: skip
    if name in retx:
        if not mss:
            raise ValueError(f"{name} needs the runs' MSS")
        col = retx[name]
        return Metric("ratio", num=lambda f, s: f[col].to_numpy(dtype=float),
                      den=lambda f, s: _segments(f, mss), scale=100.0)  # fmt: skip
    raise ValueError(f"no bootstrap for metric '{name}'")


def _find(cum: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Per row, the first column whose cumulative count exceeds the row's rank."""
    return (cum <= ranks[:, None]).sum(axis=1)


def _expanded_quantile(values: np.ndarray, counts: np.ndarray, q: float) -> np.ndarray:
    """``np.percentile(..., method='linear')`` of the sample where ``values[i]`` (sorted) is
    repeated ``counts[b, i]`` times, for every row ``b`` of ``counts``."""
    cum = np.cumsum(counts, axis=1)
    total = cum[:, -1]
    h = (total - 1) * q
    lo_rank = np.floor(h)
    hi_rank = np.minimum(lo_rank + 1, total - 1)
    lo_i, hi_i = _find(cum, lo_rank), _find(cum, hi_rank)
    n = len(values)
    lo_v = values[np.minimum(lo_i, n - 1)]
    hi_v = values[np.minimum(hi_i, n - 1)]
    out = lo_v + (h - lo_rank) * (hi_v - lo_v)
    return np.where(total > 0, out, np.nan)


def _estimate(m: Metric, sample: Sample, short_max: int) -> float:
    """The metric on the sample as it is (every seed and flow once)."""
    if m.kind == "ratio":
        per = []
        for f in sample.flows:
            den = m.den(f, short_max).sum()  # type: ignore[misc]
            if den > 0:
                per.append(m.num(f, short_max).sum() / den)  # type: ignore[misc]
        return float(np.mean(per)) * m.scale if per else float("nan")
    pooled = np.concatenate(
        [m.value(f, short_max)[m.mask(f, short_max)] for f in sample.flows]  # type: ignore[misc]
    ) if sample.flows else np.array([])  # fmt: skip
    return float(np.percentile(pooled, 100 * m.q)) * m.scale if len(pooled) else float("nan")


def _replicates(
    m: Metric, sample: Sample, short_max: int, seed_weights: np.ndarray,
    flow_counts: list[np.ndarray],
) -> np.ndarray:  # fmt: skip
    """The metric under each replicate: ``seed_weights`` (B, S) times each seed is drawn,
    ``flow_counts[s]`` (B, n_s) times each flow of seed s is drawn (over all its draws)."""
    b = seed_weights.shape[0]
    if m.kind == "ratio":
        acc = np.zeros(b)
        wsum = np.zeros(b)
        for s, f in enumerate(sample.flows):
            c = flow_counts[s]
            num = c @ m.num(f, short_max)  # type: ignore[misc]
            den = c @ m.den(f, short_max)  # type: ignore[misc]
            k = seed_weights[:, s].astype(float)
            ok = (den > 0) & (k > 0)
            acc += np.where(ok, k * np.divide(num, den, out=np.zeros(b), where=den > 0), 0.0)
            wsum += np.where(ok, k, 0.0)
        return np.divide(acc, wsum, out=np.full(b, np.nan), where=wsum > 0) * m.scale
    vals, cnts = [], []
    for s, f in enumerate(sample.flows):
        keep = m.mask(f, short_max)  # type: ignore[misc]
        vals.append(m.value(f, short_max)[keep])  # type: ignore[misc]
        cnts.append(flow_counts[s][:, keep])
    if not vals or sum(len(v) for v in vals) == 0:
        return np.full(b, np.nan)
    v = np.concatenate(vals)
    c = np.concatenate(cnts, axis=1)
    return _quantile_from_top(v, c, m.q) * m.scale


def _quantile_from_top(values: np.ndarray, counts: np.ndarray, q: float) -> np.ndarray:
    """:func:`_expanded_quantile` for a high quantile, reading only the largest values' counts
    (all of them for the rows where the top few do not reach the quantile's rank)."""
    n = len(values)
    order = np.argsort(values, kind="stable")
    k = min(n, int(np.ceil(3 * (1 - q) * n)) + 32)
    if k >= n:
        return _expanded_quantile(values[order], counts[:, order], q)
    top = order[n - k:]
    total = counts.sum(axis=1)
    ctop = counts[:, top]
    # ranks (0-based, in ascending order) the linear interpolation reads
    h = (total - 1) * q
    need_below = np.floor(h)
    # the top k values cover ranks [total - sum(ctop), total - 1]
    first_rank = total - ctop.sum(axis=1)
    ok = (first_rank <= need_below) & (total > 0)
    out = np.full(len(total), np.nan)
    if ok.any():
        sub = ctop[ok]
        base = first_rank[ok]
        cum = np.cumsum(sub, axis=1) + base[:, None]
        hh = h[ok]
        lo_rank = np.floor(hh)
        hi_rank = np.minimum(lo_rank + 1, total[ok] - 1)
        tv = values[top]
        lo_i, hi_i = _find(cum, lo_rank), _find(cum, hi_rank)
        lo_v = tv[np.minimum(lo_i, k - 1)]
        hi_v = tv[np.minimum(hi_i, k - 1)]
        out[ok] = lo_v + (hh - lo_rank) * (hi_v - lo_v)
    bad = ~ok & (total > 0)
    if bad.any():
        out[bad] = _expanded_quantile(values[order], counts[bad][:, order], q)
    return out


def _rng(*key: object) -> np.random.Generator:
    digest = hashlib.sha256(repr(key).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def paired(a: Sample, b: Sample) -> bool:
    """Whether ``a`` and ``b`` ran the same flows in the same seeds (same sizes and starts)."""
    if a.seeds != b.seeds:
        return False
    for fa, fb in zip(a.flows, b.flows, strict=True):
        if len(fa) != len(fb):
            return False
        for col in ("size", "start"):
            if col in fa and col in fb and not np.array_equal(fa[col].to_numpy(),
                                                              fb[col].to_numpy()):
                return False
    return True


def _counts(rng: np.random.Generator, mult: np.ndarray, n: int) -> np.ndarray:
    """(B, n) counts: row b draws ``mult[b] * n`` flows of ``n`` uniformly with replacement."""
    b = len(mult)
    out = np.zeros((b, n), dtype=np.int64)
    if n == 0:
        return out
    for j in np.unique(mult):
        if j == 0:
            continue
        rows = np.flatnonzero(mult == j)
        idx = rng.integers(0, n, size=(len(rows), int(j) * n))
        flat = (idx + (np.arange(len(rows)) * n)[:, None]).ravel()
        out[rows] = np.bincount(flat, minlength=len(rows) * n).reshape(len(rows), n)
    return out


@dataclass
class Interval:
    """An estimate with its bootstrap interval and the sample behind it."""

    estimate: float
    lo: float
    hi: float
    #: Flows behind the estimate (each series' flows over every seed; ``a`` first).
    flows: tuple[int, ...]
    seeds: int
    #: Whether the two series were resampled on the same flows.
    paired: bool = False
    #: Flows the percentile rests on, when the metric is a percentile (fewest of the series).
    tail_flows: int | None = None

    @property
    def half_width(self) -> float:
        """Half the interval's width."""
        return (self.hi - self.lo) / 2.0

    def thin(self) -> bool:
        """A percentile resting on fewer than :data:`P99_MIN_FLOWS` flows."""
        return self.tail_flows is not None and self.tail_flows < P99_MIN_FLOWS


def metric_flows(name: str, s: Sample, short_max: int) -> int:
    """Flows the metric ``name`` of ``s`` rests on, every seed: the finished short flows of a
    short-flow mean or percentile, the large ones of ``large_mean``, every flow of a level."""
    m = metric(name, short_max, s.mss or 1)
    n = 0
    for f in s.flows:
        if m.kind == "quantile":
            n += int(m.mask(f, short_max).sum())  # type: ignore[misc]
        else:
            n += int((m.den(f, short_max) != 0).sum())  # type: ignore[misc]
    return n


#: Metrics that are means of FCTs (their rare-event share is reported).
FCT_MEANS = ("short_mean", "large_mean", "all_mean")


@dataclass(frozen=True)
class TimeoutShare:
    """How much of one series' FCT mean comes from flows that waited for a timeout."""

    #: Flows behind the mean, and those among them with a timeout (SYN or data).
    flows: int
    with_timeout: int
    #: Share of the mean (the sum of FCTs) those flows carry, 0–1.
    share: float
    #: The mean over the flows without a timeout (as the tables: mean of per-seed means).
    mean_without: float


def timeout_share(name: str, s: Sample, short_max: int) -> TimeoutShare | None:
    """The share of an FCT mean carried by flows that waited for a retransmission timeout (SYN
    or data: a timeout, and an FCT of at least the minimum RTO, since a timeout that fires
    after the last byte arrived delays nothing); None when the records have no ``timeouts``
    column."""
    if name not in FCT_MEANS or not s.flows or any("timeouts" not in f for f in s.flows):
        return None
    m = metric(name, short_max)
    flows = with_to = 0
    total = from_to = 0.0
    per: list[float] = []
    for f in s.flows:
        keep = m.den(f, short_max) > 0  # type: ignore[misc]
        fct = _fct_or_zero(f)[keep]
        to = f["timeouts"].to_numpy()[keep] > 0
        if s.min_rto:
            to &= fct >= s.min_rto
        flows += int(keep.sum())
        with_to += int(to.sum())
        total += float(fct.sum())
        from_to += float(fct[to].sum())
        if (~to).any():
            per.append(float(fct[~to].mean()))
    return TimeoutShare(flows, with_to, from_to / total if total > 0 else 0.0,
                        float(np.mean(per)) if per else float("nan"))  # fmt: skip


def _tail_flows(m: Metric, s: Sample, short_max: int) -> int | None:
    if m.kind != "quantile":
        return None
    return int(sum(int(m.mask(f, short_max).sum()) for f in s.flows))  # type: ignore[misc]


def _bounds(reps: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    r = reps[np.isfinite(reps)]
    if len(r) < 0.9 * len(reps) or not len(r):
        return float("-inf"), float("inf")
    alpha = (1 - confidence) / 2
    return float(np.percentile(r, 100 * alpha)), float(np.percentile(r, 100 * (1 - alpha)))


def bounds(reps: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The percentile interval of bootstrap replicates at ``confidence`` (two-sided); the
    whole line when more than a tenth of the replicates are undefined."""
    return _bounds(reps, confidence)


def bound_bands(reps: np.ndarray, confidence: float = CONFIDENCE
                ) -> tuple[tuple[float, float], tuple[float, float]]:  # fmt: skip
    """Monte Carlo uncertainty of each bound of :func:`bounds`: for the lower and the upper
    bound, the replicates at the ranks ±2 binomial standard deviations around the bound's
    rank (where another set of B replicates would likely put the bound). A decision boundary
    inside a band means the verdict could depend on the generator: more replicates are due."""
    r = np.sort(reps[np.isfinite(reps)])
    n = len(r)
    if n < 0.9 * len(reps) or not n:
        inf = float("inf")
        return (-inf, inf), (-inf, inf)
    alpha = (1 - confidence) / 2
    sd = float(np.sqrt(n * alpha * (1 - alpha)))

    def band(p: float) -> tuple[float, float]:
        lo_i = int(max(0, np.floor(p * (n - 1) - 2 * sd - 1)))
        hi_i = int(min(n - 1, np.ceil(p * (n - 1) + 2 * sd + 1)))
        return float(r[lo_i]), float(r[hi_i])

    return band(alpha), band(1 - alpha)


class Bootstrap:
    """Replicates of metrics, with draws shared wherever samples share their flows.

    Seed multiplicities are drawn once per (group, seeds) — a group is a (workload, load) —
    and flow counts once per distinct set of flows, so every series that ran the same flows
    in the same seeds is resampled on the same flows (paired), and every metric of a series
    reuses its draw. Draws come from generators seeded by what they draw, so the results do
    not depend on the order effects are asked for.
    """

    def __init__(self, resamples: int = RESAMPLES, seed_stage: bool = True,
                 flow_stage: bool = True, salt: int = 0) -> None:  # fmt: skip
        self.resamples = resamples
        #: Salts every draw (0: the published draws); a verdict must not depend on it.
        self.salt = salt
        #: Whether a replicate redraws the seeds (else every seed once) and the flows within
        #: each seed (else every flow once): the coverage study's alternatives
        #: (:mod:`repflow.experiments.coverage`); the verdicts use both stages.
        self.seed_stage = seed_stage
        self.flow_stage = flow_stage
        self._weights: dict[tuple[object, ...], np.ndarray] = {}
        self._counts: dict[tuple[object, ...], list[np.ndarray]] = {}
        self._reps: dict[tuple[object, ...], tuple[float, np.ndarray]] = {}
        #: Samples whose replicates are cached (kept alive so their ids stay theirs).
        self._held: list[Sample] = []

    @staticmethod
    def identity(sample: Sample) -> str:
        """A digest of the sample's seeds and flows (sizes and starts)."""
        h = hashlib.sha256(repr(sample.seeds).encode())
        for f in sample.flows:
            for col in ("size", "start"):
                if col in f:
                    h.update(np.ascontiguousarray(f[col].to_numpy()).tobytes())
            h.update(str(len(f)).encode())
        return h.hexdigest()

    def draws(self, sample: Sample, group: object, chunk: int = 0
              ) -> tuple[np.ndarray, list[np.ndarray]]:  # fmt: skip
        """Seed multiplicities (B, S) and flow counts per seed (B, n_s) for ``sample``; chunk
        ``c`` > 0 is a further, independent set of B replicates (replicates added near a
        decision boundary: :meth:`chunk_replicates`)."""
        wkey = (group, tuple(repr(s) for s in sample.seeds))
        default = chunk == 0 and self.seed_stage and self.flow_stage
        tag: tuple[object, ...] = ((self.resamples,) if default else
                                   (self.resamples, chunk, self.seed_stage, self.flow_stage))
        if self.salt:
            tag += ("salt", self.salt)
        n = len(sample.seeds)
        if (wkey, tag) not in self._weights:
            if self.seed_stage:
                rng = _rng("seeds", wkey, *tag)
                pick = rng.integers(0, n, size=(self.resamples, n))
                self._weights[(wkey, tag)] = np.stack([(pick == s).sum(axis=1)
                                                       for s in range(n)], axis=1)  # fmt: skip
            else:
                self._weights[(wkey, tag)] = np.ones((self.resamples, n), dtype=np.int64)
        w = self._weights[(wkey, tag)]
        ckey = (wkey, self.identity(sample), tag)
        if ckey not in self._counts:
            if self.flow_stage:
                rng = _rng("flows", (wkey, self.identity(sample)), *tag)
                # float: the metrics' sums are then matrix-vector products (BLAS)
                self._counts[ckey] = [_counts(rng, w[:, s], len(f)).astype(np.float64)
                                      for s, f in enumerate(sample.flows)]  # fmt: skip
            else:
                self._counts[ckey] = [np.repeat(w[:, s:s + 1].astype(np.float64), len(f), axis=1)
                                      for s, f in enumerate(sample.flows)]  # fmt: skip
        return w, self._counts[ckey]

    def replicates(self, sample: Sample, name: str, short_max: int, group: object
                   ) -> tuple[float, np.ndarray]:  # fmt: skip
        """(estimate, replicates) of metric ``name`` of ``sample``."""
        return self.chunk_replicates(sample, name, short_max, group, 0)

    def chunk_replicates(self, sample: Sample, name: str, short_max: int, group: object,
                         chunk: int) -> tuple[float, np.ndarray]:  # fmt: skip
        """(estimate, replicates) of metric ``name`` of ``sample`` in chunk ``chunk``."""
        # the sample object itself: two series may share their flows, never their FCTs
        key = (group, id(sample), name, short_max, sample.mss, chunk)
        if key not in self._reps:
            m = metric(name, short_max, sample.mss)
            est = _estimate(m, sample, short_max)
            w, c = self.draws(sample, group, chunk)
            self._held.append(sample)
            self._reps[key] = (est, _replicates(m, sample, short_max, w, c))
        return self._reps[key]

    def effect_replicates(
        self, a: Sample, b: Sample, name: str, short_max: int,
        effect: Callable[[np.ndarray, np.ndarray], np.ndarray], group: object = (),
        chunks: int = 1,
    ) -> tuple[float, np.ndarray]:  # fmt: skip
        """(estimate, replicates) of ``effect(metric of a, metric of b)`` over ``chunks``
        chunks of B replicates each (chunk 0 first: more chunks extend, never redraw)."""
        reps = []
        est = float("nan")
        for c in range(chunks):
            ea, ra = self.chunk_replicates(a, name, short_max, group, c)
            eb, rb = self.chunk_replicates(b, name, short_max, group, c)
            est = float(effect(np.array([ea]), np.array([eb]))[0])
            with np.errstate(divide="ignore", invalid="ignore"):
                reps.append(effect(ra, rb))
            if c > 0:
                self._drop_counts(c)
        return est, np.concatenate(reps)

    def level_replicates(self, sample: Sample, name: str, short_max: int, group: object = (),
                         chunks: int = 1) -> tuple[float, np.ndarray]:  # fmt: skip
        """(estimate, replicates) of one series' metric over ``chunks`` chunks."""
        reps = []
        est = float("nan")
        for c in range(chunks):
            est, r = self.chunk_replicates(sample, name, short_max, group, c)
            reps.append(r)
            if c > 0:
                self._drop_counts(c)
        return est, np.concatenate(reps)

    def _drop_counts(self, chunk: int) -> None:
        """Frees the flow counts of a further chunk (its replicates stay cached)."""
        for k in [k for k in self._counts if len(k[2]) >= 4 and k[2][1] == chunk]:
            del self._counts[k]

    def forget_flow_draws(self) -> None:
        """Drops the cached flow counts (B × flows per seed: the bulk of the memory); the
        replicates already computed stay, so effects between them need no new draws."""
        self._counts.clear()

    def level(self, sample: Sample, name: str, short_max: int, group: object = ()) -> Interval:
        """The metric ``name`` of one series with its interval."""
        est, reps = self.replicates(sample, name, short_max, group)
        lo, hi = _bounds(reps)
        m = metric(name, short_max, sample.mss)
        return Interval(est, lo, hi, (sample.n_flows(),), len(sample.seeds),
                        tail_flows=_tail_flows(m, sample, short_max))  # fmt: skip

    def effect(
        self, a: Sample, b: Sample, name: str, short_max: int,
        effect: Callable[[np.ndarray, np.ndarray], np.ndarray], group: object = (),
    ) -> Interval:  # fmt: skip
        """``effect(metric of a, metric of b)`` with its interval."""
        ea, ra = self.replicates(a, name, short_max, group)
        eb, rb = self.replicates(b, name, short_max, group)
        est = float(effect(np.array([ea]), np.array([eb]))[0])
        with np.errstate(divide="ignore", invalid="ignore"):
            lo, hi = _bounds(effect(ra, rb))
        tails = [t for t in (_tail_flows(metric(name, short_max, a.mss), a, short_max),
                             _tail_flows(metric(name, short_max, b.mss), b, short_max))
                 if t is not None]  # fmt: skip
        return Interval(est, lo, hi, (a.n_flows(), b.n_flows()),
                        min(len(a.seeds), len(b.seeds)), paired(a, b),
                        min(tails) if tails else None)  # fmt: skip


def verdict_bootstrap(resamples: int = RESAMPLES, salt: int = 0) -> Bootstrap:
    """The bootstrap of the verdicts (:data:`VERDICT_METHOD`)."""
    seed_stage, flow_stage = STAGES[VERDICT_METHOD]
    return Bootstrap(resamples, seed_stage=seed_stage, flow_stage=flow_stage, salt=salt)


def level_interval(
    sample: Sample, name: str, short_max: int, key: object = (), resamples: int = RESAMPLES
) -> Interval:
    """The metric ``name`` of one series with its interval (a bootstrap of its own)."""
    return Bootstrap(resamples).level(sample, name, short_max, key)


def effect_interval(
    a: Sample, b: Sample, name: str, short_max: int,
    effect: Callable[[np.ndarray, np.ndarray], np.ndarray], key: object = (),
    resamples: int = RESAMPLES,
) -> Interval:  # fmt: skip
    """``effect(metric of a, metric of b)`` with its interval (paired when :func:`paired`)."""
    return Bootstrap(resamples).effect(a, b, name, short_max, effect, key)


def reduction(va: np.ndarray, vb: np.ndarray) -> np.ndarray:
    """How much lower a is than b, in percent of b (positive: a is lower, i.e. faster)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(vb > 0, 100.0 * (1.0 - va / vb), np.nan)


def difference(va: np.ndarray, vb: np.ndarray) -> np.ndarray:
    """a − b (for levels already in percent: percentage points)."""
    return va - vb


def wilson(successes: float, trials: float) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion (for counters recorded per run only)."""
    return wilson_at(successes, trials, CONFIDENCE)


def wilson_at(successes: float, trials: float, confidence: float) -> tuple[float, float]:
    """Wilson score interval of a proportion at a two-sided ``confidence``."""
    if trials <= 0:
        return float("nan"), float("nan")
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / trials
    den = 1 + z * z / trials
    mid = (p + z * z / (2 * trials)) / den
    half = z * np.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / den
    return float(max(0.0, mid - half)), float(min(1.0, mid + half))


def flows_needed(iv: Interval, boundary: float) -> float | None:
    """By how many times the sample (flows × seeds) must grow for ``iv`` to clear
    ``boundary``, if the estimate stays where it is and the interval narrows as 1/√n; None
    when the estimate sits on the boundary."""
    d = abs(iv.estimate - boundary)
    if not np.isfinite(iv.half_width) or d <= 1e-9 * max(1.0, abs(boundary)):
        return None
    return float(max(1.0, (iv.half_width / d) ** 2))
