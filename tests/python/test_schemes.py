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
