"""Per-flow records of a reference simulator (htsim, ns-3) replaying a study's own flows, read from
the committed fixtures (``tests/fixtures/refs/<study>/``; docs/validation.md, "The RepFlow study
under htsim" and "... under ns-3"), in the shape of a sweep's flow records so that the functions of
:mod:`repflow.experiments.analysis` and :mod:`repflow.experiments.claims` run on them unchanged.

>>> recs = reference_records("repflow-quick", "dc")  # doctest: +SKIP
>>> agg = reference_aggregate("repflow-quick", "dc")  # doctest: +SKIP
>>> claims.evaluate_claims(agg, ["repflow-ns3"])  # doctest: +SKIP
>>> ns3 = reference_records("repflow-quick", "ns3-2014", ref="ns3")  # doctest: +SKIP

htsim's records of a profile sit in ``<study>/<profile>/``, ns-3's in ``<study>/<profile>/ns3/``
(:data:`REFERENCE_DIRS`); each directory has its ``provenance.json``. ns-3 ran TCP and RepFlow
only (no DCTCP module on its side of the comparison); a claim that needs another scheme is "not
measured" on its records.

Columns of :func:`reference_records` (one row per application flow and scheme):

=================  =====  ==================================================================
column             unit   meaning
=================  =====  ==================================================================
``scheme``                scheme label of the sweep (``tcp``, ``repflow``, ``dctcp``,
                          ``repflow-dctcp``); ``series`` is the same label
``workload``              ``websearch`` / ``datamining`` (the sweep's ``workload.cdf``)
``load``                  offered load of the sweep point
``seed``                  the sweep's seed (it drew the flows; htsim's path draws use it too)
``id``                    flow number in our run (arrival order)
``src``, ``dst``          hosts
``size``           bytes  application bytes (RepFlow's size of the flow)
``start``          s      arrival time
``fct``            s      the reference's FCT (first copy to finish for replicated flows); NaN if
                          the flow did not finish before htsim's run ended
``finish``         s      ``start + fct``
``ideal_fct``      s      *our* ideal FCT of the same flow under the same profile and transport
                          (docs/metrics.md), so that slowdowns compare like with like
``slowdown``              ``fct / ideal_fct``
``copies``                connections the reference opened for the flow (2 for replicated flows,
                          the subflows for MPTCP)
``winner``                the copy that finished first (−1: unfinished)
``timeouts``              retransmission timeouts, all copies (htsim: SYNs included; ns-3:
                          entries into its loss state, SYN retransmissions not counted)
``fast_retransmits``      entries into fast recovery, all copies
``drops``                 htsim: the flow's packets (data and ACKs, all copies) dropped at a
                          queue; ns-3: the run's drops on the first flow's row, 0 elsewhere
``bytes_sent``     bytes  data packets htsim sent (retransmissions and losing copies included)
                          × their wire size; ACKs and SYNs not counted; NaN for MPTCP (the
                          driver does not count them) and for ns-3
``reference``             e.g. ``htsim 841d9e7``, ``ns-3 1406464``
=================  =====  ==================================================================

The retransmission columns of our records that htsim does not count (``retransmissions``,
``fast_retransmits`` as segments, …) are absent, so :func:`analysis.point_metrics` gives NaN for
the ``retx_*`` metrics.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from repflow.experiments import analysis

#: Where the fixtures live (the repository's tests/fixtures/refs).
FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "refs"

#: The studies with reference fixtures: the schemes, workloads, loads, seeds and TCP profiles
#: stored, and the study's short-flow edge (bytes, inclusive).
STUDIES: dict[str, dict] = {
    "repflow-quick": {
        "schemes": ("tcp", "repflow", "dctcp", "repflow-dctcp"),
        "workloads": ("websearch", "datamining"),
        "loads": (0.2, 0.5, 0.8),
        "seeds": (1, 2),
        "profiles": ("ns3-2014", "dc"),
        "short_max": 100_000,
    },
    # htsim has no MPTCP-L: its MPTCP (LIA, 8 subflows) with TCP and RepFlow beside it.
    "mptcp-l-quick": {
        "schemes": ("tcp", "repflow", "mptcp"),
        "workloads": ("fb-hadoop",),
        "loads": (0.2, 0.35),
        "seeds": (1,),
        "profiles": ("dc",),
        "short_max": 1_000_000,
    },
}

#: The reference simulators, and the subdirectory of ``<study>/<profile>/`` holding each one's
#: records and provenance.
REFERENCE_DIRS = {"htsim": "", "ns3": "ns3"}

#: Schemes whose ideal FCT is that of another's transport (replication does not change the
#: ideal: it is one connection alone on the idle network).
IDEAL_OF = {"tcp": "tcp", "repflow": "tcp", "dctcp": "dctcp", "repflow-dctcp": "dctcp",
            "mptcp": "mptcp"}  # fmt: skip


def point_name(workload: str, load: float, seed: int) -> str:
    """The file stem of one point: ``websearch-0.5-seed1``."""
    return f"{workload}-{load:g}-seed{seed}"


def read_point_trace(study: str, workload: str, load: float, seed: int,
                     root: Path | None = None) -> pd.DataFrame:  # fmt: skip
    """The flows of one point as our simulator drew them (``id src dst size start`` and our
    ideal FCT per profile and transport: ``ideal_<profile>_<tcp|dctcp>``)."""
    d = (root or FIXTURES) / study / "traces"
    return pd.read_csv(d / f"{point_name(workload, load, seed)}.csv.gz")


def provenance(study: str, profile: str, root: Path | None = None, ref: str = "htsim") -> dict:
    """The provenance of a reference's fixtures of one study and profile."""
    d = (root or FIXTURES) / study / profile / REFERENCE_DIRS[ref]
    return json.loads((d / "provenance.json").read_text())


