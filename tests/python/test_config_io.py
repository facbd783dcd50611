"""Configuration files, shorthand flags and --set overrides (repflow.config_io)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from repflow import config_io
from repflow.cli import build_parser
from repflow.errors import UserError

core = pytest.importorskip("repflow._core")


def _drop_none(d):
    if isinstance(d, dict):
        return {k: _drop_none(v) for k, v in d.items() if v is not None}
    return d


def test_default_config_round_trips_through_toml():
    default = config_io.default_config()
    text = config_io.dumps_toml(default)
    assert tomllib.loads(text) == _drop_none(default)
    # Validating the file's content gives back exactly the defaults (None = absent).
    assert config_io.validate(tomllib.loads(text), resolve=False) == default


def test_non_default_config_round_trips(tmp_path: Path):
    cfg = config_io.default_config()
    cfg["seed"] = 12345678901
    cfg["topology"].update(kind="leaf-spine", leaves=3, spines=2, hosts_per_leaf=5,
                           link_rate="10Gbps", uplink_rate="40Gbps", link_delay="1.5us")
    cfg["queue"]["limit_bytes"] = "36KB"
    cfg["tcp"].update(rto_backoff=1.5, handshake=False, delayed_ack=True, max_window="64KiB")
    cfg["workload"].update(load=0.35, cdf="websearch-bytes", max_flows=77, pairs="inter-pod",
                           cdf_text='# a "quoted" comment\t\n10 0.5\n20 1\n')
    cfg["scheme"].update(name="repflow", copies=3, cancel=True, threshold="50KB")
    path = tmp_path / "run.toml"
    path.write_text(config_io.dumps_toml(cfg))
    loaded = config_io.load_toml(path)
    assert loaded == _drop_none(cfg)
    normalized = config_io.validate(loaded)
    # The Rust core normalizes quantities (64KiB -> 65536 B printed as "65536B").
    assert normalized["tcp"]["max_window"] == "65536B"
    assert normalized["topology"]["uplink_rate"] == "40Gbps"
    assert normalized["workload"]["cdf_text"] == cfg["workload"]["cdf_text"]
    # (Other scheme fields, e.g. SmartRep's and DCTCP's, keep their defaults.)
    assert {k: normalized["scheme"][k] for k in ("name", "threshold", "copies", "cancel")} == {
        "name": "repflow", "threshold": "50KB", "copies": 3, "cancel": True}


def test_every_flag_sets_a_schema_key():
    keys = set(config_io.known_keys())
    for flag in config_io.FLAGS:
        assert flag.key in keys, flag.option


def _flags(*argv: str) -> dict:
    args = build_parser().parse_args(["sim", *argv])
    return config_io.flag_overrides(args)


def test_flags_map_to_nested_fields():
    got = _flags("--topology", "leaf-spine", "--leaves", "3", "--spines", "2",
                 "--hosts-per-leaf", "4", "--link-rate", "10Gbps", "--uplink-rate", "40Gbps",
                 "--link-delay", "1us", "--buffer", "50", "--buffer-bytes", "36KB",
                 "--hash", "crc16", "--min-rto", "1ms", "--init-cwnd", "4", "--no-handshake",
                 "--delayed-ack", "--workload", "datamining", "--load", "0.3",
                 "--duration", "5ms", "--drain", "1s", "--pairs", "inter-pod",
                 "--max-flows", "100", "--scheme", "repflow", "--threshold", "100KB",
                 "--copies", "3", "--cancel", "--seed", "7")  # fmt: skip
    assert got == {
        "topology": {"kind": "leaf-spine", "leaves": 3, "spines": 2, "hosts_per_leaf": 4,
                     "link_rate": "10Gbps", "uplink_rate": "40Gbps", "link_delay": "1us"},
        "queue": {"limit_packets": 50, "limit_bytes": "36KB"},
        "routing": {"hash": "crc16"},
        "tcp": {"min_rto": "1ms", "init_cwnd": 4, "handshake": False, "delayed_ack": True},
        "workload": {"cdf": "datamining", "load": 0.3, "duration": "5ms", "drain": "1s",
                     "pairs": "inter-pod", "max_flows": 100},
        "scheme": {"name": "repflow", "threshold": "100KB", "copies": 3, "cancel": True},
        "seed": 7,
    }  # fmt: skip
    cfg = config_io.validate(got)
    assert cfg["tcp"]["handshake"] is False and cfg["topology"]["hosts_per_leaf"] == 4


def test_absent_flags_set_nothing():
    assert _flags() == {}
    star = _flags("--topology", "star", "--hosts", "16")
    assert star == {"topology": {"kind": "star", "hosts": 16}}


def test_precedence_file_then_flags_then_set(tmp_path: Path):
    path = tmp_path / "run.toml"
    path.write_text('seed = 3\n[topology]\nk = 6\nlink_rate = "10Gbps"\n[workload]\nload = 0.2\n')
    cfg = config_io.build_config(path, _flags("--k", "4", "--load", "0.4"),
                                 ["workload.load=0.6", "tcp.min_rto=2ms"])  # fmt: skip
    cfg = config_io.validate(cfg)
    assert cfg["seed"] == 3  # file only
    assert cfg["topology"]["link_rate"] == "10Gbps"  # file only
    assert cfg["topology"]["k"] == 4  # flag beats file
    assert cfg["workload"]["load"] == 0.6  # --set beats flag
    assert cfg["tcp"]["min_rto"] == "2ms"


@pytest.mark.parametrize(
    "text,value",
    [("8", 8), ("0.5", 0.5), ("true", True), ("false", False), ("10ms", "10ms"),
     ('"quoted"', "quoted"), ("none", None), ("fat-tree", "fat-tree"), ("1Gbps", "1Gbps")],
)  # fmt: skip
def test_set_values_are_typed(text, value):
    assert config_io.parse_value(text) == value


def test_set_rejects_unknown_keys_and_bad_syntax():
    with pytest.raises(UserError, match=r"unknown key 'tcp.bogus'.*tcp.min_rto"):
        config_io.apply_sets({}, ["tcp.bogus=1"])
    with pytest.raises(UserError, match="unknown key 'nosuch'"):
        config_io.apply_sets({}, ["nosuch=1"])
    with pytest.raises(UserError, match="key.path=value"):
        config_io.apply_sets({}, ["tcp.min_rto"])
    assert config_io.apply_sets({}, ["topology.uplink_rate=none"]) == {
        "topology": {"uplink_rate": None}
    }


def test_toml_file_errors_name_the_file(tmp_path: Path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[topology\nk = 4\n")
    with pytest.raises(UserError, match=r"bad.toml:1: not valid TOML"):
        config_io.load_toml(bad)
    bad.write_text("[topology]\nbogus = 4\n")
    with pytest.raises(UserError, match=r"bad.toml:2: unknown key 'topology.bogus'"):
        config_io.load_toml(bad)
    with pytest.raises(UserError, match="does not exist"):
        config_io.load_toml(tmp_path / "missing.toml")


def test_builtin_cdf_is_resolved_to_its_text():
    cfg = config_io.validate({"workload": {"cdf": "datamining"}})
    assert cfg["workload"]["cdf"] == "datamining"
    assert cfg["workload"]["cdf_text"] == core.workload_text("datamining")


def test_cdf_path_relative_to_toml_file(tmp_path: Path):
    sub = tmp_path / "cfg"
    sub.mkdir()
    (sub / "mine.cdf").write_text("1000 0.5\n5000 1\n")
    (sub / "run.toml").write_text('[workload]\ncdf = "mine.cdf"\n')
    cfg = config_io.validate(config_io.load_toml(sub / "run.toml"))
    assert cfg["workload"]["cdf"] == str((sub / "mine.cdf").resolve())
    assert cfg["workload"]["cdf_text"] == "1000 0.5\n5000 1\n"


@pytest.mark.parametrize(
    "content,why",
    [("10 0.5\n5 1\n", "sizes must not decrease"),
     ("10 50\n20 120\n", "outside 0–100"),
     ("10 0.5\n20 0.4\n30 1\n", "decreases"),
     ("10 0.2\n20 0.9\n", "must be 1"),
     ("10 x\n", "not a number"),
     ("", "no points")],
)  # fmt: skip
def test_malformed_cdf_file_is_one_line_naming_the_file(tmp_path: Path, content, why):
    f = tmp_path / "weird.cdf"
    f.write_text(content)
    with pytest.raises(UserError) as ei:
        config_io.validate({"workload": {"cdf": str(f)}})
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith("workload.cdf")
    assert "weird.cdf" in msg and why in msg


def test_missing_cdf_lists_builtins():
    with pytest.raises(UserError, match=r"workload.cdf.*nope.cdf.*websearch"):
        config_io.validate({"workload": {"cdf": "nope.cdf"}})


def test_run_json_is_accepted_as_config(tmp_path: Path):
    cfg = config_io.validate({"topology": {"k": 4}, "seed": 9})
    (tmp_path / "run.json").write_text(json.dumps({"version": "x", "config": cfg}))
    again = config_io.validate(config_io.load_toml(tmp_path / "run.json"))
    assert again == cfg


def test_changing_the_cdf_of_a_run_json_drops_its_old_text(tmp_path: Path):
    cfg = config_io.validate({"workload": {"cdf": "websearch"}})
    (tmp_path / "run.json").write_text(json.dumps({"config": cfg}))
    same = config_io.validate(config_io.build_config(tmp_path / "run.json"))
    assert same["workload"]["cdf_text"] == core.workload_text("websearch")
    flags = {"workload": {"cdf": "datamining"}}
    other = config_io.validate(config_io.build_config(tmp_path / "run.json", flags))
    assert other["workload"]["cdf_text"] == core.workload_text("datamining")


def test_unset_field_with_a_non_null_default_round_trips_as_none(tmp_path: Path):
    cfg = config_io.validate(config_io.apply_sets({}, ["tcp.max_window=none"]), resolve=False)
    assert cfg["tcp"]["max_window"] is None
    default = config_io.default_config()["tcp"]["max_window"]
    assert default is not None  # otherwise this test checks nothing
    path = tmp_path / "run.toml"
    path.write_text(config_io.dumps_toml(cfg))
    assert config_io.validate(config_io.load_toml(path), resolve=False) == cfg
