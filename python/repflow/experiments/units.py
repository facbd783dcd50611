"""Quantities of resolved simulator configurations as numbers, for run-time estimates and
figure labels, read with the one grammar of :mod:`repflow.units` (the Rust core's)."""

from __future__ import annotations

from repflow.errors import UserError
from repflow.units import fmt_seconds, fmt_time, parse_duration, parse_rate, parse_size

__all__ = ["bits_per_second", "fmt_seconds", "fmt_time", "seconds", "size_bytes"]


def _value_error(parse, value: object, what: str) -> float:
    try:
        return float(parse(value, what))
    except UserError as exc:
        raise ValueError(str(exc)) from None


def seconds(value: object) -> float:
    """``"50ms"`` → 0.05; a bare number is seconds (ValueError if unreadable)."""
    return _value_error(parse_duration, value, "duration")


def bits_per_second(value: object) -> float:
    """``"1Gbps"`` → 1e9; a bare number is bits per second (ValueError if unreadable)."""
    return _value_error(parse_rate, value, "rate")


def size_bytes(value: object) -> float:
    """``"100KB"`` → 100000, ``"64KiB"`` → 65536; a bare number is bytes."""
    return _value_error(parse_size, value, "size")
