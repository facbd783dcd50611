"""Errors that reach the user as one clear line (exit code 2), never a traceback."""

from __future__ import annotations

from types import ModuleType


class UserError(Exception):
    """Bad input or an unusable environment, explained in one line.

    The message names the field, file or feature at fault and what would be accepted.
    The CLI prints it as ``repflow: error: <message>`` and exits with status 2.
    """


def require_core() -> ModuleType:
    """The Rust extension ``repflow._core``, or a :class:`UserError` saying how to build it."""
    try:
        from repflow import _core
    except ImportError as exc:  # pragma: no cover - broken install
        raise UserError(
            "the Rust core (repflow._core) is not built; run `pip install -e .` in the repository"
        ) from exc
    return _core
