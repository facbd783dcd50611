"""``repflow reproduce --budget``: after the first pass, seeds go where a verdict is still open.

The first pass runs every study as usual. Then, round after round, every claim that is still
*open* proposes an action: double the seeds of the grid cells (scheme × workload × load × the
other axes) behind its open points, for the schemes it compares. Each action has a cost —
the cost model's single-core seconds of the points it adds (:func:`work`, the model
``--dry-run`` uses; it depends on the configuration only, so a budget means the same on every
machine) — and a chance of deciding its claim, from how far each open point's estimate lies
from the boundary that keeps it open (:func:`chance`). Actions are taken in the order of
chance per unit of cost while they fit in what is left of the budget; their points are
simulated; the claims are evaluated again; and so on until every claim is decided, cannot be
decided at this design (a knife-edge percentile, an estimate on a boundary, or more flows than
:data:`LOOKS` − 1 doublings give), or the budget is spent.

**Sequential validity.** Looking at a claim again after adding seeds, and stopping once its
interval clears a boundary, would raise the error rate above 5 % if every look used 95 %
intervals. Every claim of a budgeted run may be looked at up to :data:`LOOKS` times (its cells'
seed counts double at most ``LOOKS − 1`` times), so every look spends ``0.05 / LOOKS``
(Bonferroni over looks): whatever the stopping rule, the chance that a claim's final verdict
is wrong stays ≤ 5 % (family-wise over its points as in a single look). The first pass of a
budgeted run therefore already uses these wider intervals (99 % for ``LOOKS`` = 5). The error
rate of the whole procedure is measured by ``validation/sequential_check.py``
(docs/metrics.md). A claim whose cells grow through another claim's actions gets extra looks;
the ledger counts them and the report flags a claim looked at more than ``LOOKS`` times.

**Determinism.** The order of actions depends only on the stored records and the budget; a
run interrupted between rounds resumes from its ledger (``budget.json``), replaying the rounds
it finished (every point is stored: nothing is recomputed), and a larger budget continues a
smaller one the same way.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

from repflow.experiments import verdicts as vd
from repflow.experiments.claims import CLAIMS, ClaimResult
from repflow.experiments.spec import SCHEME_AXIS, Spec
from repflow.experiments.store import write_json_atomic

#: Looks per claim: the first pass and up to ``LOOKS − 1`` doublings of its cells' seeds.
LOOKS = 5
#: Error rate spent at each look (Bonferroni over :data:`LOOKS`).
ALPHA = vd.FAMILY_ALPHA / LOOKS
#: An action less likely than this to decide its claim is not taken.
CHANCE_MIN = 0.05
#: Most seeds a cell may get, in multiples of its first pass's seeds.
GROWTH_MAX = 256
#: The ledger of a budgeted run, in its result root.
LEDGER = "budget.json"
#: Grid axis of the seeds.
SEED_AXIS = "seed"

_NORMAL = NormalDist()

#: A grid cell: the labels of every axis but the seed, as sorted (axis, value) pairs.
Cell = tuple[tuple[str, Any], ...]


def cell_of(labels: dict[str, Any]) -> Cell:
    """The cell of a grid point (its labels without the seed)."""
    return tuple(sorted((k, v) for k, v in labels.items() if k != SEED_AXIS))


def base_seeds(spec: Spec) -> list[int]:
    """The seeds every cell of ``spec`` runs (the grid's, or the base seed)."""
    if SEED_AXIS in spec.grid:
        return [int(s) for s in spec.grid[SEED_AXIS]]
    return [int(spec.base.get("seed", 1))]


def with_budget(spec: Spec) -> Spec:
    """``spec`` evaluated at the per-look error rate :data:`ALPHA` (``[experiment] alpha``)."""
    s = copy.deepcopy(spec)
    s.extra = {**s.extra, "alpha": ALPHA}
    if "# evaluated at alpha" not in s.text:
        s.text += (f"\n# run by `repflow reproduce --budget`: evaluated at alpha = {ALPHA:g} "
                   f"per look ({LOOKS} looks at most)\n")  # fmt: skip
    return s


def extend_spec(spec: Spec, extra: dict[Cell, int]) -> Spec:
    """``spec`` with ``extra[cell]`` more seeds in each cell: the seeds after the largest the
    spec runs, the same for every cell (seed ``max + i`` runs in the cells with at least ``i``
    extra seeds); the other cells are excluded at those seeds."""
    n = max(extra.values(), default=0)
    if n <= 0:
        return spec
    s = copy.deepcopy(spec)
    seeds = base_seeds(spec)
    top = max(seeds)
    new = [top + i for i in range(1, n + 1)]
    s.grid[SEED_AXIS] = seeds + new
    axes = [a for a in spec.grid if a != SEED_AXIS]
    cells = []
    for values in itertools.product(*(spec.grid[a] for a in axes)):
        labels = dict(zip(axes, values, strict=True))
        if not spec.excluded(labels):
            cells.append(labels)
    rules = []
    for i, seed in enumerate(new, start=1):
        for labels in cells:
            if extra.get(cell_of(labels), 0) < i:
                rules.append({**labels, SEED_AXIS: seed})
    s.exclude = list(spec.exclude) + rules
    total = sum(extra.values())
    s.extra = {**s.extra, "extension": [[list(map(list, c)), k] for c, k in sorted(
        extra.items(), key=lambda x: json.dumps(x[0], default=str)) if k > 0]}  # fmt: skip
    s.text = spec.text + (f"\n# extended by `repflow reproduce --budget`: {total} more "
                          f"cell-seeds over seeds {new[0]}–{new[-1]}\n")  # fmt: skip
    return s


def work(config: dict[str, Any]) -> float:
    """The cost of one point in budget units: the cost model's single-core seconds on the
    reference machine (a function of the configuration only) plus the fixed cost per point."""
    from repflow.experiments.sweep import POINT_SECONDS, estimate_seconds

    return estimate_seconds(config) + POINT_SECONDS


# -- which cells a claim's open points rest on -----------------------------------------------


@dataclass
class Grid:
    """A study's cells with their resolved configuration and cost."""

    spec: Spec
    #: cell → (resolved configuration at the first seed, cost of one seed)
    cells: dict[Cell, tuple[dict[str, Any], float]]
    schemes: list[str]
    cdfs: set[str]

    @staticmethod
    def of(spec: Spec) -> Grid:
        """Resolves every cell of ``spec`` (one seed each)."""
        from repflow.experiments.sweep import _validate

        first = base_seeds(spec)[0]
        one = copy.deepcopy(spec)
        one.grid = {k: v for k, v in spec.grid.items() if k != SEED_AXIS}
        one.base = {**one.base, SEED_AXIS: first}
        cells: dict[Cell, tuple[dict[str, Any], float]] = {}
        cdfs: set[str] = set()
        for p in one.points():
            cfg = _validate(p.config)
            cells[cell_of(p.labels)] = (cfg, work(cfg))
            cdf = (cfg.get("workload") or {}).get("cdf")
            if cdf is not None:
                cdfs.add(str(cdf))
        return Grid(spec, cells, [str(x) for x in spec.grid.get(SCHEME_AXIS, [])], cdfs)

    def cells_for(self, schemes: Sequence[str], workload: str, load: float) -> list[Cell]:
        """The cells behind a point of a claim comparing ``schemes`` at (workload, load)."""
        wanted = [s for s in self.schemes if s in schemes] or self.schemes
        out = []
        for cell, (cfg, _) in self.cells.items():
            labels = dict(cell)
            if SCHEME_AXIS in labels and str(labels[SCHEME_AXIS]) not in wanted:
                continue
            w = cfg.get("workload") or {}
            if workload in self.cdfs and str(w.get("cdf")) != workload:
                continue
            try:
                if abs(float(w.get("load", load)) - float(load)) > 1e-9:
                    continue
            except (TypeError, ValueError):
                pass
            out.append(cell)
        return out


# -- the chance that more seeds decide a claim -----------------------------------------------


def _mode(claim_id: str) -> str:
    c = next((c for c in CLAIMS if c.id == claim_id), None)
    return str(getattr(getattr(c, "evaluate", None), "mode", "all"))


def chance(res: ClaimResult, factor: float) -> tuple[float, str]:
    """The chance that ``factor`` × the flows at every open point decides ``res`` (if the
    estimates are where they are and the intervals narrow as 1/√n), and why it is 0 when it
    is. A point whose estimate needs ``k`` × the flows to clear its boundary clears it with
    ``factor`` × with chance Φ(z (√(factor / k) − 1)), z the quantile of its interval's level."""
    pts = res.points
    open_idx = [i for i, p in enumerate(pts) if p.verdict == vd.OPEN]
    if not open_idx:
        return 0.0, "no open point"
    for i in open_idx:
        if pts[i].plateau is not None and pts[i].plateau.side() == "open":
            return 0.0, ("undecidable at this design: a percentile on a timeout plateau (a "
                         "knife edge: more flows move it along the plateau, not off it)")
    mode = _mode(res.claim.id)
    m = len(pts)
    z95 = _NORMAL.inv_cdf(1 - vd.alpha() / 2)
    zfw = _NORMAL.inv_cdf(1 - vd.alpha() / (2 * max(m, 1)))
    alone, every = [], []
    for i in open_idx:
        p = pts[i]
        fam = vd.family(p.regions.kind_at(p.interval.estimate))
        settles_alone = (fam == "not reproduced") if mode == "all" else (fam == "reproduced")
        refute = settles_alone if mode == "all" else not settles_alone
        k = p.needed(refute=refute)
        if k is None:
            q = 0.0
        else:
            z = zfw if refute else z95
            q = _NORMAL.cdf(z * (math.sqrt(factor / k) - 1.0))
        (alone if settles_alone else every).append(q)
    if alone:
        c = 1.0 - math.prod(1.0 - q for q in alone)
    else:
        c = math.prod(every)
    if c <= 0.0:
        return 0.0, ("an estimate sits on a boundary: more flows alone may not settle it")
    return c, ""


# -- the ledger ------------------------------------------------------------------------------


@dataclass
class Action:
    """Bring ``cells`` of one study to ``target`` seeds, for ``claim``."""

    spec_name: str
    profile: str
    claim: str
    cells: list[Cell]
    target: int
    cost: float
    chance: float
    taken: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec_name, "profile": self.profile, "claim": self.claim,
                "cells": [[list(x) for x in c] for c in self.cells], "target": self.target,
                "cost": round(self.cost, 3), "chance": round(self.chance, 4),
                "taken": self.taken}  # fmt: skip

    @staticmethod
    def from_json(d: dict[str, Any]) -> Action:
        cells = [tuple((str(a), v) for a, v in c) for c in d["cells"]]
        return Action(str(d["spec"]), str(d["profile"]), str(d["claim"]), cells,
                      int(d["target"]), float(d["cost"]), float(d["chance"]),
                      bool(d.get("taken", False)))  # fmt: skip


