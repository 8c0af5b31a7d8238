"""The web process's side of the scale-out mode: enqueue, never ingest.

It stands where :class:`web.ingest_worker.IngestWorker` stands in the embedded mode
(``start``, ``submit``, ``shutdown``), and answers what the API asks of the queue: a
run's live job state, the queue's depth and live workers, and whether another upload
fits (backpressure).
"""

from __future__ import annotations

import logging

from saq.queue.redis import RedisQueue

from ingest.redacted_copy import REDACTION_VERSION
from web.api_schema import JobState, QueueHealth
from web.catalog import Catalog
from web.catalog import runs as catalog_runs
from web.ingest_worker import remove_orphan_dirs
from web.queue.bridge import LoopThread
from web.queue.connection import enqueue, make_queue, waiting_jobs
from web.queue.payload import IngestJob
from web.queue.recovery import one_line, recover_lost_runs
from web.services import Backpressure
from web.settings import Settings

log = logging.getLogger("tracelens.queue")

# What a refused upload is told to wait before trying again.
BACKPRESSURE_RETRY_AFTER_S = 30


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
            self._loop.call(lambda: enqueue(self.queue, self.settings, job))
        except Exception as exc:  # the run stays queued; a recovery pass enqueues it
            log.warning("could not enqueue run %s: %s", run_id, exc)

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

    def job_state(self, run_id: str) -> JobState | None:
        key = IngestJob.for_run(run_id).key
        try:
            job = self._loop.call(lambda: self.queue.job(key))
        except Exception:
            return None
        if job is None:
            return None
        return JobState(
            key=job.key,
            kind=str(job.meta.get("kind", "run")),
            status=job.status.value,
            attempts=job.attempts,
            max_attempts=job.retries,
            progress=round(float(job.progress), 4),
            worker=job.meta.get("worker") or job.worker_id,
            error=one_line(job.error) if job.error else None,
        )

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
