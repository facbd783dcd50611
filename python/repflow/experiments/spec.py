"""Experiment specifications: a base simulator configuration and a grid, as TOML data.

A spec file looks like::

    [experiment]
    name = "my-study"                    # default output directory: runs/<name>
    title = "What this measures"

    [base]                               # any simulator configuration (docs/configuration.md)
    topology = { kind = "fat-tree", k = 8 }
    workload = { duration = "20ms" }

    [grid]                               # every combination of these values is one point
    scheme = ["tcp", "repflow"]          # labels; see [schemes]
    "workload.cdf" = ["websearch", "datamining"]
    "workload.load" = [0.2, 0.5, 0.8]
    seed = [1, 2]
    "tcp.min_rto" = ["1ms", "10ms"]      # any configuration field, by dotted path

    [schemes.repflow]                    # optional: what a scheme label means
    "scheme.name" = "repflow"            # (default: scheme.name = <label>)
    "scheme.copies" = 2

    [[exclude]]                          # optional: grid points not to run
    scheme = "repflow"                   # every point with all of these values is skipped
    "workload.cdf" = "datamining"

    [figures]                            # optional presentation settings
    baseline = "tcp"
    cdf_loads = [0.2, 0.8]

Everything is validated up front, as strictly as ``repflow sim`` validates its configuration
(see :func:`repflow.experiments.sweep.plan_sweep`): ``[base]`` alone, every grid value on top of
it, every scheme label with its overrides, then every point. An error is one line naming the
spec file, the table and the field. Only a scheme name that the project knows but this build
does not compile (:data:`PLANNED_SCHEMES`) is "not in this build"; a sweep then fails unless
``--skip-unavailable`` is given.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repflow import config_io
from repflow.errors import UserError

#: Grid axis holding scheme labels (resolved through ``[schemes]``).
SCHEME_AXIS = "scheme"
#: Grid axes the figures treat specially; any other axis becomes part of the series name.
WORKLOAD_AXIS = "workload.cdf"
LOAD_AXIS = "workload.load"
SEED_AXIS = "seed"

#: The tables of a spec, in the order the docs list them.
_TOP_ORDER = ("experiment", "base", "grid", "schemes", "workloads", "exclude", "figures")
_TOP_KEYS = set(_TOP_ORDER)
#: Keys accepted in ``[experiment]`` (``paper``: the publication; ``claims``: claim scenarios
#: of :mod:`repflow.experiments.claims` the report checks).
EXPERIMENT_KEYS = ("name", "title", "description", "paper", "claims")
#: Scheme names the project defines but a build may lack (their simulator support is pending):
#: a spec naming one is "not in this build", not an error. Every scheme of the seed papers is
#: built today, so the table is empty; a scheme whose support lands later is listed here
#: first.
PLANNED_SCHEMES: dict[str, str] = {}


@dataclass
class FigureSettings:
    """How figures and the report present a sweep."""

    #: Scheme label that improvements are measured against.
    baseline: str = "tcp"
    #: Flows of at most this many bytes are "short" (the papers' (0, 100 KB] bin).
    short_max_bytes: int = 100_000
    #: Loads at which CDFs of short-flow FCT are drawn (nearest loads in the grid).
    cdf_loads: list[float] = field(default_factory=list)
    #: Display names of workloads.
    workload_labels: dict[str, str] = field(default_factory=dict)
    #: Add the analytical model's curves where :mod:`repflow.model` provides them.
    model: bool = True


@dataclass
class Point:
    """One grid point: its axis values and its (unresolved) configuration."""

    #: Axis name → value, in grid order (scheme label for the scheme axis).
    labels: dict[str, Any]
    #: Base configuration with this point's values applied.
    config: dict[str, Any]


@dataclass
class Spec:
    """A parsed experiment specification."""

    name: str
    title: str
    description: str
    base: dict[str, Any]
    grid: dict[str, list[Any]]
    schemes: dict[str, dict[str, Any]]
    figures: FigureSettings
    #: The file's text (copied into the store so a report shows what ran).
    text: str = ""
    path: str = ""
    #: Free-form extra keys of ``[experiment]`` (e.g. ``paper``).
    extra: dict[str, Any] = field(default_factory=dict)
    #: Overrides per workload (``[workloads.<cdf>]``): applied to every point whose
    #: ``workload.cdf`` is that name, after the grid (e.g. a longer duration where flows are
    #: large and few, so that every workload's percentiles rest on enough flows).
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Grid points not to run (``[[exclude]]``): a point is skipped when its labels hold every
    #: axis = value of one rule.
    exclude: list[dict[str, Any]] = field(default_factory=list)

    def excluded(self, labels: Mapping[str, Any]) -> bool:
        """Whether a point with these grid labels matches an ``[[exclude]]`` rule."""
        return any(all(k in labels and labels[k] == v for k, v in rule.items())
                   for rule in self.exclude)  # fmt: skip

    def scheme_overrides(self, label: str) -> dict[str, Any]:
        """Dotted-path overrides that a scheme label stands for."""
        if label in self.schemes:
            return dict(self.schemes[label])
        return {"scheme.name": label}

    def points(self) -> list[Point]:
        """Every combination of the grid's values but those ``[[exclude]]`` skips, in a stable
        order."""
        axes = list(self.grid)
        out = []
        for values in itertools.product(*(self.grid[a] for a in axes)):
            cfg = copy.deepcopy(self.base)
            labels: dict[str, Any] = {}
            for axis, value in zip(axes, values, strict=True):
                labels[axis] = value
            if self.excluded(labels):
                continue
            for axis, value in labels.items():
                if axis == SCHEME_AXIS:
                    for path, v in self.scheme_overrides(value).items():
                        set_path(cfg, path, v)
                else:
                    set_path(cfg, axis, value)
            cdf = (cfg.get("workload") or {}).get("cdf")
            for path, v in self.workloads.get(str(cdf), {}).items():
                set_path(cfg, path, v)
            out.append(Point(labels=labels, config=cfg))
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able view (stored beside the results)."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "base": self.base,
            "grid": self.grid,
            "schemes": self.schemes,
            "workloads": self.workloads,
            "exclude": self.exclude,
            "figures": self.figures.__dict__,
            "extra": self.extra,
            "path": self.path,
        }


def set_path(cfg: dict[str, Any], path: str, value: Any) -> None:
    """Sets ``cfg["a"]["b"]`` to a copy of ``value`` for ``path = "a.b"``, creating tables."""
    config_io.set_path(cfg, path, copy.deepcopy(value))


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (dotted keys pass through)."""
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _err(path: str, msg: str) -> UserError:
    return UserError(f"{path}: {msg}")


