"""Catalog operations of the scale-out mode (:mod:`web.queue`): runs as queue jobs see them.

A queue delivers a job at least once: a worker killed mid-job has its job delivered again
to another. So a job claims its run whether it is queued or still ``ingesting`` from the
lost delivery, and every claim is a new generation: whatever the lost delivery (or a
slow one still running somewhere) writes afterwards is guarded out by its older
generation, exactly as a re-ingest's is.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from web.catalog import runs
from web.catalog.models import Run, RunStatus, utcnow


def claim_delivery(s: Session, run_id: str) -> int | None:
    """Move a queued (or lost mid-ingest) run to ingesting: its new generation, or None
    when the run is gone or already finished (a duplicate delivery)."""
    return runs.claim(s, run_id, lost_too=True)


def release_for_retry(s: Session, run_id: str, generation: int, note: str) -> None:
    """An attempt failed and the queue will try again: the run waits, saying why."""
    s.execute(
        update(Run)
        .where(Run.id == run_id, Run.generation == generation, Run.status == RunStatus.INGESTING)
        .values(status=RunStatus.QUEUED, progress=0.0, error=note[:2000], updated_at=utcnow())
    )


@dataclass(frozen=True)
class UnfinishedRun:
    id: str
    status: str
    generation: int
    attempts: int
    label: str  # the upload's file name, for messages
    # a job run's ranks (each a rank job once its generation fans out); () for one trace
    ranks: tuple[int, ...] = ()


def unfinished_runs(s: Session) -> list[UnfinishedRun]:
    """Every queued or ingesting run, oldest first."""
    rows = s.execute(
        select(Run.id, Run.status, Run.generation, Run.attempts, Run.original_filename, Run.members)
        .where(Run.status.in_([RunStatus.QUEUED, RunStatus.INGESTING]))
        .order_by(Run.created_at)
    )
    return [
        UnfinishedRun(
            id=run_id,
            status=status,
            generation=generation,
            attempts=attempts,
            label=label,
            ranks=tuple(sorted(int(m["rank"]) for m in members or [])),
        )
        for run_id, status, generation, attempts, label, members in rows
    ]


def requeue_stalled(s: Session, run: UnfinishedRun, max_attempts: int) -> bool:
    """A run left ``ingesting`` with no job alive to finish it: queued again, or failed
    once it has been tried ``max_attempts`` times. True when it was queued again."""
    guard = (
        Run.id == run.id,
        Run.generation == run.generation,
        Run.status == RunStatus.INGESTING,
    )
    if run.attempts >= max_attempts:
        s.execute(
            update(Run)
            .where(*guard)
            .values(
                status=RunStatus.FAILED,
                error=f"ingestion was interrupted {run.attempts} times; giving up",
                updated_at=utcnow(),
            )
        )
        return False
    res = s.execute(
        update(Run).where(*guard).values(status=RunStatus.QUEUED, progress=0.0, updated_at=utcnow())
    )
    return res.rowcount == 1  # type: ignore[attr-defined]


def fail_stalled(s: Session, run: UnfinishedRun, error: str) -> None:
    """A run whose job the queue gave up on (its attempts spent) fails with its last error."""
    fail_ingesting(s, run.id, run.generation, error)


def fail_ingesting(s: Session, run_id: str, generation: int, error: str) -> None:
    """Fail ``generation`` of a run if it is still the one ingesting (a job of an older
    generation, or one the run finished without, changes nothing)."""
    s.execute(
        update(Run)
        .where(
            Run.id == run_id,
            Run.generation == generation,
            Run.status == RunStatus.INGESTING,
        )
        .values(status=RunStatus.FAILED, error=error[:2000], updated_at=utcnow())
    )


def ingesting_generation(s: Session, run_id: str, generation: int) -> Run | None:
    """The run if ``generation`` is the one ingesting it, else None (deleted, finished, or
    claimed again since): what a rank or align job checks before and after its work."""
    return s.scalar(
        select(Run).where(
            Run.id == run_id,
            Run.generation == generation,
            Run.status == RunStatus.INGESTING,
        )
    )
