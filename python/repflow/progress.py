"""Live progress that suits where it goes: a tqdm bar on a terminal, plain periodic lines in a
log file.

A bar redraws itself with carriage returns; written to a file (``repflow sim … > log 2>&1``)
those frames pile up on one long line, a bar closed with ``leave=False`` leaves the cursor in the
middle of it, and whatever is printed next lands on the bar's line. So every progress display of
the project goes through :func:`bar`: when its stream is not a terminal it gets a
:class:`LineBar`, which writes one whole line (ending in a newline, never a ``\\r``) at most every
:data:`LINE_INTERVAL` seconds, and nothing else.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

#: Seconds between two progress lines when the output is not a terminal.
LINE_INTERVAL = 30.0


def is_terminal(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default: standard error) is a terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed, or not a real file
        return False


def _fmt(v: float) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


class LineBar:
    """The parts of tqdm's interface the project uses (``update``, ``n``, ``total``,
    ``set_postfix``, ``set_postfix_str``, ``refresh``, ``write``, ``close``), printing a plain
    line (``DESC: N/TOTAL UNIT (P %), key=value, … [elapsed]``) at most every ``interval``
    seconds, and once more on ``close`` when anything changed since the last line."""

    def __init__(self, total: float | None = None, initial: float = 0, unit: str = "it",
                 desc: str = "", file: TextIO | None = None, disable: bool = False,
                 interval: float | None = None, **_ignored: Any) -> None:  # fmt: skip
        self.total = total
        self.n = initial
        self.unit = unit
        self.desc = desc
        self.file = file
        self.disable = disable
        self.interval = LINE_INTERVAL if interval is None else interval
        self.postfix = ""
        self.start = time.monotonic()
        self._last_line = self.start
        self._last_text = ""

    def _stream(self) -> TextIO:
        return self.file if self.file is not None else sys.stderr

    def text(self) -> str:
        """The line as it would be printed now."""
        done = _fmt(self.n)
        if self.total:
            pct = 100.0 * float(self.n) / float(self.total)
            done = f"{done}/{_fmt(self.total)} {self.unit} ({pct:.0f} %)"
        else:
            done = f"{done} {self.unit}"
        extra = f", {self.postfix}" if self.postfix else ""
        elapsed = time.monotonic() - self.start
        return f"{self.desc + ': ' if self.desc else ''}{done}{extra} [{elapsed:.0f} s]"

    def _emit(self) -> None:
        line = self.text()
        self._last_text = line.rsplit(" [", 1)[0]
        self._last_line = time.monotonic()
        print(line, file=self._stream(), flush=True)

    def refresh(self) -> None:
        """Prints a line if ``interval`` seconds passed since the last one."""
        if not self.disable and time.monotonic() - self._last_line >= self.interval:
            self._emit()

    def update(self, n: float = 1) -> None:
        self.n += n
        self.refresh()

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> None:
        items = dict(ordered_dict or {}, **kwargs)
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())
        if refresh:
            self.refresh()

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = s
        if refresh:
            self.refresh()

    def write(self, s: str, file: TextIO | None = None, **_ignored: Any) -> None:
        print(s, file=file if file is not None else self._stream(), flush=True)

    def close(self) -> None:
        """A last line when something happened since the previous one (not for a bar that
        closes before its first interval: short runs print nothing)."""
        if self.disable:
            return
        self.disable = True
        long_enough = time.monotonic() - self.start >= self.interval
        if long_enough and self.text().rsplit(" [", 1)[0] != self._last_text:
            print(self.text(), file=self._stream(), flush=True)


def bar(**kwargs: Any) -> Any:
    """A tqdm bar when its ``file`` (default standard error) is a terminal, else a
    :class:`LineBar` taking the same arguments."""
    stream = kwargs.get("file") or sys.stderr
    if is_terminal(stream):
        from tqdm import tqdm

        return tqdm(**kwargs)
    return LineBar(**kwargs)
