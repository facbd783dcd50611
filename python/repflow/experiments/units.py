"""Quantities of a resolved simulator configuration as numbers, and times for people.

Durations (``"50ms"``), rates (``"1Gbps"``, ``"10Gb/s"``) and sizes (``"100KB"``, ``"64KiB"``)
are parsed by the Rust core (``repflow_sim::units``), the one grammar of every front end
(documented in ``docs/configuration.md``). The experiment code needs them as numbers to
estimate run times and to label figures.
"""

from __future__ import annotations

from repflow.errors import require_core


def seconds(value: object) -> float:
    """``"50ms"`` → 0.05; a bare number is seconds. Raises :class:`ValueError`."""
    return float(require_core().parse_duration(value))


def bits_per_second(value: object) -> float:
    """``"1Gbps"`` / ``"10Gb/s"`` → 1e9 / 1e10; a bare number is bits per second. Raises
    :class:`ValueError`."""
    return float(require_core().parse_rate(value))


def size_bytes(value: object) -> float:
    """``"100KB"`` → 100000, ``"64KiB"`` → 65536; a bare number is bytes. Raises
    :class:`ValueError`."""
    return float(require_core().parse_bytes(value))


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
