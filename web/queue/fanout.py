"""One run, many jobs: a job per rank, then one ``align`` job once every rank is done.

For a run of several ranks (:mod:`web.queue.rank_jobs`): the ``run`` job that claims the
run's generation calls :func:`fan_out`; each rank job, once its rank's database is
complete, calls :func:`rank_finished`, and the call that completes the set enqueues the
align job. The set of finished ranks is a Redis set per (run, generation): adding a rank
is idempotent, so a rank job delivered twice counts once, and the align job's key is
unique per generation, so two ranks finishing together enqueue it once.

How many ranks complete the set comes from the run's members (the rank job has the run),
not from Redis: a large job or a backlog may keep the ranks queued for longer than any
expiry, and a count that expired would never be reached. The set itself expires a week
after its last rank, as finished jobs' records do, only so that it is cleaned up.
"""

from __future__ import annotations

from collections.abc import Sequence

from saq.queue.redis import RedisQueue

from web.queue.connection import FINISHED_JOB_TTL_S, enqueue
from web.queue.payload import IngestJob, JobKind
from web.settings import Settings


def generation_jobs(run_id: str, generation: int, ranks: Sequence[int]) -> list[IngestJob]:
    """The jobs a fan-out of ``generation`` makes: one per rank, then the align job."""
    return [
        *(
            IngestJob(kind=JobKind.RANK, run_id=run_id, rank=r, generation=generation)
            for r in ranks
        ),
        IngestJob(kind=JobKind.ALIGN, run_id=run_id, generation=generation),
    ]


def _ranks_key(queue: RedisQueue, run_id: str, generation: int) -> str:
    return queue.namespace(f"ranks:{run_id}:g{generation}")


async def fan_out(
    queue: RedisQueue, settings: Settings, run_id: str, generation: int, ranks: Sequence[int]
) -> None:
    """Enqueue one rank job per rank of ``generation`` of a run."""
    # a generation is fanned out once: its set starts empty
    await queue.redis.delete(_ranks_key(queue, run_id, generation))
    for job in generation_jobs(run_id, generation, ranks)[:-1]:
        await enqueue(queue, settings, job)


async def rank_finished(queue: RedisQueue, settings: Settings, job: IngestJob, ranks: int) -> bool:
    """Count ``job``'s rank as done of the run's ``ranks``; True for the call that
    enqueued the align job."""
    if job.kind != JobKind.RANK or job.rank is None or job.generation is None:
        raise ValueError(f"not a rank job: {job}")
    key = _ranks_key(queue, job.run_id, job.generation)
    async with queue.redis.pipeline(transaction=True) as pipe:
        pipe.sadd(key, job.rank)
        pipe.expire(key, FINISHED_JOB_TTL_S)
        pipe.scard(key)
        _, _, done = await pipe.execute()
    if int(done) < ranks:
        return False
    align = IngestJob(kind=JobKind.ALIGN, run_id=job.run_id, generation=job.generation)
    return await enqueue(queue, settings, align)
