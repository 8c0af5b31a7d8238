"""Ingesting a job run: every rank into its own database, then the job's report.

What the worker calls for a run whose kind is ``job`` (:class:`web.catalog.RunKind`). The
ranks are analysed by :func:`tracelens.ranks.job.analyze_job` (at most ``IN_FLIGHT`` at a
time, each with its share of the ingest's memory); each rank's database is kept with its
timeline tables, the reference rank's as the run's own database (the run's timeline), and
the job report is the run's report. Each rank's file is named in it as it was uploaded.

The scale-out mode does the same in two steps, each a queue job of its own (possibly on
different machines): :func:`build_rank` builds one rank's database and writes its extract
beside it, and :func:`align_ranks`, once every rank's is there, builds the job report from
the extracts (:func:`tracelens.ranks.job.job_report`, as :func:`analyze_job` does).
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ingest import LoadedTrace, TraceInputError
from ingest.limits import MIB, IngestLimits
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.ranks.extract_file import extract_from_json, extract_to_json
from tracelens.ranks.job import analyze_job, analyze_rank, job_report
from web.catalog import Run, RunKind
from web.ingest_progress import IngestProgress, JobProgress
from web.run_tables import keep_run_tables
from web.storage import RunFiles, publish_once, write_json_once

IN_FLIGHT = 2


def is_job(run: Run) -> bool:
    return run.kind == RunKind.JOB


def kept_sources(files: RunFiles, run: Run) -> list[Path]:
    """The run's kept originals: its one file, or each rank's."""
    if not is_job(run):
        return [files.source(run.source_file)]
    return [files.source(m["source_file"]) for m in run.members or []]


def catalog_facts(run: Run, report: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The format and facts the catalog keeps of a ready run's report."""
    if not is_job(run):
        facts = {k: report.get(k) for k in ("trace", "devices", "metrics", "notes")}
        return report["source"]["format"], facts
    ref = report["clock"]["reference_rank"]
    return report["rank_reports"][str(ref)]["source"]["format"], {
        "job": {
            "ranks": [r["rank"] for r in report["ranks"]],
            "world_size": report["world_size"],
            "reference_rank": ref,
        },
        "notes": report["notes"],
    }


