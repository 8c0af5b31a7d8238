"""The web process's side of the scale-out mode: enqueue, never ingest.

It stands where :class:`web.ingest_worker.IngestWorker` stands in the embedded mode
(``start``, ``submit``, ``shutdown``), and answers what the API asks of the queue: a
run's live job state, the queue's depth and live workers, and whether another upload
fits (backpressure).
"""

from __future__ import annotations

import asyncio
import logging
import time

import msgspec
from saq.job import Job, Status
from saq.queue.redis import RedisQueue

from ingest.redacted_copy import REDACTION_VERSION
from web.api_schema import JobState, QueueHealth
from web.catalog import Catalog, Run, RunKind, RunStatus
from web.catalog import runs as catalog_runs
from web.ingest_worker import remove_orphan_dirs
from web.queue.bridge import LoopThread
from web.queue.connection import enqueue, make_queue, waiting_jobs
from web.queue.fanout import generation_jobs
from web.queue.payload import IngestJob
from web.queue.recovery import one_line, recover_lost_runs
from web.services import Backpressure
from web.settings import Settings

log = logging.getLogger("tracelens.queue")

# What a refused upload is told to wait before trying again.
BACKPRESSURE_RETRY_AFTER_S = 30
# How often a run queued again while its last job finishes checks that the job has ended.
_FOLLOW_EVERY_S = 0.25


class QueueDispatcher:
    def __init__(self, settings: Settings, catalog: Catalog) -> None:
        self.settings = settings
        self.catalog = catalog
        self._loop = LoopThread()
        self.queue: RedisQueue = self._loop.call(self._connect)

    async def _connect(self) -> RedisQueue:
        queue = make_queue(self.settings)
        await queue.connect()
        return queue

    def start(self) -> None:
        """Redact old originals, drop orphaned directories, and give every unfinished run
        without a live job one (a web restart loses no run)."""
        with self.catalog.session() as s:
            for run_id in catalog_runs.requeue_unredacted(s, REDACTION_VERSION):
                log.info("run %s queued to redact its original", run_id)
            known = catalog_runs.all_run_ids(s)
        remove_orphan_dirs(self.settings.runs_dir, known)
        try:
            self._loop.call(lambda: recover_lost_runs(self.queue, self.settings, self.catalog))
        except Exception as exc:  # Redis away: the workers' recovery passes catch up
            log.warning("could not check unfinished runs against the queue: %s", exc)

    def submit(self, run_id: str) -> None:
        job = IngestJob.for_run(run_id)
        try:
            if not self._loop.call(lambda: enqueue(self.queue, self.settings, job)):
                self._loop.call(lambda: self._follow_active(job))
        except Exception as exc:  # the run stays queued; a recovery pass enqueues it
            log.warning("could not enqueue run %s: %s", run_id, exc)

    async def _follow_active(self, job: IngestJob) -> None:
        """The run's key still names a job. A queued one will claim the run when it runs;
        an active one may be past its claim: it published the run (so the run was ``ready``
        to be queued again) and is finishing. Enqueue after it ends, rather than leave the
        run queued until a worker's recovery pass (every visibility timeout) finds it."""
        held = await self.queue.job(job.key)
        if held is not None and held.status == Status.ACTIVE:
            asyncio.get_running_loop().create_task(self._enqueue_when_free(job))

    async def _enqueue_when_free(self, job: IngestJob) -> None:
        deadline = time.monotonic() + self.settings.queue_job_timeout_s
        while time.monotonic() < deadline:
            await asyncio.sleep(_FOLLOW_EVERY_S)
            try:
                if await enqueue(self.queue, self.settings, job):
                    return
                held = await self.queue.job(job.key)
            except Exception as exc:  # Redis away: the recovery passes catch up
                log.warning("could not enqueue run %s: %s", job.run_id, exc)
                return
            if held is None or held.status != Status.ACTIVE:
                return  # a queued or retrying job claims the run itself

    def shutdown(self, wait: bool = True) -> None:
        try:
            self._loop.call(self.queue.disconnect, timeout=5)
        except Exception:
            log.debug("queue disconnect failed", exc_info=True)
        self._loop.close()

    def backpressure(self) -> Backpressure | None:
        """Why another upload must wait (the queue is full), or None when it fits.
        Raises when Redis does not answer (the caller answers 503 for that too)."""
        waiting = self._loop.call(lambda: waiting_jobs(self.queue))
        if waiting >= self.settings.queue_max_depth:
            return Backpressure(waiting=waiting, retry_after_s=BACKPRESSURE_RETRY_AFTER_S)
        return None

    def job_state(self, run: Run) -> JobState | None:
        """The run's job on the queue; for a job run fanned out, with its rank and align
        jobs of the ingesting generation as ``parts`` (one read of them all)."""
        payloads = [IngestJob.for_run(run.id)]
        if run.kind == RunKind.JOB and run.status == RunStatus.INGESTING:
            ranks = sorted(int(m["rank"]) for m in run.members or [])
            payloads += generation_jobs(run.id, run.generation, ranks)
        try:
            jobs = self._loop.call(lambda: self.queue.jobs(p.key for p in payloads))
        except Exception:
            return None
        run_job = jobs[0]
        parts = [_state(job, p.rank) for p, job in zip(payloads[1:], jobs[1:], strict=True) if job]
        if run_job is None:
            return None
        state = _state(run_job)
        if not parts:
            return state
        return _fanned_out(state, parts, len(payloads) - 2)

    def health(self) -> QueueHealth:
        name = self.settings.queue_name
        try:
            info = self._loop.call(lambda: self.queue.info(), timeout=3)
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return QueueHealth(status=f"unreachable ({first})", name=name)
        return QueueHealth(
            status="ok",
            name=name,
            waiting=int(info["queued"]) + int(info["scheduled"]),
            active=int(info["active"]),
            workers=len(info["workers"]),
        )


def _state(job: Job, rank: int | None = None) -> JobState:
    return JobState(
        key=job.key,
        kind=str(job.meta.get("kind", "run")),
        status=job.status.value,
        attempts=job.attempts,
        max_attempts=job.retries,
        progress=round(float(job.progress), 4),
        worker=job.meta.get("worker") or job.worker_id,
        error=one_line(job.error) if job.error else None,
        rank=rank,
    )


# A job run's progress: building the ranks is most of it; aligning them is the rest.
_RANKS_SHARE = 0.9
# From least to furthest along: a fanned-out run shows the furthest any live job is.
_LIVE_ORDER = ("new", "queued", "active")


def _fanned_out(run_job: JobState, parts: list[JobState], ranks: int) -> JobState:
    """The state of a job run's generation from its rank and align jobs."""

    def done(p: JobState) -> float:
        return 1.0 if p.status == "complete" else p.progress

    rank_parts = [p for p in parts if p.rank is not None]
    aligning = [p for p in parts if p.rank is None]
    progress = _RANKS_SHARE * sum(done(p) for p in rank_parts) / max(1, ranks)
    progress += (1 - _RANKS_SHARE) * sum(done(p) for p in aligning)
    live = [p.status for p in parts if p.status in _LIVE_ORDER]
    status = max(live, key=_LIVE_ORDER.index) if live else parts[-1].status
    errors = [p.error for p in parts if p.error]
    return msgspec.structs.replace(
        run_job,
        status=status,
        progress=round(min(progress, 1.0), 4),
        worker=None,
        error=errors[-1] if errors else run_job.error,
        parts=parts,
    )
