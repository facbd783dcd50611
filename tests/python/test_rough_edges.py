"""Issue 39: the rough edges a new user hits (CLI vocabulary, specs, the Python API, progress in
logs, result directories). One test or more per item; the testbed's items are in
test_testbed_edges.py."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
from repflow.experiments.store import Store

REPO = Path(__file__).resolve().parents[2]


# -- item 10: spec.toml and sweep.json have the mode of every other file ----------------------


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_sweep_files_respect_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        Store(tmp_path / "s").write_sweep({"name": "x"}, "[experiment]\n")
        (tmp_path / "other").write_text("x")
    finally:
        os.umask(old)
    want = stat.S_IMODE((tmp_path / "other").stat().st_mode)
    assert want == 0o666 & ~umask
    for name in ("spec.toml", "sweep.json"):
        assert stat.S_IMODE((tmp_path / "s" / name).stat().st_mode) == want, name


# -- item 15: the API's missing configuration file is not phrased as a CLI flag ---------------


def test_api_missing_config_names_the_file_not_a_flag(tmp_path, capsys):
    import repflow
    from repflow.cli import main
    from repflow.errors import UserError

    missing = tmp_path / "nope.toml"
    with pytest.raises(UserError) as e:
        repflow.load_config(missing)
    assert "--config" not in str(e.value) and str(missing) in str(e.value)
    assert main(["sim", "--config", str(missing), "-q"]) == 2  # the CLI still names its flag
    assert f"--config: file '{missing}' does not exist" in capsys.readouterr().err


# -- item 9: the --out refusal names the spec that made the directory -------------------------

SPEC_A = """
[experiment]
name = "spec-a"
[base]
topology = { kind = "star", hosts = 4 }
workload = { duration = "1ms" }
[grid]
scheme = ["tcp"]
"""


def test_out_refusal_names_the_spec_that_made_the_directory(tmp_path, capsys):
    from repflow.cli import main

    a = tmp_path / "a.toml"
    a.write_text(SPEC_A)
    b = tmp_path / "b.toml"
    b.write_text(SPEC_A.replace("spec-a", "spec-b"))
    out = tmp_path / "out"
    Store(out).write_sweep({"name": "spec-a", "spec": {"path": str(a)}}, SPEC_A)
    assert main(["sweep", str(b), "--out", str(out), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "'spec-a'" in err and str(a) in err and str(out) in err, err
    assert main(["sweep", str(a), "--out", str(out), "--dry-run"]) == 0  # its own: resumed


# -- item 8: a spec without claims prints no claims section -----------------------------------


def _fake_report(root: Path, scenarios: list[str]):
    import json
    from types import SimpleNamespace

    import pandas as pd
    from repflow.experiments.claims import evaluate_claims

    root.mkdir(parents=True, exist_ok=True)
    extra = {"claims": scenarios} if scenarios else {}
    (root / "sweep.json").write_text(json.dumps({"name": "x", "spec": {"extra": extra}}))
    agg = pd.DataFrame({"series": ["tcp"], "workload": ["websearch"], "load": [0.5]})
    return SimpleNamespace(html=root / "report.html", markdown=root / "report.md",
                           figures=[], claims=evaluate_claims(agg, scenarios))  # fmt: skip


def test_a_spec_without_claims_prints_no_claims_section(tmp_path, capsys):
    from repflow.cli.experiments import _print_report

    _print_report(_fake_report(tmp_path / "none", []))
    out = capsys.readouterr().out
    assert "claims:" not in out and "not measured" not in out
    _print_report(_fake_report(tmp_path / "some", ["repflow-ns3"]))
    lines = capsys.readouterr().out.splitlines()
    assert "claims:" in lines
    shown = [ln for ln in lines[lines.index("claims:") + 1:] if ln.startswith("  ") and
             not ln.strip().startswith("measured")]  # fmt: skip
    from repflow.experiments.claims import CLAIMS

    want = [c for c in CLAIMS if c.scenario == "repflow-ns3"]
    assert want and len(shown) == len(want)


# -- item 5: `model --copies` changes the printed table, 1 copy is refused; --threshold named --


def test_model_copies_changes_the_printed_table(tmp_path, capsys):
    from repflow.cli import main

    def table(*extra: str) -> str:
        assert main(["model", "--loads", "0.3", "--out", str(tmp_path / "m"), *extra]) == 0
        return capsys.readouterr().out.split("wrote ")[0]

    plain = table()
    three = table("--copies", "3")
    four = table("--copies", "4")
    assert plain != three != four
    assert "copies3_short_mean" in three and "copies4_short_mean" in four
    assert "copies" not in plain.split("\n", 1)[1]


@pytest.mark.parametrize(("argv", "flag"), [(["--copies", "1"], "--copies"),
                                             (["--threshold", "0"], "--threshold"),
                                             (["--threshold", "0KB"], "--threshold")])
def test_model_bad_copies_and_threshold_name_their_flag(tmp_path, capsys, argv, flag):
    from repflow.cli import main

    assert main(["model", "--loads", "0.3", "--out", str(tmp_path / "m"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"repflow: error: {flag}") and "\n" not in err, err


# -- items 2 and 3: spec errors, one format, the key blamed ------------------------------------

GOOD = """
[experiment]
name = "t"
[base]
topology = { kind = "star", hosts = 4 }
workload = { duration = "1ms" }
[grid]
scheme = ["tcp", "repflow"]
"workload.load" = [0.3]
"""


def _spec_error(tmp_path, text: str) -> str:
    from repflow.errors import UserError
    from repflow.experiments import parse_spec, plan_sweep

    with pytest.raises(UserError) as e:
        plan_sweep(parse_spec(text, "t.toml"), Store(tmp_path / "s"), "v")
    assert not (tmp_path / "s").exists()
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_a_scheme_override_for_a_label_not_in_the_grid_is_an_error(tmp_path, capsys):
    from repflow.cli import main

    text = GOOD + '[schemes.repflw]\n"scheme.copies" = 3\n'
    msg = _spec_error(tmp_path, text)
    assert re.match(r"t\.toml:\d+: \[schemes.repflw\]: unknown scheme label `repflw`", msg), msg
    assert "`tcp`, `repflow`" in msg
    spec = tmp_path / "t.toml"
    spec.write_text(text)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "-q", "--no-report"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and re.search(rf"{spec}:\d+: \[schemes.repflw\]", err), err
    assert not (tmp_path / "o").exists()
    # a spec without a scheme axis has no label to override
    msg = _spec_error(tmp_path, GOOD.replace('scheme = ["tcp", "repflow"]\n', "")
                      + '[schemes.tcp]\n"scheme.name" = "tcp"\n')  # fmt: skip
    assert re.match(r"t\.toml:\d+: \[schemes.tcp\]: unused scheme label `tcp`", msg), msg
    assert "no scheme axis" in msg


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        ('duration = "1ms" }', 'duraton = "1ms" }',
         "t.toml: [base] workload.duraton: unknown field `duraton`, expected one of `cdf`"),
        ('"workload.load" = [0.3]', '"workload.lod" = [0.3]',
         "t.toml: [grid] workload.lod: unknown field `lod`, expected one of `cdf`"),
        ('"workload.load" = [0.3]', '"seeed" = [1]',
         "t.toml: [grid] seeed: unknown field `seeed`, expected one of `seed`, `topology`"),
        ("[grid]", "[gird]",
         "t.toml: [gird]: unknown table `gird`, expected one of `experiment`, `base`"),
        ('name = "t"', 'name = "t"\ntitel = "x"',
         "t.toml: [experiment] titel: unknown field `titel`, expected one of `name`, `title`"),
        ('name = "t"', 'name = "t"\n[figures]\nbaselin = "tcp"',
         "t.toml: [figures] baselin: unknown field `baselin`, expected one of `baseline`"),
    ],
)  # fmt: skip
def test_every_spec_typo_has_one_format(tmp_path, old, new, want):
    assert old in GOOD
    msg = _spec_error(tmp_path, GOOD.replace(old, new, 1))
    msg = re.sub(r"^t\.toml:\d+:", "t.toml:", msg)  # the key's line (issue 52), when known
    assert msg.startswith(want), msg
    assert "['" not in msg and "[(" not in msg  # no Python list reprs
    if "[grid]" in want:
        assert "=" not in msg.split("unknown field")[0]  # the key is blamed, not a value
    # one shape: FILE: [TABLE] KEY: unknown field `NAME`, expected one of `a`, `b`, …
    assert re.fullmatch(r"t\.toml: \[[a-z.]+\]( [a-z_.]+)?: unknown (field|table) `[a-z_]+`, "
                        r"expected one of `[a-z_]+`(, `[a-z_]+`)*", msg), msg


# -- item 4: one vocabulary, defaults in --help, usage errors on one line ----------------------


def _main_err(capsys, *argv: str) -> tuple[int, str]:
    from repflow.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "where"),
    [
        (["bench", "--out", "X"], "repflow bench"),
        (["sim", "--duration", "1ms", "--bogus"], "repflow sim"),
        (["testbed", "up", "--k", "abc"], "repflow testbed up"),
        (["testbed", "up", "--frobnicate"], "repflow testbed up"),
        (["model", "--copies", "two"], "repflow model"),
        (["sweep"], "repflow sweep"),
        (["no-such-command"], "repflow"),
    ],
)
def test_usage_errors_are_one_line_naming_the_subcommand(capsys, argv, where):
    code, err = _main_err(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("repflow: error: "), err
    assert lines[0].endswith(f"(see `{where} --help`)"), err
    assert "usage:" not in err


def test_sim_help_shows_every_flags_default():
    import re

    from repflow.cli import build_parser
    from repflow.config_io import FLAGS

    sim = build_parser()._subparsers._group_actions[0].choices["sim"]  # type: ignore[union-attr]
    text = re.sub(r"\s+", " ", sim.format_help())
    for flag, default in (("--init-cwnd", "12"), ("--k", "8"), ("--load", "0.5"),
                          ("--scheme", "tcp"), ("--min-rto", None), ("--copies", "2")):  # fmt: skip
        m = re.search(re.escape(flag) + r" [A-Z|]+ .*?\(default: ([^)]*)\)", text)
        assert m, (flag, text)
        if default is not None:
            assert m.group(1).startswith(default), (flag, m.group(1))
    valued = [f for f in FLAGS if f.const is None]
    assert text.count("(default: ") >= len(valued) - 2


@pytest.mark.parametrize(
    ("command", "old", "new", "value"),
    [
        (["model", "--loads", "0.5"], "--init-window", "--init-cwnd", "10"),
        (["model", "--loads", "0.5"], "--k", "--init-cwnd", "10"),
        (["smartrep-table"], "--eps", "--smartrep-eps", "0.05"),
        (["smartrep-table"], "--p", "--large-flow-p", "0.2"),
    ],
)
def test_old_flag_names_are_hidden_deprecated_aliases(tmp_path, capsys, command, old, new, value):
    from repflow.cli import build_parser, main

    argv = [*command, *(["--out", str(tmp_path / "m")] if command[0] == "model" else [])]
    assert main([*argv, new, value]) == 0
    current = capsys.readouterr()
    assert "deprecated" not in current.err
    assert main([*argv, old, value]) == 0
    aliased = capsys.readouterr()
    assert f"repflow: note: {old} is deprecated; use {new}" in aliased.err
    assert aliased.out.split("wrote")[0] == current.out.split("wrote")[0]
    sub = build_parser()._subparsers._group_actions[0].choices[command[0]]  # type: ignore
    shown = sub.format_help()
    assert new in shown and f"{old} " not in shown.replace(f"{old}-", "")


def test_docs_cli_rows_list_each_commands_own_flags():
    """Each command's row of docs/cli.md names every flag the command shows in --help (the
    older check passed when a flag appeared anywhere on the page)."""
    import argparse
    import re

    from repflow.cli import build_parser

    doc = (REPO / "docs" / "cli.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([a-z -]+)` \| (.*) \|$", doc, re.M)}
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    missing = []
    for name, p in commands.items():
        subs = [(name, p)]
        if p._subparsers is not None:
            subs = [(f"{name} {n}", q) for n, q in p._subparsers._group_actions[0].choices.items()]
        for cname, q in subs:
            row = rows.get(cname)
            assert row is not None, f"docs/cli.md has no row for `{cname}`"
            for action in q._actions:
                if action.help == argparse.SUPPRESS:
                    continue
                for flag in action.option_strings:
                    if flag.startswith("--") and flag != "--help" and f"`{flag}`" not in row:
                        if cname == "reproduce" and f"`{flag}`" in rows["sweep"]:
                            continue  # "and the flags of `sweep`"
                        if cname == "load" and f"`{flag}`" in rows["send"]:
                            continue  # "and the client flags of `send`"
                        missing.append(f"{cname} {flag}")
    assert not missing, missing


# -- item 14: res.summary is a DataFrame, one row per size bin --------------------------------


def test_summary_is_a_dataframe_per_size_bin(tmp_path):
    import math

    import pandas as pd
    import repflow
    from repflow.records import load_run

    res = repflow.simulate({"topology": {"kind": "star", "hosts": 4},
                            "scheme": {"name": "repflow"},
                            "workload": {"load": 0.3, "duration": "2ms"}})  # fmt: skip
    s = res.summary
    assert isinstance(s, pd.DataFrame)
    assert list(s.index) == ["(0, 100KB]", "(100KB, 10MB]", "(10MB, inf)", "all"]
    assert s.index.name == "bin"
    assert {"count", "finished", "fct_mean", "fct_p99", "slowdown_p99"} <= set(s.columns)
    s.head()  # the README's `res.summary` beside `res.flows` works as a DataFrame
    assert s.loc["all", "count"] == len(res.flows)
    assert res.overhead == s.attrs["overhead"] >= 0
    assert res.unfinished == s.attrs["unfinished"]
    assert res.bin("all")["count"] == s.loc["all", "count"]
    back = load_run(res.save(tmp_path / "run"))
    pd.testing.assert_frame_equal(back.summary, s)
    assert back.overhead == res.overhead
    short = s.loc["(0, 100KB]"]
    assert short["fct_mean"] == pytest.approx(
        res.flows.loc[res.flows["size"] <= 100_000, "fct"].mean()) or math.isnan(short.fct_mean)


# -- item 7: no "leaked semaphore" warning after kill -9; estimates with the fixed costs -------

TINY = """
[experiment]
name = "tiny"
[base]
topology = { kind = "fat-tree", k = 4 }
workload = { duration = "200ms", drain = "2s" }
[grid]
scheme = ["tcp", "repflow"]
"workload.load" = [0.3, 0.6]
seed = [1, 2, 3]
"""


def _children(pid: int) -> list[int]:
    out = []
    for st in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = st.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(st.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_a_killed_sweep_leaves_no_leaked_semaphore_warning(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY)
    out = tmp_path / "o"
    log = tmp_path / "log"
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "repflow", "sweep", str(spec), "--out",
                                 str(out), "-j", "2", "--no-report", "-q"],
                                stdout=fh, stderr=fh)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if out.exists() and any(d for d in (out / "points").glob("[!.]*")):
            break
        assert proc.poll() is None, log.read_text()
        time.sleep(0.05)
    helpers = _children(proc.pid)  # the workers and multiprocessing's resource tracker
    assert len(helpers) >= 2
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in helpers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in helpers)
    text = log.read_text()
    assert "leaked semaphore" not in text and "resource_tracker" not in text, text


def test_estimates_include_the_fixed_cost_of_points_and_workers(tmp_path):
    from repflow.experiments import parse_spec, plan_sweep
    from repflow.experiments.sweep import POINT_SECONDS, START_SECONDS, estimate_wall

    plan = plan_sweep(parse_spec(TINY, "tiny.toml"), Store(tmp_path / "s"), "v")
    todo = plan.todo()
    assert len(todo) == 12 and all(p.estimate >= POINT_SECONDS for p in todo)
    # 12 points of 0.2 s of arrivals on a 16-host network took 1 s on two workers
    # (2026-11-29, the workers' start included); the estimate said "~0 s" before the fixed
    # costs
    wall = estimate_wall(todo, 2)
    assert wall >= START_SECONDS + 12 * POINT_SECONDS / 2 >= 1.0


# -- item 6: progress written to a log file is plain lines, never `\r` frames ------------------

# about a second of simulation: the simulator reports progress every 200 ms
SIM = ["sim", "--k", "4", "--load", "0.5", "--duration", "600ms", "--drain", "1s"]


def test_sim_progress_in_a_log_file_has_no_carriage_returns(tmp_path):
    import subprocess
    import sys

    log = tmp_path / "log"
    longer = [a if a != "600ms" else "2s" for a in SIM]  # several progress reports
    with open(log, "w") as fh:
        r = subprocess.run([sys.executable, "-m", "repflow", *longer], stdout=fh,
                           stderr=subprocess.STDOUT)  # fmt: skip
    assert r.returncode == 0
    data = log.read_bytes()  # bytes: text mode would turn each \r into \n
    assert b"\r" not in data and b"\x1b[" not in data, data[:300]
    text = data.decode()
    assert any(line.startswith("flow size") for line in text.splitlines()), text


def test_periodic_progress_lines_when_not_a_terminal(monkeypatch, capsys):
    # The simulator calls back every 200 ms of wall time, so a run on a fast machine may end
    # before its first report: the callback is driven here with the values a run would report
    # (arrivals, then drain), which makes the test independent of the machine's speed.
    from repflow import progress
    from repflow.cli.sim import SimProgress

    monkeypatch.setattr(progress, "LINE_INTERVAL", 0.0)
    cb = SimProgress()
    for t in (0.1, 0.3, 0.5):
        assert cb(t, 0.6, int(t * 100), int(t * 50), int(t * 1e6)) is True
    for done in (40, 60):
        assert cb(0.6, 0.6, 60, done, 2_000_000) is True
    cb.close()
    cap = capsys.readouterr()
    assert "\r" not in cap.err and "\x1b[" not in cap.err
    lines = [ln for ln in cap.err.splitlines() if ln.strip()]
    arrivals = [ln for ln in lines if ln.startswith("arrivals (sim ms): ")]
    drain = [ln for ln in lines if ln.startswith("drain (flows done): ")]
    assert len(arrivals) >= 3 and len(drain) >= 2 and len(arrivals) + len(drain) == len(lines)
    assert "300/600 ms (50 %)" in arrivals[1] and "60/60 flow (100 %)" in drain[-1], cap.err


def test_a_sim_run_into_a_pipe_prints_its_table_and_no_frames(monkeypatch, capsys):
    from repflow import progress
    from repflow.cli import main

    monkeypatch.setattr(progress, "LINE_INTERVAL", 0.0)
    assert main(SIM) == 0
    cap = capsys.readouterr()
    assert "\r" not in cap.err and "\x1b[" not in cap.err
    # however fast the machine (zero reports or many), only progress lines reach stderr
    assert all(ln.startswith(("arrivals (sim ms): ", "drain (flows done): "))
               for ln in cap.err.splitlines() if ln.strip()), cap.err  # fmt: skip
    assert cap.out.startswith("flow size")


def test_sweep_progress_in_a_log_file_is_plain_lines(tmp_path, monkeypatch, capsys):
    from repflow import progress
    from repflow.experiments import parse_spec, run_sweep

    monkeypatch.setattr(progress, "LINE_INTERVAL", 0.0)
    spec = parse_spec(SPEC_A.replace('scheme = ["tcp"]', 'scheme = ["tcp", "repflow"]'), "a.toml")
    run_sweep(spec, tmp_path / "o", jobs=1, progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err
    assert "spec-a: 2/2 pt (100 %)" in err, err


def test_line_bar_on_a_terminal_is_tqdm(monkeypatch):
    import io

    from repflow import progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    bar = progress.bar(total=3, file=Tty())
    assert type(bar).__name__ == "tqdm"
    bar.close()
    assert isinstance(progress.bar(total=3, file=io.StringIO()), progress.LineBar)


# -- items 1 and 11: `repflow report` on a reproduce directory; a no-op rerun redraws nothing --

TINY_STUDY = """
[experiment]
name = "{name}"
claims = ["{scenario}"]
[base]
topology = {{ kind = "star", hosts = 4 }}
workload = {{ duration = "2ms", drain = "1s" }}
[grid]
scheme = ["tcp", "repflow"]
"workload.cdf" = ["websearch"]
"workload.load" = [0.3]
"""


@pytest.fixture
def tiny_reproduce(tmp_path, monkeypatch, capsys):
    """`repflow reproduce repflow --quick --profiles dc` with each study's spec replaced by a
    two-point one (seconds, not minutes)."""
    from repflow.cli import main
    from repflow.experiments import reproduce
    from repflow.experiments.papers import find_paper

    studies = {s.quick: s.scenario for s in find_paper("repflow").studies}

    def tiny_spec(name: str) -> Path:
        p = tmp_path / "specs" / f"{name}.toml"
        p.parent.mkdir(exist_ok=True)
        p.write_text(TINY_STUDY.format(name=name, scenario=studies[name]))
        return p

    monkeypatch.setattr(reproduce, "find_builtin_spec", tiny_spec)
    root = tmp_path / "root"
    argv = ["reproduce", "repflow", "--quick", "--profiles", "dc", "--out", str(root), "-j", "1"]
    assert main(argv) == 0
    capsys.readouterr()
    return root, argv


def _report_files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))
            if p.is_file() and ("report" in p.name or "figures" in p.parts)}  # fmt: skip


@pytest.mark.slow
def test_report_rebuilds_a_combined_reproduce_directory(tiny_reproduce, capsys):
    from repflow.cli import main

    root, _ = tiny_reproduce
    (root / "report.md").unlink()
    (root / "repflow-paper-quick" / "dc" / "report.html").unlink()
    assert main(["report", str(root), "-q"]) == 0
    cap = capsys.readouterr()
    assert "claims: verdict under the paper's profile / under dc" in cap.out
    assert (root / "report.md").is_file() and (root / "report.html").is_file()
    assert (root / "repflow-paper-quick" / "dc" / "report.html").is_file()
    assert "RF-" in (root / "report.md").read_text() or "| repflow |" in (
        root / "report.md").read_text()
    # a directory that is neither says what it expects
    empty = root.parent / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "no sweep.json" in err and "\n" not in err.strip()


@pytest.mark.slow
def test_a_no_op_reproduce_rerun_redraws_nothing(tiny_reproduce, capsys):
    from repflow.cli import main

    root, argv = tiny_reproduce
    studies = _report_files(root / "repflow-paper-quick")
    assert any("figures" in k for k in studies)
    md_before = (root / "report.md").read_text()
    assert main([*argv]) == 0
    cap = capsys.readouterr()
    assert "0 computed" in cap.err
    assert "not redrawn" in cap.err
    assert _report_files(root / "repflow-paper-quick") == studies  # not one file rewritten
    # the combined report still sets the same verdicts (its wall times aside)
    table = [ln for ln in md_before.splitlines() if ln.startswith("| ")]
    after = [ln for ln in (root / "report.md").read_text().splitlines() if ln.startswith("| ")]
    assert table and table == after
    # a point computed anew (here: removed, so recomputed) redraws that study's report
    pts = sorted((root / "repflow-paper-quick" / "dc" / "points").glob("[!.]*"))
    import shutil

    shutil.rmtree(pts[0])
    assert main([*argv]) == 0
    cap = capsys.readouterr()
    assert "1 computed" in cap.err
    assert _report_files(root / "repflow-paper-quick") != studies


# -- item 4 (the last example): a negative value is checked, not an unknown option -----


def test_a_negative_value_reaches_the_commands_own_check(capsys):
    code, err = _main_err(capsys, "testbed", "up", "--link-rate", "-5Mbps", "--prefix", "rfzz-")
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("repflow: error: --link-rate: '-5Mbps'"), err