def _err_at(path: str, table: str, key: str | None, msg: str) -> UserError:
    """The one format of every spec error: ``FILE: [TABLE] KEY: what is wrong; accepted: …``
    (``FILE: [TABLE]: …`` when the table itself is at fault), as the simulator's own
    validation of ``[base]``, ``[grid]`` and ``[schemes]`` values is reported."""
    return UserError(f"{path}: [{table}]{' ' + key if key else ''}: {msg}")


def unknown_field(path: str, table: str, key: str, accepted: list[str] | tuple[str, ...]
                  ) -> UserError:  # fmt: skip
    """``FILE: [TABLE] KEY: unknown field `NAME`, expected one of `a`, `b``` — the words of the
    simulator's own validation, which reports ``[base]`` and ``[schemes]`` typos."""
    listed = ", ".join(f"`{a}`" for a in accepted)
    name = key.rsplit(".", 1)[-1]
    return _err_at(path, table, key, f"unknown field `{name}`, expected one of {listed}")


def with_line(exc: UserError, path: str, text: str) -> UserError:
    """``exc`` (``FILE: [TABLE] KEY: …``) with the line of ``KEY`` (or of ``[TABLE]``) in the
    spec's ``text`` after the file's name: ``FILE:LINE: [TABLE] KEY: …``; as it was when the
    line is not known or the message names one already."""
    msg = str(exc)
    prefix = f"{path}: ["
    if not msg.startswith(prefix):
        return exc
    m = re.match(r"\[([^\]]+)\](?: ([^\s:=]+))?", msg[len(prefix) - 1 :])
    if not m:
        return exc
    lines = config_io.toml_key_lines(text)
    table, key = m.group(1), m.group(2)
    for candidate in ([f"{table}.{key}"] if key else []) + [table]:
        if candidate in lines:
            return UserError(f"{path}:{lines[candidate]}: {msg[len(path) + 2 :]}")
    return exc


