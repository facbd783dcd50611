"""`repflow reproduce`: the seed papers' studies under two TCP profiles and one report."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from repflow.cli import main
from repflow.experiments.claims import CLAIMS
from repflow.experiments.papers import DC, PAPERS, find_paper
from repflow.experiments.reproduce import profile_differences, with_profile
from repflow.experiments.spec import find_builtin_spec, load_spec

REPO = Path(__file__).resolve().parents[2]


def test_every_claim_belongs_to_a_study_of_a_paper():
    scenarios = {s.scenario for p in PAPERS for s in p.studies}
    assert {c.scenario for c in CLAIMS} <= scenarios
    for p in PAPERS:
        for s in p.studies:
            assert s.profile in ("dc", "linux", "ns2", "ns3-2014"), s
            assert s.why


@pytest.mark.parametrize("paper", [p.id for p in PAPERS])
def test_each_study_spec_exists_and_declares_its_scenario(paper):
    for s in find_paper(paper).studies:
        for name in (s.quick, s.full):
            spec = load_spec(find_builtin_spec(name))
            assert s.scenario in spec.extra.get("claims", []), (name, s.scenario)


def test_a_profile_keeps_the_specs_own_tcp_fields():
    spec = load_spec(REPO / "experiments" / "repflow-paper-quick.toml")
    a, b = with_profile(spec, "ns2"), with_profile(spec, DC)
    assert a.base["tcp"]["profile"] == "ns2" and a.name.endswith("@ns2")
    assert spec.base.get("tcp", {}).get("profile") is None  # the original is untouched
    diffs = {k for k, _, _ in profile_differences(a, b)}
    # the spec sets init_cwnd itself: equal in both runs; the RTOs come from the profile
    assert "init_cwnd" not in diffs
    assert {"min_rto", "initial_rto", "mss", "max_window"} <= diffs


def test_unknown_paper_is_one_line(capsys, tmp_path):
    assert main(["reproduce", "nosuch", "--quick", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "unknown paper 'nosuch'" in err and "repflow" in err and "fa-dctcp" in err
    assert not (tmp_path / "o").exists()


def test_one_paper_under_both_profiles_then_resumed(tmp_path):
    out = tmp_path / "fa"
    argv = [sys.executable, "-m", "repflow", "reproduce", "fa-dctcp", "--quick", "-q",
            "--out", str(out)]  # fmt: skip
    r = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stderr
    assert (out / "fa-dctcp" / "linux" / "report.html").is_file()
    assert (out / "fa-dctcp" / "dc" / "report.html").is_file()
    marker = json.loads((out / "reproduce.json").read_text())
    assert {x["profile"] for x in marker["runs"]} == {"linux", "dc"}
    rows = list(csv.DictReader((out / "claims.csv").open()))
    assert {(x["claim"], x["profile"]) for x in rows} == {("FA-1", "linux"), ("FA-1", "dc")}
    assert all(x["verdict"] != "not measured" for x in rows)
    assert {"claim", "profile", "verdict", "reason", "criterion", "published"} <= set(rows[0])
    points = list(csv.DictReader((out / "claim_points.csv").open()))
    from repflow.experiments.claims import POINT_COLUMNS

    assert tuple(points[0]) == POINT_COLUMNS
    # FA-1: 3 sizes × (mean, p99, long flows) at its one load, under two profiles
    assert len(points) == 18 and {p["seeds"] for p in points} == {"5"}
    assert all(float(p["ci_lo"]) <= float(p["measured"]) <= float(p["ci_hi"]) for p in points)
    md = (out / "report.md").read_text()
    assert "paper's profile: verdict" in md and "What decides the difference" in md
    assert " reproduced, " in md and " open" in md and "Sign convention" in md
    assert "(same run)" not in md
    assert "`min_rto` 200ms vs 10ms" in md
    # the per-study run recorded its profile
    sweep = json.loads((out / "fa-dctcp" / "linux" / "sweep.json").read_text())
    assert sweep["spec"]["base"]["tcp"]["profile"] == "linux"
    # a rerun resumes: nothing left to compute
    r2 = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert r2.returncode == 0, r2.stderr
    assert "0 computed" in r2.stderr or "30 already stored" in r2.stderr, r2.stderr


def test_seed_offset_shifts_every_seed_and_names_the_run(tmp_path):
    from repflow.experiments.papers import PAPERS
    from repflow.experiments.reproduce import plan_runs

    base = plan_runs(PAPERS, True, "both", tmp_path)
    shifted = plan_runs(PAPERS, True, "both", tmp_path, seed_offset=100)
    for a, b in zip(base, shifted, strict=True):
        assert a.spec is not None and b.spec is not None
        seeds_a = a.spec.grid.get("seed", [a.spec.base.get("seed", 1)])
        seeds_b = b.spec.grid.get("seed", [b.spec.base.get("seed", 1)])
        assert [int(x) + 100 for x in seeds_a] == [int(x) for x in seeds_b]
        assert not set(seeds_a) & set(seeds_b) and b.spec.name.endswith("+seed100")
    assert main(["reproduce", "fa-dctcp", "--quick", "--seed-offset", "-1", "--dry-run"]) == 2


def test_a_foreign_directory_is_refused(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep").write_text("mine")
    assert main(["reproduce", "l2dct", "--quick", "--out", str(tmp_path / "x")]) == 2
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == ["keep"]


def test_verdicts_of_two_runs_side_by_side_flag_only_contradictions(tmp_path):
    from repflow.experiments.reproduce import compare_verdicts, contradicts

    rep, larger = "reproduced", "reproduced, larger than published"
    smaller, opp = "not reproduced — smaller", "not reproduced — opposite sign"
    assert contradicts(rep, opp) and contradicts(smaller, larger)
    assert not contradicts(rep, larger) and not contradicts(rep, "open")
    assert not contradicts(smaller, opp)
    head = "paper,claim,profile,verdict\n"
    (tmp_path / "a.csv").write_text(head + f"repflow,RF-1,dc,{rep}\nrepflow,RF-2,dc,{rep}\n"
                                    "repflow,RF-3,dc,open\n")
    (tmp_path / "b.csv").write_text(head + f"repflow,RF-1,dc,{opp}\n"
                                    f"repflow,RF-2,dc,\"{larger}\"\nrepflow,RF-3,dc,{rep}\n")
    table, bad = compare_verdicts(tmp_path / "a.csv", tmp_path / "b.csv")
    assert bad == [f"RF-1 under dc: {rep} / {opp}"]
    assert table.count("**contradiction**") == 1
    assert f"| RF-3 | `dc` | open | {rep} |" in table


def test_claims_are_computed_on_the_reference_fixtures(tmp_path):
    from repflow.experiments.papers import find_paper
    from repflow.experiments.reproduce import plan_runs, reference_results

    runs = [r for r in plan_runs([find_paper("repflow")], True, "dc", tmp_path)
            if r.spec_name == "repflow-paper-quick"]  # fmt: skip
    refs = reference_results(runs)
    rf1, rf1_ns3 = refs[("RF-1", "dc")]
    assert rf1.label.startswith("htsim ") and len(rf1.label) == len("htsim 841d9e7")
    assert rf1.result.verdict != "not measured" and rf1.result.points
    assert "seeds 1, 2" in rf1.scope and "100 ms" in rf1.scope
    assert rf1_ns3.label == "ns-3 1406464" and rf1_ns3.result.verdict != "not measured"
    # neither htsim nor ns-3 has pFabric: RF-10 cannot be run there, and says so
    assert [x.result.verdict for x in refs[("RF-10", "dc")]] == ["not measured"] * 2


def test_the_paper_profile_has_htsim_and_ns3_beside_ours(tmp_path):
    """Under ns3-2014 the RepFlow study has two references: htsim (every scheme but pFabric)
    and ns-3 with per-flow ECMP (TCP and RepFlow only). claims.csv joins them in that order;
    a claim a reference cannot run (RF-9: DCTCP) is left out of its columns, not guessed."""
    from repflow.experiments.papers import find_paper
    from repflow.experiments.reproduce import (
        Row,
        _claim_csv_row,
        _reference_note,
        plan_runs,
        reference_results,
    )

    runs = [r for r in plan_runs([find_paper("repflow")], True, "paper", tmp_path)
            if r.spec_name == "repflow-paper-quick" and r.profile == "ns3-2014"]  # fmt: skip
    assert runs
    refs = reference_results(runs)
    rf1 = refs[("RF-1", "ns3-2014")]
    assert [x.label.split()[0] for x in rf1] == ["htsim", "ns-3"]
    assert rf1[1].label == "ns-3 1406464"
    assert all(x.result.verdict != "not measured" for x in rf1)
    assert "schemes tcp, repflow" in rf1[1].scope
    rf9 = refs[("RF-9", "ns3-2014")]
    assert [x.result.verdict == "not measured" for x in rf9] == [False, True]
    note = _reference_note(rf1, None)
    assert note.count(" says: ") == 2 and "ns-3 1406464 says:" in note
    from repflow.experiments.claims import CLAIMS

    claim = next(c for c in CLAIMS if c.id == "RF-1")
    paper = find_paper("repflow")
    row = Row(paper, claim, "ns3-2014", rf1[0].result, None)
    from repflow.experiments.reproduce import CLAIM_COLUMNS

    col = {c: i for i, c in enumerate(CLAIM_COLUMNS)}
    csv = _claim_csv_row(row, "ns3-2014", rf1[0].result, rf1)
    assert csv[col["reference"]] == f"{rf1[0].label}; ns-3 1406464"
    assert csv[col["reference_verdict"]] == f"{rf1[0].result.verdict}; {rf1[1].result.verdict}"
    csv9 = _claim_csv_row(row, "ns3-2014", rf9[0].result, rf9)
    assert csv9[col["reference"]] == rf9[0].label  # ns-3 did not measure RF-9
    # like with like: beside each reference, ours on the same flows and seeds, and whether
    # the effects differ by the intervals of their difference
    for ref in rf1:
        assert ref.ours is not None and ref.ours.points
        assert {(p.workload, p.load) for p in ref.ours.points} == {
            (p.workload, p.load) for p in ref.result.points}
        assert ref.differs is not None and ref.difference
    assert csv[col["ours_on_reference_subset"]].count(";") == 1
    assert "ours on the same flows:" in note


def test_a_report_failing_in_the_background_fails_its_study_only(tmp_path):
    """Reports are drawn in a background process while the next study computes: one that
    fails marks its own study failed, with the message, and the wait still ends."""
    from repflow.experiments.papers import PAPERS
    from repflow.experiments.reproduce import Run
    from repflow.experiments.uptodate import BackgroundReports

    said: list[str] = []
    bad = Run(PAPERS[0], "bad", "", "dc", "dc", "", tmp_path / "bad", None)
    also_bad = Run(PAPERS[0], "also-bad", "", "dc", "dc", "", tmp_path / "x" / "y", None)
    reports = BackgroundReports(said.append)
    reports.submit(bad)
    reports.submit(also_bad)
    reports.wait()
    for r in (bad, also_bad):
        assert "not an experiment directory (no sweep.json)" in r.error, r.error
        assert str(r.out) in r.error and r.claims == []
    assert said == ["bad under dc: drawing in the background",
                    "also-bad under dc: drawing in the background"]  # fmt: skip
