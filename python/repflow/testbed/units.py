"""The testbed's rate, size and duration arguments, read with the one grammar of
:mod:`repflow.units` (the Rust core's), plus the testbed's own limits."""

from __future__ import annotations

from repflow.errors import UserError
from repflow.units import format_rate, parse_size
from repflow.units import parse_duration as _duration
from repflow.units import parse_rate as _rate

__all__ = ["format_rate", "parse_duration", "parse_rate", "parse_size"]


def parse_rate(text: str, field: str = "--link-rate") -> int:
    """``20Mbps`` / ``50mbit`` / ``1Gbps`` → bits per second, at least 100 kbit/s (tbf)."""
    bps = _rate(text, field)
    if bps < 100_000:
        raise UserError(f"{field}: {text!r} is below 100 kbit/s; use e.g. 20Mbps")
    return bps


def parse_duration(text: str, field: str = "--duration") -> float:
    """``60s`` / ``500ms`` / ``2min`` / ``10`` → seconds, positive."""
    value = _duration(text, field)
    if value <= 0:
        raise UserError(f"{field}: must be positive, got {text!r}")
    return value
