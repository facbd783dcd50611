"""The report of a stored sweep: figures, one self-contained HTML file and a Markdown twin.

Everything is rebuilt from the store (nothing is simulated) and written to a temporary
directory first, then moved into place, so a report is never half-written.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from repflow.errors import UserError
from repflow.experiments import verdicts as vd
from repflow.experiments.analysis import (
    P99_MIN_FLOWS,
    aggregate,
    load_sweep,
    series_order,
    thin_p99_rows,
)
from repflow.experiments.claims import (
    ClaimResult,
    Evidence,
    evaluate_claims,
)
from repflow.experiments.figures import Figure, make_figures, workload_title
from repflow.experiments.spec import SCHEME_AXIS
from repflow.experiments.store import Store
from repflow.units import fmt_seconds, fmt_time


@dataclass
class Report:
    """Paths of a built report and the claim verdicts."""

    html: Path
    markdown: Path
    figures: list[Path]
    claims: list[ClaimResult]
    points: int
    failures: int
    missing: int


# -- small table helper rendering both formats --------------------------------------------------


class Table:
    """A table rendered to HTML and Markdown."""

    def __init__(self, headers: list[str], rows: list[list[str]], classes: list[str] | None = None):
        self.headers = headers
        self.rows = rows
        self.classes = classes

    def html(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.headers)
        body = []
        for i, r in enumerate(self.rows):
            cls = f' class="{self.classes[i]}"' if self.classes and self.classes[i] else ""
            body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>")
        thead = f"<thead><tr>{head}</tr></thead>" if any(self.headers) else ""
        return f"<table>{thead}<tbody>{''.join(body)}</tbody></table>"

    def md(self) -> str:
        def esc(s: str) -> str:
            return s.replace("|", "\\|").replace("\n", " ")

        lines = ["| " + " | ".join(esc(h) for h in self.headers) + " |"]
        lines.append("|" + "|".join("---" for _ in self.headers) + "|")
        lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in self.rows]
        return "\n".join(lines)


def _pm(mean: float, std: float, fmt) -> str:
    if not np.isfinite(mean):
        return "–"
    if np.isfinite(std) and std > 0:
        return f"{fmt(mean)} ± {fmt(std)}"
    return fmt(mean)


def _p99(r) -> str:  # noqa: ANN001
    """A pooled p99 with the number of flows behind it (marked when too few)."""
    if not np.isfinite(r.short_p99):
        return "–"
    n = r.short_p99_flows
    if not np.isfinite(n):
        return fmt_time(r.short_p99)
    mark = " ⚠" if n < P99_MIN_FLOWS else ""
    return f"{fmt_time(r.short_p99)} ({int(n):,}){mark}"


def _flows_note(flows: int, agg: pd.DataFrame) -> str:
    """The "flows simulated" of the report's Run table, saying when its p99s rest on too few
    flows (the same warning as below the tables)."""
    thin = thin_p99_rows(agg)
    if not len(thin):
        return f"{flows:,}"
    return (f"{flows:,} — too few for some percentiles: {len(thin)} of {len(agg)} short-flow "
            f"p99s rest on fewer than {P99_MIN_FLOWS:,} flows (fewest: "
            f"{int(thin['short_p99_flows'].min()):,}; marked ⚠)")  # fmt: skip


def numbers_table(agg: pd.DataFrame, workload: str, order: list[str]) -> Table:
    """FCT numbers per load and scheme for one workload."""
    sub = agg[agg["workload"] == workload]
    headers = ["load", "scheme", "short mean ± sd across seeds",
               "short p99 (short flows it rests on, seeds pooled)", "large mean", "all mean",
               "short slowdown (mean / p99)", "unfinished (of all flows, seeds summed)",
               "seeds"]  # fmt: skip
    rows = []
    for load in sorted(sub["load"].unique()):
        for s in order:
            r = sub[(sub["load"] == load) & (sub["series"] == s)]
            if r.empty:
                continue
            r = r.iloc[0]
            rows.append([
                f"{load:g}", s,
                _pm(r.short_mean, r.short_mean_seed_std, fmt_time),
                _p99(r),
                _pm(r.large_mean, r.large_mean_seed_std, fmt_time),
                _pm(r.all_mean, r.all_mean_seed_std, fmt_time),
                f"{r.short_mean_slowdown:.2f} / {r.short_p99_slowdown:.2f}",
                f"{r.unfinished * r.seeds:,.0f} of {r.flows * r.seeds:,.0f}",
                f"{int(r.seeds)}",
            ])  # fmt: skip
    return Table(headers, rows)


def overhead_table(agg: pd.DataFrame, order: list[str], labels: dict[str, str]) -> Table:
    """Replication overhead (extra bytes, %) per workload, scheme and load (Table III)."""
    loads = sorted(agg["load"].unique())
    headers = ["workload", "scheme"] + [f"{x:g}" for x in loads]
    rows = []
    for w in sorted(agg["workload"].unique()):
        for s in order:
            sub = agg[(agg["workload"] == w) & (agg["series"] == s)].set_index("load")
            if sub.empty:
                continue
            cells = []
            for x in loads:
                v = sub["overhead"].get(x, float("nan"))
                cells.append(f"{100 * v:.2f} %" if np.isfinite(v) else "–")
            rows.append([workload_title(w, labels), s] + cells)
    return Table(headers, rows)


def claims_table(results: list[ClaimResult]) -> Table:
    """The claims beside the measured effects, their intervals, verdicts and reasons."""
    rows, classes = [], []
    for r in results:
        why = r.reason or "–"
        if r.notes:
            why += " · rare events: " + " · ".join(r.notes)
        rows.append([r.claim.id, r.claim.text, r.claim.source, r.claim.criterion, r.measured,
                     why, r.verdict])  # fmt: skip
        classes.append(verdict_class(r.verdict))
    return Table(["id", "claim", "source", "criterion",
                  f"measured: effect [{vd.level_text()} % interval]",
                  "why (deciding or open points; rare events)", "verdict"], rows, classes)


def verdict_class(verdict: str) -> str:
    """The CSS class of a verdict's cell: reproduced, larger, refuted, open, nm."""
    if verdict == vd.LARGER:
        return "larger"
    return {"reproduced": "holds", "not reproduced": "fails", vd.OPEN: "inc"}.get(
        vd.family(verdict), "nm")


