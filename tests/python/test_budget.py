"""`repflow reproduce --budget`: seeds added where verdicts are open (issue 51).

Unit tests of the pieces (the spec extension, the chance of deciding, the rounds and their
ledger, the alpha spent per look, the flags), and one end-to-end budgeted run of the FA-DCTCP
study that checks the ledger, the report's section, determinism and resumption.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from repflow.experiments import budget as bd
from repflow.experiments import verdicts as vd
from repflow.experiments.claims import CLAIMS, ClaimResult
from repflow.experiments.evidence import Point
from repflow.experiments.report import sweep_alpha
from repflow.experiments.spec import parse_spec
from repflow.experiments.stats import Interval
from repflow.experiments.store import point_key
from repflow.experiments.sweep import _validate

SPEC = """
[experiment]
name = "budget-test"
claims = ["repflow-ns3"]

[base]
seed = 1
topology = { kind = "star", hosts = 4, link_rate = "1Gbps" }
workload = { cdf = "websearch", load = 0.2, duration = "5ms" }

[grid]
scheme = ["tcp", "repflow", "dctcp"]
"workload.load" = [0.2, 0.5]
seed = [1, 2]
"""


def _spec():
    return parse_spec(SPEC, "budget-test.toml")


def _cell(spec, scheme: str, load: float) -> bd.Cell:
    return bd.cell_of({"scheme": scheme, "workload.load": load})


def test_extend_spec_adds_seeds_to_the_chosen_cells_only_and_keeps_every_stored_point():
    spec = _spec()
    base = spec.points()
    assert len(base) == 12
    ext = bd.extend_spec(spec, {_cell(spec, "tcp", 0.5): 3, _cell(spec, "repflow", 0.5): 1})
    pts = ext.points()
    assert len(pts) == 12 + 3 + 1
    added = [p.labels for p in pts if p.labels["seed"] > 2]
    assert sorted((p["scheme"], p["seed"]) for p in added) == [
        ("repflow", 3), ("tcp", 3), ("tcp", 4), ("tcp", 5)]  # fmt: skip
    assert all(p["workload.load"] == 0.5 for p in added)
    # every point of the first pass keeps its configuration, hence its stored key
    keys = {point_key(_validate(p.config), "v") for p in base}
    assert keys <= {point_key(_validate(p.config), "v") for p in pts}
    # nothing to add: the spec itself
    assert bd.extend_spec(spec, {}) is spec


def _point(est: float, lo: float, hi: float, load: float = 0.5, seeds: int = 2) -> Point:
    p = Point("", "websearch", load, "short_mean", vd.at_least_regions(30.0),
              Interval(est, lo, hi, (1000, 1000), seeds))  # fmt: skip
    p.fw = Interval(est, lo - 1, hi + 1, (1000, 1000), seeds)
    p.kinds = p.regions.admits(lo, hi)
    p.kinds_fw = p.regions.admits(lo - 1, hi + 1)
    p.verdict = vd.point_verdict(p.kinds) if len(p.kinds) == 1 else vd.OPEN
    return p


def _claim(cid: str = "RF-1") -> object:
    return next(c for c in CLAIMS if c.id == cid)


def test_chance_grows_with_the_flows_and_falls_with_the_distance_to_the_boundary():
    near = ClaimResult(_claim(), "", vd.OPEN, points=[_point(31.0, 25.0, 37.0)])
    far = ClaimResult(_claim(), "", vd.OPEN, points=[_point(40.0, 28.0, 52.0)])
    c2, _ = bd.chance(near, 2.0)
    c16, _ = bd.chance(near, 16.0)
    assert 0.0 < c2 < c16 < 1.0
    assert bd.chance(far, 2.0)[0] > c2
    decided = ClaimResult(_claim(), "", vd.REPRODUCED, points=[_point(50.0, 40.0, 60.0)])
    assert bd.chance(decided, 2.0) == (0.0, "no open point")


class _Fake:
    """A study whose claim decides once its cells reach ``decide_at`` seeds."""

    def __init__(self, decide_at: int) -> None:
        self.decide_at = decide_at
        self.simulated: list[int] = []

    def simulate(self, st: bd.Study, spec) -> None:  # noqa: ANN001
        self.simulated.append(len(spec.points()))

    def evaluate(self, st: bd.Study, spec) -> list[ClaimResult]:  # noqa: ANN001
        seeds = max(st.seeds(c) for c in st.grid.cells)
        if seeds >= self.decide_at:
            return [ClaimResult(_claim(), "", vd.REPRODUCED, points=[_point(33, 31, 35)])]
        return [ClaimResult(_claim(), "", vd.OPEN, points=[_point(33, 27, 39, seeds=seeds)])]


def _study(decide_at: int) -> tuple[bd.Study, _Fake]:
    fake = _Fake(decide_at)
    spec = _spec()
    first = fake.evaluate(bd.Study("budget-test", "dc", spec, []), spec)
    return bd.Study("budget-test", "dc", spec, first), fake


def test_rounds_double_the_open_cells_until_decided_within_the_budget(tmp_path: Path):
    st, fake = _study(decide_at=8)
    led = bd.run([st], bd.Ledger(budget=1e6), tmp_path, simulate=fake.simulate,
                 evaluate=fake.evaluate)  # fmt: skip
    path = led.paths["RF-1|dc"]
    assert [e["seeds"] for e in path] == [2, 4, 8]
    assert [e["verdict"] for e in path] == [vd.OPEN, vd.OPEN, vd.REPRODUCED]
    assert led.stops["RF-1|dc"] == "decided"
    assert led.stopped == "no claim is open"
    # only the claim's schemes (tcp, repflow) at its point's load (0.5) got seeds
    assert set(st.extra) == {_cell(st.base, "tcp", 0.5), _cell(st.base, "repflow", 0.5)}
    assert 0 < led.spent <= led.budget
    stored = json.loads((tmp_path / bd.LEDGER).read_text())
    assert stored["spent"] == pytest.approx(led.spent, abs=1e-3)


def test_the_budget_stops_the_rounds_and_a_larger_one_continues_the_ledger(tmp_path: Path):
    st, fake = _study(decide_at=16)
    one_round = st.cost_of(st.claim_cells(st.claims[0]), 4)
    small = bd.run([st], bd.Ledger(budget=one_round * 1.5), tmp_path, simulate=fake.simulate,
                   evaluate=fake.evaluate)  # fmt: skip
    assert small.spent <= small.budget
    assert "budget spent" in small.stops["RF-1|dc"]
    assert [e["seeds"] for e in small.paths["RF-1|dc"]] == [2, 4]
    # the same ledger with a larger budget: round 1 replayed, then rounds until decided
    st2, fake2 = _study(decide_at=16)
    big = bd.Ledger(budget=1e6)
    big.rounds = bd.Ledger.read(tmp_path).rounds
    cont = bd.run([st2], big, tmp_path, simulate=fake2.simulate, evaluate=fake2.evaluate)
    assert [e["seeds"] for e in cont.paths["RF-1|dc"]] == [2, 4, 8, 16]
    # a fresh run with the larger budget takes the same path
    st3, fake3 = _study(decide_at=16)
    fresh = bd.run([st3], bd.Ledger(budget=1e6), tmp_path / "fresh", simulate=fake3.simulate,
                   evaluate=fake3.evaluate)  # fmt: skip
    assert fresh.paths == cont.paths
    assert fresh.spent == pytest.approx(cont.spent)


def test_a_claim_stops_at_the_look_limit(tmp_path: Path):
    st, fake = _study(decide_at=10**6)
    led = bd.run([st], bd.Ledger(budget=1e9), tmp_path, simulate=fake.simulate,
                 evaluate=fake.evaluate)  # fmt: skip
    assert len(led.paths["RF-1|dc"]) == bd.LOOKS
    assert max(e["seeds"] for e in led.paths["RF-1|dc"]) == 2 * 2 ** (bd.LOOKS - 1)
    assert "limit" in led.stops["RF-1|dc"]


def test_alpha_per_look_widens_every_interval_of_the_evaluation():
    assert vd.confidence() == pytest.approx(0.95)
    with vd.at_alpha(bd.ALPHA):
        assert vd.confidence() == pytest.approx(0.99)
        assert vd.family_confidence(5) == pytest.approx(1 - 0.01 / 5)
        assert vd.level_text() == "99"
    assert vd.family_confidence(5) == pytest.approx(0.99)
    assert sweep_alpha({"extra": {"alpha": 0.01}}) == 0.01
    assert sweep_alpha({"extra": {"alpha": "x"}}) == vd.FAMILY_ALPHA
    assert sweep_alpha({}) == vd.FAMILY_ALPHA
    with pytest.raises(ValueError):
        with vd.at_alpha(0.0):
            pass


def _repflow(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "repflow", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=900)  # fmt: skip


@pytest.mark.parametrize("args,needle", [
    (["--budget", "3600"], "--budget: '3600' has no unit"),
    (["--budget", "0s"], "--budget: must be more than 0"),
    (["--budget-wall", "10min"], "--budget-wall limits a --budget run"),
    (["--budget", "1min", "--spec", "x.toml"], "--budget spends its work on the papers' claims"),
])  # fmt: skip
def test_budget_flags_refuse_bad_input_by_name(tmp_path: Path, args: list[str], needle: str):
    papers = [] if "--spec" in args else ["fa-dctcp"]
    r = _repflow("reproduce", *papers, "--quick", "--out", str(tmp_path / "o"), *args)
    assert r.returncode != 0
    assert needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_budgeted_run_end_to_end_is_deterministic_and_resumes(tmp_path: Path):
    """The FA-DCTCP study under its paper's profile with a small budget: the ledger, the
    report's section, the claims, and a rerun that computes nothing and changes nothing."""
    out = tmp_path / "rq"
    args = ["reproduce", "fa-dctcp", "--quick", "--profiles", "paper", "--out", str(out),
            "--budget", "40s", "-q"]  # fmt: skip
    r = _repflow(*args)
    assert r.returncode == 0, r.stderr[-3000:]
    led = json.loads((out / bd.LEDGER).read_text())
    assert led["alpha_per_look"] == bd.ALPHA and led["budget"] == 40.0
    assert led["spent"] <= 40.0
    assert "FA-1|linux" in led["paths"]
    md = (out / "report.md").read_text()
    assert "Seeds added where verdicts were open" in md
    assert "every interval above is at 99 %" in md
    sweep = json.loads((out / "fa-dctcp" / "linux" / "sweep.json").read_text())
    assert sweep["spec"]["extra"]["alpha"] == bd.ALPHA
    claims = (out / "claims.csv").read_text()
    r2 = _repflow(*args)
    assert r2.returncode == 0, r2.stderr[-3000:]
    assert " computed" not in r2.stderr.replace("; 0 computed", "")
    led2 = json.loads((out / bd.LEDGER).read_text())
    assert led2["rounds"] == led["rounds"] and led2["paths"] == led["paths"]
    assert (out / "claims.csv").read_text() == claims


def test_the_path_figure_draws_an_estimate_outside_its_interval(tmp_path: Path):
    """A plateau-decided percentile's interval need not hold its estimate (seen in the main
    job: the report's figure failed on it)."""
    led = bd.Ledger(budget=100.0)
    pt = {"where": "load 0.5", "metric": "short_p99", "estimate": 40.0, "lo": 45.0,
          "hi": 60.0, "seeds": 3, "verdict": vd.OPEN, "lo_pub": 30.0, "hi_pub": 50.0}
    led.paths["RF-5|ns3-2014"] = [
        {"seeds": 3, "verdict": vd.OPEN, "points": [pt]},
        {"seeds": 6, "verdict": vd.OPEN, "points": [{**pt, "estimate": 70.0, "seeds": 6}]},
    ]
    figs = bd.draw(led, tmp_path)
    assert (tmp_path / figs["RF-5|ns3-2014"]).stat().st_size > 1000
    md = "\n".join(bd.section_md(led, figs))
    assert "RF-5" in md and "figures/budget/RF-5-ns3-2014.png" in md