@dataclass
class Ledger:
    """What a budgeted run did: its rounds, the work spent, every claim's path and why it
    stopped (``<root>/budget.json``)."""

    budget: float
    rounds: list[list[Action]] = field(default_factory=list)
    spent: float = 0.0
    first_pass: float = 0.0
    #: "claim|profile" → one entry per look: seeds and every point's interval
    paths: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: "claim|profile" → why it stopped
    stops: dict[str, str] = field(default_factory=dict)
    stopped: str = ""
    wall: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"budget": self.budget, "unit": "reference core-seconds (cost model)",
                "alpha_per_look": ALPHA, "looks": LOOKS, "spent": round(self.spent, 3),
                "first_pass": round(self.first_pass, 3),
                "rounds": [[a.to_json() for a in r] for r in self.rounds],
                "paths": self.paths, "stops": self.stops, "stopped": self.stopped,
                "wall": self.wall}  # fmt: skip

    @staticmethod
    def read(root: Path) -> Ledger | None:
        """The ledger stored in ``root``, or None."""
        try:
            d = json.loads((root / LEDGER).read_text(encoding="utf-8"))
            led = Ledger(float(d["budget"]))
            led.rounds = [[Action.from_json(a) for a in r] for r in d.get("rounds", [])]
            led.spent = float(d.get("spent", 0.0))
            led.first_pass = float(d.get("first_pass", 0.0))
            led.paths = dict(d.get("paths", {}))
            led.stops = dict(d.get("stops", {}))
            led.stopped = str(d.get("stopped", ""))
            led.wall = d.get("wall")
            return led
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, root: Path) -> None:
        """Stores the ledger (atomically)."""
        write_json_atomic(root / LEDGER, self.to_json())


