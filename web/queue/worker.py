"""``tracelens worker``'s process: a SAQ worker running ingest jobs from the queue.

Besides the jobs it runs, every worker takes part in keeping the queue honest: SAQ's
sweep (one worker at a time, every third of the visibility timeout) gives jobs whose
worker went silent to another, and :func:`~web.queue.recovery.recover_lost_runs`
enqueues runs the catalog has unfinished but the queue has no live job for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from typing import Any

from saq import Worker

from tracelens import __version__
from web.catalog import Catalog
from web.ingest_worker import IngestWorker
from web.queue.connection import make_queue
from web.queue.jobs import WorkerRuntime, ingest_job
from web.queue.payload import JOB_FUNCTION
from web.queue.rank_jobs import register_rank_jobs
from web.queue.recovery import recover_lost_runs
from web.settings import Settings

log = logging.getLogger("tracelens.queue")

# Seconds a stopping worker (SIGTERM) lets its running jobs finish before handing them
# back to the queue; SIGKILL hands them back through the sweep instead.
SHUTDOWN_GRACE_S = 20


def worker_name() -> str:
    """host-pid-random: which machine and process ran a job, unique across restarts.
    (No colons: SAQ's worker registry splits its keys on them.)"""
    host = socket.gethostname().replace(":", "-")
    return f"{host}-{os.getpid()}-{secrets.token_hex(2)}"


def build_worker(settings: Settings, concurrency: int, name: str | None = None) -> Worker:
    register_rank_jobs()
    name = name or worker_name()
    settings.ingest_workers = concurrency  # each job's share of memory (ingest.limits)
    catalog = Catalog(settings.database_url)
    runtime = WorkerRuntime(
        settings=settings,
        catalog=catalog,
        engine=IngestWorker(settings, catalog),
        name=name,
    )
    every = max(1, settings.queue_visibility_s // 3)
    upkeep: list[asyncio.Task[None]] = []

    async def recover_periodically(queue: Any) -> None:
        while True:
            try:
                await recover_lost_runs(queue, settings, catalog)
            except Exception as exc:  # Redis or the catalog away for a moment: next round
                log.warning(
                    "recovery pass failed: %s", str(exc).splitlines()[0] if str(exc) else exc
                )
            await asyncio.sleep(settings.queue_visibility_s)

    async def startup(ctx: dict[str, Any]) -> None:
        ctx["tracelens"] = runtime
        queue = ctx["worker"].queue
        upkeep.append(asyncio.create_task(recover_periodically(queue)))

    async def shutdown(ctx: dict[str, Any]) -> None:
        for task in upkeep:
            task.cancel()
        catalog.dispose()

    return Worker(
        make_queue(settings),
        functions=[(JOB_FUNCTION, ingest_job)],
        id=name,
        concurrency=concurrency,
        startup=startup,
        shutdown=shutdown,
        timers={"sweep": every, "worker_info": every, "schedule": 1, "abort": 1},
        dequeue_timeout=1.0,
        shutdown_grace_period_s=SHUTDOWN_GRACE_S,
        metadata={"host": socket.gethostname(), "pid": os.getpid(), "version": __version__},
    )


async def run_worker(worker: Worker) -> None:
    await worker.queue.connect()
    try:
        await worker.start()
    finally:
        with contextlib.suppress(Exception):
            await worker.queue.disconnect()
