"""Run configurations as files and command-line flags.

One schema (the Rust ``repflow_sim::Config``, documented in ``docs/configuration.md``) reaches
the simulator three ways: a TOML file (``--config run.toml``), the ``repflow sim`` shorthand
flags, and generic ``--set section.key=value`` overrides. This module turns each into the
nested ``dict`` the schema describes, merges them (defaults < file < flags < ``--set``),
resolves the flow-size CDF into ``workload.cdf_text`` and validates the result with the Rust
core, so that every error is one line naming the field (or file) and what is accepted.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from repflow.errors import UserError, require_core

#: Sections of the schema, in the order they are written to TOML files.
SECTIONS: tuple[str, ...] = ("topology", "queue", "routing", "tcp", "workload", "scheme")


def _core():
    return require_core()


def default_config() -> dict[str, Any]:
    """The default configuration (every field), as the Rust core defines it."""
    return json.loads(_core().default_config())


def scheme_parameters() -> dict[str, dict[str, Any]]:
    """Every scheme's parameters with their defaults, ``{name: {parameter: default}}``, as
    the Rust core's scheme registry defines them (a scheme takes only its own parameters)."""
    return json.loads(_core().scheme_defaults())


def _scheme_keys() -> list[str]:
    """``name`` and every parameter of any scheme, in registry order."""
    keys = ["name"]
    for params in scheme_parameters().values():
        keys.extend(k for k in params if k not in keys)
    return keys


# --------------------------------------------------------------------------------------------
# TOML


def toml_key_lines(text: str) -> dict[str, int]:
    """The line (1-based) on which each dotted key of TOML ``text`` is assigned or its table
    opens: ``[tcp]`` then ``min_rto = "10ms"`` gives ``{"tcp": 1, "tcp.min_rto": 2}``; the keys
    of an inline table on one line (``tcp = { min_rto = "10ms" }``) get that line. A scan of
    the common forms, for error messages (``tomllib`` keeps no positions)."""

    def parts(key: str) -> list[str]:
        return [k.strip().strip('"').strip("'") for k in re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+',
                                                                    key)]  # fmt: skip

    lines: dict[str, int] = {}
    prefix: list[str] = []
    for n, line in enumerate(text.splitlines(), start=1):
        header = re.match(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$", line)
        if header:
            prefix = parts(header.group(1))
            lines.setdefault(".".join(prefix), n)
            continue
        assign = re.match(r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_.\- ])+?)\s*=(.*)$""", line)
        if not assign:
            continue
        key = prefix + parts(assign.group(1))
        lines.setdefault(".".join(key), n)
        rest = assign.group(2).strip()
        if rest.startswith("{"):
            for inner in re.findall(r"""[{,]\s*("[^"]*"|'[^']*'|[A-Za-z0-9_\-]+)\s*=""", rest):
                lines.setdefault(".".join(key + parts(inner)), n)
    return lines