def key(claim: str, profile: str) -> str:
    """Ledger key of a claim under a profile."""
    return f"{claim}|{profile}"


def look_entry(res: ClaimResult, seeds: int) -> dict[str, Any]:
    """One look at a claim: its verdict, seeds and every point's interval."""
    return {
        "seeds": seeds, "verdict": res.verdict,
        "points": [{"where": p.where(), "metric": p.metric, "estimate": p.interval.estimate,
                    "lo": p.interval.lo, "hi": p.interval.hi, "seeds": p.interval.seeds,
                    "verdict": p.verdict, "lo_pub": p.published_lo, "hi_pub": p.published_hi}
                   for p in res.points],
    }  # fmt: skip


def _finite(x: Any) -> Any:
    return x if isinstance(x, (int, str)) or (isinstance(x, float) and math.isfinite(x)) else None


# -- the loop --------------------------------------------------------------------------------


class Study:
    """One study under one profile, as the loop sees it."""

    def __init__(self, spec_name: str, profile: str, spec: Spec,
                 claims: list[ClaimResult]) -> None:  # fmt: skip
        self.spec_name, self.profile, self.base = spec_name, profile, spec
        self.grid = Grid.of(spec)
        self.extra: dict[Cell, int] = {}
        self.scenarios = set((spec.extra or {}).get("claims", []))
        self.claims = claims
        self.seeds0 = len(base_seeds(spec))

    @property
    def claims(self) -> list[ClaimResult]:
        """The verdicts of the claims this study declares (``[experiment] claims``)."""
        return self._claims

    @claims.setter
    def claims(self, results: list[ClaimResult]) -> None:
        self._claims = [c for c in results
                        if not self.scenarios or c.claim.scenario in self.scenarios]  # fmt: skip

    def seeds(self, cell: Cell) -> int:
        return self.seeds0 + self.extra.get(cell, 0)

    def spec(self) -> Spec:
        """The study's spec with its current extension."""
        return extend_spec(self.base, self.extra)

    def claim_cells(self, res: ClaimResult, only_open: bool = True) -> list[Cell]:
        out: list[Cell] = []
        for p in res.points:
            if only_open and p.verdict != vd.OPEN:
                continue
            for c in self.grid.cells_for(res.claim.schemes, p.workload, p.load):
                if c not in out:
                    out.append(c)
        return out

    def state(self, res: ClaimResult) -> tuple[int, ...]:
        """The seeds of every cell a claim's points rest on (its data state)."""
        return tuple(self.seeds(c) for c in self.claim_cells(res, only_open=False))

    def apply(self, a: Action) -> float:
        """Brings ``a``'s cells to its target; returns the work added."""
        cost = 0.0
        for c in a.cells:
            have = self.seeds(c)
            if have < a.target:
                cost += (a.target - have) * self.grid.cells[c][1]
                self.extra[c] = a.target - self.seeds0
        return cost

    def cost_of(self, cells: Iterable[Cell], target: int) -> float:
        return sum(max(0, target - self.seeds(c)) * self.grid.cells[c][1] for c in cells)


