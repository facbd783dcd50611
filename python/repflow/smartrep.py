"""SmartRep's replica table (RepNumAssign) and hash-collision measurements, from Python.

The algorithms live in the Rust simulator (``repflow_sim::smartrep``); this module reads
histories (a workload CDF or an earlier run's ``flows.parquet``) and formats results.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repflow.errors import UserError


def _core() -> Any:
    from repflow import _core

    return _core


@dataclass
class ReplicaTable:
    """RepNumAssign's result: ``extra[i]`` replicas for sizes in ``(i·unit, (i+1)·unit]``."""

    unit_bytes: int
    extra: list[int]
    weights: list[float]
    total_bytes: float
    overhead: float
    eps: float
    p: float
    max_extra: int

    def replicas_for(self, size: int) -> int:
        """Replicas (beyond the original) for a flow of ``size`` bytes."""
        b = max(1, -(-int(size) // self.unit_bytes))
        return self.extra[b - 1] if b <= len(self.extra) else 0


def _check(eps: float, p: float, paths: int) -> None:
    if not 0 < eps < 1:
        raise UserError(f"--smartrep-eps (ε): must be strictly between 0 and 1, got {eps}")
    if not 0 < p < 1:
        raise UserError(f"--large-flow-p (p): must be strictly between 0 and 1, got {p}")
    if not 1 <= paths <= 64:
        raise UserError(f"--paths: must be between 1 and 64, got {paths}")


def table(
    *,
    cdf_text: str | None = None,
    sizes: list[int] | None = None,
    eps: float = 0.03,
    p: float = 0.1,
    paths: int = 5,
    threshold: int = 100_000,
    unit_bytes: int = 1000,
) -> ReplicaTable:
    """RepNumAssign over a CDF (its exact bin probabilities) or observed sizes, with at most
    ``paths − 1`` replicas per flow."""
    _check(eps, p, paths)
    core = _core()
    try:
        d = core.sim_smartrep_table(
            eps=eps, p=p, max_extra=paths - 1, threshold=threshold, unit_bytes=unit_bytes,
            cdf_text=cdf_text, sizes=sizes,
        )  # fmt: skip
    except core.ConfigError as exc:
        raise UserError(str(exc)) from None
    return ReplicaTable(
        unit_bytes=int(d["unit_bytes"]), extra=[int(x) for x in d["extra"]],
        weights=[float(w) for w in d["weights"]], total_bytes=float(d["total_bytes"]),
        overhead=float(d["overhead"]), eps=eps, p=p, max_extra=paths - 1,
    )  # fmt: skip


def history_sizes(path: str | Path) -> list[int]:
    """Flow sizes of an earlier run: a run directory, its ``flows.parquet`` or ``run.json``."""
    from repflow.records import read_flows

    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "flows.parquet"
    elif p.name == "run.json":
        p = p.parent / "flows.parquet"
    if not p.is_file():
        raise UserError(
            f"scheme.history: '{path}' is not a run directory, flows.parquet or run.json "
            "of an earlier run"
        )
    try:
        flows = read_flows(p)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's input
        raise UserError(f"scheme.history: cannot read '{p}': {exc}") from None
    if len(flows) == 0:
        raise UserError(f"scheme.history: '{p}' holds no flows")
    return [int(s) for s in flows["size"]]


def resolve_history(config: dict[str, Any]) -> dict[str, Any]:
    """Fills ``scheme.table`` from ``scheme.history`` (an earlier run's flow sizes) for a
    SmartRep configuration that names a history but carries no table."""
    sch = config.get("scheme")
    if not isinstance(sch, dict) or not sch.get("history") or sch.get("table") is not None:
        return config
    if sch.get("name") != "smartrep":
        return config
    out = copy.deepcopy(config)
    sch = out["scheme"]
    probe = copy.deepcopy(out)
    probe["scheme"].pop("history", None)
    core = _core()
    try:
        paths = int(core.sim_disjoint_paths(json.dumps(probe)))
    except core.ConfigError:
        return config  # validation reports the real error
    defaults = json.loads(core.scheme_defaults())["smartrep"]
    from repflow.units import parse_size

    thr = sch.get("threshold", defaults["threshold"])
    if isinstance(thr, int | float):
        threshold = int(thr)
    else:
        threshold = parse_size(str(thr), "scheme.threshold")
    t = table(
        sizes=history_sizes(sch["history"]), eps=float(sch.get("eps", defaults["eps"])),
        p=float(sch.get("p", defaults["p"])), paths=paths, threshold=threshold,
    )  # fmt: skip
    sch["table"] = t.extra
    return out


def format_table(t: ReplicaTable, *, all_bins: bool = False) -> str:
    """The table as text: one line per size bin with flows (or every bin)."""
    total_w = sum(t.weights) or 1.0
    lines = [
        f"RepNumAssign: eps={t.eps:g} p={t.p:g} max replicas={t.max_extra} "
        f"(bins of {t.unit_bytes} B); replica bytes = {t.overhead:.4f} of all bytes "
        f"(budget {t.eps:g})",
        f"{'size bin (bytes)':>20} {'flows %':>8} {'replicas':>8} {'copies':>6}",
    ]
    for i, (w, x) in enumerate(zip(t.weights, t.extra, strict=True)):
        if w <= 0 and not all_bins:
            continue
        lo, hi = i * t.unit_bytes, (i + 1) * t.unit_bytes
        lines.append(f"{f'({lo}, {hi}]':>20} {100 * w / total_w:8.3f} {x:8d} {x + 1:6d}")
    return "\n".join(lines)
