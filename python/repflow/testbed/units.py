"""The testbed's rate, size and duration arguments, read with the simulator's grammar.

Parsing is done once, in Rust (``repflow_sim::units`` through ``repflow._core``); these wrappers
add the flag name to the message and the testbed's own bounds (durations above zero, rates of
at least 100 kbit/s). The grammar is documented in ``docs/configuration.md``.
"""

from __future__ import annotations

from repflow.errors import UserError, require_core


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


def format_rate(bps: int) -> str:
    """Human form of a rate: 20000000 → ``20Mbps``."""
    for unit, scale in (("Gbps", 10**9), ("Mbps", 10**6), ("kbps", 10**3)):
        if bps >= scale and bps % scale == 0:
            return f"{bps // scale}{unit}"
    return f"{bps}bps"