def replayed_extra(rounds: Sequence[Sequence[Action]], spec_name: str, profile: str,
                   seeds0: int) -> dict[Cell, int]:  # fmt: skip
    """The extra seeds per cell that the taken actions of ``rounds`` gave one study."""
    extra: dict[Cell, int] = {}
    for r in rounds:
        for a in r:
            if a.taken and (a.spec_name, a.profile) == (spec_name, profile):
                for c in a.cells:
                    extra[c] = max(extra.get(c, 0), a.target - seeds0)
    return extra


def propose(studies: Sequence[Study], looks: dict[str, int], left: float = math.inf,
            own: Iterable[str] = ()) -> tuple[list[Action], dict[str, str]]:  # fmt: skip
    """Every open claim's next action, in the order they are taken (chance per unit of cost,
    then claim and profile), and why each claim that has none stops.

    An action multiplies the seeds of the claim's open cells by a power of two — the one
    with the most chance of deciding per unit of work among those that fit in ``left`` — up
    to :data:`GROWTH_MAX` times the first pass's seeds; one action is one look, so a claim
    that needs many times the flows gets them in one step rather than in several doublings.
    ``own``: keys of the claims that have taken an action of their own (for the reasons)."""
    actions: list[Action] = []
    stops: dict[str, str] = {}
    own = set(own)
    for st in studies:
        for res in st.claims:
            k = key(res.claim.id, st.profile)
            if res.verdict in vd.CONCLUSIVE or res.verdict == vd.REGIME:
                stops[k] = "decided"
                continue
            if res.verdict != vd.OPEN:
                stops[k] = f"not measured ({res.measured})" if res.measured else "not measured"
                continue
            if looks.get(k, 1) >= LOOKS:
                stops[k] = (f"look limit: {LOOKS} looks (the alpha spent per look allows no "
                            "more)" if k in own else
                            f"look limit: its cells gained seeds {looks.get(k, 1) - 1} times "
                            f"through other claims' actions ({LOOKS} looks: the alpha spent "
                            "per look allows no more)")  # fmt: skip
                continue
            cells = st.claim_cells(res)
            if not cells:
                stops[k] = "its open points map to no grid cell of the study"
                continue
            have = max(st.seeds(c) for c in cells)
            limit = st.seeds0 * GROWTH_MAX
            factors = []
            f = 2
            while have * f <= limit:
                factors.append(f)
                f *= 2
            if not factors:
                stops[k] = f"seed limit: {limit} seeds per cell ({GROWTH_MAX}× the first pass)"
                continue
            c_max, why = chance(res, factors[-1])
            if c_max < CHANCE_MIN:
                stops[k] = why or (f"undecidable at this design: even {have * factors[-1]} "
                                   f"seeds per cell would decide it with chance {c_max:.0%} "
                                   "(estimates too close to a boundary)")  # fmt: skip
                continue
            best: Action | None = None
            cheapest = math.inf
            for f in factors:
                target = have * f
                cost = st.cost_of(cells, target)
                c, _ = chance(res, f)
                cheapest = min(cheapest, cost) if c >= CHANCE_MIN else cheapest
                if c < CHANCE_MIN or cost > left + 1e-9:
                    continue
                a = Action(st.spec_name, st.profile, res.claim.id, cells, target, cost, c)
                if best is None or c / max(cost, 1e-9) > best.chance / max(best.cost, 1e-9):
                    best = a
            if best is None:
                stops[k] = (f"budget spent (its cheapest useful step costs {cheapest:.0f} s of "
                            f"work, {left:.0f} s left)")  # fmt: skip
                continue
            actions.append(best)
    actions.sort(key=lambda a: (-a.chance / max(a.cost, 1e-9), a.claim, a.profile))
    return actions, stops


