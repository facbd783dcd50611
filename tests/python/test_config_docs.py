"""docs/configuration.md stays in step with the schema the Rust core defines."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from repflow import config_io

core = pytest.importorskip("repflow._core")

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _sections(text: str) -> dict[str, str]:
    """Maps a schema section name to the text of its '## `[section]`' part."""
    parts = re.split(r"^## ", text, flags=re.M)
    out = {}
    for part in parts:
        m = re.match(r"`\[(\w+)\]`", part)
        if m:
            out[m.group(1)] = part
        elif part.startswith("Top level"):
            out[""] = part
    return out


def test_every_field_is_documented_in_its_section():
    text = DOC.read_text(encoding="utf-8")
    sections = _sections(text)
    for name, params in config_io.scheme_parameters().items():
        assert re.search(rf"^\| `{name}` \|", sections["scheme"], re.M), f"scheme {name}"
        for p in params:
            assert re.search(rf"^\| `{p}`( \(|\s)", sections["scheme"], re.M), (
                f"parameter {p} of scheme {name} is not documented"
            )
    for section, fields in config_io.default_config().items():
        if isinstance(fields, dict):
            assert section in sections, f"no section for [{section}]"
            for name in fields:
                assert re.search(rf"^\| `{name}` \|", sections[section], re.M), (
                    f"{section}.{name} is not documented"
                )
        else:
            assert re.search(rf"^\| `{section}` \|", sections[""], re.M), section


def test_every_flag_is_documented():
    text = DOC.read_text(encoding="utf-8")
    for flag in config_io.FLAGS:
        assert f"`{flag.option}" in text, flag.option


def test_builtin_workloads_are_documented():
    text = DOC.read_text(encoding="utf-8")
    for name, file in core.builtin_workloads():
        assert f"| `{name}` | `{file}` |" in text, name


def test_complete_example_is_valid_and_complete():
    text = DOC.read_text(encoding="utf-8")
    example = re.search(r"## Complete example.*?```toml\n(.*?)```", text, re.S)
    assert example, "no example"
    data = tomllib.loads(example.group(1))
    cfg = config_io.validate(data)
    assert cfg["scheme"]["name"] == "repflow" and cfg["topology"]["k"] == 4
    # Every field without an optional (None) default is spelled out in the example.
    full = config_io.default_config()
    full["scheme"] = {"name": "repflow", **config_io.scheme_parameters()["repflow"]}
    for section, fields in full.items():
        if isinstance(fields, dict):
            for name, default in fields.items():
                if default is not None:
                    assert name in data[section], f"{section}.{name} missing from the example"
                else:
                    assert f"# {name} = " in example.group(1) or name == "cdf_text", name
