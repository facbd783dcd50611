"""One flag vocabulary across commands (docs/cli.md) and complete --help."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from repflow import _core
from repflow.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]


def _help(*argv: str) -> str:
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    p = sub[argv[0]]
    for a in argv[1:]:
        p = p._subparsers._group_actions[0].choices[a]  # type: ignore[union-attr]
    return re.sub(r"\s+", " ", p.format_help())


def _accepted(field: str, name: str) -> bool:
    section, key = field.split(".")
    try:
        _core.validate_config(json.dumps({section: {key: name}}))
    except _core.ConfigError:
        return False
    return True


def test_sim_help_lists_every_scheme_and_pair_pattern():
    text = _help("sim")
    schemes = re.search(r"--scheme NAME transport scheme: (.*?) \[scheme.name\]", text)
    assert schemes, text
    names = [n.strip() for n in schemes.group(1).replace("- ", "-").split(",")]
    assert "..." not in schemes.group(1) and "…" not in schemes.group(1)
    assert {"tcp", "repflow", "smartrep", "pfabric", "l2dct", "fa-dctcp"} <= set(names)
    assert all(_accepted("scheme.name", n) for n in names)
    pairs = re.search(r"--pairs PATTERN host pairs: (.*?) \[workload.pairs\]", text)
    assert pairs and "incast" in pairs.group(1)
    assert all(_accepted("workload.pairs", n.strip()) for n in pairs.group(1).split(","))


def test_copies_default_and_initial_window_flag_agree_across_commands(tmp_path, capsys):
    from repflow.config_io import scheme_parameters
    from repflow.model.defaults import DEFAULT_N

    assert DEFAULT_N == scheme_parameters()["repflow"]["copies"] == 2
    assert "--init-cwnd" in _help("model") and "--init-cwnd" in _help("sim")
    assert main(["model", "--k", "10", "--loads", "0.5", "--out", str(tmp_path / "a")]) == 0
    captured = capsys.readouterr()
    assert "--k is deprecated; use --init-cwnd" in captured.err
    assert "k=10" in captured.out
    assert main(["model", "--init-cwnd", "10", "--loads", "0.5", "--out",
                 str(tmp_path / "b")]) == 0  # fmt: skip
    assert "deprecated" not in capsys.readouterr().err


@pytest.mark.parametrize("command", [["sim"], ["sweep", "x.toml"], ["reproduce"]])
def test_quiet_is_one_flag_everywhere(command):
    args = build_parser().parse_args([*command, "--quiet"])
    assert args.quiet is True
    assert build_parser().parse_args([*command, "-q"]).quiet is True


def test_no_progress_still_works_with_a_note(tmp_path, capsys):
    spec = tmp_path / "t.toml"
    spec.write_text('[experiment]\nname = "t"\n[grid]\nseed = [1]\n')
    main(["sweep", str(spec), "--no-progress", "--dry-run", "--out", str(tmp_path / "o")])
    assert "--no-progress is deprecated; use --quiet" in capsys.readouterr().err


def test_a_trace_run_reports_no_offered_load(tmp_path, capsys):
    cfg = tmp_path / "trace.toml"
    cfg.write_text(
        '[topology]\nkind = "star"\nhosts = 4\n[workload]\n'
        'trace = [{ start = "0s", src = 0, dst = 1, size = "20KB" },'
        ' { start = "10us", src = 2, dst = 3, size = "20KB" }]\n'
    )
    assert main(["sim", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "offered load" not in out and "flows replayed from a trace" in out


def test_docs_cli_table_lists_every_flag_of_every_command():
    doc = (REPO / "docs" / "cli.md").read_text()
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    missing = []
    for name, p in commands.items():
        subs = [(name, p)]
        if p._subparsers is not None:
            subs = [(f"{name} {n}", q) for n, q in p._subparsers._group_actions[0].choices.items()]
        for cname, q in subs:
            for action in q._actions:
                for flag in action.option_strings:
                    if flag.startswith("--") and flag != "--help" and f"`{flag}`" not in doc:
                        missing.append(f"{cname} {flag}")
    assert not missing, missing