def build_job_run(
    files: RunFiles,
    generation: int,
    run: Run,
    limits: IngestLimits,
    progress: Callable[[float], None],
) -> dict[str, Any]:
    """Ingest every rank of ``run``, write the job report, and return it."""
    members = sorted(run.members or [], key=lambda m: int(m["rank"]))
    pairs = [(int(m["rank"]), files.source(m["source_file"])) for m in members]
    by_rank = {int(m["rank"]): m for m in members}
    ref = pairs[0][0]
    bar = JobProgress(progress, [r for r, _ in pairs])

    def db_path(rank: int) -> Path:
        return files.database(generation) if rank == ref else files.rank_database(generation, rank)

    def on_rank(rank: int, loaded: LoadedTrace, db: TraceDB) -> None:
        keep_run_tables(loaded, db)
        bar.finished(rank)

    # the ranks in flight split the worker's share, ceiling included (the retry's figure)
    share = dataclasses.replace(
        limits,
        memory_bytes=max(256 * MIB, limits.memory_bytes // IN_FLIGHT),
        ceiling_bytes=max(256 * MIB, limits.ceiling // IN_FLIGHT),
    )
    try:
        job = analyze_job(
            pairs,
            in_flight=IN_FLIGHT,
            db_path=db_path,
            limits=share,
            on_rank=on_rank,
            progress_of=bar.rank,
        )
    except TraceInputError as exc:
        raise _naming_rank(exc, pairs, by_rank) from None
    return _publishable(files, generation, job, by_rank)


def _naming_rank(
    exc: TraceInputError, pairs: list[tuple[int, Path]], by_rank: dict[int, dict[str, Any]]
) -> TraceInputError:
    """``exc`` saying which rank (and which uploaded file) it is about."""
    for r, p in pairs:
        if exc.path == str(p):
            return TraceInputError(p, f"rank {r} ({by_rank[r]['filename']}): {exc.problem}")
    return exc


def _publishable(
    files: RunFiles, generation: int, job: dict[str, Any], by_rank: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    """The job report with each rank's file named as uploaded, written as the run's."""
    for row in job["ranks"]:
        row["file"] = by_rank[row["rank"]]["filename"]
    for rank, rep in job["rank_reports"].items():
        m = by_rank[int(rank)]
        rep["source"].update(path=m["filename"], sha256=m["sha256"], size_bytes=m["size_bytes"])
    # the stored form, as every page and API answer reads it back
    job = json.loads(json.dumps(job, default=str))
    # A second delivery of a generation's align job builds the same report from the same
    # extracts: the one in place (perhaps published, perhaps open on another machine) stays.
    write_json_once(files.report(generation), job)
    return job


def _members(run: Run) -> tuple[list[dict[str, Any]], int]:
    """The run's ranks in order, and its reference rank (the first)."""
    members = sorted(run.members or [], key=lambda m: int(m["rank"]))
    return members, int(members[0]["rank"])


def build_rank(
    files: RunFiles,
    generation: int,
    run: Run,
    rank: int,
    limits: IngestLimits,
    worker: str,
    on_progress: Callable[[float], None] | None = None,
) -> None:
    """One rank of ``generation``: its database (with its timeline tables) and its extract.

    The database is built under a name of this delivery's own and moved into place only
    once complete, and never over one that is there (:func:`web.storage.publish_once`):
    a second delivery of the same rank (at-least-once) keeps the first one's, which may
    already be published and open, and discards its own (the same rank, built the same).
    The extract is written last, the same way: a rank whose extract is there is complete.
    The extract names ``worker``, the delivery that wrote it. ``on_progress`` takes the
    rank's progress through its phases.
    """
    members, ref = _members(run)
    by_rank = {int(m["rank"]): m for m in members}
    source = files.source(by_rank[rank]["source_file"])
    target = files.job_database(generation, rank, ref)
    building = target.with_name(f".{target.name}.{secrets.token_hex(4)}.partial")

    progress = IngestProgress(on_progress) if on_progress is not None else None

    def on_rank(_: int, loaded: LoadedTrace, db: TraceDB) -> None:
        keep_run_tables(loaded, db)
        if progress is not None:
            progress.timeline_built()

    try:
        found = analyze_rank(
            rank,
            source,
            Thresholds(),
            db_path=building,
            limits=limits,
            on_rank=on_rank,
            progress=progress,
        )
        publish_once(building, target)
    except TraceInputError as exc:
        raise _naming_rank(exc, [(rank, source)], by_rank) from None
    finally:
        for p in (building, building.with_name(building.name + ".wal")):
            p.unlink(missing_ok=True)
    write_json_once(
        files.rank_extract(generation, rank), {"worker": worker, "extract": extract_to_json(found)}
    )


class RankMissing(Exception):
    """A rank of the generation has no complete database: the job cannot be published."""


def align_ranks(
    files: RunFiles, generation: int, run: Run
) -> tuple[dict[str, Any], dict[int, str]]:
    """The job report of ``generation`` from its ranks' extracts, written as the run's, and
    which worker built each rank. Raises :class:`RankMissing` unless every rank's database
    and extract are there."""
    members, ref = _members(run)
    by_rank = {int(m["rank"]): m for m in members}
    extracts = []
    workers: dict[int, str] = {}
    for rank in by_rank:
        path = files.rank_extract(generation, rank)
        if not path.is_file() or not files.job_database(generation, rank, ref).is_file():
            raise RankMissing(f"rank {rank} ({by_rank[rank]['filename']}) has no complete database")
        kept = json.loads(path.read_text(encoding="utf-8"))
        extracts.append(extract_from_json(kept["extract"]))
        workers[rank] = str(kept["worker"])
    job = job_report(extracts, Thresholds())
    return _publishable(files, generation, job, by_rank), workers
