"""``repflow reproduce``: the seed papers' studies under two TCP profiles, and one report.

Every study of every chosen paper (:mod:`repflow.experiments.papers`) runs as an ordinary
resumable sweep into ``<root>/<spec>/<profile>/`` (with its own report and figures), once with
``tcp.profile`` set to the profile the paper most likely used and once with ``dc``. The
combined report (``<root>/report.md``, ``report.html``, ``claims.csv``) sets the verdict of
every published claim under both profiles side by side, lists the TCP fields in which the two
runs differ, and says which verdicts the profile changes.
"""

from __future__ import annotations

import copy
import csv
import html
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repflow.errors import UserError
from repflow.experiments.claims import CLAIMS, NOT_MEASURED, Claim, ClaimResult
from repflow.experiments.papers import DC, Paper
from repflow.experiments.spec import Spec, find_builtin_spec, load_spec

#: File marking a directory as a ``repflow reproduce`` result root.
MARKER = "reproduce.json"


@dataclass
class Run:
    """One study under one profile."""

    paper: Paper
    spec_name: str
    scenario: str
    #: ``tcp.profile`` of this run.
    profile: str
    #: The paper's profile for this study (``profile`` is either it or ``dc``).
    paper_profile: str
    why: str
    out: Path
    #: The spec with the profile applied (None: the spec file is not in this tree).
    spec: Spec | None
    missing: str = ""
    claims: list[ClaimResult] = field(default_factory=list)
    error: str = ""
    wall: float = 0.0


def with_profile(spec: Spec, profile: str) -> Spec:
    """``spec`` with ``[base] tcp.profile = profile`` (its explicit ``[tcp]`` fields, the
    paper's stated settings, still override the profile) and a name saying so."""
    s = copy.deepcopy(spec)
    s.base.setdefault("tcp", {})["profile"] = profile
    s.name = f"{spec.name}@{profile}"
    s.text = spec.text + f'\n# run by `repflow reproduce` with [base] tcp.profile = "{profile}"\n'
    s.extra = {**s.extra, "tcp_profile": profile}
    return s


def plan_runs(papers: Sequence[Paper], quick: bool, profiles: str, root: Path) -> list[Run]:
    """Every (study, profile) to run; ``profiles`` is ``both``, ``paper`` or ``dc``."""
    runs: list[Run] = []
    for paper in papers:
        for study in paper.studies:
            name = study.quick if quick else study.full
            wanted: list[str] = []
            if profiles in ("both", "paper"):
                wanted.append(study.profile)
            if profiles in ("both", "dc") and DC not in wanted:
                wanted.append(DC)
            try:
                base: Spec | None = load_spec(find_builtin_spec(name))
                missing = ""
            except UserError as exc:
                base, missing = None, str(exc)
            for prof in wanted:
                runs.append(
                    Run(
                        paper=paper,
                        spec_name=name,
                        scenario=study.scenario,
                        profile=prof,
                        paper_profile=study.profile,
                        why=study.why,
                        out=root / name / prof,
                        spec=with_profile(base, prof) if base is not None else None,
                        missing=missing,
                    )
                )
    return runs


def owned(root: Path) -> bool:
    """Whether ``root`` is a result root of ``repflow reproduce`` (resumable)."""
    return (root / MARKER).is_file()


def write_marker(root: Path, runs: Sequence[Run], quick: bool, profiles: str) -> None:
    """Records what this root holds (read back by :func:`owned` and by the report)."""
    from repflow.version import __version__

    root.mkdir(parents=True, exist_ok=True)
    record = {
        "command": "repflow reproduce" + (" --quick" if quick else ""),
        "version": __version__,
        "profiles": profiles,
        "papers": sorted({r.paper.id for r in runs}),
        "runs": [
            {
                "paper": r.paper.id,
                "spec": r.spec_name,
                "profile": r.profile,
                "paper_profile": r.paper_profile,
                "dir": str(r.out.relative_to(root)),
            }
            for r in runs
        ],
    }
    (root / MARKER).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


# -- the combined report --------------------------------------------------------------------


def _resolved_tcp(spec: Spec) -> dict[str, Any]:
    from repflow import config_io

    return config_io.validate(spec.base).get("tcp", {})


def profile_differences(paper_spec: Spec, dc_spec: Spec) -> list[tuple[str, Any, Any]]:
    """(field, value under the paper's profile, value under dc) for every resolved TCP field
    that differs between the two runs of a study."""
    a, b = _resolved_tcp(paper_spec), _resolved_tcp(dc_spec)
    return [
        (k, a.get(k), b.get(k))
        for k in sorted(set(a) | set(b))
        if k != "profile" and a.get(k) != b.get(k)
    ]