def parse_spec(text: str, path: str = "<spec>") -> Spec:
    """Parses spec text; errors name the file, the line of the key when known, and the key."""
    try:
        return _parse_spec(text, path)
    except UserError as exc:
        raise with_line(exc, path, text) from None


def _parse_spec(text: str, path: str) -> Spec:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", str(exc))
        if m:
            raise _err(f"{path}:{m.group(1)}", f"not valid TOML: {str(exc)[: m.start()]} "
                       f"(column {m.group(2)})") from None  # fmt: skip
        raise _err(path, f"not valid TOML: {exc}") from None
    unknown = [k for k in data if k not in _TOP_KEYS]
    if unknown:
        raise _err_at(path, unknown[0], None, f"unknown table `{unknown[0]}`, expected one of "
                      + ", ".join(f"`{k}`" for k in _TOP_ORDER))  # fmt: skip
    exp = data.get("experiment", {})
    if not isinstance(exp, dict):
        raise _err_at(path, "experiment", None, "must be a table")
    unknown_exp = [k for k in exp if k not in EXPERIMENT_KEYS]
    if unknown_exp:
        raise unknown_field(path, "experiment", unknown_exp[0], EXPERIMENT_KEYS)
    name = exp.get("name") or Path(path).stem
    if not isinstance(name, str) or not name or "/" in name:
        raise _err_at(path, "experiment", "name", "must be a non-empty string without '/'")
    base = data.get("base", {})
    if not isinstance(base, dict):
        raise _err_at(path, "base", None, "must be a table of simulator configuration")
    # Dotted keys written as quoted strings ("tcp.min_rto" = ...) become nested tables.
    nested_base: dict[str, Any] = {}
    for k, v in flatten(base).items():
        set_path(nested_base, k, v)

    grid_raw = data.get("grid", {})
    if not isinstance(grid_raw, dict):
        raise _err_at(path, "grid", None, "must be a table of axis = [values]")
    grid: dict[str, list[Any]] = {}
    for axis, values in flatten(grid_raw).items():
        if not isinstance(values, list) or not values:
            raise _err_at(path, "grid", axis, "must be a non-empty list of values")
        if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
            raise _err_at(path, "grid", axis, "lists a value twice")
        grid[axis] = values
    if SCHEME_AXIS in grid and not all(isinstance(s, str) for s in grid[SCHEME_AXIS]):
        raise _err_at(path, "grid", SCHEME_AXIS, "must list scheme labels (strings)")

    schemes_raw = data.get("schemes", {})
    if not isinstance(schemes_raw, dict):
        raise _err_at(path, "schemes", None, "must be a table of label = { dotted.path = value }")
    schemes: dict[str, dict[str, Any]] = {}
    for label, overrides in schemes_raw.items():
        if not isinstance(overrides, dict):
            raise _err_at(path, f"schemes.{label}", None,
                          "must be a table of configuration overrides")  # fmt: skip
        schemes[label] = flatten(overrides)
    for label in grid.get(SCHEME_AXIS, []):
        head = label.split(".")[0]
        if "." in label and label not in schemes and head in schemes:
            raise _err_at(
                path, "grid", SCHEME_AXIS,
                f"lists {label!r} but [schemes] defines {head!r}: TOML reads the dots "
                f'of a bare table name as nesting; quote the label: [schemes."{label}"]',
            )  # fmt: skip

    wl_raw = data.get("workloads", {})
    if not isinstance(wl_raw, dict):
        raise _err(path, "[workloads] must be a table of cdf = { dotted.path = value }")
    cdfs = {str(c) for c in grid.get("workload.cdf", [])}
    base_cdf = (nested_base.get("workload") or {}).get("cdf")
    if base_cdf is not None:
        cdfs.add(str(base_cdf))
    workloads: dict[str, dict[str, Any]] = {}
    for wname, overrides in wl_raw.items():
        if not isinstance(overrides, dict):
            raise _err(path, f"[workloads.{wname}] must be a table of configuration overrides")
        if wname not in cdfs:
            raise _err(path, f"[workloads.{wname}]: no point runs workload {wname!r}; "
                             f"the spec's workloads: {', '.join(sorted(cdfs)) or 'none'}")
        workloads[wname] = flatten(overrides)

    exclude = _parse_exclude(data.get("exclude", []), grid, path)

    fig_raw = data.get("figures", {})
    if not isinstance(fig_raw, dict):
        raise _err_at(path, "figures", None, "must be a table of presentation settings")
    figs = FigureSettings()
    for k, v in fig_raw.items():
        if k not in figs.__dict__:
            raise unknown_field(path, "figures", k, list(figs.__dict__))
        setattr(figs, k, v)
    if not isinstance(figs.short_max_bytes, int) or figs.short_max_bytes <= 0:
        raise _err_at(path, "figures", "short_max_bytes", "must be a positive integer (bytes)")

    extra = {k: v for k, v in exp.items() if k not in ("name", "title", "description")}
    return Spec(
        name=name,
        title=str(exp.get("title", name)),
        description=str(exp.get("description", "")),
        base=nested_base,
        grid=grid,
        schemes=schemes,
        figures=figs,
        text=text,
        path=path,
        extra=extra,
        workloads=workloads,
        exclude=exclude,
    )


