"""Parsing of the quantities a resolved simulator configuration writes as strings.

The Rust core normalizes durations (``"50ms"``), rates (``"1Gbps"``) and sizes (``"100KB"``,
powers of 1000; ``KiB`` powers of 1024). The experiment code needs them as numbers to estimate
run times and to label figures.
"""

from __future__ import annotations

import re

_NUM = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([^\s]*)\s*$")

_TIME = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "ps": 1e-12}
_RATE = {"": 1.0, "bps": 1.0, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "tbps": 1e12}
_SIZE = {
    "": 1.0, "b": 1.0, "kb": 1e3, "k": 1e3, "mb": 1e6, "gb": 1e9,
    "kib": 1024.0, "mib": 1024.0**2, "gib": 1024.0**3,
}  # fmt: skip


def _parse(value: object, table: dict[str, float], what: str, fold: bool) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a {what}")
    if isinstance(value, int | float):
        return float(value)
    m = _NUM.match(str(value))
    if not m:
        raise ValueError(f"{value!r} is not a {what}")
    unit = m.group(2).lower() if fold else m.group(2)
    if unit not in table:
        raise ValueError(f"{value!r} has an unknown {what} unit")
    return float(m.group(1)) * table[unit]


def seconds(value: object) -> float:
    """``"50ms"`` → 0.05; a bare number is seconds."""
    return _parse(value, _TIME, "duration", fold=False)


def bits_per_second(value: object) -> float:
    """``"1Gbps"`` → 1e9; a bare number is bits per second."""
    return _parse(value, _RATE, "rate", fold=True)


def size_bytes(value: object) -> float:
    """``"100KB"`` → 100000, ``"64KiB"`` → 65536; a bare number is bytes."""
    return _parse(value, _SIZE, "size", fold=True)


def fmt_seconds(s: float) -> str:
    """A duration for people: ``"42 s"``, ``"7.5 min"``, ``"3.2 h"``, ``"2.1 days"``."""
    if s < 90:
        return f"{s:.0f} s"
    if s < 90 * 60:
        return f"{s / 60:.1f} min"
    if s < 48 * 3600:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def fmt_time(s: float) -> str:
    """An FCT for tables: ``"412 µs"``, ``"3.1 ms"``, ``"1.20 s"``."""
    if s != s:  # NaN
        return "–"
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1.0:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"
