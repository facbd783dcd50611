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
