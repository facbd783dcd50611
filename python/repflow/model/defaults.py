"""The model's default parameters, in a module light enough for the CLI parser to import."""

from __future__ import annotations

#: Maximum segment size, bytes.
DEFAULT_MSS = 1460
#: Maximum window: 64 KB (65,536 B) = 44 whole packets of 1460 B (RepFlow's Table II).
DEFAULT_M = 65_536 // DEFAULT_MSS
#: Short/large threshold: 100 KB (100,000 B) in packets of 1460 B (68.49; flows of at most
#: 68 whole packets are short, as in the simulator's ``scheme.threshold = "100KB"``).
DEFAULT_S_L = 100_000 / DEFAULT_MSS
#: Initial window in packets (RepFlow uses k = 12).
DEFAULT_K = 12
#: Hash-collision probability for SmartRep's Theorem 1 (SmartRep saw > 25 % with CRC16).
DEFAULT_P = 0.25
#: Copies per short flow for SmartRep's n-copies curve.
DEFAULT_N = 2
