"""The installed package's version (``0.0.0+source`` when run from a source tree).

Read on first use of ``__version__`` (``importlib.metadata`` alone takes ~30 ms to import,
paid twice by a command that restarts itself with huge pages): from the Rust core when it
loads — maturin builds the package with the core's crate version, so the two are one number —
else from the installed distribution's metadata.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def package_version() -> str:
    """The package's version."""
    try:
        from repflow import _core

        return str(_core.core_version())
    except ImportError:
        pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("repflow")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0+source"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return package_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
