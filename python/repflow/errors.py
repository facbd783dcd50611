"""Errors that reach the user as one clear line (exit code 2), never a traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input or an unusable environment, explained in one line.

    The message names the field, file or feature at fault and what would be accepted.
    The CLI prints it as ``repflow: error: <message>`` and exits with status 2.
    """
