"""Runs the catalog says are unfinished, checked against their jobs on the queue.

Queued and ingesting runs should each have a live job. One may not: the web process
stopped between recording an upload and enqueueing it, Redis lost its data, or the
queue gave up on a job whose workers kept dying. The web process checks at start and
every worker checks periodically, so whichever is left running finds such runs:

- a live job (queued, running, waiting to retry): nothing to do;
- an ``ingesting`` run whose job the queue aborted after its attempts were spent: the
  run fails with the job's last error;
- otherwise an ``ingesting`` run goes back to queued (failed once the catalog counts
  ``queue_attempts`` tries), and a queued run's job is enqueued again.

Every catalog change is guarded by the generation read, so a run that moved on between
the two reads is left as it is, and enqueueing is idempotent by job key.
"""

from __future__ import annotations

import asyncio
import logging

from saq import Queue
from saq.job import Status

from web.catalog import Catalog, RunStatus, job_runs
from web.queue.connection import enqueue
from web.queue.payload import IngestJob
from web.settings import Settings

log = logging.getLogger("tracelens.queue")

LIVE_STATUSES = frozenset({Status.NEW, Status.QUEUED, Status.ACTIVE, Status.ABORTING})


def _unfinished(catalog: Catalog) -> list[job_runs.UnfinishedRun]:
    with catalog.session() as s:
        return job_runs.unfinished_runs(s)


def _fail(catalog: Catalog, run: job_runs.UnfinishedRun, error: str) -> None:
    with catalog.session() as s:
        job_runs.fail_stalled(s, run, error)


def _requeue(catalog: Catalog, run: job_runs.UnfinishedRun, max_attempts: int) -> bool:
    with catalog.session() as s:
        return job_runs.requeue_stalled(s, run, max_attempts)


def one_line(text: str | None) -> str:
    """The last line of a job's error (SAQ keeps a traceback): what a run shows."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else "unknown error"


def _attempts(n: int) -> str:
    return f"{n} attempt" if n == 1 else f"{n} attempts"


async def recover_lost_runs(queue: Queue, settings: Settings, catalog: Catalog) -> int:
    """Give every unfinished run without a live job one again; how many were enqueued."""
    runs = await asyncio.to_thread(_unfinished, catalog)
    if not runs:
        return 0
    jobs = await queue.jobs(IngestJob.for_run(r.id).key for r in runs)
    enqueued = 0
    for run, job in zip(runs, jobs, strict=True):
        if job is not None and job.status in LIVE_STATUSES:
            continue
        if run.status == RunStatus.INGESTING:
            if job is not None and job.status == Status.ABORTED:
                await asyncio.to_thread(
                    _fail,
                    catalog,
                    run,
                    f"{run.label}: {one_line(job.error)}; gave up after {_attempts(job.attempts)}",
                )
                continue
            if not await asyncio.to_thread(_requeue, catalog, run, settings.queue_attempts):
                continue
        if await enqueue(queue, settings, IngestJob.for_run(run.id)):
            log.warning("run %s had no live ingest job; enqueued it again", run.id)
            enqueued += 1
    return enqueued
