"""Fixtures shared by the test modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


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
