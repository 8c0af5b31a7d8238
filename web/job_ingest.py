"""Ingesting a job run: every rank into its own database, then the job's report.

What the worker calls for a run whose kind is ``job`` (:class:`web.catalog.RunKind`). The
ranks are analysed by :func:`tracelens.ranks.job.analyze_job` (at most ``IN_FLIGHT`` at a
time, each with its share of the ingest's memory); each rank's database is kept with its
timeline tables, the reference rank's as the run's own database (the run's timeline), and
the job report is the run's report. Each rank's file is named in it as it was uploaded.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ingest import LoadedTrace, TraceInputError
from ingest.limits import MIB, IngestLimits
from ingest.redaction import redact
from ingest.schema import set_info
from tracelens.core.tracedb import TraceDB
from tracelens.flame_graph import store_call_path_tree
from tracelens.ranks.job import analyze_job
from web.catalog import Run, RunKind
from web.storage import RunFiles, write_json_atomic
from web.timeline_store import build_timeline_tables

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
    from web.ingest_worker import INGEST_NOTES_FACT

    members = sorted(run.members or [], key=lambda m: int(m["rank"]))
    pairs = [(int(m["rank"]), files.source(m["source_file"])) for m in members]
    by_rank = {int(m["rank"]): m for m in members}
    ref = pairs[0][0]
    done = [0]
    lock = threading.Lock()

    def db_path(rank: int) -> Path:
        return files.database(generation) if rank == ref else files.rank_database(generation, rank)

    def on_rank(rank: int, loaded: LoadedTrace) -> None:
        set_info(loaded.con, {INGEST_NOTES_FACT: json.dumps(redact(loaded.notes))})
        build_timeline_tables(loaded.con)
        store_call_path_tree(TraceDB(loaded.con))
        loaded.con.execute("CHECKPOINT")
        with lock:
            done[0] += 1
            progress(0.95 * done[0] / len(pairs))

    share = dataclasses.replace(
        limits, memory_bytes=max(256 * MIB, limits.memory_bytes // IN_FLIGHT)
    )
    try:
        job = analyze_job(
            pairs, in_flight=IN_FLIGHT, db_path=db_path, limits=share, on_rank=on_rank
        )
    except TraceInputError as exc:
        for r, p in pairs:
            if exc.path == str(p):
                raise TraceInputError(
                    p, f"rank {r} ({by_rank[r]['filename']}): {exc.problem}"
                ) from None
        raise
    for row in job["ranks"]:
        row["file"] = by_rank[row["rank"]]["filename"]
    for rank, rep in job["rank_reports"].items():
        m = by_rank[int(rank)]
        rep["source"].update(path=m["filename"], sha256=m["sha256"], size_bytes=m["size_bytes"])
    # the stored form, as every page and API answer reads it back
    job = json.loads(json.dumps(job, default=str))
    write_json_atomic(files.report(generation), job)
    return job
