"""``repflow model``: the analytical model's table and figures, alone or over a simulated sweep."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from repflow.errors import UserError
from repflow.model.defaults import DEFAULT_N as DEFAULT_COPIES

SHOWN_COLUMNS = (
    "load",
    "tcp_short_mean",
    "repflow_short_mean",
    "tcp_short_p99",
    "repflow_short_p99",
    "tcp_large_mean",
    "repflow_large_mean",
    "tcp_large_p99",
    "repflow_large_p99",
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the ``model`` command."""
    from repflow.model.defaults import DEFAULT_K, DEFAULT_N, DEFAULT_P

    p = subparsers.add_parser(
        "model",
        help="evaluate the M/G/1 FCT model of RepFlow/SmartRep on a workload",
        description=(
            "Evaluate RepFlow's M/G/1 model (and SmartRep's extension) of normalized FCT on a "
            "flow-size CDF: print a table, write figures (PNG+SVG) and a CSV to --out. With "
            "--overlay DIR, draw the model over a stored simulation sweep instead."
        ),
    )
    p.add_argument(
        "--workload",
        action="append",
        metavar="NAME|FILE",
        help="built-in workload name or CDF file; repeat or comma-separate for several "
        "(default: websearch)",
    )
    p.add_argument(
        "--loads",
        default="0.1:0.8:0.1",
        help="loads: START:STOP:STEP (inclusive), a comma list, or one number, each in (0,1) "
        "(default 0.1:0.8:0.1)",
    )
    from repflow.cli import add_hidden_alias

    p.add_argument(
        "--init-cwnd",
        dest="init_window",
        type=float,
        default=DEFAULT_K,
        metavar="SEGS",
        help="TCP initial congestion window k, packets (the model's k; default 12, as "
        "`sim --init-cwnd`)",
    )
    # Old names: --init-window (until issue 39) and --k (in `sim` the fat-tree arity).
    add_hidden_alias(p, "--init-window", "--k", new="--init-cwnd", dest="init_window",
                     type=float)  # fmt: skip
    p.add_argument(
        "--max-window", default="64KiB", help="maximum window M as a size (64KiB = 44 packets)"
    )
    p.add_argument(
        "--threshold", default="100KB", help="short-flow threshold S_L as a size (100KB)"
    )
    p.add_argument("--mss", type=int, default=1460, help="packet payload bytes (1460)")
    p.add_argument(
        "--eps", type=float, default=None, help="override ε (default: computed from the CDF)"
    )
    p.add_argument(
        "--collision-p",
        type=float,
        default=DEFAULT_P,
        help=f"hash-collision probability p for SmartRep's Theorem 1 ({DEFAULT_P})",
    )
    p.add_argument(
        "--copies",
        type=int,
        default=None,
        help=f"copies per short flow (2..64, original included) of SmartRep's n-copies "
        f"variant; given, the table adds its columns (default {DEFAULT_N}, in the CSV only)",
    )
    p.add_argument(
        "--sizes",
        choices=("continuous", "sampled"),
        default="continuous",
        help="continuous = the piecewise-linear CDF (paper); sampled = the simulator's rounding",
    )
    p.add_argument(
        "--overlay",
        metavar="DIR",
        help="draw the model over the simulated runs (run.json + flows.parquet) under DIR",
    )
    p.add_argument("--out", default="runs/model", help="output directory (default runs/model/)")
    p.set_defaults(func=handler)


