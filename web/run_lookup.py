"""A run and its data for a request: 404 when there is no such run, 409 when it is not ready.

Every route that reads a run goes through here, so the refusals read the same on the API
and on the pages.
"""

from __future__ import annotations

from typing import Any, NoReturn

import duckdb
from litestar.exceptions import ClientException, NotFoundException

from web.api_schema import RunView
from web.catalog import Run, RunKind, RunStatus
from web.catalog import runs as catalog_runs
from web.errors import ConflictException
from web.run_data import OutdatedReportError
from web.services import Services
from web.timeline_store import OutdatedTimelineError


def load_run(svc: Services, run_id: str) -> Run:
    """The run as the catalog has it now (a ready one from the kept copies when its row has
    not changed since); read-only."""
    run = svc.ready_runs.get(run_id)
    if run is None:
        raise NotFoundException(f"no run {run_id!r}")
    return run


def live_view(svc: Services, run: Run) -> RunView:
    """A run as the API shows it; an unfinished one in the scale-out mode with its job's
    state on the queue, whose progress is the one the running worker reports."""
    view = RunView.of(run)
    if svc.queue is not None and run.status in (RunStatus.QUEUED, RunStatus.INGESTING):
        view.ingest_job = svc.queue.job_state(run)
        if view.ingest_job is not None and run.status == RunStatus.INGESTING:
            view.progress = view.ingest_job.progress
    return view


def load_ready_run(svc: Services, run_id: str) -> Run:
    run = load_run(svc, run_id)
    if run.status != RunStatus.READY:
        detail = f": {run.error}" if run.error else ""
        raise ConflictException(f"run {run_id} is {run.status}, not ready{detail}")
    return run


def ready_report(svc: Services, run: Run) -> dict[str, Any]:
    """The stored report of a ready run (computed at ingest, cached per generation).

    A report of another version's shape is rebuilt: the run is queued for re-ingestion.
    """
    try:
        return svc.run_data.report(run.id, run.generation)
    except OutdatedReportError:
        _reingest(svc, run)


def open_run_database(
    svc: Services, run: Run, rank: int | None = None
) -> tuple[duckdb.DuckDBPyConnection, dict[str, Any]]:
    """A cursor on a ready run's trace database and its timeline metadata; for a job,
    ``rank``'s (None: its reference rank's, the run's own database).

    A database built by an older tracelens lacks the current timeline tables: the run is
    queued for re-ingestion from its kept original, and the client told to come back.
    """
    rank = job_rank(run, rank)
    try:
        return svc.run_data.database(run.id, run.generation, rank)
    except OutdatedTimelineError:
        _reingest(svc, run)


def job_rank(run: Run, rank: int | None) -> int | None:
    """``rank`` as the run's databases are named: None for the reference (lowest) rank,
    whose database is the run's own; 400 for a rank of a single trace, 404 for a rank the
    job does not have."""
    if rank is None:
        return None
    if run.kind != RunKind.JOB:
        raise ClientException(f"run {run.id} is one trace: it has no ranks to choose from")
    ranks = sorted(int(m["rank"]) for m in run.members or [])
    if rank not in ranks:
        raise NotFoundException(f"run {run.id} has no rank {rank} (its ranks: {ranks})")
    return None if rank == ranks[0] else rank


def _reingest(svc: Services, run: Run) -> NoReturn:
    """Queue a run whose stored data another version wrote, and tell the client so (409)."""
    with svc.catalog.session() as s:
        catalog_runs.requeue(s, run.id)
    svc.run_data.forget(run.id)
    svc.worker.submit(run.id)
    raise ConflictException(
        f"run {run.id} was ingested by an older tracelens and is being re-ingested; "
        "try again in a moment"
    ) from None