def _fmt_value(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


@dataclass
class Row:
    """One claim under the paper's profile and under dc."""

    paper: Paper
    claim: Claim
    paper_profile: str
    under_paper: ClaimResult | None
    under_dc: ClaimResult | None


def claim_rows(runs: Sequence[Run]) -> list[Row]:
    """One row per claim of the chosen papers, in registry order."""
    rows = []
    scen_paper = {r.scenario: (r.paper, r.paper_profile) for r in runs}
    for claim in CLAIMS:
        if claim.scenario not in scen_paper:
            continue
        paper, pprof = scen_paper[claim.scenario]

        def result(profile: str, claim: Claim = claim) -> ClaimResult | None:
            for r in runs:
                if r.scenario != claim.scenario or r.profile != profile:
                    continue
                if r.missing:
                    return ClaimResult(claim, f"spec missing: {r.missing}", NOT_MEASURED)
                if r.error:
                    return ClaimResult(claim, f"study failed: {r.error}", NOT_MEASURED)
                for c in r.claims:
                    if c.claim.id == claim.id:
                        return c
            return None

        rows.append(Row(paper, claim, pprof, result(pprof), result(DC) if pprof != DC else None))
    return rows


def _cell(r: ClaimResult | None) -> tuple[str, str]:
    if r is None:
        return "—", ""
    return r.verdict, r.measured


def _difference_paragraph(paper: Paper, runs: Sequence[Run], rows: Sequence[Row]) -> str:
    mine = [r for r in runs if r.paper.id == paper.id]
    parts = []
    for spec_name in dict.fromkeys(r.spec_name for r in mine):
        pair = {r.profile: r for r in mine if r.spec_name == spec_name}
        pprof = next(iter(pair.values())).paper_profile
        if pprof == DC:
            parts.append(
                f"`{spec_name}` runs under `dc` only (the paper's own settings are closest to it)."
            )
            continue
        a, b = pair.get(pprof), pair.get(DC)
        if a is None or b is None or a.spec is None or b.spec is None:
            continue
        try:
            diffs = profile_differences(a.spec, b.spec)
        except UserError as exc:
            parts.append(f"`{spec_name}`: could not resolve the profiles ({exc}).")
            continue
        if diffs:
            listed = ", ".join(f"`{k}` {_fmt_value(x)} vs {_fmt_value(y)}" for k, x, y in diffs)
            parts.append(
                f"`{spec_name}` under `{pprof}` differs from `dc` in {listed} (fields "
                "the spec sets itself are equal in both runs)."
            )
        else:
            parts.append(
                f"`{spec_name}`: the spec sets every field the profiles differ in, so "
                "both runs are the same configuration."
            )
    changed = [
        f"{r.claim.id} ({r.under_paper.verdict} under `{r.paper_profile}`, "
        f"{r.under_dc.verdict} under `dc`)"
        for r in rows
        if r.paper.id == paper.id
        and r.under_paper is not None
        and r.under_dc is not None
        and r.under_paper.verdict != r.under_dc.verdict
    ]
    verdicts = (
        "Verdicts the profile changes: " + "; ".join(changed) + "."
        if changed
        else "No verdict changes between the profiles."
    )
    return " ".join(
        ["How the profile can act:", paper.mechanism, "In these runs:", *parts, verdicts]
    )


_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1250px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.8em 0;font-size:.86em}
th,td{border:1px solid #ccc;padding:.25em .55em;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.holds{background:#d8f3d8;font-weight:600}
td.partial{background:#fff2c8;font-weight:600}td.fails{background:#f8d0d0;font-weight:600}
td.nm{color:#777}.m{color:#555;font-size:.92em;font-weight:normal}
"""

_VCLASS = {"holds": "holds", "direction only": "partial", "does not hold": "fails"}


def write_report(root: Path, runs: Sequence[Run], quick: bool, wall: float) -> tuple[Path, Path]:
    """Writes ``report.md``, ``report.html`` and ``claims.csv`` into ``root``."""
    rows = claim_rows(runs)
    papers = list(dict.fromkeys(r.paper.id for r in runs))
    by_id = {r.paper.id: r.paper for r in runs}
    title = "Reproduction of the seed papers" + (" (quick forms)" if quick else "")
    counts: dict[str, dict[str, int]] = {"paper": {}, DC: {}}
    for row in rows:
        for key, res in (("paper", row.under_paper), (DC, row.under_dc or row.under_paper)):
            v = res.verdict if res else NOT_MEASURED
            counts[key][v] = counts[key].get(v, 0) + 1

    def summary(key: str) -> str:
        return ", ".join(f"{n} {v}" for v, n in sorted(counts[key].items()))

    md = [f"# {title}", ""]
    md.append(
        f"{len(rows)} published claims of {len(papers)} papers, each measured under the TCP "
        "profile the paper most likely used and under the data-center profile `dc` "
        f"(docs/configuration.md). Wall time of this run: {wall:.0f} s."
    )
    md += [
        "",
        f"- under the papers' profiles: {summary('paper')}",
        f"- under `dc`: {summary(DC)}",
        "",
    ]
    md += [
        "| paper | claim | published | paper's profile | verdict (paper's profile) | "
        "verdict (`dc`) |",
        "|---|---|---|---|---|---|",
    ]

    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    for row in rows:
        vp, mp = _cell(row.under_paper)
        vd, md_ = _cell(row.under_dc) if row.paper_profile != DC else ("(same run)", "")
        md.append(
            f"| {row.paper.id} | {row.claim.id} | {esc(row.claim.text)} | "
            f"`{row.paper_profile}` | **{vp}**: {esc(mp)} | **{vd}**: {esc(md_)} |"
        )
    for pid in papers:
        paper = by_id[pid]
        md += ["", f"## {paper.title}", ""]
        for r in runs:
            if r.paper.id != pid:
                continue
            where = (
                f"[report]({r.out.relative_to(root)}/report.html)"
                if not r.missing
                else f"not run: {r.missing}"
            )
            if r.error:
                where = f"failed: {r.error}"
            md.append(f"- `{r.spec_name}` under `{r.profile}`: {where} ({r.wall:.0f} s)")
        study_why = {r.spec_name: r.why for r in runs if r.paper.id == pid}
        md.append("")
        for name, why in study_why.items():
            md.append(f"Profile of `{name}`: {why}.")
        md += ["", "**What decides the difference.** " + _difference_paragraph(paper, runs, rows)]
    md_text = "\n".join(md) + "\n"

    h = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>"
    ]
    h.append(
        f"<p>{len(rows)} published claims of {len(papers)} papers, each measured under the "
        "TCP profile the paper most likely used and under the data-center profile "
        f"<code>dc</code>. Wall time: {wall:.0f} s.</p><ul><li>under the papers' profiles: "
        f"{html.escape(summary('paper'))}</li><li>under <code>dc</code>: "
        f"{html.escape(summary(DC))}</li></ul>"
    )
    h.append(
        "<table><tr><th>paper</th><th>claim</th><th>published</th><th>paper's profile</th>"
        "<th>verdict (paper's profile)</th><th>verdict (dc)</th></tr>"
    )

    def hcell(r: ClaimResult | None, same: bool = False) -> str:
        if same:
            return "<td class='nm'>(same run)</td>"
        v, m = _cell(r)
        cls = _VCLASS.get(v, "nm")
        return f"<td class='{cls}'>{html.escape(v)}<div class='m'>{html.escape(m)}</div></td>"

    for row in rows:
        h.append(
            f"<tr><td>{row.paper.id}</td><td>{row.claim.id}</td>"
            f"<td>{html.escape(row.claim.text)}</td><td><code>{row.paper_profile}</code></td>"
            f"{hcell(row.under_paper)}{hcell(row.under_dc, row.paper_profile == DC)}</tr>"
        )
    h.append("</table>")
    for pid in papers:
        paper = by_id[pid]
        h.append(f"<h2>{html.escape(paper.title)}</h2><ul>")
        for r in runs:
            if r.paper.id != pid:
                continue
            if r.missing:
                where = f"not run: {html.escape(r.missing)}"
            elif r.error:
                where = f"failed: {html.escape(r.error)}"
            else:
                where = f"<a href='{r.out.relative_to(root)}/report.html'>report</a>"
            h.append(
                f"<li><code>{r.spec_name}</code> under <code>{r.profile}</code>: {where} "
                f"({r.wall:.0f} s)</li>"
            )
        h.append("</ul>")
        for r in {r.spec_name: r for r in runs if r.paper.id == pid}.values():
            h.append(f"<p>Profile of <code>{r.spec_name}</code>: {html.escape(r.why)}.</p>")
        para = html.escape(_difference_paragraph(paper, runs, rows)).replace("`", "")
        h.append(f"<p><b>What decides the difference.</b> {para}</p>")
    h.append("</body></html>")

    with (root / "claims.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["paper", "claim", "profile", "paper_profile", "verdict", "measured"])
        for row in rows:
            pairs = [(row.paper_profile, row.under_paper)]
            if row.paper_profile != DC:
                pairs.append((DC, row.under_dc))
            for prof, res in pairs:
                if res is None:
                    continue
                w.writerow(
                    [row.paper.id, row.claim.id, prof, row.paper_profile, res.verdict, res.measured]
                )
    (root / "report.md").write_text(md_text, encoding="utf-8")
    (root / "report.html").write_text("".join(h), encoding="utf-8")
    return root / "report.md", root / "report.html"


def run_all(
    runs: Sequence[Run],
    root: Path,
    *,
    quick: bool,
    sweep: Callable[[Run], None],
) -> tuple[Path, Path, list[Row]]:
    """Runs every study with ``sweep(run)`` (which fills ``run.claims`` or raises
    :class:`UserError`), then writes the combined report. A failed study is reported and the
    others still run; nothing computed is lost (each sweep is resumable)."""
    t0 = time.monotonic()
    for r in runs:
        if r.missing or r.spec is None:
            continue
        t = time.monotonic()
        try:
            sweep(r)
        except UserError as exc:
            r.error = str(exc)
        r.wall = time.monotonic() - t
    wall = time.monotonic() - t0
    md, h = write_report(root, runs, quick, wall)
    return md, h, claim_rows(runs)
