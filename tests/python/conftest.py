"""Fixtures shared by the test modules."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Every testbed the tests build is named ``rft<x>-…``; users' testbeds never are.
TEST_PREFIX_STEM = "rft"


def _leftover_test_prefixes() -> list[str]:
    """Prefixes (``rft?-`` / ``rft??-``) of namespaces a killed earlier test run left behind."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    prefixes = {n[: n.index("-") + 1] for n in names if n.startswith(TEST_PREFIX_STEM) and "-" in n}
    return sorted(p for p in prefixes if len(p) <= 6)


@pytest.fixture(scope="session", autouse=True)
def _no_leftover_test_testbeds() -> Iterator[None]:
    """A test run killed mid-way (Ctrl-C twice, SIGKILL, a lost session) can leave its
    namespaces in the kernel, and the next run on the same machine would then refuse to build
    its testbeds. Namespaces under the tests' own prefixes are removed once, before any test,
    and named on stderr; nothing else is touched. Two test runs on one machine at once are not
    supported for the root tests."""
    if os.geteuid() == 0 and shutil.which("ip") is not None:
        from repflow.testbed import netns

        for prefix in _leftover_test_prefixes():
            deleted = netns.down(prefix, force=True)
            print(
                f"conftest: removed {len(deleted)} namespaces {prefix}* left by an earlier "
                "test run",
                file=sys.stderr,
            )
    yield


@pytest.fixture(scope="module")
def testbed_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private testbed state directory (``REPFLOW_TESTBED_STATE_DIR``) for one test module,
    so its testbeds never meet another module's or a user's; the variable is restored after."""
    d = tmp_path_factory.mktemp("tbstate")
    mp = pytest.MonkeyPatch()
    mp.setenv("REPFLOW_TESTBED_STATE_DIR", str(d))
    try:
        yield d
    finally:
        mp.undo()


def require_net_commands() -> None:
    """Skips the calling test when this build lacks ``repflow serve``/``repflow load``."""
    from repflow.testbed.workload import net_commands_available

    if not net_commands_available():
        pytest.skip("`repflow serve`/`repflow load` (repflow-net) are not in this build")
