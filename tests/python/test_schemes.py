"""The reference schemes (DCTCP family, pFabric) through the Python API and the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from repflow import api
from repflow.errors import UserError
from repflow.experiments.spec import load_spec

pytest.importorskip("repflow._core")

ROOT = Path(__file__).resolve().parents[2]
SCHEMES = ["dctcp", "repflow-dctcp", "pfabric", "l2dct", "fa-dctcp"]


def _small(scheme: str) -> dict:
    return {
        "seed": 3,
        "topology": {"kind": "fat-tree", "k": 4},
        "scheme": {"name": scheme},
        "workload": {"cdf": "websearch", "load": 0.5, "duration": "10ms"},
    }


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_scheme_runs_through_the_api(scheme: str) -> None:
    r = api.simulate(_small(scheme))
    assert tuple(r.flows.columns) == api.RECORD_COLUMNS
    assert len(r.flows) > 5
    assert r.flows["fct"].notna().all()
    assert (r.flows["fct"] >= r.flows["ideal_fct"] * (1 - 1e-12)).all()
    assert r.metadata["config"]["scheme"]["name"] == scheme
    short = r.flows[r.flows["size"] <= 100_000]
    assert (short["copies"] == (2 if scheme == "repflow-dctcp" else 1)).all()


def test_bad_scheme_parameters_name_the_field() -> None:
    cfg = _small("l2dct")
    cfg["scheme"]["w_min"] = 0
    with pytest.raises(UserError, match="scheme.w_min"):
        api.simulate(cfg)
    # A parameter of another scheme is refused, naming it and what this scheme takes.
    cfg = _small("dctcp")
    cfg["scheme"]["copies"] = 3
    with pytest.raises(UserError, match=r"scheme\.copies: not a parameter .*alpha_init, g"):
        api.simulate(cfg)
    cfg = _small("dctcp")
    cfg["queue"] = {"ecn_k_packets": 0}
    with pytest.raises(UserError, match="queue.ecn_k_packets"):
        api.simulate(cfg)


def test_cli_accepts_the_new_scheme_names() -> None:
    for scheme in ("pfabric", "fa-dctcp"):
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "repflow",
                "sim",
                "--scheme",
                scheme,
                "--k",
                "4",
                "--duration",
                "3ms",
                "-q",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("name", ["l2dct", "fa-dctcp"])
def test_scenario_specs_resolve_to_valid_configurations(name: str) -> None:
    spec = load_spec(ROOT / "experiments" / f"{name}.toml")
    points = spec.points()
    assert points
    for p in points:
        cfg = api.load_config(p.config)
        assert cfg["workload"]["pairs"] == "incast"
        assert len(cfg["workload"]["background"]) == 2


@pytest.mark.parametrize("scheme", ["mptcp", "mptcp-l"])
def test_multipath_schemes_run_through_the_api_with_their_columns(scheme: str) -> None:
    r = api.simulate(_small(scheme))
    assert tuple(r.flows.columns) == api.RECORD_COLUMNS
    assert r.flows["fct"].notna().all()
    short = r.flows[r.flows["size"] <= 1_000_000]
    assert (short["copies"] == (2 if scheme == "mptcp-l" else 8)).all()
    causes = ["fast_retransmits", "timeout_retransmits", "detect_retransmits",
              "atimer_retransmits"]  # fmt: skip
    assert (r.flows[causes].sum(axis=1) == r.flows["retransmissions"]).all()
    if scheme == "mptcp":
        assert (r.flows[["detect_retransmits", "atimer_retransmits"]] == 0).all().all()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--scheme", "mptcp", "--set", "scheme.subflows=0"], "scheme.subflows"),
        (["--scheme", "mptcp", "--set", "scheme.subflows=65"], "scheme.subflows"),
        (["--scheme", "tcp", "--set", "scheme.subflows=4"], "scheme.subflows"),
        (["--scheme", "mptcp-l", "--set", "scheme.join=never"], "scheme.join"),
    ],
)
def test_bad_multipath_options_are_one_line_exit_2(args: list[str], field: str, tmp_path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "repflow", "sim", "--k", "4", "--duration", "1ms", "--quiet",
         "--out", str(tmp_path / "o"), *args],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and field in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()