def reference_label(study: str, profile: str, root: Path | None = None,
                    ref: str = "htsim") -> str:  # fmt: skip
    """``htsim <commit>`` / ``ns-3 <commit>`` of the fixtures (commit to 7 characters)."""
    p = provenance(study, profile, root, ref)
    name = "ns-3" if ref == "ns3" else "htsim"
    return f"{name} {str(p.get('commit', 'unknown'))[:7]}"


def available_references(study: str, profile: str, root: Path | None = None) -> list[str]:
    """The references (keys of :data:`REFERENCE_DIRS`) with fixtures for ``study`` under
    ``profile``, htsim first."""
    base = (root or FIXTURES) / study / profile
    return [r for r, sub in REFERENCE_DIRS.items() if (base / sub / "provenance.json").is_file()]


def reference_records(study: str, profile: str, root: Path | None = None,
                      ref: str = "htsim") -> pd.DataFrame:  # fmt: skip
    """A reference's per-flow records of ``study`` under the ``profile``-like TCP settings
    (every scheme, workload, load and seed stored), with the columns of the module's table."""
    spec = STUDIES[study]
    base = (root or FIXTURES) / study
    label = reference_label(study, profile, root, ref)
    pkt = _wire_packet(study, profile, root) if ref == "htsim" else 0
    sub = REFERENCE_DIRS[ref]
    frames = []
    for w in spec["workloads"]:
        for load in spec["loads"]:
            for seed in spec["seeds"]:
                trace = read_point_trace(study, w, load, seed, root)
                for scheme in spec["schemes"]:
                    f = base / profile / sub / f"{scheme}-{point_name(w, load, seed)}.csv.gz"
                    if not f.is_file():
                        continue
                    h = pd.read_csv(f)
                    sent = (h["sent_packets"].where(h["sent_packets"] >= 0) * pkt
                            if "sent_packets" in h else np.nan)  # fmt: skip
                    frames.append(_records(f, h, trace, profile, scheme, (w, load, seed), {
                        "winner": h["winner"], "fast_retransmits": h["fast_recoveries"],
                        "drops": h["drops"], "bytes_sent": sent, "reference": label}))
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


def ours_records(study: str, profile: str, root: Path | None = None,
                 like: pd.DataFrame | None = None) -> pd.DataFrame:  # fmt: skip
    """Our own per-flow records of the same subset (``ours-<scheme>-<point>.csv.gz``, stored
    beside the references' when their fixtures were made): the records a reference verdict is
    compared with, like with like. ``like``: a reference's records, whose (scheme, point) set
    is kept."""
    spec = STUDIES[study]
    base = (root or FIXTURES) / study / profile
    keep = None
    if like is not None and not like.empty:
        keep = {(s, w, float(ld), int(sd)) for s, w, ld, sd in
                like[["scheme", "workload", "load", "seed"]].drop_duplicates().itertuples(
                    index=False)}  # fmt: skip
    frames = []
    for w in spec["workloads"]:
        for load in spec["loads"]:
            for seed in spec["seeds"]:
                trace = None
                for scheme in spec["schemes"]:
                    if keep is not None and (scheme, w, float(load), int(seed)) not in keep:
                        continue
                    f = base / f"ours-{scheme}-{point_name(w, load, seed)}.csv.gz"
                    if not f.is_file():
                        continue
                    if trace is None:
                        trace = read_point_trace(study, w, load, seed, root)
                    frames.append(_records(f, pd.read_csv(f), trace, profile, scheme,
                                           (w, load, seed), {
                        "winner": 0, "fast_retransmits": 0, "drops": 0, "bytes_sent": np.nan,
                        "reference": "ours"}))  # fmt: skip
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


