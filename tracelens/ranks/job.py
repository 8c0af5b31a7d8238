"""Analyse a job: every rank on its own, at most ``in_flight`` at once, then across ranks.

Each rank is loaded, analysed and reduced to its extract, then closed, so memory holds
``in_flight`` rank databases at most, whatever the job's size. The job report carries each
rank's metrics and clock offset (``ranks``), the shared collectives' arrival skew, the
stragglers, and the findings: the cross-rank ones, then every rank's own, each naming its
rank.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from statistics import median
from typing import Any, Protocol

from ingest import LoadedTrace, load_trace
from ingest.limits import IngestLimits
from tracelens import __version__
from tracelens.core.finding_sections import reading_order
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import RECORDING_CAVEATS
from tracelens.ranks.clock import Alignment, align, from_base_times
from tracelens.ranks.counted_once import dropped_waiting_notes, reconcile, waiting_by_rank
from tracelens.ranks.extract import RankExtract, extract
from tracelens.ranks.grouping import group_shared
from tracelens.ranks.job_findings import imbalance_finding, straggler_findings
from tracelens.ranks.queueing import cite_queuing
from tracelens.ranks.storms import storm_finding, storm_saving_ns
from tracelens.ranks.stragglers import groups, skew_by_kind, stragglers

JOB_SCHEMA = "tracelens.job/1"


class RankProgress(Protocol):
    """What one rank reports as it goes (``web.ingest_progress.IngestProgress`` is one):
    the bytes of its file read, then the analyzers done."""

    def reading(self, done: int, total: int) -> None: ...

    def loaded(self) -> None: ...

    def analysing(self, done: int, total: int) -> None: ...

    def analysed(self) -> None: ...


def analyze_job(
    files: list[tuple[int, Path]],
    thresholds: Thresholds | None = None,
    top: int = 10,
    in_flight: int = 2,
    db_path: Callable[[int], Path | None] | None = None,
    limits: IngestLimits | None = None,
    on_rank: Callable[[int, LoadedTrace, TraceDB], None] | None = None,
    progress_of: Callable[[int], RankProgress] | None = None,
) -> dict[str, Any]:
    """The job report of ``files`` ((rank, path) pairs).

    ``db_path(rank)`` keeps a rank's trace database in that file (default: in memory);
    ``on_rank(rank, loaded, db)`` is called with each rank's open database (and the TraceDB
    its analysis used) once it is analysed
    (to add to what is kept of it), before it is closed. ``progress_of(rank)`` is where
    that rank reports its progress (from the rank's own thread).
    """
    t = thresholds or Thresholds()
    # the ranks in flight share one ingest's part of the machine, as concurrent ingests do
    limits = limits or IngestLimits.from_env(concurrent=max(1, in_flight))

    def one(item: tuple[int, Path]) -> RankExtract:
        rank, path = item
        target = db_path(rank) if db_path is not None else None
        progress = progress_of(rank) if progress_of is not None else None
        return analyze_rank(rank, path, t, top, target, limits, on_rank, progress)

    with ThreadPoolExecutor(max_workers=max(1, in_flight)) as pool:
        extracts = list(pool.map(one, files))
    return job_report(extracts, t)


def analyze_rank(
    rank: int,
    path: Path,
    t: Thresholds,
    top: int = 10,
    db_path: Path | None = None,
    limits: IngestLimits | None = None,
    on_rank: Callable[[int, LoadedTrace, TraceDB], None] | None = None,
    progress: RankProgress | None = None,
) -> RankExtract:
    """One rank loaded, analysed and reduced to its extract (what :func:`job_report` needs
    of it), then closed; ``db_path``, ``on_rank`` and ``progress`` as for
    :func:`analyze_job`. Ranks are independent until :func:`job_report`, so they may be
    analysed anywhere, in any order."""
    from tracelens.report import build_report

    loaded = load_trace(
        path,
        db_path=db_path,
        limits=limits,
        on_progress=progress.reading if progress is not None else None,
    )
    try:
        if progress is not None:
            progress.loaded()
        # one TraceDB for both: the extract reuses the derived tables the analyzers built
        db = TraceDB(loaded.con)
        report = build_report(
            loaded,
            t,
            top,
            db=db,
            on_progress=progress.analysing if progress is not None else None,
        )
        if progress is not None:
            progress.analysed()
        found = extract(db, rank, path, report, t)
        if on_rank is not None:
            on_rank(rank, loaded, db)
        return found
    finally:
        loaded.close()


def job_report(extracts: list[RankExtract], t: Thresholds) -> dict[str, Any]:
    ref = extracts[0]
    alignments = {ref.rank: Alignment(0, 0, len(ref.collectives), "reference")}
    for e in extracts[1:]:
        a = align(e.collectives, ref.collectives)
        if a.method == "none":
            a = from_base_times(e.base_time_ns, e.t0_ns, ref.base_time_ns, ref.t0_ns) or a
        alignments[e.rank] = a
    found = groups(extracts, alignments)
    late = stragglers(extracts, found)
    # Ranks whose traces kept a sample of their launches: who arrives last is measured
    # (the collectives' kernels were kept); their idle gaps are not, and their compute is
    # the kept kernels' (a heavier operator there is still seen, not what was dropped).
    thinned = any(e.sampled for e in extracts)
    if thinned:
        late = [
            s if s.cause == "compute" else replace(s, cause="thinned", idle_cause=None)
            for s in late
        ]
    window = int(median(_window(e) for e in extracts)) or 1
    world = _world_size(extracts)
    findings = straggler_findings(
        late, found, window, t, world, {e.rank: e.compute_ns for e in extracts}, thinned
    )
    # Time a rank waits inside collectives for a straggler is the straggler finding's: its
    # own communication findings keep only the rest, so no millisecond leads twice.
    named = {f["rank"] for f in findings if f["impact_ns"] > 0}
    waited = {e.rank: sum(g.waits[e.rank] for g in found if g.last in named) for e in extracts}
    imb = imbalance_finding(extracts, window, t, late, thinned)
    if imb is not None:
        findings.append(imb)
    storm = storm_finding(extracts, window, t)
    if storm is not None:
        findings.append(storm)
    # likewise what coalescing small collectives gives back is the storm finding's
    coalesced = {
        e.rank: storm_saving_ns(e.small, t)
        if storm and e.rank in storm["evidence"]["ranks"] and e.small
        else 0
        for e in extracts
    }
    whole = world is None or world == len(extracts)
    own: list[dict[str, Any]] = []
    dropped: dict[int, tuple[int, int]] = {}
    for e in extracts:
        paired = [g for g in found if e.rank in g.members]
        measured = (
            sum(g.waits[e.rank] for g in paired)
            if whole and found and len(paired) == len(e.collectives)
            else None
        )
        mine, note = reconcile(
            e.rank,
            e.report["findings"],
            measured,
            waited[e.rank],
            coalesced[e.rank],
            last_among_recorded=not whole and e.rank in named,
        )
        own += mine
        if note:
            dropped[e.rank] = note
    notes = dropped_waiting_notes(dropped)
    findings = [{**f, "ranks": f.get("ranks") or [f["rank"]]} for f in findings]
    # a shared finding's queuing advice rests on the rank that records the queuing
    findings += waiting_by_rank(
        cite_queuing(group_shared(own, len(extracts), world), extracts, alignments),
        {e.rank: e.report for e in extracts},
        frozenset(named) if not whole else frozenset(),
        waited,
    )
    findings.sort(
        key=lambda f: (
            -int(f["impact_ns"]),
            -int(f.get("subject_ns") or 0),
            f.get("rank") is not None,
            f["id"],
        )
    )
    notes += [
        f"rank {r}: {a.matched} collectives shared with rank {ref.rank}, none agree on a "
        "clock offset; its recorded clock is used"
        for r, a in alignments.items()
        if a.method == "none" and r != ref.rank
    ]
    notes += [
        f"rank {r}: no collective shared with rank {ref.rank} agrees on a clock offset; the "
        "ranks' recorded base times (baseTimeNanoseconds, realtime) align it, to the "
        "hosts' clock synchronisation (typically within milliseconds)"
        for r, a in alignments.items()
        if a.method == "base time"
    ]
    # what a rank's recording leaves out (filtered, launches thinned) weighs on every
    # cross-rank figure built from it: said once per rank, as its own report says it
    notes += [
        f"rank {e.rank}: {n}"
        for e in extracts
        for n in e.report.get("notes", [])
        if n.startswith(RECORDING_CAVEATS)
    ]
    if not found:
        notes.append("no collective is found on every rank: no straggler or skew analysis")
    if world is not None and world > len(extracts):
        notes.append(
            f"{len(extracts)} of the job's {world} ranks are here: who arrives last is judged "
            "among these, and a rank outside them may be later still"
        )
    return {
        "schema": JOB_SCHEMA,
        "tracelens_version": __version__,
        "world_size": world,
        "ranks": [_rank_row(e, alignments[e.rank]) for e in extracts],
        "clock": {
            "reference_rank": ref.rank,
            "method": "collective ends"
            if any(a.method == "collectives" for a in alignments.values())
            else "base times"
            if any(a.method == "base time" for a in alignments.values())
            else "recorded clocks",
            "offsets": [
                {
                    "rank": e.rank,
                    "offset_ns": alignments[e.rank].offset_ns,
                    "residual_ns": alignments[e.rank].residual_ns,
                    "matched_collectives": alignments[e.rank].matched,
                    "method": alignments[e.rank].method,
                }
                for e in extracts
            ],
        },
        "collectives": {"shared": len(found), "skew": skew_by_kind(found)},
        "stragglers": [
            {
                "rank": s.rank,
                "last_in": s.late,
                "of": s.groups,
                "held_back_ns": s.held_back_ns,
                "others_wait_ns": s.others_wait_ns,
                "cause": s.cause,
                "excess_compute_ns": s.excess_compute_ns,
                "excess_idle_ns": s.excess_idle_ns,
                "idle_cause": s.idle_cause,
            }
            for s in late
        ],
        "findings": findings,
        # as in a trace's report: positions in findings, in the order the job's text and
        # Markdown read them (sampled ranks: their un-costed idle time first, not the
        # pinned-memory hint that ranks first by impact)
        "reading_order": reading_order(findings),
        "notes": notes,
        "rank_reports": {str(e.rank): e.report for e in extracts},
    }


def _window(e: RankExtract) -> int:
    return int(e.report["metrics"].get("window_ns") or 0)


def _world_size(extracts: list[RankExtract]) -> int | None:
    sizes = {e.report["trace"].get("world_size") for e in extracts} - {None}
    return int(sizes.pop()) if len(sizes) == 1 else None


def _rank_row(e: RankExtract, a: Alignment) -> dict[str, Any]:
    from tracelens.analyzers.steps import step_timing

    rep = e.report
    step = step_timing(rep["findings"])
    return {
        "rank": e.rank,
        "file": str(e.path),
        "window_ns": _window(e),
        "busy_pct": rep["metrics"].get("gpu_busy_pct"),
        "idle_ns_by_cause": e.idle_ns_by_cause,
        "compute_ns": e.compute_ns,
        "comm_ns": e.comm_ns,
        "exposed_comm_ns": e.exposed_comm_ns,
        "median_step_ns": step.median_step_ns if step else None,
        "clock_offset_ns": a.offset_ns,
        "findings": len(rep["findings"]),
    }
