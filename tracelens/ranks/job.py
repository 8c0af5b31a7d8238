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
from pathlib import Path
from statistics import median
from typing import Any

from ingest import LoadedTrace, load_trace
from ingest.limits import IngestLimits
from tracelens import __version__
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.ranks.clock import Alignment, align
from tracelens.ranks.extract import RankExtract, extract
from tracelens.ranks.job_findings import imbalance_finding, straggler_findings
from tracelens.ranks.stragglers import groups, skew_by_kind, stragglers

JOB_SCHEMA = "tracelens.job/1"


def analyze_job(
    files: list[tuple[int, Path]],
    thresholds: Thresholds | None = None,
    top: int = 10,
    in_flight: int = 2,
    db_path: Callable[[int], Path | None] | None = None,
    limits: IngestLimits | None = None,
    on_rank: Callable[[int, LoadedTrace], None] | None = None,
) -> dict[str, Any]:
    """The job report of ``files`` ((rank, path) pairs).

    ``db_path(rank)`` keeps a rank's trace database in that file (default: in memory);
    ``on_rank(rank, loaded)`` is called with each rank's open database once it is analysed
    (to add to what is kept of it), before it is closed.
    """
    t = thresholds or Thresholds()
    from tracelens.report import build_report

    def one(item: tuple[int, Path]) -> RankExtract:
        rank, path = item
        target = db_path(rank) if db_path is not None else None
        loaded = load_trace(path, db_path=target, limits=limits)
        try:
            report = build_report(loaded, t, top)
            found = extract(TraceDB(loaded.con), rank, path, report)
            if on_rank is not None:
                on_rank(rank, loaded)
            return found
        finally:
            loaded.close()

    with ThreadPoolExecutor(max_workers=max(1, in_flight)) as pool:
        extracts = list(pool.map(one, files))
    return job_report(extracts, t)


def job_report(extracts: list[RankExtract], t: Thresholds) -> dict[str, Any]:
    ref = extracts[0]
    alignments = {ref.rank: Alignment(0, 0, len(ref.collectives), "reference")}
    for e in extracts[1:]:
        alignments[e.rank] = align(e.collectives, ref.collectives)
    found = groups(extracts, alignments)
    late = stragglers(extracts, found)
    window = int(median(_window(e) for e in extracts)) or 1
    findings = straggler_findings(late, found, window, t)
    imb = imbalance_finding(extracts, window, t, late)
    if imb is not None:
        findings.append(imb)
    # Time a rank waits inside collectives for a straggler is the straggler finding's: its
    # own communication findings keep only the rest, so no millisecond leads twice.
    named = {f["rank"] for f in findings if f["analyzer"] == "ranks" and f["impact_ns"] > 0}
    waited = {e.rank: sum(g.waits[e.rank] for g in found if g.last in named) for e in extracts}
    for e in extracts:
        left = waited[e.rank]
        # A rank's finding id is its single-trace id and its rank: every rank may have the
        # same finding (the same hot operator), and a job's ids must each name one.
        mine = [_of_rank(f, e.rank) for f in e.report["findings"]]
        # the peer-waiting finding holds waiting time first; the transfer finding only
        # what exceeds it (it already leaves the peer-waiting finding's part out)
        for f in sorted(mine, key=lambda f: "waiting_ns" not in f["evidence"]):
            f2, left = _less_waiting(f, left)
            findings.append(f2)
    findings.sort(key=lambda f: (-int(f["impact_ns"]), f.get("rank") is not None, f["id"]))
    notes = [
        f"rank {r}: {a.matched} collectives shared with rank {ref.rank}, none agree on a "
        "clock offset; its recorded clock is used"
        for r, a in alignments.items()
        if a.method == "none" and r != ref.rank
    ]
    if not found:
        notes.append("no collective is found on every rank: no straggler or skew analysis")
    world = _world_size(extracts)
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
            "method": "collective ends",
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
        "notes": notes,
        "rank_reports": {str(e.rank): e.report for e in extracts},
    }


def _of_rank(f: dict[str, Any], rank: int) -> dict[str, Any]:
    return {
        **f,
        "id": f"{f['id']}-r{rank}",
        "supersedes": [f"{s}-r{rank}" for s in f.get("supersedes") or []],
        "rank": rank,
    }


def _less_waiting(f: dict[str, Any], waited_ns: int) -> tuple[dict[str, Any], int]:
    """``f`` without up to ``waited_ns`` of straggler waiting, and the waiting left over."""
    if f["analyzer"] != "communication" or waited_ns <= 0 or f["impact_ns"] <= 0:
        return f, waited_ns
    cut = min(int(f["impact_ns"]), waited_ns)
    scale = (f["impact_ns"] - cut) / f["impact_ns"]
    return {
        **f,
        "impact_ns": int(f["impact_ns"]) - cut,
        "impact_pct": round(float(f["impact_pct"]) * scale, 3),
        "impact_basis": f["impact_basis"]
        + f" In this job, {fmt_ns(cut)} of it is waiting for a straggler rank, which that "
        "rank's finding counts; the rest is left here.",
    }, waited_ns - cut


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
