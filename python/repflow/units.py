"""Quantities with units, parsed once: by the Rust core's grammar (``repflow_sim::units``),
the one every front end uses — the simulator's configuration, sweep specs, the model, the
library's commands and the testbed.

Durations: ``min``, ``s``, ``ms``, ``us`` (``µs``), ``ns``, ``ps``; a bare number is seconds;
``2m`` is refused as ambiguous. Rates: ``bps``, ``kbps``, ``Mbps``, ``Gbps``, ``Tbps`` (any
case), also ``Gb/s`` and tc's ``Gbit``; a bare number is bits per second. Sizes: ``B``,
``KB``/``MB``/``GB`` (powers of 1000), ``KiB``/``MiB``/``GiB`` (powers of 1024); a bare number
is bytes. docs/configuration.md gives the full table.
"""

from __future__ import annotations

from repflow.errors import UserError, require_core


def _parse(kind: str, value: object, field: str) -> float:
    if isinstance(value, bool):
        raise UserError(f"{field}: {value!r} is not a {kind}")
    if isinstance(value, int | float):
        if value < 0 or value != value:
            raise UserError(f"{field}: {value!r} must be a non-negative {kind}")
        return float(value)
    core = require_core()
    try:
        return float(core.parse_quantity(kind, str(value)))
    except core.ConfigError as exc:
        raise UserError(f"{field}: {exc}") from None


def parse_duration(value: object, field: str = "duration") -> float:
    """Seconds from ``"50ms"``, ``"2min"``, ``1.5`` …"""
    return _parse("duration", value, field)


def parse_rate(value: object, field: str = "rate") -> int:
    """Bits per second from ``"1Gbps"``, ``"10Gb/s"``, ``"50mbit"`` …"""
    return int(round(_parse("rate", value, field)))


def parse_size(value: object, field: str = "size") -> int:
    """Bytes from ``"100KB"``, ``"64KiB"``, ``14600`` …"""
    return int(round(_parse("size", value, field)))


def format_rate(bps: int) -> str:
    """Human form of a rate: 20000000 → ``20Mbps``."""
    for unit, scale in (("Gbps", 10**9), ("Mbps", 10**6), ("kbps", 10**3)):
        if bps >= scale and bps % scale == 0:
            return f"{bps // scale}{unit}"
    return f"{bps}bps"


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
