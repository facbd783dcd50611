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
from typing import Any, Protocol

from repflow.errors import UserError
from repflow.experiments import verdicts as vd
from repflow.experiments.claims import (
    CLAIMS,
    NOT_MEASURED,
    POINT_COLUMNS,
    Claim,
    ClaimResult,
    RepEstimate,
    point_rows,
)
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
    #: Wall time of this study in the run (None: not recorded; see :func:`record_walls`).
    wall: float | None = 0.0


def with_profile(spec: Spec, profile: str) -> Spec:
    """``spec`` with ``[base] tcp.profile = profile`` (its explicit ``[tcp]`` fields, the
    paper's stated settings, still override the profile) and a name saying so."""
    s = copy.deepcopy(spec)
    s.base.setdefault("tcp", {})["profile"] = profile
    s.name = f"{spec.name}@{profile}"
    s.text = spec.text + f'\n# run by `repflow reproduce` with [base] tcp.profile = "{profile}"\n'
    s.extra = {**s.extra, "tcp_profile": profile}
    return s


def with_seed_offset(spec: Spec, offset: int) -> Spec:
    """``spec`` with every seed it runs (the grid's ``seed`` axis, or the base seed) shifted by
    ``offset`` (``--seed-offset``: the same study on other draws)."""
    if not offset:
        return spec
    s = copy.deepcopy(spec)
    if "seed" in s.grid:
        s.grid["seed"] = [int(x) + offset for x in s.grid["seed"]]
    s.base["seed"] = int(s.base.get("seed", 1)) + offset
    s.name = f"{spec.name}+seed{offset}"
    s.text = spec.text + f"\n# run by `repflow reproduce` with every seed shifted by {offset}\n"
    s.extra = {**s.extra, "seed_offset": offset}
    return s


def plan_runs(
    papers: Sequence[Paper], quick: bool, profiles: str, root: Path, seed_offset: int = 0
) -> list[Run]:
    """Every (study, profile) to run; ``profiles`` is ``both``, ``paper`` or ``dc``; every
    seed shifted by ``seed_offset``."""
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
                        spec=(with_seed_offset(with_profile(base, prof), seed_offset)
                              if base is not None else None),
                        missing=missing,
                    )
                )
    return runs


def owned(root: Path) -> bool:
    """Whether ``root`` is a result root of ``repflow reproduce`` (resumable)."""
    return (root / MARKER).is_file()