_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1250px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em}
h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.8em 0;font-size:.86em}
th,td{border:1px solid #ccc;padding:.25em .55em;text-align:left;vertical-align:top}
th{background:#f3f3f3}tr.holds td:last-child{background:#d8f3d8;font-weight:600}
tr.larger td:last-child{background:#c8ecd8;font-weight:600}
tr.fails td:last-child{background:#f8d0d0;font-weight:600}tr.nm td:last-child{color:#777}
tr.inc td:last-child{background:#e8e8f4;font-weight:600}.links{font-size:.9em}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:.8em}
.meta td:first-child{font-weight:600}.note{color:#555;font-size:.9em}
"""


def _img_html(fig: Figure) -> str:
    data = base64.b64encode(fig.png.read_bytes()).decode("ascii")
    return (
        f'<figure><img alt="{html.escape(fig.title)}" src="data:image/png;base64,{data}">'
        f"<figcaption class=note>{html.escape(fig.title)}</figcaption></figure>"
    )


def reduction_intervals(evidence: Evidence):  # noqa: ANN201
    """The verdicts' 95 % intervals of reductions, for the reduction plots (the bootstrap's
    replicates are shared with the claims that already asked for them)."""
    from repflow.experiments import stats

    def get(a: str, b: str, metric: str, workload: str, load: float
            ) -> tuple[float, float] | None:  # fmt: skip
        sa = evidence.samples.get((workload, a, load))
        sb = evidence.samples.get((workload, b, load))
        if sa is None or sb is None or not sa.flows or not sb.flows:
            return None
        try:
            _, reps = evidence.boot.effect_replicates(sa, sb, metric, evidence.short_max,
                                                      stats.reduction, (workload, load))
        except ValueError:
            return None
        return stats.bounds(reps)

    return get


def sweep_alpha(spec: dict[str, Any]) -> float:
    """The error rate a sweep's verdicts spend (``[experiment] alpha``, set by ``repflow
    reproduce --budget`` on the studies it may extend; default :data:`vd.FAMILY_ALPHA`)."""
    try:
        a = float((spec.get("extra") or {}).get("alpha", vd.FAMILY_ALPHA))
    except (TypeError, ValueError):
        return vd.FAMILY_ALPHA
    return a if 0.0 < a < 1.0 else vd.FAMILY_ALPHA


def _claims_of(loaded: Any) -> tuple[pd.DataFrame, Evidence, list[ClaimResult]]:
    """The aggregated table, the evidence and the claim verdicts of a loaded sweep, at the
    error rate its spec spends (:func:`sweep_alpha`)."""
    sweep = loaded.sweep
    spec = sweep.get("spec", {})
    agg = aggregate(loaded.points, loaded)
    scenarios = list((spec.get("extra") or {}).get("claims", []))
    short_max = int(spec.get("figures", {}).get("short_max_bytes", 100_000))
    evidence = Evidence(agg, loaded.samples, short_max)
    with vd.at_alpha(sweep_alpha(spec)):
        claims = evaluate_claims(evidence, scenarios, sweep.get("unavailable"))
    return agg, evidence, claims


def sweep_claims(root: str | Path) -> list[ClaimResult]:
    """The claim verdicts of the sweep stored in ``root``, without figures or report files
    (what ``repflow reproduce --budget`` needs between its rounds)."""
    store = Store(root)
    loaded = load_sweep(store)
    if loaded.points.empty:
        raise UserError(f"{store.root}: no finished point to report on")
    return _claims_of(loaded)[2]


def build_report(root: str | Path, progress=None, out: str | Path | None = None) -> Report:
    """Rebuilds figures, ``report.html``, ``report.md`` and ``summary.csv`` of the sweep stored
    in ``root``, into ``out`` (default: ``root`` itself; ``out`` is made if missing and the
    store is only read); ``progress(msg)`` (optional) hears of each step."""
    import time

    t0 = time.monotonic()

    def say(msg: str) -> None:
        if progress is not None:
            progress(f"{msg} [{time.monotonic() - t0:.1f} s]")

    store = Store(root)
    loaded = load_sweep(store, progress=say)
    say(f"read {len(loaded.points)} finished points")
    if loaded.points.empty:
        detail = ""
        if loaded.failures:
            detail = f"; {len(loaded.failures)} failed, e.g. {loaded.failures[0]['error']}"
        raise UserError(f"{store.root}: no finished point to report on{detail}")
    sweep = loaded.sweep
    spec = sweep.get("spec", {})
    figs_cfg = spec.get("figures", {})
    labels = figs_cfg.get("workload_labels", {}) or {}
    baseline = str(figs_cfg.get("baseline", "tcp"))
    order = series_order(loaded.points, baseline)
    say("claims: intervals (bootstrap over flows within seeds)")
    agg, evidence, claims = _claims_of(loaded)

    dest = store.root if out is None else Path(out)
    dest.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".report-", dir=dest))
    try:
        figures = make_figures(loaded, tmp / "figures", progress=say, agg=agg,
                               intervals=reduction_intervals(evidence))
        say(f"{len(figures)} figures drawn; writing the report")
        agg.to_csv(tmp / "summary.csv", index=False)
        with vd.at_alpha(sweep_alpha(spec)):
            html_text, md_text = _render(loaded, agg, order, claims, figures, labels, spec,
                                         sweep, store.root)  # fmt: skip
        (tmp / "report.html").write_text(html_text, encoding="utf-8")
        (tmp / "report.md").write_text(md_text, encoding="utf-8")
        # Move into place: the figures directory is swapped, the files replaced.
        final_figs = dest / "figures"
        old = dest / f".figures-old-{tmp.name}"
        if final_figs.exists():
            final_figs.rename(old)
        (tmp / "figures").rename(final_figs)
        shutil.rmtree(old, ignore_errors=True)
        for name in ("summary.csv", "report.md", "report.html"):
            (tmp / name).replace(dest / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Report(
        html=dest / "report.html",
        markdown=dest / "report.md",
        figures=[dest / "figures" / f.png.name for f in figures],
        claims=claims,
        points=len(loaded.points),
        failures=len(loaded.failures),
        missing=len(loaded.missing),
    )


def _links(root: Path) -> tuple[str, str]:
    """Links from a study's report to what surrounds it (HTML, Markdown)."""
    items = [("summary.csv", "summary.csv (every number of this report)")]
    combined = root.parent.parent
    if (combined / "reproduce.json").is_file():
        items = [("../../report.html", "← the combined report of every paper"),
                 ("../../claims.csv", "claims.csv"),
                 ("../../claim_points.csv", "claim_points.csv")] + items  # fmt: skip
    h = " · ".join(f"<a href='{html.escape(u)}'>{html.escape(t)}</a>" for u, t in items)
    m = " · ".join(f"[{t}]({u})" for u, t in items)
    tail = ("Definitions of every metric and of the intervals: docs/metrics.md in the "
            "repository.")  # fmt: skip
    return f"<p class=links>{h}. {html.escape(tail)}</p>", f"{m}. {tail}"


def _render(
    loaded, agg, order, claims, figures, labels, spec, sweep, root: Path | None = None
) -> tuple[str, str]:  # noqa: ANN001
    title = spec.get("title") or sweep.get("name")
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    pts = loaded.points
    meta_rows = [
        ["experiment", str(sweep.get("name"))],
        ["spec", str(spec.get("path", ""))],
        ["repflow version", str(sweep.get("version"))],
        ["points", f"{len(pts)} finished, {len(loaded.failures)} failed, "
                   f"{len(loaded.missing)} not computed"],  # fmt: skip
        ["schemes", ", ".join(order)],
        ["workloads", ", ".join(workload_title(w, labels) for w in sorted(pts.workload.unique()))],
        ["loads", ", ".join(f"{x:g}" for x in sorted(pts["load"].unique()))],
        ["seeds per point", ", ".join(str(s) for s in sorted(agg["seeds"].unique()))],
        ["compute time (wall seconds of every point, summed)",
         fmt_seconds(loaded.compute_seconds)],
        ["flows simulated", _flows_note(int(pts["flows"].sum()), agg)],
        ["generated", now],
    ]
    unavailable = sweep.get("unavailable") or {}
    if unavailable:
        meta_rows.append(["schemes not in this build", ", ".join(sorted(unavailable))])
    meta = Table(["", ""], meta_rows)
    meta_md = Table(["item", "value"], meta_rows)
    grid_rows = [[k, ", ".join(str(v) for v in vals)] for k, vals in spec.get("grid", {}).items()]
    scheme_rows = [
        [label, json.dumps(ov, sort_keys=True)] for label, ov in (spec.get("schemes") or {}).items()
    ]
    base_cfg = _base_view(loaded.example_config, spec)
    # Only the claims of the scenarios this spec measures; the others belong to other studies
    # (`repflow reproduce` sets every claim of every study in one report).
    scenarios = set((spec.get("extra") or {}).get("claims", []))
    claims = [c for c in claims if c.claim.scenario in scenarios]
    ctab = claims_table(claims)
    otab = overhead_table(agg, order, labels)
    by_w: dict[str, list[Figure]] = {}
    for f in figures:
        by_w.setdefault(f.workload, []).append(f)

    verdict_counts: dict[str, int] = {}
    for c in claims:
        verdict_counts[c.verdict] = verdict_counts.get(c.verdict, 0) + 1
    verdict_line = vd.headline_line(vd.headline(c.verdict for c in claims)) + ": "
    verdict_line += ", ".join(f"{n} {v}" for v, n in verdict_counts.items())
    if not claims:
        verdict_line = "This spec declares no claim scenario ([experiment] claims)"
    notes = (
        "FCT statistics exclude unfinished flows (counted in the tables, over all seeds). Means "
        "are means of the per-seed means; ± in the tables is one standard deviation across "
        "seeds; error bars in the figures are 95 % confidence intervals (a mean's: Student t "
        "across seeds, drawn only with three seeds or more; a pooled p99's: from its order "
        "statistics). The claims' intervals are a bootstrap over the flows within each seed "
        "(docs/metrics.md). Percentiles (p99) pool the flows of every seed and show, in "
        f"brackets, how many flows each rests on; ⚠ marks a p99 of fewer than {P99_MIN_FLOWS:,} "
        "flows (its top 1 % is ten flows or fewer). Slowdown = FCT / ideal FCT of the flow "
        "alone on an idle path. Overhead = "
        "extra bytes sent by replicas over application bytes. Column names and units of "
        "summary.csv: docs/metrics.md."
    )
    thin = thin_p99_rows(agg)
    if len(thin):
        notes += (
            f" Warning: {len(thin)} of {len(agg)} rows have a short-flow p99 resting on fewer "
            f"than {P99_MIN_FLOWS} flows (fewest: {int(thin['short_p99_flows'].min())})."
        )

    h: list[str] = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(str(title))}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(str(title))}</h1>",
    ]
    m: list[str] = [f"# {title}", ""]
    if spec.get("description"):
        h.append(f"<p>{html.escape(spec['description'])}</p>")
        m += [spec["description"], ""]
    if root is not None:
        lh, lm = _links(root)
        h.append(lh)
        m += [lm, ""]
    h += ["<h2>Run</h2>", meta.html().replace("<table>", "<table class=meta>", 1)]
    m += ["## Run", "", meta_md.md(), ""]
    h += ["<h2>Published claims beside measured values</h2>",
          f"<p class=note>{html.escape(verdict_line)}. Effects are reductions of the first "
          "scheme's metric against the second's (positive: faster); each verdict follows from "
          "the intervals at every point the claim covers (family-wise over its points), or the "
          "claim is open (docs/metrics.md).</p>", ctab.html()]  # fmt: skip
    m += ["## Published claims beside measured values", "", f"{verdict_line}.", "", ctab.md(), ""]
    for w in sorted(pts["workload"].unique()):
        wt = workload_title(w, labels)
        h.append(f"<h2>{html.escape(wt)}</h2>")
        m += [f"## {wt}", ""]
        for f in by_w.get(w, []):
            h.append(_img_html(f))
            m += [f"![{f.title}](figures/{f.png.name})", ""]
        nt = numbers_table(agg, w, order)
        h += [f"<h3>{html.escape(wt)}: numbers</h3>", nt.html()]
        m += [f"### {wt}: numbers", "", nt.md(), ""]
    h += ["<h2>Replication overhead (extra bytes)</h2>", otab.html()]
    m += ["## Replication overhead (extra bytes)", "", otab.md(), ""]
    h += ["<h2>Notes</h2>", f"<p class=note>{html.escape(notes)}</p>"]
    m += ["## Notes", "", notes, ""]
    if loaded.failures:
        ft = Table(["point", "error"], [
            [", ".join(f"{k}={v}" for k, v in f["labels"].items()), str(f["error"])]
            for f in loaded.failures
        ])  # fmt: skip
        h += ["<h2>Failed points</h2>", ft.html()]
        m += ["## Failed points", "", ft.md(), ""]
    if unavailable:
        ut = Table(["scheme", "why"], [[k, v] for k, v in sorted(unavailable.items())])
        h += ["<h2>Schemes not available in this build</h2>", ut.html()]
        m += ["## Schemes not available in this build", "", ut.md(), ""]
    gt = Table(["axis", "values"], grid_rows)
    h += ["<h2>Configuration</h2>", "<h3>Grid</h3>", gt.html()]
    m += ["## Configuration", "", "### Grid", "", gt.md(), ""]
    if scheme_rows:
        st = Table(["scheme label", "configuration overrides"], scheme_rows)
        h += ["<h3>Scheme labels</h3>", st.html()]
        m += ["### Scheme labels", "", st.md(), ""]
    cfg_text = json.dumps(base_cfg, indent=2, sort_keys=False)
    h += [
        "<h3>Resolved base configuration</h3>",
        "<p class=note>Every default filled in; grid axes override the fields they name.</p>",
        f"<pre>{html.escape(cfg_text)}</pre>",
    ]
    m += ["### Resolved base configuration", "", "```json", cfg_text, "```", ""]
    h.append("</body></html>")
    return "\n".join(h), "\n".join(m)


#: Topology fields each kind uses (docs/configuration.md); the others are not shown.
_TOPOLOGY_FIELDS = {
    "fat-tree": {"kind", "k", "hosts_per_edge", "link_rate", "uplink_rate", "link_delay"},
    "leaf-spine": {"kind", "leaves", "spines", "hosts_per_leaf", "link_rate", "uplink_rate",
                   "link_delay"},
    "star": {"kind", "hosts", "link_rate", "uplink_rate", "link_delay"},
    "toy": {"kind", "link_rate", "uplink_rate", "link_delay"},
}


def _base_view(example: dict[str, Any] | None, spec: dict[str, Any]) -> dict[str, Any]:
    """A finished point's resolved configuration with grid-controlled fields marked."""
    if not example:
        return spec.get("base", {})
    cfg = json.loads(json.dumps(example))
    topo = cfg.get("topology")
    if isinstance(topo, dict):
        used = _TOPOLOGY_FIELDS.get(str(topo.get("kind")))
        if used is not None:
            cfg["topology"] = {k: v for k, v in topo.items() if k in used}
    w = cfg.get("workload", {})
    if isinstance(w, dict) and w.get("cdf_text"):
        w["cdf_text"] = f"<{len(w['cdf_text'])} characters: the CDF file's text>"
    for axis in spec.get("grid", {}):
        if axis == SCHEME_AXIS:
            continue
        node = cfg
        parts = axis.split(".")
        for p in parts[:-1]:
            node = node.get(p, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict) and parts[-1] in node:
            node[parts[-1]] = "<grid>"
    return cfg
