"""Scale-out mode: a run queued again while its last job is still finishing gets a job.

A worker publishes a run (``ready``) before its job is marked complete on the queue; new
objectives or a re-ingest in that window find the run's key still held by an active job,
so the enqueue is refused. The dispatcher then enqueues once that job ends, instead of
leaving the run queued until a worker's recovery pass (every visibility timeout, 60 s by
default) notices it. A job merely queued needs nothing: it claims the run when it runs.
Real Redis, real catalog; the job's life is driven through the queue's own calls.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from queue_stack import REDIS_URL

from web.catalog import Catalog
from web.queue.payload import IngestJob
from web.settings import Settings

pytest.importorskip("saq", reason="the queue extra (saq) is not installed")


def test_a_run_queued_while_its_job_finishes_is_enqueued_when_it_ends(
    tmp_path: Path, queue_name: str
) -> None:
    from saq.job import Status

    from web.queue.dispatcher import QueueDispatcher

    name = queue_name
    settings = Settings.from_env(
        tmp_path,
        queue_url=REDIS_URL,
        queue_name=name,
        database_url=f"sqlite:///{tmp_path / 'catalog.sqlite'}",
    )
    catalog = Catalog(settings.database_url)
    dispatcher = QueueDispatcher(settings, catalog)
    run_id = "0123456789ab"
    key = IngestJob.for_run(run_id).key
    call = dispatcher._loop.call
    try:
        dispatcher.submit(run_id)
        first = call(lambda: dispatcher.queue.job(key))
        assert first is not None and first.status == Status.QUEUED
        # queued: submitting again changes nothing (that job claims the run)
        dispatcher.submit(run_id)
        assert call(lambda: dispatcher.queue.count("queued")) == 1

        # a worker takes it: the job is active and, past its claim, publishes the run
        taken = call(lambda: dispatcher.queue.dequeue(1))
        assert taken is not None and taken.key == key
        call(lambda: taken.update(status=Status.ACTIVE))
        dispatcher.submit(run_id)  # the run was ready, so it was queued again: refused
        assert call(lambda: dispatcher.queue.count("queued")) == 0

        time.sleep(0.6)  # the job goes on a while; nothing is enqueued meanwhile
        assert call(lambda: dispatcher.queue.count("queued")) == 0
        call(lambda: taken.finish(Status.COMPLETE))

        deadline = time.monotonic() + 10
        while True:
            job = call(lambda: dispatcher.queue.job(key))
            if job is not None and job.status == Status.QUEUED:
                break
            assert time.monotonic() < deadline, f"no new job after the active one ended: {job}"
            time.sleep(0.1)
    finally:
        dispatcher.shutdown()
        catalog.dispose()
