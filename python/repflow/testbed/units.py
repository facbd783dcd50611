"""Parsing of the testbed's rate, size and duration arguments."""

from __future__ import annotations

import re

from repflow.errors import UserError

_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(bps|bit|b/s|bit/s)?\s*$", re.IGNORECASE)
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmg]?)(i?b)?\s*$", re.IGNORECASE)
_TIME = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(us|ms|s|m|min)?\s*$", re.IGNORECASE)
_SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def parse_rate(text: str, field: str = "--link-rate") -> int:
    """``20Mbps`` / ``50mbit`` / ``1G`` → bits per second."""
    m = _RATE.match(str(text))
    if not m:
        raise UserError(f"{field}: cannot read {text!r} as a rate; use e.g. 20Mbps, 50mbit, 1Gbps")
    bps = int(float(m.group(1)) * _SCALE[m.group(2).lower()])
    if bps < 100_000:
        raise UserError(f"{field}: {text!r} is below 100 kbit/s; use e.g. 20Mbps")
    return bps


def parse_size(text: str, field: str = "--size") -> int:
    """``20KB`` / ``1.5MB`` / ``14600`` → bytes (decimal units; ``KiB`` is binary)."""
    m = _SIZE.match(str(text))
    if not m:
        raise UserError(f"{field}: cannot read {text!r} as a size; use e.g. 14600, 20KB, 1MB")
    binary = (m.group(3) or "").lower() == "ib"
    scale = (
        {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[m.group(2).lower()]
        if binary
        else (_SCALE[m.group(2).lower()])
    )
    return int(float(m.group(1)) * scale)


def parse_duration(text: str, field: str = "--duration") -> float:
    """``60s`` / ``500ms`` / ``2min`` / ``10`` → seconds."""
    m = _TIME.match(str(text))
    if not m:
        raise UserError(f"{field}: cannot read {text!r} as a duration; use e.g. 60s, 500ms, 2min")
    unit = (m.group(2) or "s").lower()
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0}[unit]
    value = float(m.group(1)) * scale
    if value <= 0:
        raise UserError(f"{field}: must be positive, got {text!r}")
    return value


def format_rate(bps: int) -> str:
    """Human form of a rate: 20000000 → ``20Mbps``."""
    for unit, scale in (("Gbps", 10**9), ("Mbps", 10**6), ("kbps", 10**3)):
        if bps >= scale and bps % scale == 0:
            return f"{bps // scale}{unit}"
    return f"{bps}bps"
