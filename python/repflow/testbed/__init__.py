"""The emulated data-center testbed: a fat-tree of Linux network namespaces with kernel ECMP.

``repflow testbed up|check|run|toy|status|down`` drive it; see ``docs/testbed.md``.
Submodules: :mod:`~repflow.testbed.topology` (pure topology and routing),
:mod:`~repflow.testbed.netns` (build/teardown with iproute2), :mod:`~repflow.testbed.checks`,
:mod:`~repflow.testbed.workload` (``run``), :mod:`~repflow.testbed.toyexp` (Table I),
:mod:`~repflow.testbed.probe` and :mod:`~repflow.testbed.agent` (run inside namespaces).
The package itself imports nothing heavy, so the in-namespace agent starts fast.
"""

from __future__ import annotations

__all__ = ["Testbed", "Topology", "current", "down", "fat_tree", "read_state", "toy", "up"]


def __getattr__(name: str):
    if name in ("Topology", "fat_tree", "toy"):
        from repflow.testbed import topology

        return getattr(topology, name)
    if name in ("Testbed", "current", "down", "read_state", "up"):
        from repflow.testbed import netns

        return getattr(netns, name)
    raise AttributeError(name)
