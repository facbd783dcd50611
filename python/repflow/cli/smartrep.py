"""``repflow smartrep-table`` and ``repflow smartrep-collisions``.

``smartrep-table`` prints SmartRep's replica table (RepNumAssign, the simulator's Rust
implementation) for a workload's CDF or an earlier run's flow sizes. ``smartrep-collisions``
measures how often RepFlow's two copies share a switch-to-switch link (an ECMP hash
collision) for each hash function on a fat-tree.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from repflow import config_io
from repflow.errors import UserError

HASHES = ("crc16", "crc32", "default")


def register(subparsers: Any) -> None:
    """Adds the ``smartrep-table`` and ``smartrep-collisions`` commands."""
    p = subparsers.add_parser(
        "smartrep-table",
        help="print SmartRep's replica table (RepNumAssign) for a workload",
        description=(
            "Run SmartRep's RepNumAssign (Algorithm 3) on a flow-size history — a workload's "
            "CDF (exact bin probabilities) or the flows.parquet of an earlier run — and print "
            "how many replicas each 1 KB size bin gets."
        ),
    )
    p.add_argument("--workload", default="websearch",
                   help="built-in workload name or CDF file (default websearch)")
    p.add_argument("--from-run", metavar="DIR",
                   help="use the flow sizes of an earlier run (directory or flows.parquet)")
    p.add_argument("--smartrep-eps", dest="eps", type=float, default=0.03,
                   help="SmartRep's byte budget ε (default 0.03, as `load --smartrep-eps`)")
    p.add_argument("--large-flow-p", dest="p", type=float, default=0.1,
                   help="probability a copy meets a large flow (default 0.1; not the model's "
                        "--collision-p, the chance two copies share a path)")
    from repflow.cli import add_hidden_alias

    # Old names (until issue 39): --eps, --p.
    add_hidden_alias(p, "--eps", new="--smartrep-eps", dest="eps", type=float)
    add_hidden_alias(p, "--p", new="--large-flow-p", dest="p", type=float)
    p.add_argument("--paths", type=int, default=5,
                   help="link-disjoint equal-cost paths; replicas ≤ paths − 1 (default 5)")
    p.add_argument("--threshold", default="100KB", help="largest short flow (default 100KB)")
    p.add_argument("--all-bins", action="store_true", help="also print bins without flows")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p.set_defaults(func=run_table)

    c = subparsers.add_parser(
        "smartrep-collisions",
        help="measure RepFlow's ECMP hash-collision rate per hash function",
        description=(
            "Draw host pairs and source ports as the simulator does and count the flows whose "
            "RepFlow copy (destination port + 1) shares a switch-to-switch link with the "
            "original, for each ECMP hash. With HCA the rate is 0 by construction."
        ),
    )
    c.add_argument("--k", type=int, action="append",
                   help="fat-tree arity (repeatable; default 10 and 16)")
    c.add_argument("--hash", choices=HASHES, action="append",
                   help="hash function (repeatable; default all)")
    c.add_argument("--pairs", choices=("random", "inter-pod"), default="random",
                   help="host pairs (default random)")
    c.add_argument("--samples", type=int, default=20000, help="flows per cell (default 20000)")
    c.add_argument("--seeds", type=int, default=3, help="ECMP salts to average over (default 3)")
    c.add_argument("--json", action="store_true", help="print the rows as JSON")
    c.set_defaults(func=run_collisions)


def run_table(args: argparse.Namespace) -> int:
    """Handler of ``repflow smartrep-table``."""
    from repflow import smartrep
    from repflow.units import parse_size

    threshold = parse_size(args.threshold, "--threshold")
    if threshold <= 0:
        raise UserError("--threshold: must be positive")
    if args.from_run:
        t = smartrep.table(sizes=smartrep.history_sizes(args.from_run), eps=args.eps, p=args.p,
                           paths=args.paths, threshold=threshold)  # fmt: skip
    else:
        cfg = config_io.resolve_cdf({"workload": {"cdf": args.workload}})
        t = smartrep.table(cdf_text=cfg["workload"]["cdf_text"], eps=args.eps, p=args.p,
                           paths=args.paths, threshold=threshold)  # fmt: skip
    if args.json:
        print(json.dumps({"unit_bytes": t.unit_bytes, "extra": t.extra, "eps": t.eps, "p": t.p,
                          "max_extra": t.max_extra, "overhead": t.overhead}))  # fmt: skip
    else:
        print(smartrep.format_table(t, all_bins=args.all_bins))
    return 0


def collision_rows(ks: list[int], hashes: list[str], pairs: str, samples: int,
                   seeds: int) -> list[dict[str, Any]]:  # fmt: skip
    """One row per (k, hash): flows, inter-ToR flows, collisions and rates."""
    from repflow import _core

    if samples < 1 or seeds < 1:
        raise UserError("--samples and --seeds: must be at least 1")
    rows = []
    for k in ks:
        for h in hashes:
            flows = inter = coll = 0
            for seed in range(1, seeds + 1):
                cfg = {"seed": seed, "topology": {"kind": "fat-tree", "k": k},
                       "routing": {"hash": h}, "workload": {"pairs": pairs}}  # fmt: skip
                try:
                    f, i, c = _core.sim_collisions(json.dumps(cfg), samples)
                except _core.ConfigError as exc:
                    raise UserError(f"--k {k}: {exc}") from None
                flows, inter, coll = flows + f, inter + i, coll + c
            rows.append({"k": k, "hash": h, "pairs": pairs, "flows": flows, "inter_tor": inter,
                         "collisions": coll, "rate": coll / flows,
                         "rate_inter_tor": coll / inter if inter else float("nan")})  # fmt: skip
    return rows


def run_collisions(args: argparse.Namespace) -> int:
    """Handler of ``repflow smartrep-collisions``."""
    rows = collision_rows(args.k or [10, 16], args.hash or list(HASHES), args.pairs,
                          args.samples, args.seeds)  # fmt: skip
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"{'k':>3} {'hash':>8} {'flows':>7} {'collide':>8} {'rate':>6} {'inter-ToR rate':>14}")
    for r in rows:
        print(f"{r['k']:>3} {r['hash']:>8} {r['flows']:>7} {r['collisions']:>8} "
              f"{r['rate']:6.3f} {r['rate_inter_tor']:14.3f}")  # fmt: skip
    print("HCA (repflow-hca, smartrep, fullrep): 0 by construction (copies on distinct paths)")
    return 0