def _leaf_keys(data: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for k, v in data.items():
        key = f"{prefix}{k}"
        out.append(key)
        if isinstance(v, Mapping):
            out.extend(_leaf_keys(v, key + "."))
    return out


@dataclass(frozen=True)
class Origin:
    """Where a configuration value came from, for error messages."""

    #: ``"file"``, ``"flag"`` or ``"set"``.
    kind: str
    #: ``run.toml:3`` (a file, with the line when known), ``--min-rto``, ``--set``.
    label: str
    #: The text as given (a flag's or ``--set``'s value).
    raw: str | None = None


def load_toml_with_origins(
    path: str | os.PathLike[str], flag: str | None = None
) -> tuple[dict[str, Any], dict[str, Origin]]:
    """:func:`load_toml`, and the origin (``FILE:LINE``) of every key it read."""
    data = load_toml(path, flag)
    p = Path(path)
    try:
        lines = toml_key_lines(p.read_text(encoding="utf-8")) if p.suffix != ".json" else {}
    except (OSError, UnicodeDecodeError):  # pragma: no cover - read a moment ago
        lines = {}
    origins = {
        key: Origin("file", f"{p}:{lines[key]}" if key in lines else str(p))
        for key in _leaf_keys(data)
    }
    return data, origins


def _toml_error(p: Path, exc: tomllib.TOMLDecodeError) -> UserError:
    """``FILE:LINE: not valid TOML: …`` from tomllib's ``… (at line N, column M)``."""
    msg = str(exc)
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", msg)
    if m:
        return UserError(f"{p}:{m.group(1)}: not valid TOML: {msg[: m.start()]} "
                         f"(column {m.group(2)})")  # fmt: skip
    return UserError(f"{p}: not valid TOML: {msg}")


def load_toml(path: str | os.PathLike[str], flag: str | None = None) -> dict[str, Any]:
    """Reads a run configuration from a TOML file (or from a ``run.json`` of an earlier run,
    whose ``config`` it returns, so ``repflow sim --config runs/x/run.json`` reruns ``x``).

    A relative ``workload.cdf`` that names a file (not a built-in workload) is taken relative
    to the configuration file's directory. Raises :class:`UserError` naming the file when it
    cannot be read or parsed (prefixed with ``flag``, e.g. ``--config``, when the path came
    from a command-line flag).
    """
    p = Path(path)
    what = f"{flag}: file" if flag else "configuration file"
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{what} '{p}' does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{what} '{p}': cannot read it: {exc}") from None
    data: Any
    lines: dict[str, int] = {}
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(
                f"{p}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})"
            ) from None
        if isinstance(data, dict) and isinstance(data.get("config"), dict):
            data = data["config"]
        if not isinstance(data, dict):
            raise UserError(f"{p}: expected a JSON object with the configuration")
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise _toml_error(p, exc) from None
        lines = toml_key_lines(text)
    check_keys(data, str(p), lines)
    wl = data.get("workload")
    if isinstance(wl, dict) and isinstance(wl.get("cdf"), str) and wl.get("cdf_text") is None:
        cdf = wl["cdf"]
        if not _is_builtin(cdf) and not Path(cdf).expanduser().is_absolute():
            wl["cdf"] = str((p.parent / Path(cdf).expanduser()).resolve())
    return data


def dumps_toml(config: Mapping[str, Any]) -> str:
    """Writes a configuration as TOML text (with ``tomli-w``) that means the same configuration.

    Top-level values come first, then the sections in :data:`SECTIONS` order; tables nest to
    any depth and lists of tables (``workload.trace``) become arrays of tables. TOML has no
    null: an unset optional field (``None``) is left out when its default is unset too, and
    written as ``"none"`` when the default is a value (``tcp.max_window``), which the schema
    reads back as unset.
    """
    import tomli_w

    try:
        defaults: Any = default_config()
    except UserError:  # pragma: no cover - no core
        defaults = {}

    def clean(value: Any, default: Any, where: str) -> Any:
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for k, v in value.items():
                d = default.get(k) if isinstance(default, Mapping) else None
                if v is None:
                    if d is not None:
                        out[str(k)] = "none"
                    continue
                out[str(k)] = clean(v, d, f"{where}.{k}" if where else str(k))
            return out
        if isinstance(value, list | tuple):
            if any(v is None for v in value):
                raise TypeError(f"{where}: a list holding null cannot be written to TOML")
            return [clean(v, None, where) for v in value]
        return value

    doc = clean(config, defaults, "")
    order = {name: i for i, name in enumerate(SECTIONS)}
    tables = sorted((k for k, v in doc.items() if isinstance(v, dict)),
                    key=lambda k: order.get(k, len(order)))  # fmt: skip
    ordered = {k: v for k, v in doc.items() if not isinstance(v, dict)}
    ordered.update((k, doc[k]) for k in tables)
    return tomli_w.dumps(ordered)


# --------------------------------------------------------------------------------------------
# Merging and --set overrides


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merges ``override`` into a copy of ``base`` (tables merge, values replace)."""
    out = copy.deepcopy(dict(base))
    for k, v in override.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def set_path(config: dict[str, Any], dotted: str, value: Any) -> None:
    """Sets ``config[a][b] = value`` for ``dotted == "a.b"``, creating tables as needed."""
    parts = dotted.split(".")
    node = config
    for p in parts[:-1]:
        nxt = node.get(p)
        if not isinstance(nxt, dict):
            nxt = {}
            node[p] = nxt
        node = nxt
    node[parts[-1]] = value


def known_keys() -> list[str]:
    """Every dotted key of the schema (``seed``, ``topology.k``, ...)."""
    keys: list[str] = []
    for k, v in default_config().items():
        if k == "scheme":
            keys.extend(f"scheme.{kk}" for kk in _scheme_keys())
        elif isinstance(v, dict):
            keys.extend(f"{k}.{kk}" for kk in v)
        else:
            keys.append(k)
    return keys


def check_keys(
    config: Mapping[str, Any], source: str, lines: Mapping[str, int] | None = None
) -> None:
    """Raises :class:`UserError` naming ``source`` for the first key not in the schema (and
    the line, ``source:LINE``, when ``lines`` gives the key's, see :func:`toml_key_lines`)."""
    defaults = default_config()

    def at(key: str) -> str:
        return f"{source}:{lines[key]}" if lines and key in lines else source

    for k, v in config.items():
        if k not in defaults:
            accepted = ", ".join(defaults)
            raise UserError(f"{at(k)}: unknown key '{k}' (accepted: {accepted})")
        if isinstance(defaults[k], dict):
            if not isinstance(v, Mapping):
                raise UserError(f"{at(k)}: '{k}' must be a table ([{k}])")
            if k == "scheme":
                continue  # which keys a scheme takes depends on its name: the core checks
            for kk in v:
                if kk not in defaults[k]:
                    accepted = ", ".join(defaults[k])
                    raise UserError(
                        f"{at(f'{k}.{kk}')}: unknown key '{k}.{kk}' (accepted in [{k}]: "
                        f"{accepted})"
                    )


def parse_value(text: str) -> Any:
    """Reads a ``--set`` value: a TOML literal (``8``, ``0.5``, ``true``, ``"x"``) if it is
    one, ``none``/``null`` for an unset optional field, otherwise the text as a string (so
    ``10ms`` and ``1Gbps`` need no quotes)."""
    t = text.strip()
    if t.lower() in ("none", "null"):
        return None
    try:
        return tomllib.loads(f"v = {t}")["v"]
    except tomllib.TOMLDecodeError:
        return t


def apply_sets(config: dict[str, Any], assignments: Iterable[str]) -> dict[str, Any]:
    """Applies ``key.path=value`` overrides in order; unknown keys are a :class:`UserError`."""
    keys = None
    assignments = list(assignments)
    if not assignments:
        return dict(config)  # nothing to set: no deep copy of a trace of thousands of flows
    out = copy.deepcopy(config)
    for item in assignments:
        if "=" not in item:
            raise UserError(
                f"--set: '{item}' is not of the form key.path=value (e.g. tcp.min_rto=1ms)"
            )
        key, _, raw = item.partition("=")
        key = key.strip()
        if keys is None:
            keys = known_keys()
        if key not in keys:
            section = key.split(".")[0]
            near = [k for k in keys if k.split(".")[0] == section and "." in k]
            hint = ", ".join(near) if near else ", ".join(sorted({k.split(".")[0] for k in keys}))
            raise UserError(f"--set: unknown key '{key}' (accepted: {hint})")
        set_path(out, key, parse_value(raw))
    return out


# --------------------------------------------------------------------------------------------
# Command-line flags


def _int(text: str) -> int:
    return int(text.strip())


def _float(text: str) -> float:
    v = float(text.strip())
    return v


@dataclass(frozen=True)
class Flag:
    """A ``repflow sim`` shorthand flag and the schema field it sets."""

    #: Option string, e.g. ``--k``.
    option: str
    #: Dotted schema key, e.g. ``topology.k``.
    key: str
    #: Help text.
    help: str
    #: Converts the flag's text to the schema value (``None``: keep the text; quantities
    #: with units are parsed by the Rust core, which names the field on error).
    convert: Callable[[str], Any] | None = None
    #: What the converter accepts, for its error message.
    accepted: str = ""
    #: A switch without a value that sets ``key`` to this constant.
    const: Any = None
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return "flag_" + self.option.lstrip("-").replace("-", "_")


#: Every shorthand flag of ``repflow sim``, in ``--help`` order.
FLAGS: tuple[Flag, ...] = (
    Flag("--topology", "topology.kind", "fat-tree, leaf-spine, star or toy", metavar="KIND"),
    Flag("--k", "topology.k", "fat-tree arity (even, >= 4)", _int, "an even integer >= 4",
         metavar="K"),
    Flag("--leaves", "topology.leaves", "leaf-spine: leaves", _int, "a positive integer",
         metavar="N"),
    Flag("--spines", "topology.spines", "leaf-spine: spines", _int, "a positive integer",
         metavar="N"),
    Flag("--hosts-per-leaf", "topology.hosts_per_leaf", "leaf-spine: hosts per leaf", _int,
         "a positive integer", metavar="N"),
    Flag("--hosts", "topology.hosts", "star: number of hosts", _int, "an integer >= 2",
         metavar="N"),
    Flag("--link-rate", "topology.link_rate", "rate of every link, e.g. 1Gbps", metavar="RATE"),
    Flag("--uplink-rate", "topology.uplink_rate", "rate of switch-to-switch links",
         metavar="RATE"),
    Flag("--link-delay", "topology.link_delay", "propagation delay per link, e.g. 2us",
         metavar="TIME"),
    Flag("--buffer", "queue.limit_packets", "switch port DropTail limit in packets", _int,
         "a positive integer (packets)", metavar="PKTS"),
    Flag("--buffer-bytes", "queue.limit_bytes", "switch port DropTail limit in bytes, e.g. 36KB",
         metavar="SIZE"),
    Flag("--hash", "routing.hash", "ECMP hash: default, crc16 or crc32", metavar="HASH"),
    Flag("--min-rto", "tcp.min_rto", "minimum TCP retransmission timeout, e.g. 10ms",
         metavar="TIME"),
    Flag("--init-cwnd", "tcp.init_cwnd", "initial congestion window in segments", _int,
         "a positive integer (segments)", metavar="SEGS"),
    Flag("--no-handshake", "tcp.handshake", "send data without a SYN/SYN-ACK exchange",
         const=False),
    Flag("--delayed-ack", "tcp.delayed_ack", "acknowledge every second segment", const=True),
    Flag("--workload", "workload.cdf", "built-in workload name or CDF file path",
         metavar="NAME|PATH"),
    Flag("--load", "workload.load", "offered load, 0 < load < 1", _float,
         "a number strictly between 0 and 1", metavar="RHO"),
    Flag("--duration", "workload.duration", "arrival period, e.g. 50ms", metavar="TIME"),
    Flag("--drain", "workload.drain", "longest drain after the last arrival", metavar="TIME"),
    Flag("--pairs", "workload.pairs", "host pairs: random or inter-pod", metavar="PATTERN"),
    Flag("--max-flows", "workload.max_flows", "cap on the number of flows", _int,
         "a positive integer", metavar="N"),
    Flag("--scheme", "scheme.name",
         "transport scheme: tcp, repflow, repflow-hca, smartrep, fullrep, ...", metavar="NAME"),
    Flag("--threshold", "scheme.threshold", "replicate flows of at most this size, e.g. 100KB",
         metavar="SIZE"),
    Flag("--copies", "scheme.copies", "copies of a replicated flow (original included)", _int,
         "an integer from 1 to 64", metavar="N"),
    Flag("--cancel", "scheme.cancel", "stop the other copies once one completes", const=True),
    Flag("--seed", "seed", "master seed", _int, "a non-negative integer", metavar="N"),
)  # fmt: skip

_FLAG_BY_KEY = {f.key: f for f in FLAGS}


def one_line_errors(parser: argparse.ArgumentParser) -> None:
    """Makes ``parser`` report usage errors in one line (exit 2) and accept values that start
    with a minus sign (``--link-rate -1Gbps``), so that the schema check can name the field."""

    def error(message: str) -> NoReturn:
        parser.exit(2, f"repflow: error: {message} (see `{parser.prog} --help`)\n")

    parser.error = error  # type: ignore[method-assign]
    # argparse reads "-1Gbps" as an unknown option unless it looks like a negative number.
    if hasattr(parser, "_negative_number_matcher"):
        parser._negative_number_matcher = re.compile(r"^-\.?\d")


def _shown(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def scheme_default_text(key: str, schemes: Mapping[str, Mapping[str, Any]]) -> str | None:
    """A scheme parameter's default as ``--help`` states it: per scheme, grouped by value,
    as ``--dump-config --scheme NAME`` resolves it (``100KB for repflow, smartrep; 1MB for
    mptcp-l``); None when no scheme takes ``key``."""
    by_value: dict[str, list[str]] = {}
    for name, params in schemes.items():
        if key in params:
            by_value.setdefault(_shown(params[key]), []).append(name)
    if not by_value:
        return None
    return "; ".join(f"{value} for {', '.join(names)}" for value, names in by_value.items())


def flag_defaults() -> dict[str, str]:
    """The default of every field a shorthand flag sets, as ``--help`` shows it and
    ``--dump-config`` resolves it (a scheme parameter: per scheme, see
    :func:`scheme_default_text`); {} without the core."""
    try:
        cfg = default_config()
        schemes = scheme_parameters()
    except UserError:  # pragma: no cover - no core: help without defaults
        return {}
    out: dict[str, str] = {}
    for f in FLAGS:
        section, _, key = f.key.rpartition(".")
        if section == "scheme" and key != "name":
            text = scheme_default_text(key, schemes)
            if text is not None:
                out[f.key] = text
            continue
        node = cfg.get(section, {}) if section else cfg
        if isinstance(node, dict) and key in node:
            out[f.key] = _shown(node[key])
    return out


def add_flags(parser: argparse.ArgumentParser | Any) -> None:
    """Adds every shorthand flag of :data:`FLAGS` to ``parser`` (values stay text; they are
    converted and checked by :func:`flag_overrides`)."""
    defaults = flag_defaults()
    for f in FLAGS:
        help_text = f"{f.help} [{f.key}]"
        if f.key in defaults:
            help_text += f" (default: {defaults[f.key]})".replace("%", "%%")
        if f.const is not None:
            parser.add_argument(f.option, dest=f.dest, action="store_const", const=f.const,
                                default=None, help=help_text)  # fmt: skip
        else:
            parser.add_argument(f.option, dest=f.dest, default=None, metavar=f.metavar,
                                help=help_text)  # fmt: skip


def flag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The nested config fragment set by the shorthand flags present in ``args``."""
    out: dict[str, Any] = {}
    for f in FLAGS:
        raw = getattr(args, f.dest, None)
        if raw is None:
            continue
        value: Any = raw
        if f.const is None and f.convert is not None:
            try:
                value = f.convert(raw)
            except ValueError:
                raise UserError(
                    f"{f.key} ({f.option}): '{raw}' is not valid; accepted: {f.accepted}"
                ) from None
        set_path(out, f.key, value)
    return out


def flag_for(key: str) -> str | None:
    """The shorthand flag that sets dotted ``key``, if any."""
    f = _FLAG_BY_KEY.get(key)
    return f.option if f else None


# --------------------------------------------------------------------------------------------
# CDF resolution and validation


def _is_builtin(name: str) -> bool:
    try:
        return any(n == name for n, _ in _core().builtin_workloads())
    except UserError:  # pragma: no cover - no core
        return False


def builtin_names() -> list[str]:
    """Names of the built-in workloads."""
    return [n for n, _ in _core().builtin_workloads()]


def resolve_cdf(config: dict[str, Any]) -> dict[str, Any]:
    """Fills ``workload.cdf_text`` from ``workload.cdf`` (a built-in name or a file path).

    A configuration that already carries ``cdf_text`` is left as it is. A missing,
    unreadable or malformed file raises :class:`UserError` naming the file.
    """
    core = _core()
    # Only `workload` is written below: it alone is copied (a trace of thousands of flows
    # deep-copied took 0.3 s of a run's start; the caller's mapping is never changed).
    out = dict(config)
    wl = out.setdefault("workload", {})
    if not isinstance(wl, dict):
        return out  # the schema check reports the type error
    wl = out["workload"] = dict(wl)
    if wl.get("cdf_text") is not None:
        return out
    cdf = wl.get("cdf", default_config()["workload"]["cdf"])
    if not isinstance(cdf, str):
        return out
    text = core.workload_text(cdf)
    if text is None:
        path = Path(cdf).expanduser()
        names = ", ".join(builtin_names())
        if not path.exists():
            raise UserError(
                f"workload.cdf (--workload): '{cdf}' is neither a built-in workload ({names}) "
                "nor an existing CDF file"
            )
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(
                f"workload.cdf (--workload): cannot read CDF file '{cdf}': {exc}"
            ) from None
        try:
            core.parse_cdf(text)
        except core.ConfigError as exc:
            raise UserError(
                f"workload.cdf (--workload): CDF file '{cdf}' is malformed: {exc} (accepted: lines "
                "'size cdf' or 'size 1 cdf', sizes and cdf non-decreasing, cdf ending at 1 or 100)"
            ) from None
        wl["cdf"] = str(path.resolve())
    wl["cdf_text"] = text
    return out


def _default_of(field: str, config: Mapping[str, Any]) -> Any:
    """The default of dotted ``field`` (a scheme parameter: the configured scheme's, else the
    first scheme's that has it); ``None`` when unknown (a list element, an unset optional)."""
    section, _, key = field.rpartition(".")
    try:
        if section == "scheme":
            schemes = scheme_parameters()
            sch = config.get("scheme")
            name = sch.get("name") if isinstance(sch, Mapping) else None
            if isinstance(name, str) and key in schemes.get(name, {}):
                return schemes[name][key]
            return next((p[key] for p in schemes.values() if key in p), None)
        node: Any = default_config()
        for part in field.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        return node
    except UserError:  # pragma: no cover - no core
        return None


def _origin_of(field: str, origins: Mapping[str, Origin]) -> Origin | None:
    """The origin of ``field`` (``workload.trace[3].start`` falls back to ``workload.trace``)."""
    key = re.sub(r"\[\d+\]", "", field)
    while key:
        if key in origins:
            return origins[key]
        key = key.rpartition(".")[0]
    return None


def explain(
    message: str,
    config: Mapping[str, Any],
    origins: Mapping[str, Origin] | None = None,
    flag_hints: bool = False,
) -> str:
    """The core's ``field: what is wrong`` as the user should read it: prefixed with the file
    and line the value came from (``run.toml:3: tcp.min_rto: …``), or naming the flag or
    ``--set`` that gave it; a bare number becomes ``--min-rto 10: give a unit, e.g. 10ms``
    with the unit nearest the field's default."""
    from repflow import units

    field, sep, rest = message.partition(": ")
    if not sep:
        return message
    origin = _origin_of(field, origins or {})
    if origin is None and flag_hints and flag_for(field):
        origin = Origin("flag", flag_for(field) or "")
    bare = units.no_unit(rest)
    if bare is not None:
        number, suggested = bare
        suggested = units.suggest_unit(number, _default_of(field, config)) or suggested
        if origin is None:
            return units.no_unit_message(f"{field} =", number, suggested, quote=True)
        if origin.kind == "flag":
            return units.no_unit_message(origin.label, origin.raw or number, suggested)
        if origin.kind == "set":
            return units.no_unit_message(f"--set {field}=", origin.raw or number, suggested)
        return units.no_unit_message(f"{origin.label}: {field} =", number, suggested, quote=True)
    if origin is None:
        return message
    if origin.kind == "flag":
        return f"{field} ({origin.label}): {rest}"
    if origin.kind == "set":
        return f"{field} (--set): {rest}"
    return f"{origin.label}: {message}"


def validate(
    config: Mapping[str, Any],
    *,
    resolve: bool = True,
    flag_hints: bool = False,
    origins: Mapping[str, Origin] | None = None,
) -> dict[str, Any]:
    """Validates ``config`` with the Rust core; returns it normalized with every default.

    With ``resolve`` the CDF is loaded into ``workload.cdf_text`` first. Raises
    :class:`UserError` whose message starts with the dotted field at fault, prefixed with the
    file and line it came from when ``origins`` says (see :func:`build_config_with_origins`),
    else followed by the ``repflow sim`` flag that sets it, with ``flag_hints``. A quantity
    without a unit gets one suggested (:func:`explain`).
    """
    core = _core()
    if not isinstance(config, Mapping):
        raise UserError(f"config: expected a mapping of sections, got {type(config).__name__}")
    cfg = resolve_cdf(dict(config)) if resolve else dict(config)
    if resolve:
        from repflow.smartrep import resolve_history

        cfg = resolve_history(cfg)
    try:
        text = json.dumps(cfg, allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise UserError(f"config: not representable as JSON: {exc}") from None
    try:
        return json.loads(core.validate_config(text))
    except core.ConfigError as exc:
        raise UserError(explain(str(exc), cfg, origins, flag_hints)) from None


def build_config_with_origins(
    toml_path: str | os.PathLike[str] | None = None,
    flags: Mapping[str, Any] | None = None,
    sets: Iterable[str] = (),
    flag_texts: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[dict[str, Any], dict[str, Origin]]:
    """:func:`build_config`, and where each key's value came from (``FILE:LINE``, a flag,
    ``--set``), for :func:`validate`'s messages. ``flag_texts``: dotted key → (flag, text as
    given), see :func:`flag_texts`."""
    origins: dict[str, Origin] = {}
    cfg: dict[str, Any] = {}
    if toml_path is not None:
        cfg, origins = load_toml_with_origins(toml_path, "--config")
    wl0 = cfg.get("workload")
    base_cdf = wl0.get("cdf") if isinstance(wl0, dict) else None
    if flags:
        cfg = merge(cfg, flags)
        for key in _leaf_keys(flags):
            option, raw = (flag_texts or {}).get(key, (flag_for(key) or "", None))
            if option:
                origins[key] = Origin("flag", option, raw)
    sets = list(sets)
    cfg = apply_sets(cfg, sets)
    for item in sets:
        key, _, raw = item.partition("=")
        origins[key.strip()] = Origin("set", "--set", raw.strip())
    wl = cfg.get("workload")
    # A file (e.g. an earlier run.json) may carry the text of its CDF; a flag or --set that
    # names another CDF must not run with the old text.
    if isinstance(wl, dict) and wl.get("cdf") != base_cdf and wl.get("cdf_text") is not None:
        if not any(a.split("=", 1)[0].strip() == "workload.cdf_text" for a in sets):
            wl["cdf_text"] = None
    return cfg, origins


def build_config(
    toml_path: str | os.PathLike[str] | None = None,
    flags: Mapping[str, Any] | None = None,
    sets: Iterable[str] = (),
) -> dict[str, Any]:
    """Merges file < flags < ``--set`` overrides (unvalidated; see :func:`validate`)."""
    return build_config_with_origins(toml_path, flags, sets)[0]


def flag_texts(args: argparse.Namespace) -> dict[str, tuple[str, str]]:
    """Dotted key → (flag, text as given) for the shorthand flags present in ``args``."""
    return {
        f.key: (f.option, str(getattr(args, f.dest)))
        for f in FLAGS
        if f.const is None and getattr(args, f.dest, None) is not None
    }
