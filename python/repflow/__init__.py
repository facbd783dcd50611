"""RepFlow: replicate short flows over ECMP to cut data-center flow completion times.

The package bundles a packet-level simulator (Rust core, :func:`simulate`), the analytical
model, the real transport library's command line, the namespace testbed and the experiment
runner. See the README and ``docs/``.
"""

from __future__ import annotations

__all__ = ["__version__", "simulate", "SimResult", "load_config"]


def __getattr__(name: str):  # lazy: importing repflow must not require the Rust core
    if name == "__version__":
        from repflow.version import package_version

        return package_version()
    if name in ("simulate", "SimResult", "load_config"):
        from repflow import api

        return getattr(api, name)
    raise AttributeError(name)
