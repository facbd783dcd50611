"""Rates, sizes and durations: the Rust unit grammar, wrapped once for every Python front end.

Parsing is done once, in Rust (``repflow_sim::units`` through ``repflow._core``); the grammar
(``"50ms"``, ``"1Gbps"``, ``"10Gb/s"``, ``"100KB"``, ``"64KiB"``) is documented in
``docs/configuration.md``. A bare number (``"10"``, ``10``, ``0``) is refused everywhere with
a one-line message suggesting the unit most likely meant (:func:`no_unit_message`): in a field
such as a minimum RTO, "10" means seconds to some readers and milliseconds to others. Two
kinds of callers:

- code reading a resolved configuration (experiments): :func:`seconds`,
  :func:`bits_per_second`, :func:`size_bytes` return floats and raise :class:`ValueError`;
- command-line arguments (testbed, library): :func:`parse_rate`, :func:`parse_size`,
  :func:`parse_duration` add the flag name to the message, raise
  :class:`~repflow.errors.UserError`, and apply the testbed's bounds (durations above zero,
  rates of at least 100 kbit/s).

And the reverse, for people: :func:`format_rate`, :func:`fmt_seconds`, :func:`fmt_time`.
"""

from __future__ import annotations

import math
import re

from repflow.errors import UserError, require_core

#: The phrase every front end's message for a quantity without a unit contains (the Rust
#: core's ``units::bare_number``), followed by the suggested value.
NO_UNIT = "has no unit: give one, e.g. "

#: Units a suggestion picks from, per kind, with their value in the base unit.
_UNITS: dict[str, tuple[tuple[str, float], ...]] = {
    "duration": (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)),
    "rate": (("Gbps", 1e9), ("Mbps", 1e6), ("kbps", 1e3), ("bps", 1.0)),
    "size": (("B", 1.0), ("KB", 1e3), ("MB", 1e6), ("GB", 1e9)),
}
_KIND_OF_UNIT = {u: kind for kind, units in _UNITS.items() for u, _ in units}
_PARSER = {"duration": "parse_duration", "rate": "parse_rate", "size": "parse_bytes"}
_NO_UNIT_RE = re.compile(r"'(?P<num>[^']*)' " + re.escape(NO_UNIT) + r"(?P<suggested>\S+)")


def suggest_unit(number: str, like: object = None) -> str | None:
    """The value a reader most likely meant by the bare ``number`` in a field whose default
    (or a typical value) is ``like`` (e.g. ``"10ms"``): the number with the unit that puts it
    nearest ``like`` (``10`` like ``"10ms"`` → ``"10ms"``; ``1000`` like ``"1Gbps"`` →
    ``"1000Mbps"``; ``0`` → ``like``'s own unit). ``None`` when ``like`` is not a quantity."""
    if not isinstance(like, str):
        return None
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([A-Za-zµ/]+)\s*", like)
    if not m:
        return None
    kind = _KIND_OF_UNIT.get(m.group(2))
    if kind is None:
        try:
            float(require_core().parse_duration(like))
            kind = "duration"
        except (ValueError, UserError):
            return None
    try:
        target = float(getattr(require_core(), _PARSER[kind])(like))
        v = float(number)
    except (ValueError, UserError):
        return None
    own = m.group(2) if m.group(2) in _KIND_OF_UNIT else _UNITS[kind][0][0]
    if v <= 0 or target <= 0 or not math.isfinite(v):
        return f"{number}{own}"
    best = min(_UNITS[kind], key=lambda u: (abs(math.log10(v * u[1] / target)), u[0] != own))
    return f"{number}{best[0]}"


def no_unit(message: str) -> tuple[str, str] | None:
    """``(number, suggested)`` when ``message`` is the core's refusal of a bare number."""
    m = _NO_UNIT_RE.search(message)
    return (m.group("num"), m.group("suggested")) if m else None


def no_unit_message(where: str, number: str, suggested: str, quote: bool = False) -> str:
    """The one message for a quantity without a unit: ``--min-rto 10: give a unit, e.g.
    10ms`` (``where`` is a flag, ``--set key=`` or ``FILE:LINE: key =``; ``quote`` writes the
    suggestion as a TOML/JSON string, ``"10ms"``)."""
    shown = f'"{suggested}"' if quote else suggested
    sep = "" if where.endswith("=") and not where.endswith(" =") else " "
    return f"{where}{sep}{number}: give a unit, e.g. {shown}"

# --- a resolved configuration's quantities as numbers (ValueError) ---------------------------


def seconds(value: object) -> float:
    """``"50ms"`` → 0.05 (a bare number is refused). Raises :class:`ValueError`."""
    return float(require_core().parse_duration(value))


def bits_per_second(value: object) -> float:
    """``"1Gbps"`` / ``"10Gb/s"`` → 1e9 / 1e10 (a bare number is refused). Raises
    :class:`ValueError`."""
    return float(require_core().parse_rate(value))


def size_bytes(value: object) -> float:
    """``"100KB"`` → 100000, ``"64KiB"`` → 65536 (a bare number is refused). Raises
    :class:`ValueError`."""
    return float(require_core().parse_bytes(value))


# --- command-line arguments (UserError naming the flag) ---------------------------------------


def _parse(kind: str, text: object, field: str, like: object = None) -> float:
    core = require_core()
    try:
        return getattr(core, kind)(text)
    except ValueError as exc:
        bare = no_unit(str(exc))
        if bare is not None:
            number, suggested = bare
            suggested = suggest_unit(number, like) or suggested
            raise UserError(no_unit_message(field, number, suggested)) from None
        raise UserError(f"{field}: {exc}") from None


def parse_rate(text: str, field: str = "--link-rate", like: object = None) -> int:
    """``20Mbps`` / ``50Mbit`` / ``10Gb/s`` / ``1G`` → bits per second (at least 100 kbit/s).
    A bare number is refused, suggesting the unit nearest ``like`` (the flag's default)."""
    bps = int(_parse("parse_rate", text, field, like))
    if bps < 100_000:
        raise UserError(f"{field}: {text!r} is below 100 kbit/s; use e.g. 20Mbps")
    return bps


def parse_size(text: str, field: str = "--size", like: object = None) -> int:
    """``20KB`` / ``1.5MB`` / ``14600B`` → bytes (decimal units; ``KiB`` is binary). A bare
    number is refused, suggesting the unit nearest ``like`` (the flag's default)."""
    return int(_parse("parse_bytes", text, field, like))


def parse_duration(
    text: str, field: str = "--duration", like: object = None, zero: bool = False
) -> float:
    """``60s`` / ``500ms`` / ``2min`` → seconds (``2m`` is refused as ambiguous, a bare number
    as unitless, suggesting the unit nearest ``like``, the flag's default). Above zero unless
    ``zero`` (then ``0s`` is accepted; ``0`` has no unit like any bare number)."""
    value = float(_parse("parse_duration", text, field, like))
    if value < 0 or (value == 0 and not zero):
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
