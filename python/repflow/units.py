"""Rates, sizes and durations: the Rust unit grammar, wrapped once for every Python front end.

Parsing is done once, in Rust (``repflow_sim::units`` through ``repflow._core``); the grammar
(``"50ms"``, ``"1Gbps"``, ``"10Gb/s"``, ``"100KB"``, ``"64KiB"``; a bare number is the base
unit) is documented in ``docs/configuration.md``. Two kinds of callers:

- code reading a resolved configuration (experiments): :func:`seconds`,
  :func:`bits_per_second`, :func:`size_bytes` return floats and raise :class:`ValueError`;
- command-line arguments (testbed, library): :func:`parse_rate`, :func:`parse_size`,
  :func:`parse_duration` add the flag name to the message, raise
  :class:`~repflow.errors.UserError`, and apply the testbed's bounds (durations above zero,
  rates of at least 100 kbit/s).

And the reverse, for people: :func:`format_rate`, :func:`fmt_seconds`, :func:`fmt_time`.
"""

from __future__ import annotations

from repflow.errors import UserError, require_core

# --- a resolved configuration's quantities as numbers (ValueError) ---------------------------


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


# --- command-line arguments (UserError naming the flag) ---------------------------------------


def _parse(kind: str, text: object, field: str) -> float:
    core = require_core()
    try:
        return getattr(core, kind)(text)
    except ValueError as exc:
        raise UserError(f"{field}: {exc}") from None


def parse_rate(text: str, field: str = "--link-rate") -> int:
    """``20Mbps`` / ``50Mbit`` / ``10Gb/s`` / ``1G`` → bits per second (at least 100 kbit/s)."""
    bps = int(_parse("parse_rate", text, field))
    if bps < 100_000:
        raise UserError(f"{field}: {text!r} is below 100 kbit/s; use e.g. 20Mbps")
    return bps


def parse_size(text: str, field: str = "--size") -> int:
    """``20KB`` / ``1.5MB`` / ``14600`` → bytes (decimal units; ``KiB`` is binary)."""
    return int(_parse("parse_bytes", text, field))


def parse_duration(text: str, field: str = "--duration") -> float:
    """``60s`` / ``500ms`` / ``2min`` / ``10`` → seconds (``2m`` is refused as ambiguous)."""
    value = float(_parse("parse_duration", text, field))
    if value <= 0:
        raise UserError(f"{field}: must be positive, got {text!r}")
    return value


# --- for people ---------------------------------------------------------------------------------


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
