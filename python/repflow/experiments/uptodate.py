"""Reports that are rebuilt only when their inputs changed, and the combined report of a
``repflow reproduce`` directory rebuilt from what it holds.

A sweep's report (figures, ``report.html``, ``report.md``) is a function of its store: the sweep
record (``sweep.json``), which points are finished or failed, and the project version. After a
report is built, :func:`record` writes a stamp (:data:`STAMP`) with a fingerprint of those
inputs and the claim verdicts. A rerun of ``repflow reproduce`` that computed nothing then finds
the stamp current and reuses the verdicts without reading a point or drawing a figure
(:func:`report_claims`); anything that changed — a point computed or retried, a spec edited, a
new version — rebuilds the report as before.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repflow.errors import UserError
from repflow.experiments.claims import CLAIMS, ClaimResult, Point
from repflow.experiments.store import POINTS, SWEEP_FILE, write_json_atomic

if TYPE_CHECKING:
    from repflow.experiments.reproduce import Run

#: The stamp a built report leaves in its sweep directory.
STAMP = ".uptodate.json"
#: Files a built report consists of (all must exist for the stamp to count).
REPORT_FILES = ("report.html", "report.md", "summary.csv", "figures")


#: Modules whose code decides a report's contents: a change to any of them makes every stamp
#: stale (the version alone does not change between releases).
REPORT_CODE = ("analysis", "claims", "claimtext", "evidence", "verdicts", "rare", "stats",
               "report", "figures")


def _code_digest() -> bytes:
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in REPORT_CODE:
        try:
            h.update((here / f"{name}.py").read_bytes())
        except OSError:
            h.update(name.encode())
    return h.digest()


def fingerprint(root: Path) -> str:
    """A digest of everything a sweep's report is built from: ``sweep.json``, the name and
    files of every stored point (a point directory never changes once written; a retried one is
    replaced, with other files), the project version and the code of :data:`REPORT_CODE`."""
    from repflow import __version__

    h = hashlib.sha256()
    h.update(__version__.encode())
    h.update(_code_digest())
    h.update((root / SWEEP_FILE).read_bytes())
    points = root / POINTS
    if points.is_dir():
        for d in sorted(points.iterdir()):
            if d.name.startswith(".") or not d.is_dir():
                continue
            files = sorted(f.name for f in d.iterdir() if f.name != "timing.json")
            h.update(f"{d.name}:{','.join(files)};".encode())
    return h.hexdigest()


def record(root: Path, claims: Sequence[ClaimResult]) -> None:
    """Writes the stamp of the report just built in ``root``."""
    write_json_atomic(
        root / STAMP,
        {
            "fingerprint": fingerprint(root),
            "claims": [
                {"id": c.claim.id, "measured": c.measured, "verdict": c.verdict,
                 "reason": c.reason, "notes": list(c.notes),
                 "points": [_point_json(p) for p in c.points]}
                for c in claims
            ],
        },
    )


def current_claims(root: Path) -> list[ClaimResult] | None:
    """The claim verdicts of ``root``'s report if the report is up to date with its store,
    else None (no stamp, a report file missing, or any input changed)."""
    try:
        stamp = json.loads((root / STAMP).read_text(encoding="utf-8"))
        if not all((root / name).exists() for name in REPORT_FILES):
            return None
        if stamp.get("fingerprint") != fingerprint(root):
            return None
        by_id = {c.id: c for c in CLAIMS}
        return [ClaimResult(by_id[c["id"]], c["measured"], c["verdict"], c.get("reason", ""),
                            [_point_of(p) for p in c.get("points", [])], list(c.get("notes", [])))
                for c in stamp["claims"]]  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _point_json(p: Point) -> dict[str, Any]:
    return p.to_json()


def _point_of(d: dict[str, Any]) -> Point:
    return Point.from_json(d)


def report_claims(root: Path, progress: Callable[[str], None] | None = None,
                  force: bool = False) -> tuple[list[ClaimResult], bool]:  # fmt: skip
    """The claim verdicts of the sweep in ``root``, building its report only when it is not
    up to date (or ``force``). Returns ``(claims, rebuilt)``."""
    if not force:
        claims = current_claims(root)
        if claims is not None:
            if progress is not None:
                progress("up to date (nothing changed since it was built): not redrawn")
            return claims, False
    from repflow.experiments.report import build_report

    rep = build_report(root, progress=progress)
    record(root, rep.claims)
    return rep.claims, True


# -- `repflow report` on a `repflow reproduce` directory ---------------------------------------


def read_marker(root: Path) -> dict[str, Any] | None:
    """The ``reproduce.json`` of a ``repflow reproduce`` root, or None."""
    from repflow.experiments.reproduce import MARKER

    try:
        doc = json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


@dataclass
class Rebuilt:
    """What ``repflow report ROOT`` rebuilt, for its closing lines."""

    #: The combined report's Markdown and HTML.
    markdown: Path
    html: Path
    #: The combined report's rows (claims).
    rows: list
    #: ``spec under profile`` of every study report redrawn, and where.
    studies: list[tuple[str, Path]]
    #: The run's wall time as recorded (None: the run recorded none).
    wall: float | None


def rebuild_combined(root: Path, progress: Callable[[str], None] | None = None,
                     out: Path | None = None) -> Rebuilt:  # fmt: skip
    """Rebuilds every study's report under a ``repflow reproduce`` root and then the combined
    report, from what the root holds (nothing is simulated), into ``out`` (default: in place;
    the layout under ``out`` is the root's). The studies keep the run's order and wall times,
    read from the root's marker (:func:`~repflow.experiments.reproduce.record_walls`)."""
    from repflow.experiments.papers import find_paper
    from repflow.experiments.report import build_report
    from repflow.experiments.reproduce import claim_rows, plan_runs, write_report

    marker = read_marker(root)
    if marker is None:
        raise UserError(f"{root}: not a `repflow reproduce` directory (no reproduce.json)")
    quick = "--quick" in str(marker.get("command", ""))
    recorded_runs = [r for r in marker.get("runs", []) if isinstance(r, dict)]
    # The papers in the order the run took them: its runs' order (older markers listed the
    # papers sorted; the runs were always in run order).
    ids = list(dict.fromkeys([str(r.get("paper")) for r in recorded_runs if r.get("paper")]
                             + list(marker.get("papers", []))))  # fmt: skip
    papers = [find_paper(p) for p in ids]
    runs = plan_runs(papers, quick, str(marker.get("profiles", "both")), root,
                     int(marker.get("seed_offset", 0) or 0))
    place = {(r.get("spec"), r.get("profile")): i for i, r in enumerate(recorded_runs)}
    if place:
        runs = sorted((r for r in runs if (r.spec_name, r.profile) in place),
                      key=lambda r: place[(r.spec_name, r.profile)])  # fmt: skip
    walls = {(r.get("spec"), r.get("profile")): r.get("wall") for r in recorded_runs}
    studies: list[tuple[str, Path]] = []
    for r in runs:
        w = walls.get((r.spec_name, r.profile))
        r.wall = float(w) if isinstance(w, int | float) else None
        if r.missing or r.spec is None:
            continue
        if not (r.out / SWEEP_FILE).is_file():
            r.error = "not computed yet (run `repflow reproduce` to compute it)"
            continue
        if progress is not None:
            progress(f"{r.spec_name} under {r.profile}")
        try:
            if out is None:
                r.claims, _ = report_claims(r.out, progress=progress, force=True)
                studies.append((f"{r.spec_name} under {r.profile}", r.out))
            else:
                dest = out / r.out.relative_to(root)
                r.claims = build_report(r.out, progress=progress, out=dest).claims
                studies.append((f"{r.spec_name} under {r.profile}", dest))
        except UserError as exc:
            r.error = str(exc)
    wall = marker.get("wall")
    wall = float(wall) if isinstance(wall, int | float) else None
    md, html_path = write_report(root, runs, quick, wall, dest=out)
    return Rebuilt(md, html_path, claim_rows(runs), studies, wall)


def say(msg: str) -> None:
    """Progress on standard error (one line per step)."""
    print(f"report: {msg}", file=sys.stderr, flush=True)


# -- reports drawn in the background by `repflow reproduce` ------------------------------


def _draw_report(out: str) -> None:
    """Builds the report of the sweep in ``out`` and records its verdicts (in a background
    process: :class:`BackgroundReports`)."""
    report_claims(Path(out), progress=None, force=True)


class BackgroundReports:
    """Draws each study's report in one background process while the next study computes.

    A report is single-threaded (mostly figures) and the sweeps keep every core busy, so a
    report drawn in the foreground leaves all cores but one idle for its duration; drawn in
    the background it shares the cores with the next sweep instead. The verdicts come back
    through the report's up-to-date stamp (:func:`current_claims`),
    so nothing but a path crosses the process boundary. A report that fails marks its study
    failed (its points stay stored: ``repflow report DIR`` redraws it)."""

    def __init__(self, progress: Callable[[str], None] | None = None) -> None:
        self.progress = progress
        self._pool: Any = None
        self._pending: list[tuple[Run, Any, float]] = []

    def submit(self, r: Run) -> None:
        """Starts drawing ``r``'s report."""
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        self._pending.append((r, self._pool.submit(_draw_report, str(r.out)), time.monotonic()))
        if self.progress is not None:
            self.progress(f"{r.spec_name} under {r.profile}: drawing in the background")

    def poll(self) -> None:
        """Takes in the reports already drawn (never waits)."""
        for item in [i for i in self._pending if i[1].done()]:
            self._finish(*item)

    def wait(self) -> None:
        """Waits for every report, then stops the background process."""
        for item in list(self._pending):
            self._finish(*item)
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def _finish(self, r: Run, fut: Any, t0: float) -> None:
        self._pending.remove((r, fut, t0))
        try:
            fut.result()
        except UserError as exc:
            r.error = str(exc)
            return
        except Exception as exc:  # noqa: BLE001 - a failed report must not lose the others
            r.error = (f"its report failed ({type(exc).__name__}: {exc}); the points are "
                       f"stored: `repflow report {r.out}` redraws it")  # fmt: skip
            return
        claims = current_claims(r.out)
        if claims is None:
            r.error = f"its report was drawn but is not up to date: `repflow report {r.out}`"
            return
        r.claims = claims
        if self.progress is not None:
            self.progress(f"{r.spec_name} under {r.profile}: drawn "
                          f"({time.monotonic() - t0:.0f} s, in the background)")  # fmt: skip
