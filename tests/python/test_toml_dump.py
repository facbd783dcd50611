"""``dumps_toml`` (tomli-w) and ``repflow sim --dump-config`` for every kind of valid config."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from repflow import config_io
from repflow.cli import main

pytest.importorskip("repflow._core")

TRACE = """seed = 3
[topology]
kind = "star"
hosts = 4
[workload]
duration = "1ms"
trace = [{start = "0s", src = 0, dst = 1, size = "10KB"},
         {start = "10us", src = 2, dst = 3, size = "1460B"}]
"""

BACKGROUND = """[topology]
kind = "star"
hosts = 4
[workload]
cdf = "google-rpc"
background = [{ start = "0s", src = 1, dst = 0, size = "1MB" }]
[scheme]
name = "smartrep"
table = [2, 2, 1]
"""


def _round_trip(cfg: dict, tmp_path: Path) -> dict:
    path = tmp_path / "dumped.toml"
    path.write_text(config_io.dumps_toml(cfg))
    return config_io.validate(config_io.load_toml(path), resolve=False)


def test_dump_config_writes_a_trace_config(tmp_path: Path, capsys):
    """It used to stop with "workload.trace: cannot write dict to TOML"."""
    src = tmp_path / "trace.toml"
    src.write_text(TRACE)
    assert main(["sim", "--config", str(src), "--dump-config"]) == 0
    text = capsys.readouterr().out
    dumped = tomllib.loads(text)
    assert dumped["workload"]["trace"][1] == {"start": "10us", "src": 2, "dst": 3,
                                              "size": "1460B"}  # fmt: skip
    again = tmp_path / "again.toml"
    again.write_text(text)
    assert config_io.validate(config_io.load_toml(again)) == config_io.validate(
        config_io.load_toml(src)
    )
    # dumping the dump gives the same text
    assert main(["sim", "--config", str(again), "--dump-config"]) == 0
    assert capsys.readouterr().out == text


@pytest.mark.parametrize(
    "scheme",
    ["tcp", "repflow", "repflow-hca", "smartrep", "fullrep", "dctcp", "repflow-dctcp",
     "pfabric", "l2dct", "fa-dctcp"],
)  # fmt: skip
def test_every_scheme_round_trips(scheme: str, tmp_path: Path):
    cfg = config_io.validate({"scheme": {"name": scheme}}, resolve=False)
    assert _round_trip(cfg, tmp_path) == cfg


def test_arrays_of_tables_lists_and_unset_values_round_trip(tmp_path: Path):
    src = tmp_path / "bg.toml"
    src.write_text(BACKGROUND)
    cfg = config_io.validate(config_io.load_toml(src), resolve=False)
    cfg["tcp"]["max_window"] = None  # unset, with a default that is a value: written "none"
    cfg = config_io.validate(cfg, resolve=False)
    assert cfg["tcp"]["max_window"] is None and cfg["scheme"]["table"] == [2, 2, 1]
    text = config_io.dumps_toml(cfg)
    assert 'max_window = "none"' in text
    assert "uplink_rate" not in text  # unset with an unset default: left out
    assert _round_trip(cfg, tmp_path) == cfg
    # sections in schema order after the top-level values
    heads = [ln for ln in text.splitlines() if ln.startswith("[") and not ln.startswith("[[")]
    assert heads == [f"[{s}]" for s in config_io.SECTIONS]
    assert text.index("seed =") < text.index("[topology]")
