"""A run of several ranks on the queue: one job per rank, then exactly one align job.

Real Redis, a queue of the test's own; no worker runs (what is checked is what the jobs
enqueue, not what they ingest).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("saq", reason="the queue extra (saq) is not installed")

from web.queue.connection import make_queue
from web.queue.fanout import fan_out, rank_finished
from web.queue.payload import IngestJob, JobKind
from web.settings import Settings

REDIS_URL = "redis://127.0.0.1:6379/0"
RANKS = 8


def test_eight_ranks_fan_out_and_the_last_one_enqueues_one_align_job(tmp_path: Path) -> None:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except Exception as exc:
        pytest.skip(f"no Redis at {REDIS_URL} ({exc!s:.80})")
    settings = Settings.from_env(
        tmp_path, queue_url=REDIS_URL, queue_name=f"tl-test-{uuid.uuid4().hex[:10]}"
    )
    run_id, generation = "0123456789ab", 4

    async def scenario() -> tuple[list[bool], list[bool], Any, list[Any]]:
        queue = make_queue(settings)
        await queue.connect()
        try:
            await fan_out(queue, settings, run_id, generation, range(RANKS))
            rank_jobs = [
                IngestJob(kind=JobKind.RANK, run_id=run_id, rank=r, generation=generation)
                for r in range(RANKS)
            ]
            stored = await queue.jobs(j.key for j in rank_jobs)
            # Seven ranks, one of them delivered twice: not yet.
            early = [
                await rank_finished(queue, settings, j, RANKS)
                for j in [*rank_jobs[:7], rank_jobs[3]]
            ]
            align_key = IngestJob(kind=JobKind.ALIGN, run_id=run_id, generation=generation).key
            before = await queue.job(align_key)
            assert before is None
            # The last rank and a late duplicate of another at once: one of them enqueues.
            last = await asyncio.gather(
                rank_finished(queue, settings, rank_jobs[7], RANKS),
                rank_finished(queue, settings, rank_jobs[0], RANKS),
            )
            return early, list(last), await queue.job(align_key), list(stored)
        finally:
            keys = [k async for k in queue.redis.scan_iter(match=f"saq:*{settings.queue_name}:*")]
            if keys:
                await queue.redis.delete(*keys)
            await queue.disconnect()

    early, last, align, stored = asyncio.run(scenario())
    assert early == [False] * 8
    assert sorted(last) == [False, True]
    assert align is not None and align.kwargs == {
        "payload": {"kind": "align", "run_id": run_id, "generation": generation}
    }
    assert [j.meta["rank"] for j in stored] == list(range(RANKS))
    assert {j.key for j in stored} == {f"rank:{run_id}:g{generation}:r{r}" for r in range(RANKS)}


def test_the_align_job_is_enqueued_however_long_the_ranks_wait_in_the_queue(
    tmp_path: Path,
) -> None:
    """A large job or a backlog: the ranks may finish long after the fan-out, later than
    any expiry tied to one job's timeout (here 1 s, so the wait below outlasts it)."""
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except Exception as exc:
        pytest.skip(f"no Redis at {REDIS_URL} ({exc!s:.80})")
    settings = dataclasses.replace(
        Settings.from_env(
            tmp_path, queue_url=REDIS_URL, queue_name=f"tl-test-{uuid.uuid4().hex[:10]}"
        ),
        queue_job_timeout_s=1,
    )
    run_id, generation = "0123456789ab", 2

    async def scenario() -> tuple[list[bool], Any]:
        queue = make_queue(settings)
        await queue.connect()
        try:
            await fan_out(queue, settings, run_id, generation, range(RANKS))
            await asyncio.sleep(2.5 * settings.queue_job_timeout_s)  # the backlog drains
            done = [
                await rank_finished(
                    queue,
                    settings,
                    IngestJob(kind=JobKind.RANK, run_id=run_id, rank=r, generation=generation),
                    RANKS,
                )
                for r in range(RANKS)
            ]
            align_key = IngestJob(kind=JobKind.ALIGN, run_id=run_id, generation=generation).key
            return done, await queue.job(align_key)
        finally:
            keys = [k async for k in queue.redis.scan_iter(match=f"saq:*{settings.queue_name}:*")]
            if keys:
                await queue.redis.delete(*keys)
            await queue.disconnect()

    done, align = asyncio.run(scenario())
    assert done == [False] * (RANKS - 1) + [True]
    assert align is not None