def parse_loads(spec: str) -> list[float]:
    """Loads from ``START:STOP:STEP`` (inclusive), ``a,b,c`` or a single number."""
    spec = str(spec).strip()
    err = (
        f"--loads '{spec}' is malformed (accepted: START:STOP:STEP such as 0.1:0.8:0.1, "
        "a comma list such as 0.2,0.5, or one number; each load in (0, 1))"
    )
    try:
        if ":" in spec:
            parts = [float(x) for x in spec.split(":")]
            if len(parts) != 3:
                raise UserError(err)
            start, stop, step = parts
            if not (step > 0) or stop < start or not all(map(math.isfinite, parts)):
                raise UserError(err)
            count = math.floor((stop - start) / step + 1e-9) + 1
            if count > 10_000:
                raise UserError(err)
            loads = [round(start + i * step, 12) for i in range(count)]
        else:
            loads = [float(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise UserError(err) from None
    if not loads:
        raise UserError(err)
    for x in loads:
        if not (0.0 < x < 1.0):
            raise UserError(f"--loads: load {x:g} is outside (0, 1) (accepted: 0 < load < 1)")
    return loads


@contextmanager
def atomic_output(out: Path) -> Iterator[Path]:
    """Yields a temporary directory next to ``out``; on success its files replace those of
    the same names in ``out`` (created if needed); on failure nothing in ``out`` changes."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    os.chmod(tmp, 0o755)  # mkdtemp makes it private; it may become ``out`` itself
    try:
        yield tmp
        if not out.exists():
            os.replace(tmp, out)
            return
        if not out.is_dir():
            raise UserError(f"--out '{out}' exists and is not a directory")
        for f in tmp.iterdir():
            os.replace(f, out / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: The n-copies columns ``--copies N`` adds to the printed table (CSV name → shown name).
COPIES_COLUMNS = {
    "smartrep_n_short_mean": "copies{n}_short_mean",
    "smartrep_n_short_p99": "copies{n}_short_p99",
    "smartrep_n_large_mean": "copies{n}_large_mean",
}


def shown_table(df, copies: int | None):  # noqa: ANN001, ANN201
    """The table and columns ``repflow model`` prints: :data:`SHOWN_COLUMNS`, plus SmartRep's
    n-copies columns (named after n) when ``--copies`` was given."""
    if copies is None:
        return df, SHOWN_COLUMNS
    names = {c: c_shown.format(n=copies) for c, c_shown in COPIES_COLUMNS.items()}
    return df.rename(columns=names), (*SHOWN_COLUMNS, *names.values())


def _overlay_display(table):  # noqa: ANN001, ANN202
    """The overlay table with its model cells spelled out: "no model" for a scheme the model
    does not describe, "undefined (load ≥ 1)" where its effective load reaches 1."""
    shown = table.copy()
    for c in [c for c in shown.columns if c.startswith(("model_", "ratio_"))]:
        shown[c] = [
            ("no model" if not m else "undefined (load ≥ 1)")
            if not (isinstance(v, float) and math.isfinite(v))
            else f"{v:.3f}"
            for v, m in zip(shown[c], shown["modelled"], strict=True)
        ]
    return shown


def _model_outputs_only(d: Path) -> bool:
    """Whether every entry of ``d`` is a file ``repflow model`` writes."""
    return all(
        e.is_file() and (e.name.startswith(("model-", "overlay")) or e.name.startswith("."))
        for e in d.iterdir()
    )


def _workloads(args: argparse.Namespace) -> list[str]:
    names: list[str] = []
    for item in args.workload or ["websearch"]:
        names += [x.strip() for x in item.split(",") if x.strip()]
    return names


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(name).name)


def handler(args: argparse.Namespace) -> int:
    """Runs ``repflow model``."""
    from repflow.cli.outdir import prepare_out
    from repflow.model import fct_table, format_table
    from repflow.model.overlay import parse_size

    out = prepare_out(
        args.out, command="model", owned=_model_outputs_only,
        hint="`model --out` replaces only its own files (model-*, overlay*): choose another "
        "directory",
    )  # fmt: skip
    if args.eps is not None and not 0.0 < args.eps <= 1.0:
        raise UserError(
            f"--eps must be in (0, 1] (the fraction of bytes in short flows), got {args.eps:g}"
        )
    if not 0.0 <= args.collision_p < 1.0:
        raise UserError(
            f"--collision-p: the hash-collision probability must be in [0, 1), got "
            f"{args.collision_p:g}"
        )
    copies = DEFAULT_COPIES if args.copies is None else args.copies
    if not 2 <= copies <= 64:
        raise UserError(
            f"--copies must be between 2 and 64 (copies of a short flow, the original "
            f"included; 1 copy is plain TCP), got {copies}"
        )
    if not args.init_window > 0:
        raise UserError(
            f"--init-cwnd must be a positive number of packets, got {args.init_window:g}"
        )
    if args.overlay:
        return _overlay(args, out)
    loads = parse_loads(args.loads)
    if args.mss <= 0:
        raise UserError(f"--mss must be a positive number of bytes, got {args.mss}")
    M = math.floor(parse_size(args.max_window, "--max-window") / args.mss)
    S_L = parse_size(args.threshold, "--threshold") / args.mss
    if not S_L > 0:
        raise UserError(f"--threshold must be a positive size (e.g. 100KB), got {args.threshold}")
    if M < 1:
        raise UserError(f"--max-window {args.max_window} is below one packet of {args.mss} B")
    tables = []
    for wl in _workloads(args):
        df = fct_table(
            wl, loads, k=args.init_window, M=M, S_L=S_L, eps=args.eps, p=args.collision_p,
            n=copies, mss=args.mss, sizes=args.sizes,
        )  # fmt: skip
        tables.append((wl, df))
    from repflow.model.plot import model_figure

    written = []
    with atomic_output(out) as tmp:
        for wl, df in tables:
            base = f"model-{_safe(wl)}"
            df.to_csv(tmp / f"{base}.csv", index=False)
            written += [out / f"{base}.csv"]
            written += [out / p.name for p in model_figure(df, tmp / base)]
    for wl, df in tables:
        a = df.attrs
        print(
            f"workload {wl} ({a['sizes']} sizes): eps={a['eps_used']:.4f} "
            f"(from CDF {a['eps_from_cdf']:.4f}), short flows {df['short_frac'].iloc[0]:.3f}, "
            f"k={a['k']:g}, M={a['M']:g}, S_L={a['S_L']:.2f} packets"
        )
        print(format_table(*shown_table(df, args.copies)))
        notes = [n for n in df["note"] if n]
        for n in dict.fromkeys(notes):
            print(f"note: {n}")
        print()
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _overlay(args: argparse.Namespace, out: Path) -> int:
    from repflow.model.overlay import overlay_table
    from repflow.model.plot import overlay_figure

    table, curves = overlay_table(Path(args.overlay), sizes=args.sizes)
    written = []
    with atomic_output(out) as tmp:
        table.to_csv(tmp / "overlay.csv", index=False)
        written.append(out / "overlay.csv")
        for group, model in curves.items():
            sim = table[table["group"] == group]
            title = f"model (lines) vs simulation (markers): {group}, runs under {args.overlay}"
            written += [
                out / p.name
                for p in overlay_figure(model, sim, tmp / f"overlay-{_safe(group)}", title)
            ]
    cols = ["workload", "scheme", "load", "runs", "short_flows", "unfinished",
            "sim_short_mean", "model_short_mean", "ratio_short_mean",
            "sim_short_p99", "model_short_p99", "sim_large_mean", "model_large_mean"]  # fmt: skip
    if table["config"].astype(bool).any():
        cols.insert(1, "config")
    from repflow.model import format_table

    print(format_table(_overlay_display(table), cols))
    print(
        "model columns: 'no model' = the model does not describe this scheme; 'undefined' = "
        "the scheme's effective load (1+eps)*load is at least 1. p99: the seeds' flows pooled."
    )
    print("wrote " + ", ".join(str(p) for p in written))
    return 0
