"""The SAQ queue for the service's settings, and the options every ingest job gets.

Delivery guarantees come from SAQ (see docs/architecture.md, "Ingest on a queue"): a job
is active on one worker, which touches it (its progress) at least every quarter of the
visibility timeout; a job untouched for longer is swept by a live worker and queued
again, so a worker killed mid-job loses nothing. Failed attempts are retried with
exponential backoff until the attempts are spent.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from saq import Queue
from saq.job import Status
from saq.queue.redis import RedisQueue

from web.queue.payload import JOB_FUNCTION, IngestJob
from web.settings import Settings

# Finished jobs stay readable (who ran them, how often, the last error) for a week.
FINISHED_JOB_TTL_S = 7 * 24 * 3600
# The longest wait between two retries, whatever the backoff doubles to.
MAX_RETRY_DELAY_S = 300.0


# How long a sweep waits for a silent job's worker to acknowledge its abort before
# queueing the job again: a killed worker never does, a live one notices within a second.
SWEEP_ABORT_WAIT_S = 1.0
# A sweep starts up to this long after its timer fires.
SWEEP_JITTER_S = 0.5
# How long a sweep lets a dequeued job's worker mark it active before judging it.
UNMARKED_GRACE_S = 2.0


class IngestQueue(RedisQueue):
    """SAQ's Redis queue, with a sweep that gives just-dequeued jobs a moment.

    SAQ's sweep takes a job that is in its active list but not yet marked active for a
    lost one. Such a job is usually one a worker dequeued a moment ago (it marks it
    active one round trip later, longer on a loaded machine), which the sweep would
    deliver again, spending one of its attempts (harmless otherwise: the extra delivery
    finds its run claimed by a newer generation, or finished). So a sweep that sees
    one waits ``UNMARKED_GRACE_S`` first, and sweeps never run the moment a worker
    starts (when a second worker joins, the first is taking jobs) nor in step with the
    scheduler's tick (which is what hands a retried job to be dequeued). A worker that
    died between dequeuing and marking is still swept, one grace later.
    """

    _started_sweeping = False

    async def sweep(self, lock: int = 60, abort: float = 5.0) -> list[str]:
        if not self._started_sweeping:
            self._started_sweeping = True
            return []
        await asyncio.sleep(random.uniform(0, SWEEP_JITTER_S))
        if await self._has_unmarked_active():
            await asyncio.sleep(UNMARKED_GRACE_S)
        return await super().sweep(lock=lock, abort=min(abort, SWEEP_ABORT_WAIT_S))

    async def _has_unmarked_active(self) -> bool:
        ids = await self.redis.lrange(self._active, 0, -1)
        if not ids:
            return False
        jobs = [self.deserialize(raw) for raw in await self.redis.mget(ids)]
        return any(job is not None and job.status != Status.ACTIVE for job in jobs)


def make_queue(settings: Settings) -> RedisQueue:
    if not settings.queue_url:
        raise ValueError("no queue configured (TRACELENS_QUEUE_URL)")
    return IngestQueue.from_url(
        settings.queue_url,
        name=settings.queue_name,
        swept_error_message="the worker running it stopped answering (killed or out of memory)",
    )


def heartbeat_every_s(settings: Settings) -> float:
    """How often a running job reports: four reports fit in the visibility timeout."""
    return max(0.5, settings.queue_visibility_s / 4)


def job_options(settings: Settings) -> dict[str, Any]:
    return {
        "timeout": settings.queue_job_timeout_s,
        "heartbeat": settings.queue_visibility_s,
        "retries": settings.queue_attempts,
        "retry_delay": settings.queue_retry_delay_s,
        "retry_backoff": MAX_RETRY_DELAY_S,
        "ttl": FINISHED_JOB_TTL_S,
    }


async def enqueue(queue: Queue, settings: Settings, job: IngestJob) -> bool:
    """Queue ``job``; False when an unfinished job with its key is queued already."""
    queued = await queue.enqueue(
        JOB_FUNCTION,
        key=job.key,
        meta={"kind": job.kind.value, "run_id": job.run_id, "rank": job.rank},
        **job_options(settings),
        **job.to_kwargs(),
    )
    return queued is not None


async def waiting_jobs(queue: Queue) -> int:
    """Jobs not yet running: queued now or waiting out a retry's delay."""
    # incomplete = queued + active + waiting to be retried
    return await queue.count("incomplete") - await queue.count("active")
