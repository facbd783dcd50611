"""The emulated data-center testbed: a fat-tree of Linux network namespaces with kernel ECMP.

``repflow testbed up|check|run|toy|status|down`` drive it; see ``docs/testbed.md``.
"""

from repflow.testbed.netns import DEFAULT_PREFIX, Testbed, current, down, read_state, up
from repflow.testbed.topology import Topology, fat_tree, toy

__all__ = [
    "DEFAULT_PREFIX",
    "Testbed",
    "Topology",
    "current",
    "down",
    "fat_tree",
    "read_state",
    "toy",
    "up",
]
