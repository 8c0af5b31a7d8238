"""What a worker does with a job: the handler of its kind, off the event loop.

SAQ calls :func:`ingest_job` on the worker's event loop. The ingest itself is DuckDB work
in a thread of its own, while the coroutine reports the job's progress to the queue every
quarter of the visibility timeout: the report is also the heartbeat that tells the queue
the job is alive, and the state the run page reads, whichever worker runs it.

Handlers are per kind (:class:`~web.queue.payload.JobKind`); ``register`` adds one, so
the kinds of a run of several ranks plug in beside the single-trace ``run``
(:mod:`web.queue.rank_jobs`): a ``run`` job of a job run claims its generation and fans
it out instead of ingesting it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from saq.job import Job
from saq.queue.redis import RedisQueue

from ingest import TraceInputError
from ingest.redaction import redact
from web.catalog import Catalog, Run, job_runs
from web.catalog import runs as catalog_runs
from web.ingest_worker import IngestWorker, internal_error_message
from web.job_ingest import is_job
from web.queue.bridge import CALL_TIMEOUT_S
from web.queue.connection import heartbeat_every_s
from web.queue.fanout import fan_out
from web.queue.payload import IngestJob, JobKind
from web.settings import Settings
from web.storage import RunFiles

log = logging.getLogger("tracelens.queue")

# Test-only: seconds every run or rank job sleeps once it has claimed its run (its
# generation), so tests can kill a worker mid-ingest deterministically. Unset (the
# default) it does nothing.
TEST_DELAY_ENV = "TRACELENS_TEST_ONLY_JOB_DELAY_S"

T = TypeVar("T")


def test_delay() -> None:
    delay = float(os.environ.get(TEST_DELAY_ENV) or 0)
    if delay > 0:
        time.sleep(delay)


@dataclass
class JobContext:
    """What a handler gets besides its payload."""

    settings: Settings
    catalog: Catalog
    engine: IngestWorker
    worker_name: str
    attempt: int
    max_attempts: int
    # the worker's queue and the event loop that owns it, for a handler's own enqueueing
    queue: RedisQueue | None = None
    loop: asyncio.AbstractEventLoop | None = None
    progress: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_queue(self, make: Callable[[RedisQueue], Coroutine[Any, Any, T]]) -> T:
        """Run ``make(queue)`` on the worker's loop from the handler's thread; its result."""
        if self.queue is None or self.loop is None:
            raise RuntimeError("this job has no queue to enqueue on")
        queue = self.queue
        done = asyncio.run_coroutine_threadsafe(make(queue), self.loop)
        return done.result(CALL_TIMEOUT_S)

    def report(self, fraction: float) -> None:
        with self.lock:
            self.progress = max(0.0, min(1.0, fraction))

    @property
    def last_attempt(self) -> bool:
        return self.attempt >= self.max_attempts


Handler = Callable[[JobContext, IngestJob], None]
HANDLERS: dict[JobKind, Handler] = {}


def register(kind: JobKind, handler: Handler) -> None:
    HANDLERS[kind] = handler


def ingest_run(ctx: JobContext, job: IngestJob) -> None:
    """A single trace: claim the run, ingest, publish (the web thread pool's work)."""
    with ctx.catalog.session() as s:
        generation = job_runs.claim_delivery(s, job.run_id)
        run = catalog_runs.get_run(s, job.run_id) if generation is not None else None
    if generation is None or run is None:
        return  # deleted, or finished by an earlier delivery
    test_delay()
    try:
        if is_job(run):
            fan_out_run(ctx, run, generation)
        else:
            ctx.engine.ingest_claimed(
                run, generation, on_progress=ctx.report, retry_internal_errors=True
            )
    except Exception as exc:
        message = redact(internal_error_message(run.original_filename, exc))
        with ctx.catalog.session() as s:
            if ctx.last_attempt:
                catalog_runs.mark_failed(s, run.id, generation, message)
            else:
                note = f"attempt {ctx.attempt} of {ctx.max_attempts} failed ({message}); retrying"
                job_runs.release_for_retry(s, run.id, generation, note)
        raise


def fan_out_run(ctx: JobContext, run: Run, generation: int) -> None:
    """A job run's claimed generation as one rank job per rank (then one align job):
    the ranks are ingested by whichever workers take them (:mod:`web.queue.rank_jobs`)."""
    files = RunFiles(ctx.settings.runs_dir, run.id)
    # every earlier delivery's leftovers: this generation's rank jobs are not yet queued
    files.remove_partials()
    try:
        ctx.engine.redact_kept_originals(files, run)
    except TraceInputError as exc:
        with ctx.catalog.session() as s:
            job_runs.fail_ingesting(
                s, run.id, generation, f"{run.original_filename}: {exc.problem}"
            )
        return
    ranks = sorted(int(m["rank"]) for m in run.members or [])
    ctx.on_queue(lambda q: fan_out(q, ctx.settings, run.id, generation, ranks))


register(JobKind.RUN, ingest_run)


class UnknownJobKind(Exception):
    pass


@dataclass
class WorkerRuntime:
    """The long-lived parts a worker process's jobs share."""

    settings: Settings
    catalog: Catalog
    engine: IngestWorker
    name: str

    def run(self, job: IngestJob, ctx: JobContext) -> None:
        handler = HANDLERS.get(job.kind)
        if handler is None:
            raise UnknownJobKind(f"no handler for jobs of kind {job.kind!r} on this worker")
        handler(ctx, job)


def _in_thread(fn: Callable[[], None]) -> asyncio.Future[None]:
    """Run ``fn`` in a daemon thread: a worker stopping never waits for an ingest to end
    (the job is delivered again elsewhere) the way a thread pool's exit would."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(exc: BaseException | None) -> None:
        if done.cancelled():
            return
        if exc is None:
            done.set_result(None)
        else:
            done.set_exception(exc)

    def target() -> None:
        try:
            fn()
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, exc)
        else:
            loop.call_soon_threadsafe(settle, None)

    threading.Thread(target=target, name="tracelens-job", daemon=True).start()
    return done


async def ingest_job(ctx: dict[str, Any], **kwargs: Any) -> None:
    """The function workers register (``payload.JOB_FUNCTION``)."""
    saq_job: Job = ctx["job"]
    runtime: WorkerRuntime = ctx["tracelens"]
    payload = IngestJob.from_kwargs(kwargs)
    job_ctx = JobContext(
        settings=runtime.settings,
        catalog=runtime.catalog,
        engine=runtime.engine,
        worker_name=runtime.name,
        attempt=saq_job.attempts,
        max_attempts=saq_job.retries,
        queue=ctx["worker"].queue,
        loop=asyncio.get_running_loop(),
    )
    # The per-job record: which worker ran (runs) it, kept with the job on the queue.
    meta = {**saq_job.meta, "worker": runtime.name}
    await saq_job.update(meta=meta)
    log.info("job %s: attempt %d of %d", saq_job.key, job_ctx.attempt, job_ctx.max_attempts)
    done = _in_thread(lambda: runtime.run(payload, job_ctx))
    beat = heartbeat_every_s(runtime.settings)
    while True:
        finished, _ = await asyncio.wait({done}, timeout=beat)
        if finished:
            break
        with job_ctx.lock:
            progress = job_ctx.progress
        await saq_job.update(progress=progress)
    done.result()