def _records(f: Path, rec: pd.DataFrame, trace: pd.DataFrame, profile: str, scheme: str,
             where: tuple[str, float, int], extra: dict) -> pd.DataFrame:  # fmt: skip
    """One point's per-flow records (``rec``: id, fct, copies, timeouts, …) joined to its trace,
    in the columns of this module's tables; ``extra``: the columns that differ by source."""
    if len(rec) != len(trace):
        raise ValueError(f"{f}: {len(rec)} flows, its trace {len(trace)}")
    fct = rec["fct"].to_numpy(dtype=float, copy=True)
    fct[fct < 0] = np.nan
    ideal = trace[f"ideal_{profile}_{IDEAL_OF[scheme]}"].to_numpy(dtype=float)
    w, load, seed = where
    return pd.DataFrame({
        "scheme": scheme, "series": scheme, "workload": w, "load": load, "seed": seed,
        "id": trace["id"], "src": trace["src"], "dst": trace["dst"], "size": trace["size"],
        "start": trace["start"], "fct": fct, "finish": trace["start"].to_numpy() + fct,
        "ideal_fct": ideal, "slowdown": fct / ideal, "copies": rec["copies"],
        "timeouts": rec["timeouts"], **extra,
    })  # fmt: skip


def _wire_packet(study: str, profile: str, root: Path | None) -> int:
    return int(provenance(study, profile, root)["settings"]["htsim"]["packet_bytes"])


def reference_points(study: str, profile: str, short_max: int | None = None,
                     root: Path | None = None, ref: str = "htsim",
                     records: pd.DataFrame | None = None
                     ) -> tuple[pd.DataFrame, analysis.Loaded]:  # fmt: skip
    """One row per (scheme, workload, load, seed) with :func:`analysis.point_metrics` of
    the reference's records (``overhead`` = Σ size·(copies − 1) / Σ size, as our summaries), and a
    :class:`analysis.Loaded` holding the pooled short-flow FCTs for :func:`analysis.aggregate`.
    ``records``: :func:`reference_records`' table when the caller already read it."""
    short_max = short_max or STUDIES[study]["short_max"]
    recs = reference_records(study, profile, root, ref) if records is None else records
    loaded = analysis.Loaded(sweep={}, points=pd.DataFrame())
    rows = []
    if recs.empty:
        return pd.DataFrame(), loaded
    for (scheme, w, load, seed), g in recs.groupby(["scheme", "workload", "load", "seed"]):
        m = analysis.point_metrics(g, short_max)
        size = g["size"].to_numpy(dtype=float)
        m["overhead"] = float((size * (g["copies"].to_numpy() - 1)).sum() / size.sum())
        m["collision_frac"] = float("nan")
        rows.append({"key": f"{study}/{profile}/{scheme}/{point_name(w, load, seed)}",
                     "scheme": scheme, "series": scheme, "workload": w, "load": float(load),
                     "seed": seed, "labels": "{}", **m})  # fmt: skip
        fct = g["fct"].to_numpy(dtype=float)
        sel = (g["size"].to_numpy() <= short_max) & np.isfinite(fct)
        k = (w, scheme, float(load))
        sd = g["slowdown"].to_numpy(dtype=float)[sel]
        for store, v in ((loaded.short_fcts, fct[sel]), (loaded.short_slowdowns, sd)):
            store[k] = v if k not in store else np.concatenate([store[k], v])
    points = pd.DataFrame(rows)
    loaded.points = points
    return points, loaded


def reference_aggregate(study: str, profile: str, short_max: int | None = None,
                        root: Path | None = None, ref: str = "htsim",
                        records: pd.DataFrame | None = None) -> pd.DataFrame:  # fmt: skip
    """The aggregated table of a reference's records (:func:`analysis.aggregate`: means across
    seeds, pooled p99), the input of :func:`claims.evaluate_claims`."""
    points, loaded = reference_points(study, profile, short_max, root, ref, records)
    return analysis.aggregate(points, loaded)
