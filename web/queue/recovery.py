"""Runs the catalog says are unfinished, checked against their jobs on the queue.

Queued and ingesting runs should each have a live job. One may not: the web process
stopped between recording an upload and enqueueing it, Redis lost its data, or the
queue gave up on a job whose workers kept dying. The web process checks at start and
every worker checks periodically, so whichever is left running finds such runs:

- a live job (queued, running, waiting to retry): nothing to do; for a job run of
  several ranks, its ``run`` job or any rank or align job of its ingesting generation;
- an ``ingesting`` run whose job (or a rank or align job of its generation) the queue
  gave up on after its attempts were spent: the run fails with that job's last error;
- otherwise an ``ingesting`` run goes back to queued (failed once the catalog counts
  ``queue_attempts`` tries), and a queued run's job is enqueued again.

A job run whose generation's jobs are lost goes back to queued like any other, and its
next ``run`` job claims a new generation and fans it out again: every rank is rebuilt,
rather than only the lost ones. That is the simplest correct choice: which ranks of the
old generation are complete would have to be read from the data directory and the set of
finished ranks from Redis (which may be what lost the jobs), while a new generation needs
neither, and the old generation's late writes are guarded out as for any run.

Every catalog change is guarded by the generation read, so a run that moved on between
the two reads is left as it is, and enqueueing is idempotent by job key.
"""

from __future__ import annotations

import asyncio
import logging

from saq import Queue
from saq.job import Job, Status

from web.catalog import Catalog, RunStatus, job_runs
from web.queue.connection import enqueue
from web.queue.fanout import generation_jobs
from web.queue.payload import IngestJob, JobKind
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


def _jobs_of(run: job_runs.UnfinishedRun) -> list[IngestJob]:
    """The jobs that may be carrying ``run`` on: its run job, and the jobs of its
    ingesting generation's fan-out for a job of several ranks."""
    jobs = [IngestJob.for_run(run.id)]
    if run.ranks and run.status == RunStatus.INGESTING:
        jobs += generation_jobs(run.id, run.generation, run.ranks)
    return jobs


def _gave_up(run: job_runs.UnfinishedRun, jobs: list[tuple[IngestJob, Job | None]]) -> str | None:
    """Why the run must fail: a job of it whose attempts the queue spent (aborted) or, for a
    rank or align job, one that failed its last attempt; None when there is none."""
    for payload, job in jobs:
        if job is None:
            continue
        dead = job.status == Status.ABORTED or (
            payload.kind != JobKind.RUN and job.status == Status.FAILED
        )
        if not dead:
            continue
        part = {JobKind.RUN: "", JobKind.ALIGN: " aligning the ranks"}.get(
            payload.kind, f" rank {payload.rank}"
        )
        return (
            f"{run.label}:{part}{':' if part else ''} {one_line(job.error)}; "
            f"gave up after {_attempts(job.attempts)}"
        )
    return None


async def recover_lost_runs(queue: Queue, settings: Settings, catalog: Catalog) -> int:
    """Give every unfinished run without a live job one again; how many were enqueued."""
    runs = await asyncio.to_thread(_unfinished, catalog)
    if not runs:
        return 0
    payloads = [_jobs_of(r) for r in runs]
    # one read (MGET) of every job: a job enqueues its successor before it completes, so
    # a run moving on between jobs always shows a live one in it
    found = iter(await queue.jobs(p.key for ps in payloads for p in ps))
    enqueued = 0
    for run, ps in zip(runs, payloads, strict=True):
        jobs = [(p, next(found)) for p in ps]
        if any(job is not None and job.status in LIVE_STATUSES for _, job in jobs):
            continue
        if run.status == RunStatus.INGESTING:
            error = _gave_up(run, jobs)
            if error is not None:
                await asyncio.to_thread(_fail, catalog, run, error)
                continue
            if not await asyncio.to_thread(_requeue, catalog, run, settings.queue_attempts):
                continue
        if await enqueue(queue, settings, IngestJob.for_run(run.id)):
            log.warning("run %s had no live ingest job; enqueued it again", run.id)
            enqueued += 1
    return enqueued
