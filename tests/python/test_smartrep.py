"""SmartRep from Python: the replica table, its CLI, history from an earlier run, collisions."""

from __future__ import annotations

import json
import random

import pytest
from repflow.cli import main
from repflow.errors import UserError

core = pytest.importorskip("repflow._core")
from repflow import smartrep  # noqa: E402


def test_simulator_and_network_library_agree_on_rep_num_assign():
    # The simulator (repflow_sim::smartrep, sizes binned as weights) and the socket library
    # (repflow_net::policy, flow counts) share Algorithm 3 (crate repflow-repnum) but bin and
    # convert on their own; on the same observed sizes they must give the same table.
    rng = random.Random(4)
    for trial in range(40):
        n = rng.randrange(1, 3000)
        sizes = [rng.choice([rng.randrange(1, 100_001), rng.randrange(1, 10_000_000)])
                 for _ in range(n)]  # fmt: skip
        eps = rng.choice([0.001, 0.01, 0.03, 0.1, 0.3])
        p = rng.choice([0.05, 0.1, 0.3])
        max_extra = rng.randrange(0, 8)
        sim = core.sim_smartrep_table(eps=eps, p=p, max_extra=max_extra, sizes=sizes)
        unit, net = core.smartrep_table(sizes, eps=eps, p=p, max_extra=max_extra)
        assert unit == sim["unit_bytes"] == 1000
        assert list(sim["extra"]) == list(net), f"trial {trial}"
        assert sim["overhead"] <= eps + 1e-12


def test_table_from_the_workload_cdf_respects_the_budget():
    t = smartrep.table(cdf_text=core.workload_text("websearch"), eps=0.03, p=0.1, paths=5)
    assert 0 < t.overhead <= 0.03 + 1e-12
    assert max(t.extra) == 4 and min(t.extra) >= 0
    assert t.replicas_for(1) == t.extra[0] and t.replicas_for(10**6) == 0
    # Data mining's short flows are a tiny share of its bytes: every bin gets the cap.
    dm = smartrep.table(cdf_text=core.workload_text("datamining"), paths=5)
    assert all(x == 4 for x, w in zip(dm.extra, dm.weights, strict=True) if w > 0)
    # A tighter budget never gives more replicas.
    tight = smartrep.table(cdf_text=core.workload_text("websearch"), eps=0.01, paths=5)
    assert sum(tight.extra) < sum(t.extra)


def test_smartrep_table_cli(capsys):
    assert main(["smartrep-table", "--workload", "websearch", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["max_extra"] == 4 and d["overhead"] <= 0.03 + 1e-12 and len(d["extra"]) == 100
    assert main(["smartrep-table", "--workload", "datamining", "--paths", "3"]) == 0
    out = capsys.readouterr().out
    assert "RepNumAssign" in out and "(1000, 2000]" in out


@pytest.mark.parametrize(
    "argv,word",
    [(["--smartrep-eps", "1.5"], "--smartrep-eps"), (["--large-flow-p", "0"], "--large-flow-p"),
     (["--paths", "0"], "--paths"),
     (["--workload", "no/such.cdf"], "workload.cdf"), (["--from-run", "/nonexistent"], "history")],
)  # fmt: skip
def test_smartrep_table_bad_input_is_one_line(argv, word, capsys):
    assert main(["smartrep-table", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("repflow: error:") and word in err and "\n" not in err


def test_collisions_crc32_worst_and_all_rates_plausible():
    from repflow.cli.smartrep import collision_rows

    rows = collision_rows([10], ["crc16", "crc32", "default"], "inter-pod", 3000, 1)
    rate = {r["hash"]: r["rate"] for r in rows}
    assert all(r["inter_tor"] == r["flows"] == 3000 for r in rows)
    # Independent hashing collides 1/5 of the time on 5 link-disjoint paths; CRC32 with
    # destination port + 1 much more often.
    assert 0.15 < rate["default"] < 0.25
    assert rate["crc32"] > 0.5 and rate["crc16"] > 0.2


def test_history_from_an_earlier_run_becomes_the_table(tmp_path):
    import repflow

    base = {"seed": 2, "topology": {"k": 4}, "workload": {"load": 0.3, "duration": "100ms"}}
    first = repflow.simulate(base)
    run_dir = first.save(tmp_path / "first")
    cfg = {**base, "scheme": {"name": "smartrep", "history": str(run_dir)}}
    second = repflow.simulate(cfg)
    table = second.metadata["config"]["scheme"]["table"]
    expected = smartrep.table(sizes=[int(s) for s in first.flows["size"]], paths=2)
    assert table == expected.extra
    c = second.metadata["counters"]
    assert c["copy_collisions"] == 0
    with pytest.raises(UserError, match="scheme.history"):
        repflow.simulate({**base, "scheme": {"name": "smartrep", "history": str(tmp_path)}})