def _parse_exclude(raw: Any, grid: Mapping[str, list[Any]], path: str) -> list[dict[str, Any]]:
    """``[[exclude]]`` rules: each a table of grid axis = one of that axis's values."""
    if not isinstance(raw, list) or not all(isinstance(r, dict) for r in raw):
        raise _err(path, "[[exclude]] must be an array of tables of axis = value")
    rules = []
    for i, rule in enumerate(raw):
        flat = flatten(rule)
        if not flat:
            raise _err(path, f"[[exclude]] #{i + 1} is empty: it would skip every point")
        for axis, value in flat.items():
            if axis == SEED_AXIS:
                raise _err(path, f"[[exclude]] #{i + 1}: seeds cannot be excluded (a run's "
                                 "seeds move with --seed-offset); list fewer seeds instead")
            if axis not in grid:
                raise _err(path, f"[[exclude]] #{i + 1}: `{axis}` is not a grid axis; the "
                                 f"grid's axes: {', '.join(grid) or 'none'}")
            if value not in grid[axis]:
                raise _err(path, f"[[exclude]] #{i + 1}: {axis} = {value!r} is not in the "
                                 f"grid's values {grid[axis]!r}")
        rules.append(flat)
    return rules


def check_grid_keys(spec: Spec) -> None:
    """Raises the spec's one-line error for a grid axis that names no configuration field
    (blaming the key, not one of its values)."""
    ordered = config_io.known_keys()
    known = set(ordered)
    defaults = config_io.default_config()
    for axis in spec.grid:
        if axis == SCHEME_AXIS or axis in known or axis in defaults:
            continue
        section, _, rest = axis.partition(".")
        if isinstance(defaults.get(section), dict) and rest:
            accepted = [k.split(".", 1)[1] for k in ordered if k.startswith(section + ".")]
        else:
            accepted = list(defaults)
        raise unknown_field(spec.path, "grid", axis, accepted)


def check_scheme_labels(spec: Spec) -> None:
    """Raises the spec's one-line error for a ``[schemes.LABEL]`` table whose label the grid's
    scheme axis does not list (a typo there would otherwise be silently ignored)."""
    labels = spec.grid.get(SCHEME_AXIS, [])
    for label in spec.schemes:
        if label not in labels:
            listed = ", ".join(f"`{x}`" for x in labels)
            why = (
                f"unknown scheme label `{label}`, expected one of the labels of [grid] scheme: "
                f"{listed}"
                if labels
                else f"unused scheme label `{label}`: [grid] has no scheme axis"
            )
            raise _err_at(spec.path, f"schemes.{label}", None, why)


def load_spec(path: str | Path) -> Spec:
    """Reads and parses a spec file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{p}: cannot read experiment spec ({exc.strerror})") from None
    return parse_spec(text, str(p))


def find_builtin_spec(name: str) -> Path:
    """Locates ``experiments/<name>.toml``: in the working directory, else in the repository
    this package was installed from (editable installs)."""
    candidates = [Path.cwd() / "experiments" / f"{name}.toml"]
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidates.append(parent / "experiments" / f"{name}.toml")
    for c in candidates:
        if c.is_file():
            return c
    raise UserError(
        f"experiment spec '{name}.toml' not found in ./experiments/ or the source tree; "
        "run from the repository root or pass --spec FILE"
    )
