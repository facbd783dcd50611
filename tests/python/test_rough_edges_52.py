"""Issue 52: rough edges, second round (bare numbers for quantities, abbreviated flags, help
defaults, ``repflow report --out``, errors naming the file and line, thin percentiles, the
scripts' pip warnings). One test or more per item."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _main_err(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    from repflow.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


# -- item 10: the scripts silence pip's root-user warning -----------------------------------


@pytest.mark.parametrize("script", ["scripts/main.sh", "scripts/test-all.sh"])
def test_scripts_silence_pips_root_warning_before_any_pip(script):
    lines = (REPO / script).read_text().splitlines()
    pip = next(i for i, line in enumerate(lines) if "pip install" in line)
    exported = [i for i, line in enumerate(lines)
                if re.match(r"\s*export\b.*\bPIP_ROOT_USER_ACTION=ignore\b", line)]  # fmt: skip
    assert exported and exported[0] < pip, script


# -- item 2: no parser accepts an abbreviated flag -------------------------------------------


def _every_parser():
    from repflow.cli import _all_parsers, build_parser

    return _all_parsers(build_parser())


def _matches(parser, arg: str) -> bool:
    """Whether ``parser`` takes ``arg`` for one of its options."""
    found = parser._parse_optional(arg)
    if isinstance(found, list):  # Python >= 3.12.7: a list of candidates
        return any(f[0] is not None for f in found)
    return found is not None and found[0] is not None


def test_no_parser_accepts_an_abbreviated_flag():
    checked = 0
    for parser in _every_parser():
        assert parser.allow_abbrev is False, parser.prog
        options = {o for a in parser._actions for o in a.option_strings}
        for option in options:
            if not option.startswith("--") or len(option) < 5:
                continue
            abbrev = option[:-1]
            if abbrev in options:
                continue
            assert not _matches(parser, abbrev), (parser.prog, abbrev)
            checked += 1
    assert checked > 100


def test_an_abbreviated_sim_flag_is_an_error(capsys):
    code, err = _main_err(capsys, "sim", "--schem", "repflow", "--dump-config")
    assert code == 2
    assert "unrecognized arguments: --schem" in err


# -- item 3: --help states each default as --dump-config resolves it --------------------------


def _dump(capsys: pytest.CaptureFixture[str], *flags: str) -> dict:
    import tomllib

    from repflow.cli import main

    assert main(["sim", "--dump-config", *flags]) == 0
    return tomllib.loads(capsys.readouterr().out)


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "unset" if value is None else str(value)


def test_sim_help_defaults_are_what_dump_config_resolves(capsys):
    from repflow.cli import build_parser
    from repflow.config_io import FLAGS

    sim = build_parser()._subparsers._group_actions[0].choices["sim"]  # type: ignore[union-attr]
    helps = {o: a.help for a in sim._actions for o in a.option_strings}
    base = _dump(capsys)
    checked = 0
    for f in FLAGS:
        m = re.search(r"\(default: (.*)\)$", re.sub(r"\s+", " ", helps[f.option]))
        assert m, f.option
        shown = m.group(1)
        section, _, key = f.key.rpartition(".")
        if section == "scheme" and key != "name":
            # per scheme: "100KB for repflow, smartrep; 1MB for mptcp-l"
            for part in shown.split("; "):
                value, _, names = part.partition(" for ")
                assert names, (f.option, shown)
                for name in names.split(", "):
                    dumped = _dump(capsys, "--scheme", name)["scheme"]
                    assert _shown(dumped.get(key)) == value, (f.option, name, dumped)
                    checked += 1
            continue
        node = base.get(section, {}) if section else base
        assert _shown(node.get(key)) == shown, (f.option, shown, node.get(key))
        checked += 1
    assert checked > len(FLAGS)


def test_threshold_help_names_repflows_and_mptcp_ls_defaults():
    from repflow.cli import build_parser

    sim = build_parser()._subparsers._group_actions[0].choices["sim"]  # type: ignore[union-attr]
    text = re.sub(r"\s+", " ", sim.format_help())
    m = re.search(r"\[scheme\.threshold\] \(default: ([^)]*)\)", text)
    assert m
    parts = dict(reversed(p.split(" for ", 1)) for p in m.group(1).split("; "))
    by_scheme = {n: v for names, v in parts.items() for n in names.split(", ")}
    assert by_scheme["repflow"] == "100KB" and by_scheme["mptcp-l"] == "1MB"


# -- item 1: a quantity refuses a bare number everywhere, suggesting a unit -------------------


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["--min-rto", "10"], "--min-rto 10: give a unit, e.g. 10ms"),
        (["--duration", "50"], "--duration 50: give a unit, e.g. 50ms"),
        (["--link-rate", "1000"], "--link-rate 1000: give a unit, e.g. 1000Mbps"),
        (["--link-delay", "2"], "--link-delay 2: give a unit, e.g. 2us"),
        (["--scheme", "repflow", "--threshold", "100"], "--threshold 100: give a unit, e.g. 100KB"),
        (["--scheme", "mptcp-l", "--threshold", "1"], "--threshold 1: give a unit, e.g. 1MB"),
        (["--drain", "0"], "--drain 0: give a unit, e.g. 0s"),
        (["--set", "tcp.min_rto=10"], "--set tcp.min_rto=10: give a unit, e.g. 10ms"),
        (["--set", 'tcp.min_rto="10"'], '--set tcp.min_rto="10": give a unit, e.g. 10ms'),
        (["--set", "workload.duration=0.05"],
         "--set workload.duration=0.05: give a unit, e.g. 0.05s"),
    ],
)  # fmt: skip
def test_sim_refuses_a_bare_number_naming_the_flag(capsys, argv, want):
    code, err = _main_err(capsys, "sim", *argv, "--dump-config")
    assert code == 2
    assert err == f"repflow: error: {want}\n"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("[tcp]\nsack = true\nmin_rto = 10\n",
         'run.toml:3: tcp.min_rto = 10: give a unit, e.g. "10ms"'),
        ('[tcp]\nmin_rto = "10"\n', 'run.toml:2: tcp.min_rto = 10: give a unit, e.g. "10ms"'),
        ("seed = 2\ntopology = { kind = \"star\", link_delay = 0 }\n",
         'run.toml:2: topology.link_delay = 0: give a unit, e.g. "0us"'),
        ('[queue]\nlimit_bytes = 36000\n', 'run.toml:2: queue.limit_bytes = 36000: give a unit'),
    ],
)  # fmt: skip
def test_a_toml_file_refuses_a_bare_number_naming_file_and_line(tmp_path, capsys, text, want):
    path = tmp_path / "run.toml"
    path.write_text(text)
    code, err = _main_err(capsys, "sim", "--config", str(path), "--dump-config")
    assert code == 2
    assert err.startswith(f"repflow: error: {tmp_path}/{want}"), err
    assert err.count("\n") == 1


def test_a_json_file_and_the_python_api_refuse_a_bare_number(tmp_path, capsys):
    import json

    import repflow
    from repflow.errors import UserError

    run = tmp_path / "run.json"
    run.write_text(json.dumps({"config": {"tcp": {"min_rto": 0.01}}}))
    code, err = _main_err(capsys, "sim", "--config", str(run), "--dump-config")
    assert code == 2
    assert f'{run}: tcp.min_rto = 0.01: give a unit, e.g. "0.01s"' in err
    for value in ("10", 10):
        with pytest.raises(UserError, match=r'^tcp.min_rto = 10: give a unit, e.g. "10ms"$'):
            repflow.load_config({"tcp": {"min_rto": value}})
    with pytest.raises(UserError, match=r"^workload.trace\[0\].start = 0: give a unit"):
        repflow.load_config({"topology": {"kind": "star", "hosts": 2}, "workload": {
            "trace": [{"start": 0, "src": 0, "dst": 1, "size": "1KB"}]}})
    # a unit is enough, and zero with a unit is zero
    cfg = repflow.load_config({"tcp": {"min_rto": "10ms"}, "topology": {"link_delay": "0s"}})
    assert cfg["tcp"]["min_rto"] == "10ms" and cfg["topology"]["link_delay"] == "0s"


def test_a_sweep_spec_refuses_a_bare_number_naming_file_and_line(tmp_path):
    from repflow.errors import UserError
    from repflow.experiments import Store, parse_spec, plan_sweep

    text = ('[experiment]\nname = "t"\n[base]\ntopology = { kind = "star", hosts = 4 }\n'
            'tcp = { min_rto = 10 }\n[grid]\nscheme = ["tcp"]\n')  # fmt: skip
    with pytest.raises(UserError) as e:
        plan_sweep(parse_spec(text, "t.toml"), Store(tmp_path / "s"), "v")
    assert str(e.value) == 't.toml:5: [base] tcp.min_rto = 10: give a unit, e.g. "10ms"'
    grid = text.replace("tcp = { min_rto = 10 }\n", "").replace(
        '[grid]\n', '[grid]\n"workload.drain" = ["1s", 5]\n')
    with pytest.raises(UserError) as e:
        plan_sweep(parse_spec(grid, "t.toml"), Store(tmp_path / "s"), "v")
    assert str(e.value) == 't.toml:6: [grid] workload.drain = 5: give a unit, e.g. "5s"'


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["model", "--threshold", "100"], "--threshold 100: give a unit, e.g. 100KB"),
        (["send", "--to", "127.0.0.1:9", "--interval", "5"], "--interval 5: give a unit"),
        (["send", "--to", "127.0.0.1:9", "--size", "1000"], "--size 1000: give a unit"),
        (["testbed", "up", "--link-rate", "20"], "--link-rate 20: give a unit, e.g. 20Mbps"),
        (["bench", "--duration", "5"], "--duration 5: give a unit, e.g. 5ms"),
        (["bench", "--drain", "0"], "--drain 0: give a unit, e.g. 0s"),
    ],
)  # fmt: skip
def test_other_commands_refuse_a_bare_number_too(tmp_path, capsys, argv, want):
    if argv[0] == "model":
        argv = [*argv, "--out", str(tmp_path / "m")]
    code, err = _main_err(capsys, *argv)
    assert code == 2
    assert err.startswith(f"repflow: error: {want}"), err
    assert err.count("\n") == 1


SPECS = sorted((REPO / "experiments").glob("*.toml"))


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_every_shipped_spec_parses_and_validates(path):
    """Every spec in experiments/ still parses under the unit rule: base, every grid value and
    every scheme label validated as `repflow sweep` validates them before computing."""
    from repflow.experiments import load_spec
    from repflow.experiments.sweep import check_spec

    spec = load_spec(path)
    assert check_spec(spec) == {}
    assert spec.points()


# -- item 4: `repflow report DIR [--out OUT]` ---------------------------------------------------

TINY_SWEEP = """
[experiment]
name = "tiny"
claims = ["repflow-ns3"]
[base]
topology = { kind = "star", hosts = 4 }
workload = { duration = "2ms", drain = "1s" }
[grid]
scheme = ["tcp", "repflow"]
"workload.load" = [0.3]
"""


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))
            if p.is_file()}  # fmt: skip


@pytest.mark.slow
def test_report_out_writes_elsewhere_and_leaves_the_sweep_alone(tmp_path, capsys):
    from repflow.cli import main

    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY_SWEEP)
    d = tmp_path / "d"
    assert main(["sweep", str(spec), "--out", str(d), "-q", "-j", "1"]) == 0
    capsys.readouterr()
    before = _files(d)
    out = tmp_path / "elsewhere" / "r"
    assert main(["report", str(d), "--out", str(out), "-q"]) == 0
    said = capsys.readouterr().out
    assert _files(d) == before  # not one file of DIR rewritten
    for name in ("report.html", "report.md", "summary.csv"):
        assert (out / name).is_file(), name
    assert list((out / "figures").glob("*.png"))
    assert f"rebuilt into {out} (DIR unchanged) from the 2 finished points stored in {d}" in said
    # two points of a few flows each: the sweep's p99s are thin, and the terminal says so
    assert "⚠ too few flows for a percentile: 2 of 2 short-flow p99s" in said
    assert main(["report", str(d), "-q"]) == 0
    assert "rebuilt in place from the 2 finished points" in capsys.readouterr().out


TINY_STUDY = TINY_SWEEP.replace('name = "tiny"', 'name = "{name}"').replace(
    'claims = ["repflow-ns3"]', 'claims = ["{scenario}"]').replace("{ kind", "{{ kind").replace(
    "4 }", "4 }}").replace('{ duration', '{{ duration').replace('"1s" }', '"1s" }}')


@pytest.mark.slow
def test_a_rebuilt_combined_report_keeps_the_runs_order_and_wall_times(tmp_path, monkeypatch,
                                                                       capsys):  # fmt: skip
    import json

    from repflow.cli import main
    from repflow.experiments import reproduce
    from repflow.experiments.papers import find_paper

    studies = {s.quick: s.scenario for p in ("smartrep", "repflow")
               for s in find_paper(p).studies}  # fmt: skip

    def tiny_spec(name: str) -> Path:
        p = tmp_path / "specs" / f"{name}.toml"
        p.parent.mkdir(exist_ok=True)
        p.write_text(TINY_STUDY.format(name=name, scenario=studies[name]))
        return p

    monkeypatch.setattr(reproduce, "find_builtin_spec", tiny_spec)
    root = tmp_path / "root"
    # run order smartrep, then repflow: not alphabetical
    argv = ["reproduce", "smartrep", "repflow", "--quick", "--profiles", "dc", "--out",
            str(root), "-j", "1", "-q"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    marker = json.loads((root / "reproduce.json").read_text())
    assert marker["papers"] == ["smartrep", "repflow"]
    assert isinstance(marker["wall"], float) and all("wall" in r for r in marker["runs"])
    titles = [ln for ln in (root / "report.md").read_text().splitlines() if ln.startswith("## ")]
    assert "SmartRep" in titles[0], titles
    # known wall times, to see them come back
    marker["wall"] = 1234.0
    for i, r in enumerate(marker["runs"]):
        r["wall"] = 100.0 + i
    (root / "reproduce.json").write_text(json.dumps(marker))

    before = _files(root)
    out = tmp_path / "rebuilt"
    assert main(["report", str(root), "--out", str(out), "-q"]) == 0
    said = capsys.readouterr().out
    assert f"rebuilt into {out} ({root} unchanged): 3 study reports" in said, said
    assert "in the run's order, with the run's wall times as it recorded them" in said
    assert _files(root) == before
    md = (out / "report.md").read_text()
    assert "Wall time of this run: 1234 s." in md
    assert "(100 s)" in md and "(101 s)" in md and "(102 s)" in md and "(0 s)" not in md
    assert [ln for ln in md.splitlines() if ln.startswith("## ")] == titles
    assert (out / "smartrep-quick" / "dc" / "report.html").is_file()

    assert main(["report", str(root), "-q"]) == 0
    assert "rebuilt in place: 3 study reports" in capsys.readouterr().out
    md = (root / "report.md").read_text()
    assert "Wall time of this run: 1234 s." in md and "(102 s)" in md
    assert [ln for ln in md.splitlines() if ln.startswith("## ")] == titles

    # a run made before wall times were stored says so instead of "0 s"
    for r in marker["runs"]:
        del r["wall"]
    del marker["wall"]
    (root / "reproduce.json").write_text(json.dumps(marker))
    assert main(["report", str(root), "-q"]) == 0
    assert "no wall times (this run recorded none" in capsys.readouterr().out
    md = (root / "report.md").read_text()
    assert "Wall time of this run: not recorded." in md and "(0 s)" not in md


# -- item 6: a percentile on too few flows says so where it is shown -----------------------------


def test_api_summary_counts_the_flows_behind_each_percentile():
    import repflow
    from repflow.experiments.stats import P99_MIN_FLOWS

    res = repflow.simulate({"topology": {"kind": "star", "hosts": 4},
                            "workload": {"cdf": "datamining", "duration": "100ms", "drain": "1s",
                                         "load": 0.5}})  # fmt: skip
    s = res.summary
    assert s.attrs["p99_min_flows"] == P99_MIN_FLOWS
    assert {"p99_flows", "p99_thin"} <= set(s.columns)
    done = s["finished"] if "finished" in s.columns else s["count"]
    assert (s["p99_flows"] == done).all()
    assert 0 < s.loc["all", "p99_flows"] < P99_MIN_FLOWS
    assert s.loc["all", "p99_thin"]  # a few dozen flows: too few for a p99
    assert "p99_flows" not in res.summary_record["bins"][0]  # run.json keeps its form


def test_sim_summary_marks_a_p99_on_too_few_flows(tmp_path, capsys):
    from repflow.cli import main

    assert main(["sim", "--topology", "star", "--hosts", "4", "--duration", "100ms",
                 "--workload", "datamining"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "⚠ too few flows for a percentile" in out
    assert "fewer than 1,000 finished flows" in out


def test_report_run_table_says_when_flows_are_too_few_for_a_p99():
    import pandas as pd
    from repflow.experiments.report import _flows_note

    agg = pd.DataFrame({"short_p99": [0.01, 0.02], "short_p99_flows": [3.0, 5000.0]})
    assert _flows_note(6, agg).startswith("6 — too few for some percentiles: 1 of 2")
    assert _flows_note(9000, agg.iloc[[1]]) == "9,000"


# -- item 7: the docs' hand-made Ray cluster stops itself and nothing else ----------------------

FAKE_RAY = r'''#!PYTHON
"""A stand-in for `ray start --block` (no Ray needed): the head listens on --port; each node
starts a child (as Ray's raylet) in its process group and stops it on SIGTERM."""
import signal, socket, subprocess, sys, time
args = sys.argv[1:]
assert args[:1] == ["start"] and "--block" in args, args
lsock = None
if "--head" in args:
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", int(args[args.index("--port") + 1])))
    lsock.listen()
child = subprocess.Popen(["sleep", "600"])
def stop(*_):
    child.terminate()
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
while True:
    time.sleep(1)
'''


def _doc_cluster_block() -> str:
    text = (REPO / "docs" / "experiments.md").read_text()
    start = text.index("    export RAY_AUTH_MODE=token RAY_USAGE_STATS_ENABLED=0")
    block = text[start:text.index("\n\n", start)]
    return "\n".join(line[4:] for line in block.splitlines())


def test_the_docs_ray_cluster_never_uses_ray_stop():
    block = _doc_cluster_block()
    assert "ray stop" not in block
    assert block.count("setsid") == 2 and block.count("--block") == 2
    assert block.count("--temp-dir") == 2


@pytest.mark.slow
def test_the_docs_ray_cluster_commands_stop_exactly_their_own_processes(tmp_path):
    import os
    import shutil
    import signal
    import socket
    import subprocess
    import sys
    import time

    if shutil.which("setsid") is None or shutil.which("bash") is None:
        pytest.skip("needs setsid and bash")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    ray = bindir / "ray"
    ray.write_text(FAKE_RAY.replace("PYTHON", sys.executable))
    ray.chmod(0o755)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = _doc_cluster_block().replace("6380", str(port))
    script = "\n".join("touch \"$tmp/swept\"  # the sweep" if ln.startswith("repflow sweep")
                       else ln for ln in script.splitlines())  # fmt: skip
    script = script.replace("sleep 10;", "sleep 2;").replace('rm -rf "$tmp"', 'echo "$tmp"')
    env = {**os.environ, "PATH": f"{bindir}:{Path(sys.executable).parent}:{os.environ['PATH']}"}
    # another user's "cluster" on the machine: it must survive
    other = subprocess.Popen([str(ray), "start", "--block"], env=env, start_new_session=True)
    try:
        r = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True,
                           timeout=120)  # fmt: skip
        assert r.returncode == 0, r.stderr
        tmp = Path(r.stdout.strip().splitlines()[-1])
        assert (tmp / "swept").is_file()
        for g in ("head", "node"):
            pgid = int((tmp / f"{g}.pgid").read_text())
            # the whole group is gone (once its killed processes are reaped: on a loaded
            # machine that can take a moment after the script's last kill)
            deadline = time.monotonic() + 20
            while True:
                try:
                    os.killpg(pgid, 0)
                except ProcessLookupError:
                    break
                assert time.monotonic() < deadline, f"the {g} node's process group survived"
                time.sleep(0.2)
        assert other.poll() is None  # the other cluster still runs
        shutil.rmtree(tmp, ignore_errors=True)
    finally:
        os.killpg(other.pid, signal.SIGTERM)
        other.wait(timeout=30)


# -- item 5: an error in a file names the file and the line ---------------------------------------


def test_a_toml_config_error_names_the_file_and_line(tmp_path, capsys):
    path = tmp_path / "run.toml"
    path.write_text('[topology]\nk = 4\n[tcp]\nmin_rto = "10 msec"\n')
    code, err = _main_err(capsys, "sim", "--config", str(path), "--dump-config")
    assert code == 2
    assert err == (f"repflow: error: {path}:4: tcp.min_rto: '10 msec' has unknown time unit "
                   "'msec' (accepted: s, ms, us, ns, ps, min)\n")  # fmt: skip
    path.write_text('[tcp]\nsack = true\nmin_rtt = "10ms"\n')
    code, err = _main_err(capsys, "sim", "--config", str(path), "--dump-config")
    assert err.startswith(f"repflow: error: {path}:3: unknown key 'tcp.min_rtt'"), err
    path.write_text('[tcp]\nmin_rto = "10ms\n')
    code, err = _main_err(capsys, "sim", "--config", str(path), "--dump-config")
    assert err.startswith(f"repflow: error: {path}:2: not valid TOML"), err
    # a value from a flag is still reported under its flag, a file's under the file
    path.write_text('[topology]\nk = 5\n')
    code, err = _main_err(capsys, "sim", "--config", str(path), "--dump-config")
    assert err.startswith(f"repflow: error: {path}:2: topology.k: "), err
    code, err = _main_err(capsys, "sim", "--config", str(path), "--k", "7", "--dump-config")
    assert err.startswith("repflow: error: topology.k (--k): "), err


SPEC_LINES = """[experiment]
name = "t"
[base]
topology = { kind = "star", hosts = 4 }
[grid]
scheme = ["tcp"]
"""


@pytest.mark.parametrize(
    ("old", "new", "what"),
    [
        ('name = "t"\n', 'name = "t"\n\n\ntitel = "x"\n', '5: [experiment] titel: unknown field'),
        ('scheme = ["tcp"]\n', 'scheme = ["tcp"]\n\n"workload.lod" = [0.3]\n',
         "8: [grid] workload.lod: unknown field"),
        ('scheme = ["tcp"]\n', 'scheme = ["tcp"]\n[schemes.rep]\n"scheme.name" = "repflow"\n',
         "7: [schemes.rep]: unknown scheme label"),
        ('scheme = ["tcp"]\n', 'scheme = ["tcp"]\n\n[figures\n', "8: not valid TOML"),
        ('hosts = 4 }', 'hosts = 4, link_delay = "1 parsec" }',
         "4: [base] topology.link_delay: '1 parsec' has unknown time unit"),
    ],
)  # fmt: skip
def test_a_spec_error_names_the_file_and_line(tmp_path, old, new, what):
    from repflow.errors import UserError
    from repflow.experiments import Store, parse_spec, plan_sweep

    assert old in SPEC_LINES
    with pytest.raises(UserError) as e:
        plan_sweep(parse_spec(SPEC_LINES.replace(old, new), "t.toml"), Store(tmp_path / "s"), "v")
    assert str(e.value).startswith(f"t.toml:{what}"), str(e.value)


def test_the_docs_spec_example_parses_and_validates():
    """docs/experiments.md's spec format example is a spec that runs (issue 52: every shipped
    spec and docs snippet parses under the unit rule)."""
    from repflow.experiments import parse_spec
    from repflow.experiments.sweep import check_spec

    text = (REPO / "docs" / "experiments.md").read_text()
    start = text.index("```toml\n[experiment]") + len("```toml\n")
    spec = parse_spec(text[start:text.index("```", start)], "docs/experiments.md")
    assert check_spec(spec) == {}
    assert len(spec.points()) > 1
