"""Do the main job's verdicts depend on the bootstrap's generator? Re-decides every claim of a
`repflow reproduce` result directory with other generator keys and lists every verdict that
changes (docs/metrics.md, "Replicates near a boundary").

    python validation/generator_keys.py runs/reproduce-quick --keys 20

Reads the stored points only (nothing is simulated); prints one line per study and profile,
and exits 1 when a verdict changes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from repflow.experiments import claims
from repflow.experiments.analysis import aggregate, load_sweep
from repflow.experiments.store import Store


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("root", type=Path, help="a `repflow reproduce` result directory")
    ap.add_argument("--keys", type=int, default=20, help="generator keys, 0 included (20)")
    args = ap.parse_args(argv)
    marker = json.loads((args.root / "reproduce.json").read_text())
    changed = 0
    for run in marker["runs"]:
        d = args.root / run["dir"]
        if not (d / "sweep.json").is_file():
            continue
        t0 = time.monotonic()
        loaded = load_sweep(Store(d))
        agg = aggregate(loaded.points, loaded)
        spec = loaded.sweep.get("spec", {})
        scen = list((spec.get("extra") or {}).get("claims", []))
        short_max = int(spec.get("figures", {}).get("short_max_bytes", 100_000))
        seen: dict[str, set[str]] = {}
        for key in range(args.keys):
            ev = claims.Evidence(agg, loaded.samples, short_max, generator_key=key)
            for r in claims.evaluate_claims(ev, scen):
                if r.claim.scenario in scen:
                    seen.setdefault(r.claim.id, set()).add(r.verdict)
        moved = {c: v for c, v in seen.items() if len(v) > 1}
        changed += len(moved)
        print(f"{d.relative_to(args.root)}: {len(seen)} claims, {args.keys} keys, "
              f"{len(moved)} changed {moved or ''} [{time.monotonic() - t0:.0f} s]")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
