"""The simulator's heap on huge pages (repflow.hugepages): the environment it is asked for
by, that the kernel really gives them, and that `repflow sim` starts itself again with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from repflow import hugepages

SMAPS = Path("/proc/self/smaps_rollup")

needs_huge_pages = pytest.mark.skipif(
    not hugepages.wanted({}) or not SMAPS.exists(),
    reason="needs Linux with glibc >= 2.35, transparent huge pages not 'never', and "
    "/proc/self/smaps_rollup",
)

# A child that allocates and touches 64 MiB through malloc and prints how much of its
# memory is on huge pages, and whether repflow thinks its heap asks for them.
CHILD = """
import re
from pathlib import Path
from repflow import hugepages
buf = bytearray(64 << 20)
for i in range(0, len(buf), 4096):
    buf[i] = 1
m = re.search(r"AnonHugePages:\\s+(\\d+) kB", Path("/proc/self/smaps_rollup").read_text())
print(int(m.group(1)) if m else -1, hugepages.active())
"""


def _child(env: dict[str, str]) -> tuple[int, bool]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[0]), out[1] == "True"


def _env_without_tunable() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", hugepages.OPT_OUT)}
    env.pop(hugepages.RESTARTED, None)
    return env


def test_the_tunable_is_added_beside_others_and_a_users_value_is_kept() -> None:
    assert hugepages.with_huge_pages({})["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"
    env = hugepages.with_huge_pages({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2", "X": "y"})
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    assert env["X"] == "y"
    off = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}
    assert hugepages.with_huge_pages(off)["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=0"


def test_the_user_can_turn_it_off() -> None:
    assert not hugepages.wanted({hugepages.OPT_OUT: "0"})


@needs_huge_pages
def test_a_process_started_with_the_tunable_gets_huge_pages() -> None:
    kib, active = _child(hugepages.with_huge_pages(_env_without_tunable()))
    assert active
    assert kib >= 2048, f"64 MiB allocated with the tunable, {kib} KiB on huge pages"
    if hugepages.thp_mode() == "madvise":
        # Without the tunable nothing asks for them, and in this mode nothing gets them:
        # the tunable, not the kernel's default, made the difference above.
        kib, active = _child(_env_without_tunable())
        assert not active
        assert kib == 0


@needs_huge_pages
def test_repflow_sim_starts_itself_again_with_huge_pages() -> None:
    argv = [sys.executable, "-m", "repflow", "sim", "--topology", "fat-tree", "--k", "4",
            "--workload", "websearch", "--load", "0.3", "--duration", "1ms"]  # fmt: skip
    run = subprocess.run(argv, env=_env_without_tunable(), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "heap on huge pages" in run.stdout
    off = {**_env_without_tunable(), hugepages.OPT_OUT: "0"}
    run = subprocess.run(argv, env=off, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "heap on the system's pages" in run.stdout


def test_the_commands_restarted_before_parsing_are_those_whose_parser_asks() -> None:
    from repflow.cli import HUGE_PAGE_COMMANDS, _subparsers, build_parser

    asking = {name for name, p in _subparsers(build_parser()).items()
              if p.get_default("huge_pages")}  # fmt: skip
    assert asking == set(HUGE_PAGE_COMMANDS)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_huge_pages
def test_a_sweep_on_a_ray_cluster_started_without_the_tunable_runs_with_huge_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'repflow[ray]')")
    import ray
    from repflow.experiments import parse_spec, run_sweep
    from repflow.experiments.executors import RayExecutor

    if ray.is_initialized():
        pytest.skip("this process is already connected to a Ray instance")
    spec = parse_spec(
        """
[experiment]
name = "hp"
[base]
topology = { kind = "fat-tree", k = 4 }
workload = { cdf = "websearch", duration = "5ms", drain = "0s" }
[grid]
"workload.load" = [0.3, 0.5]
""",
        "hp.toml",
    )
    port = _free_port()
    env = _env_without_tunable()
    env.pop("RAY_ADDRESS", None)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["RAY_AUTH_MODE"] = "disabled"  # a throwaway cluster on this host: no token to share
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    ray_bin = str(Path(sys.executable).with_name("ray"))
    start = [ray_bin, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
             "--num-cpus=1",
             "--include-dashboard=false", "--disable-usage-stats"]  # fmt: skip
    up = subprocess.run(start, env=env, capture_output=True, text=True, timeout=180)
    assert up.returncode == 0, up.stderr[-2000:]
    try:
        # The cluster's processes, the workers it would start included, lack the tunable:
        # only the job's runtime_env gives it to them.
        seen = {}
        for opt_out in ("0", "1"):
            monkeypatch.setenv(hugepages.OPT_OUT, opt_out)
            ex = RayExecutor(address=f"127.0.0.1:{port}")
            try:
                out = tmp_path / f"hp{opt_out}"
                s = run_sweep(spec, out, executor=ex, progress=False)
            finally:
                ray.shutdown()
            assert s.computed == 2 and not s.failed
            seen[opt_out] = {
                json.loads(t.read_text())["huge_pages"] for t in out.glob("points/*/timing.json")
            }
        assert seen == {"0": {False}, "1": {True}}
    finally:
        subprocess.run([ray_bin, "stop", "--force"], env=env, capture_output=True, timeout=120)