def write_marker(
    root: Path, runs: Sequence[Run], quick: bool, profiles: str, seed_offset: int = 0,
    budget: str | None = None,
) -> None:
    """Records what this root holds (read back by :func:`owned` and by the report)."""
    from repflow.version import __version__

    root.mkdir(parents=True, exist_ok=True)
    command = "repflow reproduce" + (" --quick" if quick else "")
    if seed_offset:
        command += f" --seed-offset {seed_offset}"
    if budget is not None:
        command += f" --budget {budget}"
    record = {
        "command": command,
        "version": __version__,
        "profiles": profiles,
        "seed_offset": seed_offset,
        "budget": budget,
        # in the order the run takes them (the combined report's order, also when rebuilt)
        "papers": list(dict.fromkeys(r.paper.id for r in runs)),
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


def budget_ledger(root: Path) -> Any:
    """The ledger of a ``--budget`` run stored in ``root`` (None: the last run of this root
    had no budget, or there is no ledger)."""
    from repflow.experiments import budget as bd

    try:
        marker = json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("budget") is None:
        return None
    return bd.Ledger.read(root)


def record_walls(root: Path, runs: Sequence[Run], wall: float) -> None:
    """Stores the wall times of this run (the whole run's and each study's) in the root's
    marker, where ``repflow report ROOT`` reads them back when it rebuilds the combined report
    (a rebuild computes nothing, so it has no wall time of its own to show)."""
    path = root / MARKER
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    record["wall"] = round(wall, 3)
    by_key = {(r.spec_name, r.profile): r for r in runs}
    for item in record.get("runs", []):
        r = by_key.get((item.get("spec"), item.get("profile")))
        if r is not None and not (r.missing or r.spec is None):
            item["wall"] = round(r.wall, 3)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


# -- the combined report --------------------------------------------------------------------


def _resolved_tcp(spec: Spec) -> dict[str, Any]:
    from repflow import config_io

    return config_io.validate(spec.base).get("tcp", {})


def profile_min_rto(profile: str) -> float | None:
    """``tcp.min_rto`` of a TCP profile, seconds (None when it cannot be resolved)."""
    from repflow import config_io
    from repflow.units import seconds

    try:
        tcp = config_io.validate({"tcp": {"profile": profile}}).get("tcp", {})
        return float(seconds(tcp["min_rto"]))
    except (UserError, KeyError, ValueError, TypeError):
        return None


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


def _same_run(row: Row) -> str:
    return (f"the run under the paper's profile, which is `{DC}` itself: see the column "
            "to the left")  # fmt: skip


def _counts(rows: Sequence[Row], key: str) -> dict[str, int]:
    """Headline counts (reproduced / not reproduced / open / …) under the papers' profiles
    (``key`` = ``paper``) or under ``dc``."""
    verdicts = []
    for row in rows:
        if key == "paper":
            res = row.under_paper
        else:
            res = row.under_paper if row.paper_profile == DC else row.under_dc
        if res is None:
            continue  # not run under this profile (`--profiles`)
        verdicts.append(res.verdict)
    return vd.headline(verdicts)


def _count_line(c: dict[str, int]) -> str:
    return vd.headline_line(c)


#: The report's statement of its conventions (both formats).
CONVENTIONS = (
    "Sign convention, everywhere: an effect of scheme a against scheme b is the reduction of "
    "a's metric relative to b's, in percent of b's — positive means a is lower (faster); "
    "'10× lower' reads 90 %, '30 % slower' reads −30 %. Levels (overhead, shares, collisions, "
    "retransmissions) are percentages of what they name. Every effect carries its 95 % "
    "interval (a bootstrap over the flows within each seed, the method the coverage study "
    "chose, with replicates "
    "added where a bound is near a boundary; docs/metrics.md) and the flows behind it per "
    "series and the seeds; ⚠ marks a 99th percentile resting on fewer than 1,000 flows, ⧗ a "
    "percentile on a timeout plateau (decided on the share of flows beyond it), † a mean "
    "carried mostly by flows that waited for a timeout (the notes give the share and the "
    "effect without them). Verdicts: reproduced; reproduced, larger than published; not "
    "reproduced — smaller, opposite sign, larger, or sign open; open (reproduced still "
    "possible together with something else); regime not reached. A claim over m points is "
    "reproduced when every point's 95 % interval is, and not reproduced when one point's "
    "interval at 1 − 0.05/m is not (5 % family-wise); bounds are printed with the digits "
    "that keep them on their side of the boundary they are tested against."
)


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
td.larger{background:#c8ecd8;font-weight:600}td.fails{background:#f8d0d0;font-weight:600}
td.regime{background:#f0e6d0;font-weight:600}.v{font-size:1.08em}
td.nm{color:#777}td.inc{background:#e8e8f4;font-weight:600}
.m{color:#555;font-size:.92em;font-weight:normal}.why{color:#124;font-size:.95em;
font-weight:600;margin-top:.2em}.rare{color:#733;font-size:.86em;font-weight:normal;
margin-top:.3em}.conv{color:#444;font-size:.9em}
.ref{color:#630;font-size:.88em;font-weight:600;margin-top:.3em}
"""

def _vclass(verdict: str) -> str:
    if verdict == vd.LARGER:
        return "larger"
    return {"reproduced": "holds", "not reproduced": "fails", vd.OPEN: "inc",
            vd.REGIME: "regime"}.get(vd.family(verdict), "nm")  # fmt: skip


def _wall(seconds: float | None) -> str:
    return "not recorded" if seconds is None else f"{seconds:.0f} s"


def write_report(
    root: Path, runs: Sequence[Run], quick: bool, wall: float | None, dest: Path | None = None
) -> tuple[Path, Path]:
    """Writes ``report.md``, ``report.html``, ``claims.csv`` and ``claim_points.csv`` into
    ``dest`` (default ``root``; the studies' reports are linked at their place relative to
    ``root``). ``wall``: the run's wall time (None: not recorded, e.g. a rebuild of a run made
    before wall times were stored; so is each run's ``wall`` when None)."""
    dest = root if dest is None else dest
    rows = claim_rows(runs)
    refs = reference_results(runs)
    papers = list(dict.fromkeys(r.paper.id for r in runs))
    by_id = {r.paper.id: r.paper for r in runs}
    offsets = {int((r.spec.extra or {}).get("seed_offset", 0)) for r in runs if r.spec}
    offset = max(offsets) if offsets else 0
    title = "Reproduction of the seed papers" + (" (quick forms)" if quick else "")
    if offset:
        title += f", every seed shifted by {offset}"
    c_paper, c_dc = _count_line(_counts(rows, "paper")), _count_line(_counts(rows, DC))
    conventions = CONVENTIONS
    if budget_ledger(root) is not None:
        from repflow.experiments import budget as bd

        conventions += (f" This run added seeds where verdicts were open (--budget): every "
                        f"interval above is at {vd.level_text(1 - bd.ALPHA)} % instead of 95 %, "
                        f"and at 1 − {bd.ALPHA:g}/m family-wise, so that the {bd.LOOKS} looks "
                        "a claim may get keep its error rate ≤ 5 % (the last section).")
    intro = (
        f"{len(rows)} published claims of {len(papers)} papers, each measured under the TCP "
        "profile the paper most likely used and under the data-center profile `dc` "
        f"(docs/configuration.md). Wall time of this run: {_wall(wall)}."
    )

    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    def md_cell(r: ClaimResult | None, ref: list[Reference] | None = None) -> str:
        if r is None:
            return "—"
        out = f"**{r.verdict}**" + (f" — {esc(r.reason)}" if r.reason else "")
        out += f"<br>{esc(r.measured)}"
        if r.notes:
            out += "<br>rare events: " + esc(" · ".join(r.notes))
        note = _reference_note(ref, r)
        if note:
            out += f" — **{esc(note)}**"
        return out

    md = [f"# {title}", "", intro, "",
          f"- under the papers' profiles: {c_paper}", f"- under `dc`: {c_dc}", "",
          conventions, "",
          "Machine-readable: [claims.csv](claims.csv) (one row per claim and profile), "
          "[claim_points.csv](claim_points.csv) (one row per claim, profile, workload, load "
          "and metric); columns in docs/metrics.md.", "",
          "| paper | claim | published | criterion | paper's profile | paper's profile: "
          "verdict, measured [95 % interval] | `dc`: verdict, measured [95 % interval] |",
          "|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in rows:
        dc_cell = (md_cell(row.under_dc, refs.get((row.claim.id, DC)))
                   if row.paper_profile != DC else _same_run(row))  # fmt: skip
        paper_cell = md_cell(row.under_paper, refs.get((row.claim.id, row.paper_profile)))
        md.append(
            f"| {row.paper.id} | {row.claim.id} | {esc(row.claim.text)} | "
            f"{esc(row.claim.criterion)} | `{row.paper_profile}` | {paper_cell} | {dc_cell} |"
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
            md.append(f"- `{r.spec_name}` under `{r.profile}`: {where} ({_wall(r.wall)})")
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
        f"<p>{html.escape(intro).replace('`dc`', '<code>dc</code>')}</p><ul><li>under the "
        f"papers' profiles: {html.escape(c_paper)}</li><li>under <code>dc</code>: "
        f"{html.escape(c_dc)}</li></ul><p class='conv'>{html.escape(conventions)}</p>"
        "<p>Machine-readable: <a href='claims.csv'>claims.csv</a> (one row per claim and "
        "profile), <a href='claim_points.csv'>claim_points.csv</a> (one row per claim, "
        "profile, workload, load and metric); columns in docs/metrics.md.</p>"
    )
    h.append(
        "<table><tr><th>paper</th><th>claim</th><th>published</th><th>criterion</th>"
        "<th>paper's profile</th><th>paper's profile: verdict, measured [95 % interval]</th>"
        "<th>dc: verdict, measured [95 % interval]</th></tr>"
    )

    def hcell(r: ClaimResult | None, same: str = "", ref: list[Reference] | None = None) -> str:
        if same:
            return f"<td class='nm'>{html.escape(same.replace('`', ''))}</td>"
        v, m = _cell(r)
        cls = _vclass(v)
        why = f"<div class='why'>{html.escape(r.reason)}</div>" if r and r.reason else ""
        rare = "".join(f"<div class='rare'>{html.escape(n)}</div>" for n in (r.notes if r else []))
        refs = "".join(f"<div class='ref'>{html.escape(_reference_note([one], r))}</div>"
                       for one in _measured_refs(ref))  # fmt: skip
        return (f"<td class='{cls}'><span class='v'>{html.escape(v)}</span>{why}"
                f"<div class='m'>{html.escape(m)}</div>{rare}{refs}</td>")  # fmt: skip

    for row in rows:
        same = _same_run(row) if row.paper_profile == DC else ""
        h.append(
            f"<tr><td>{row.paper.id}</td><td>{row.claim.id}</td>"
            f"<td>{html.escape(row.claim.text)}</td><td>{html.escape(row.claim.criterion)}</td>"
            f"<td><code>{row.paper_profile}</code></td>"
            f"{hcell(row.under_paper, ref=refs.get((row.claim.id, row.paper_profile)))}"
            f"{hcell(row.under_dc, same, refs.get((row.claim.id, DC)))}</tr>"
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
                f"({_wall(r.wall)})</li>"
            )
        h.append("</ul>")
        for r in {r.spec_name: r for r in runs if r.paper.id == pid}.values():
            h.append(f"<p>Profile of <code>{r.spec_name}</code>: {html.escape(r.why)}.</p>")
        para = html.escape(_difference_paragraph(paper, runs, rows)).replace("`", "")
        h.append(f"<p><b>What decides the difference.</b> {para}</p>")
    dest.mkdir(parents=True, exist_ok=True)
    ledger = budget_ledger(root)
    if ledger is not None:
        from repflow.experiments import budget as bd

        figs = bd.draw(ledger, dest)
        md_text += "\n".join(bd.section_md(ledger, figs)) + "\n"
        h.append(bd.section_html(ledger, figs))
    h.append("</body></html>")

    with (dest / "claims.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(CLAIM_COLUMNS)
        for row in rows:
            for prof, res in _profile_results(row):
                w.writerow(_claim_csv_row(row, prof, res, refs.get((row.claim.id, prof))))
    with (dest / "claim_points.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(POINT_COLUMNS))
        w.writeheader()
        for row in rows:
            for prof, res in _profile_results(row):
                for pr in point_rows(res, prof):
                    w.writerow({k: _csv_value(v) for k, v in pr.items()})
    (dest / "report.md").write_text(md_text, encoding="utf-8")
    (dest / "report.html").write_text("".join(h), encoding="utf-8")
    return dest / "report.md", dest / "report.html"


def contradicts(a: str, b: str) -> bool:
    """Whether verdicts ``a`` and ``b`` of one claim contradict each other: one says
    reproduced, the other not reproduced."""
    return vd.opposite_kinds(a, b)


def compare_verdicts(a: Path, b: Path) -> tuple[str, list[str]]:
    """A Markdown table of two runs' verdicts side by side (their ``claims.csv``), and the
    claims whose conclusive verdicts contradict each other."""
    def read(p: Path) -> dict[tuple[str, str], str]:
        with p.open(newline="", encoding="utf-8") as f:
            return {(r["claim"], r["profile"]): r["verdict"] for r in csv.DictReader(f)}

    va, vb = read(a), read(b)
    lines = ["| claim | profile | first run | second run | |", "|---|---|---|---|---|"]
    bad = []
    for key in sorted(set(va) & set(vb), key=lambda k: (CLAIM_ORDER.get(k[0], 99), k[1])):
        x, y = va[key], vb[key]
        mark = "**contradiction**" if contradicts(x, y) else ("same" if x == y else "")
        if contradicts(x, y):
            bad.append(f"{key[0]} under {key[1]}: {x} / {y}")
        lines.append(f"| {key[0]} | `{key[1]}` | {x} | {y} | {mark} |")
    return "\n".join(lines), bad


CLAIM_ORDER = {c.id: i for i, c in enumerate(CLAIMS)}


#: Studies whose flows a reference simulator replayed (committed fixtures,
#: :mod:`repflow.experiments.references`): quick spec → fixture study.
REFERENCE_STUDIES = {"repflow-paper-quick": "repflow-quick", "mptcp-l-quick": "mptcp-l-quick"}


@dataclass
class Reference:
    """What a reference simulator says of one claim under one profile."""

    label: str
    result: ClaimResult
    #: The sample it rests on (e.g. "seeds 1–2 of the quick study, the same flows").
    scope: str
    #: Our verdict on the same subset of flows and seeds (like with like).
    ours: ClaimResult | None = None
    #: Whether the reference's effects differ from ours on those flows: True when one
    #: point's interval of the difference (family-wise over the claim's points) excludes 0,
    #: False when none does, None when it cannot be computed.
    differs: bool | None = None
    #: The point where they differ most (or the widest agreement), in words.
    difference: str = ""


def effect_difference(ref: ClaimResult, ours: ClaimResult) -> tuple[bool | None, str]:
    """Whether a reference's effects differ from ours on the same flows: the paired
    replicates (the same flows are drawn for both: same seeds, sizes and starts) of ref − ours
    per point, at 1 − 0.05/m over the m points."""
    from repflow.experiments import stats

    pairs = []
    for a, b in zip(ref.points, ours.points, strict=False):
        if (a.workload, a.load, a.part, a.metric) != (b.workload, b.load, b.part, b.metric):
            continue
        if isinstance(a.est, RepEstimate) and isinstance(b.est, RepEstimate):
            n = min(len(a.est.reps), len(b.est.reps))
            pairs.append((a, a.est.reps[:n] - b.est.reps[:n], b))
    if not pairs:
        return None, ""
    conf = vd.family_confidence(len(pairs))
    worst = None
    for a, d, b in pairs:
        lo, hi = stats.bounds(d, conf)
        if lo > 0 or hi < 0:
            gap = min(abs(lo), abs(hi))
            if worst is None or gap > worst[0]:
                worst = (gap, a, lo, hi, b)
    if worst is None:
        n = len(pairs)
        return False, (f"every difference's interval includes 0 ({n} point{'s' if n > 1 else ''}"
                       f", {100 * conf:.1f} % each)")  # fmt: skip
    _, a, lo, hi, b = worst
    return True, (f"{a.where()}: reference {a.interval.estimate:.1f} % vs ours "
                  f"{b.interval.estimate:.1f} %, difference [{lo:.1f}, {hi:.1f}] points")


def reference_results(runs: Sequence[Run]) -> dict[tuple[str, str], list[Reference]]:
    """(claim id, profile) → what each reference simulator with fixtures says (htsim first,
    then ns-3): the verdict of the claim functions run unchanged on its records of the same
    flows (read from the committed fixtures; no reference binary is needed). Empty where no
    fixture exists or the references module is absent."""
    try:
        from repflow.experiments import references
    except ImportError:
        return {}
    from repflow.experiments.claims import Evidence, evaluate_claims
    from repflow.experiments.stats import Sample

    out: dict[tuple[str, str], list[Reference]] = {}
    for r in runs:
        study = REFERENCE_STUDIES.get(r.spec_name)
        if study is None or study not in references.STUDIES:
            continue
        spec = references.STUDIES[study]
        if r.profile not in spec["profiles"]:
            continue
        # the fixtures beside an editable install, or under the working directory (the
        # repository's root, where scripts/main.sh runs a regular install)
        roots = [references.FIXTURES, Path.cwd() / "tests" / "fixtures" / "refs"]
        root = next((x for x in roots if (x / study).is_dir()), None)
        if root is None:
            continue
        for ref in references.available_references(study, r.profile, root):
            try:
                recs = references.reference_records(study, r.profile, root, ref)
                agg = references.reference_aggregate(study, r.profile, root=root, ref=ref,
                                                     records=recs)
                prov = references.provenance(study, r.profile, root, ref)
                label = references.reference_label(study, r.profile, root, ref)
            except (OSError, ValueError, KeyError):
                continue
            subset = str(prov.get("subset", "")).split(";")[0]
            if recs.empty or agg.empty:
                continue
            samples: dict[tuple[str, str, float], Sample] = {}
            for (w, series, load, seed), g in recs.groupby(
                ["workload", "series", "load", "seed"]
            ):
                samples.setdefault((str(w), str(series), float(load)), Sample()).add(
                    seed, g, min_rto=profile_min_rto(r.profile))
            for smp in samples.values():
                smp.sort()
            ev = Evidence(agg, samples, int(spec.get("short_max", 100_000)))
            ours_ev = _ours_evidence(references, study, r.profile, root, recs,
                                     int(spec.get("short_max", 100_000)))  # fmt: skip
            ours_res = ({c.claim.id: c for c in evaluate_claims(ours_ev, [r.scenario])}
                        if ours_ev is not None else {})  # fmt: skip
            seeds = ", ".join(str(x) for x in sorted(set(recs["seed"])))
            schemes = ", ".join(dict.fromkeys(recs["scheme"]))
            scope = (f"{label} on our flows: seeds {seeds}" + (f", {subset}" if subset else "")
                     + f"; schemes {schemes}")  # fmt: skip
            for res in evaluate_claims(ev, [r.scenario]):
                if res.claim.scenario == r.scenario:
                    mine = ours_res.get(res.claim.id)
                    differs, diff = (effect_difference(res, mine) if mine is not None
                                     else (None, ""))  # fmt: skip
                    out.setdefault((res.claim.id, r.profile), []).append(
                        Reference(label, res, scope, mine, differs, diff)
                    )
    return out


def _ours_evidence(references: Any, study: str, profile: str, root: Path, recs: Any,
                   short_max: int) -> Any:  # fmt: skip
    """Evidence of our own records on a reference's subset (its schemes, points and seeds),
    or None when they are not stored."""
    from repflow.experiments import analysis
    from repflow.experiments.claims import Evidence
    from repflow.experiments.stats import Sample

    try:
        ours = references.ours_records(study, profile, root, like=recs)
    except (OSError, ValueError, KeyError):
        return None
    if ours.empty:
        return None
    pts, loaded = references.reference_points(study, profile, short_max, root, records=ours)
    agg = analysis.aggregate(pts, loaded)
    samples: dict[tuple[str, str, float], Sample] = {}
    for (w, series, load, seed), g in ours.groupby(["workload", "series", "load", "seed"]):
        samples.setdefault((str(w), str(series), float(load)), Sample()).add(
            seed, g, min_rto=profile_min_rto(profile))
    for smp in samples.values():
        smp.sort()
    return Evidence(agg, samples, short_max)


#: Columns of ``claims.csv`` (docs/metrics.md).
CLAIM_COLUMNS = ("paper", "claim", "profile", "paper_profile", "verdict", "family", "reason",
                 "published", "criterion", "measured", "rare_events", "interval_coverage", "points",
                 "points_decided", "family_level", "min_flows", "seeds", "reference",
                 "reference_verdict", "reference_measured", "ours_on_reference_subset",
                 "reference_differs")  # fmt: skip


def _profile_results(row: Row) -> list[tuple[str, ClaimResult]]:
    """(profile, result) of a claim: the paper's profile, then dc when it is another run."""
    pairs = [(row.paper_profile, row.under_paper)]
    if row.paper_profile != DC:
        pairs.append((DC, row.under_dc))
    return [(p, r) for p, r in pairs if r is not None]


def _measured_refs(refs: Sequence[Reference] | None) -> list[Reference]:
    return [x for x in refs or () if x.result.verdict != NOT_MEASURED]


def _claim_csv_row(row: Row, prof: str, res: ClaimResult,
                   refs: Sequence[Reference] | None = None) -> list[Any]:  # fmt: skip
    """One ``claims.csv`` row; with several references that measured the claim, their labels,
    verdicts and measurements are joined by "; " in the same order (htsim, then ns-3)."""
    pts = res.points
    flows = [min(p.interval.flows) for p in pts if p.interval.flows]
    m = _measured_refs(refs)
    return [row.paper.id, row.claim.id, prof, row.paper_profile, res.verdict,
            vd.family(res.verdict), res.reason, row.claim.text, row.claim.criterion,
            res.measured, " · ".join(res.notes), _coverage_cell(pts), len(pts),
            sum(1 for p in pts if p.verdict != vd.OPEN),
            f"{vd.family_confidence(len(pts)):.4g}" if pts else "",
            min(flows) if flows else "", max((p.interval.seeds for p in pts), default=""),
            "; ".join(x.label for x in m), "; ".join(x.result.verdict for x in m),
            "; ".join(x.result.measured for x in m),
            "; ".join(x.ours.verdict if x.ours else "" for x in m),
            "; ".join("" if x.differs is None else ("yes" if x.differs else "no")
                      for x in m)]  # fmt: skip


def _coverage_cell(points: Sequence[Any]) -> str:
    """The lowest measured coverage of the verdicts' intervals among the kinds of effect a
    claim rests on (docs/validation.md), as a fraction."""
    from repflow.experiments import coverage

    low = coverage.lowest_coverage(points)
    return "" if low is None else f"{low:.3g}"


def _reference_note(refs: Sequence[Reference] | None, ours: ClaimResult | None) -> str:
    """One sentence per reference on what it says, and whether it agrees with ours."""
    notes = []
    for ref in _measured_refs(refs):
        note = f"{ref.label} says: {ref.result.verdict}"
        if ref.ours is not None:
            note += f"; ours on the same flows: {ref.ours.verdict}"
        if ref.differs is True:
            note += f" — the effects differ ({ref.difference})"
        elif ref.differs is False:
            note += f" — no difference shown ({ref.difference})"
        notes.append(note + f" [{ref.scope}]")
    return ". ".join(notes)


def _csv_value(v: Any) -> Any:
    if isinstance(v, float):
        if v != v:
            return ""
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return f"{v:.6g}"
    return v


class ReportQueue(Protocol):
    """Reports drawn while the studies run
    (:class:`repflow.experiments.uptodate.BackgroundReports`)."""

    def poll(self) -> None:
        """Takes in the reports already drawn (never waits)."""

    def wait(self) -> None:
        """Waits for every report."""


def run_all(
    runs: Sequence[Run],
    root: Path,
    *,
    quick: bool,
    sweep: Callable[[Run], None],
    reports: ReportQueue | None = None,
) -> tuple[Path, Path, list[Row]]:
    """Runs every study with ``sweep(run)`` (which fills ``run.claims``, hands the run to
    ``reports``, or raises :class:`UserError`), waits for the reports drawn in the background,
    then writes the combined report. A failed study is reported and the others still run;
    nothing computed is lost (each sweep is resumable)."""
    t0 = time.monotonic()
    try:
        for r in runs:
            if r.missing or r.spec is None:
                continue
            t = time.monotonic()
            try:
                sweep(r)
            except UserError as exc:
                r.error = str(exc)
            r.wall = time.monotonic() - t
            if reports is not None:
                reports.poll()
    finally:
        if reports is not None:
            reports.wait()
    wall = time.monotonic() - t0
    record_walls(root, runs, wall)
    md, h = write_report(root, runs, quick, wall)
    return md, h, claim_rows(runs)