def run(
    studies: Sequence[Study], ledger: Ledger, root: Path, *,
    simulate: Callable[[Study, Spec], None],
    evaluate: Callable[[Study, Spec], list[ClaimResult]],
    out_of_time: Callable[[], bool] = lambda: False,
    say: Callable[[str], None] = lambda _m: None,
    progress: Callable[[float], None] = lambda _w: None,
    resumed: bool = False,
) -> Ledger:
    """The rounds: replays those ``ledger`` holds, then adds new ones while an action fits
    the budget. ``simulate(study, spec)`` runs the spec's missing points; ``evaluate`` returns
    its claims (on the stored points).

    ``resumed``: the studies already carry the extension of ``ledger``'s rounds
    (:func:`replayed_extra`) and their claims are those of that state, as a resumed run
    finds them stored; the rounds, paths and work of ``ledger`` are then taken as they are
    and the run goes on from there."""
    by = {(s.spec_name, s.profile): s for s in studies}
    looks: dict[str, int] = {}
    states: dict[str, tuple[int, ...]] = {}

    def observe(st: Study) -> None:
        for res in st.claims:
            k = key(res.claim.id, st.profile)
            s = st.state(res)
            if states.get(k) != s:
                states[k] = s
                looks[k] = looks.get(k, 0) + 1
                path = ledger.paths.setdefault(k, [])
                seeds = max(s) if s else st.seeds0
                if len(path) < looks[k]:
                    path.append(look_entry(res, seeds))
                else:
                    path[looks[k] - 1] = look_entry(res, seeds)

    if resumed:
        for st in studies:
            for res in st.claims:
                k = key(res.claim.id, st.profile)
                looks[k] = max(1, len(ledger.paths.get(k, [])))
                states[k] = st.state(res)
                if k not in ledger.paths:
                    ledger.paths[k] = [look_entry(res, st.seeds0)]
        replay: list[list[Action]] = []
        n = len(ledger.rounds)
        say(f"resumed after {n} rounds ({ledger.spent:.0f} s of work spent)")
    else:
        for st in studies:
            observe(st)
        replay = list(ledger.rounds)
        ledger.rounds = []
        ledger.spent = 0.0
        n = 0
    while True:
        n += 1
        if replay:
            chosen = replay.pop(0)
            for a in chosen:
                if a.taken and (a.spec_name, a.profile) in by:
                    ledger.spent += by[(a.spec_name, a.profile)].apply(a)
            ledger.rounds.append(chosen)
            touched = {(a.spec_name, a.profile) for a in chosen if a.taken}
            say(f"round {n}: replayed from the ledger")
        else:
            actions, stops = propose(studies, looks, ledger.budget - ledger.spent,
                                     {key(a.claim, a.profile) for r in ledger.rounds
                                      for a in r if a.taken})  # fmt: skip
            ledger.stops.update(stops)
            if not actions:
                still = [k for st in studies for res in st.claims
                         if res.verdict == vd.OPEN for k in [key(res.claim.id, st.profile)]]
                ledger.stopped = ("no claim is open" if not still else
                                  f"{len(still)} open claims cannot be helped by more seeds "
                                  "at this design (see each one's reason)")  # fmt: skip
                break
            if out_of_time():
                ledger.stopped = "the wall-clock limit (--budget-wall) was reached"
                for a in actions:
                    ledger.stops[key(a.claim, a.profile)] = "wall-clock limit"
                break
            touched = set()
            for a in actions:
                st = by[(a.spec_name, a.profile)]
                cost = st.cost_of(a.cells, a.target)
                if ledger.spent + cost <= ledger.budget + 1e-9:
                    a.taken = True
                    a.cost = cost
                    ledger.spent += st.apply(a)
                    touched.add((a.spec_name, a.profile))
            for a in actions:
                if not a.taken:
                    ledger.stops[key(a.claim, a.profile)] = (
                        f"budget spent (its next step, {a.target} seeds per cell, costs "
                        f"{a.cost:.0f} s of the {ledger.budget - ledger.spent:.0f} s left)")
            ledger.rounds.append(actions)
            if not touched:
                ledger.stopped = "the budget is spent"
                break
            say(f"round {n}: {sum(a.taken for a in actions)} of {len(actions)} actions "
                f"taken; {ledger.spent:.0f} of {ledger.budget:.0f} s of work spent")
        for k in sorted(touched):
            st = by[k]
            spec = st.spec()
            simulate(st, spec)
            st.claims = evaluate(st, spec)
            observe(st)
        progress(ledger.spent)
        ledger.write(root)
    for k, n_looks in looks.items():
        if n_looks > LOOKS:
            ledger.stops[k] = (ledger.stops.get(k, "") + f"; looked at {n_looks} times (> "
                               f"{LOOKS}: other claims' seeds changed its data), so its 5 % "
                               "bound is not guaranteed")  # fmt: skip
    for path in ledger.paths.values():
        for entry in path:
            for p in entry["points"]:
                for f in ("estimate", "lo", "hi", "lo_pub", "hi_pub"):
                    p[f] = _finite(p[f])
    ledger.write(root)
    return ledger


# -- the report's section ----------------------------------------------------------------------


def draw(ledger: Ledger, dest: Path) -> dict[str, str]:
    """One small figure per claim looked at more than once: every point's interval at each
    look against the seeds behind it, with the published range. Returns key → file name
    (relative to ``dest``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    figs = dest / "figures" / "budget"
    for k, path in sorted(ledger.paths.items()):
        if len(path) < 2:
            continue
        figs.mkdir(parents=True, exist_ok=True)
        fig, ax = plt.subplots(figsize=(4.2, 2.6), dpi=110)
        # the points that were open at some look: the ones the seeds were added for
        wheres = list(dict.fromkeys(p["where"] for e in path for p in e["points"]
                                    if p["verdict"] == vd.OPEN))  # fmt: skip
        if not wheres:
            wheres = list(dict.fromkeys(p["where"] for e in path for p in e["points"]))
        for j, where in enumerate(wheres):
            xs, ys, lo, hi = [], [], [], []
            for e in path:
                for p in e["points"]:
                    if p["where"] == where and p["estimate"] is not None:
                        x = e["seeds"] * (1 + 0.04 * (j - len(wheres) / 2))
                        xs.append(x)
                        ys.append(p["estimate"])
                        # (a plateau-decided percentile's interval need not hold its
                        # estimate: the bar then ends at the estimate)
                        lo.append(max(0.0, p["estimate"] - (p["lo"] if p["lo"] is not None
                                                            else p["estimate"])))  # fmt: skip
                        hi.append(max(0.0, (p["hi"] if p["hi"] is not None else p["estimate"])
                                      - p["estimate"]))  # fmt: skip
            if xs:
                ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", ms=3, lw=1, capsize=2,
                            label=where)  # fmt: skip
        pub = [(p["lo_pub"], p["hi_pub"], p["where"]) for p in path[-1]["points"]
               if p["where"] in wheres and p["lo_pub"] is not None
               and p["hi_pub"] is not None]  # fmt: skip
        if pub:
            a, b, where = pub[0]
            ax.axhspan(max(a, -200), min(b, 200), color="#2ca02c", alpha=0.12,
                       label=f"reproduced range ({where})")  # fmt: skip
        ax.set_xscale("log", base=2)
        seeds = sorted({e["seeds"] for e in path})
        ax.set_xticks(seeds, [str(x) for x in seeds])
        ax.minorticks_off()
        ax.set_xlabel("seeds per cell")
        ax.set_ylabel("effect")
        claim, profile = k.split("|", 1)
        ax.set_title(f"{claim} under {profile}: {path[0]['verdict']} → {path[-1]['verdict']}",
                     fontsize=8)  # fmt: skip
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=5, loc="best")
        fig.tight_layout()
        name = f"figures/budget/{claim}-{profile}.png"
        fig.savefig(dest / name)
        plt.close(fig)
        out[k] = name
    return out


def rows(ledger: Ledger) -> list[dict[str, str]]:
    """One row per claim and profile: the first and last verdict, looks, seeds, why stopped."""
    out = []
    order = {c.id: i for i, c in enumerate(CLAIMS)}
    for k, path in sorted(ledger.paths.items(),
                          key=lambda kv: (order.get(kv[0].split("|")[0], 999), kv[0])):
        claim, profile = k.split("|", 1)
        first, last = path[0], path[-1]
        spent = sum(a.cost for r in ledger.rounds for a in r
                    if a.taken and key(a.claim, a.profile) == k)  # fmt: skip
        stop = ledger.stops.get(k, "")
        if stop == "decided":
            stop = ("decided in the first pass" if len(path) == 1
                    else f"decided at look {len(path)}")  # fmt: skip
        out.append({"claim": claim, "profile": profile, "first": first["verdict"],
                    "last": last["verdict"], "looks": str(len(path)),
                    "seeds": f"{first['seeds']} → {last['seeds']}" if len(path) > 1
                    else str(first["seeds"]), "work": f"{spent:.0f} s", "why": stop})  # fmt: skip
    return out


def summary_line(ledger: Ledger) -> str:
    """How much of the budget the run spent, and why it stopped."""
    wall = f"; {ledger.wall:.0f} s wall" if ledger.wall is not None else ""
    rounds = sum(1 for r in ledger.rounds if any(a.taken for a in r))
    level = vd.level_text(1 - ALPHA)
    return (f"budget {ledger.budget:.0f} s of work (reference core-seconds, the cost model's), "
            f"{ledger.spent:.0f} s spent over {rounds} rounds after a first pass of "
            f"{ledger.first_pass:.0f} s{wall}; stopped: {ledger.stopped or 'not finished'}. "
            f"Every interval is at {level} % (alpha {ALPHA:g} per look, {LOOKS} looks at "
            "most: Bonferroni over looks).")  # fmt: skip


def section_md(ledger: Ledger, figures: dict[str, str]) -> list[str]:
    """The report's section on the budgeted run (Markdown lines)."""
    md = ["", "## Seeds added where verdicts were open (`--budget`)", "", summary_line(ledger),
          "", "| claim | profile | first pass | final | looks | seeds per cell | "
          "work (own actions) | why it stopped | path |",
          "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows(ledger):
        k = key(r["claim"], r["profile"])
        fig = f"![interval path]({figures[k]})" if k in figures else ""
        md.append(f"| {r['claim']} | `{r['profile']}` | {r['first']} | {r['last']} | "
                  f"{r['looks']} | {r['seeds']} | {r['work']} | {r['why']} | {fig} |")
    return md


def section_html(ledger: Ledger, figures: dict[str, str]) -> str:
    """The report's section on the budgeted run (HTML)."""
    import html as h

    out = [f"<h2>Seeds added where verdicts were open (<code>--budget</code>)</h2>"
           f"<p>{h.escape(summary_line(ledger))}</p><table><tr><th>claim</th><th>profile</th>"
           "<th>first pass</th><th>final</th><th>looks</th><th>seeds per cell</th>"
           "<th>work (own actions)</th><th>why it stopped</th><th>path</th></tr>"]  # fmt: skip
    for r in rows(ledger):
        k = key(r["claim"], r["profile"])
        fig = (f"<img src='{h.escape(figures[k])}' width='320'>" if k in figures else "")
        out.append(f"<tr><td>{r['claim']}</td><td><code>{h.escape(r['profile'])}</code></td>"
                   f"<td>{h.escape(r['first'])}</td><td>{h.escape(r['last'])}</td>"
                   f"<td>{r['looks']}</td><td>{r['seeds']}</td><td>{r['work']}</td>"
                   f"<td>{h.escape(r['why'])}</td><td>{fig}</td></tr>")
    out.append("</table>")
    return "".join(out)
