"""The jobs of a run of several ranks: one ``rank`` job per rank, then one ``align`` job.

A ``run`` job that claims a job run's generation fans it out (:func:`web.queue.jobs.
fan_out_run`). Each rank job builds its rank's database and extract
(:func:`web.job_ingest.build_rank`) and counts its rank done
(:func:`web.queue.fanout.rank_finished`); the last one enqueues the align job, which builds
the job report from the extracts and publishes the run in one transaction, as a ``run`` job
does. Every job checks, before and after its work, that its generation is still the one
ingesting the run: one of an older generation (the run claimed again, deleted, finished)
does nothing, and what it wrote is removed.

A bad trace fails the run at once; an internal error is retried by the queue with backoff
(the run stays ``ingesting``: the other ranks go on), and fails the run on the last
attempt. A worker registers both kinds (:func:`register_rank_jobs`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from ingest import TraceInputError
from ingest.redaction import redact
from web.catalog import Run, RunStatus, job_runs
from web.catalog import runs as catalog_runs
from web.ingest_worker import internal_error_message
from web.job_ingest import align_ranks, build_rank, catalog_facts
from web.queue.fanout import rank_finished
from web.queue.jobs import JobContext, register, test_delay
from web.queue.payload import IngestJob, JobKind
from web.storage import RunFiles

log = logging.getLogger("tracelens.queue")


def _current(ctx: JobContext, job: IngestJob) -> Run | None:
    """The run, if ``job``'s generation is still the one ingesting it."""
    if job.generation is None:
        raise ValueError(f"{job.key}: a {job.kind} job carries its generation")
    with ctx.catalog.session() as s:
        return job_runs.ingesting_generation(s, job.run_id, job.generation)


def _fail(ctx: JobContext, job: IngestJob, message: str) -> None:
    assert job.generation is not None
    with ctx.catalog.session() as s:
        job_runs.fail_ingesting(s, job.run_id, job.generation, redact(message))


def _failed_attempt(ctx: JobContext, job: IngestJob, what: str, exc: Exception) -> None:
    """An internal error: the run fails on the last attempt; the queue retries otherwise.
    A job whose generation has moved on meanwhile gives up quietly (nothing to retry)."""
    if _current(ctx, job) is None:
        log.info("job %s: its generation is gone; dropping its error (%s)", job.key, exc)
        return
    log.exception("job %s failed (attempt %d of %d)", job.key, ctx.attempt, ctx.max_attempts)
    if ctx.last_attempt:
        _fail(ctx, job, internal_error_message(what, exc))
    raise exc


def discard_late_work(
    ctx: JobContext, job: IngestJob, published_parts: list[Path], scratch: list[Path]
) -> None:
    """What ``job`` wrote once its generation was no longer the one ingesting the run:
    ``scratch`` goes, and so do ``published_parts`` unless that generation is the one
    published (then they are the ready run's own: a late second delivery of a rank job
    never replaced them, :func:`web.job_ingest.build_rank`). A deleted run's whole
    directory goes."""
    files = RunFiles(ctx.settings.runs_dir, job.run_id)
    with ctx.catalog.session() as s:
        run = catalog_runs.get_run(s, job.run_id)
    if run is None:
        files.remove()
        return
    published = run.status == RunStatus.READY and run.generation == job.generation
    for p in scratch if published else [*published_parts, *scratch]:
        p.unlink(missing_ok=True)


def ingest_rank(ctx: JobContext, job: IngestJob) -> None:
    run = _current(ctx, job)
    if run is None or job.rank is None or job.generation is None:
        return  # an older generation's job, or the run is gone or finished
    test_delay()
    files = RunFiles(ctx.settings.runs_dir, run.id)
    what = f"{run.original_filename}: rank {job.rank}"
    try:
        build_rank(
            files,
            job.generation,
            run,
            job.rank,
            ctx.engine.limits,
            ctx.worker_name,
            on_progress=ctx.report,
        )
    except TraceInputError as exc:  # a bad trace fails again: the run fails now
        _fail(ctx, job, f"{run.original_filename}: {exc.problem}")
        return
    except Exception as exc:
        _failed_attempt(ctx, job, what, exc)
        return
    if _current(ctx, job) is None:  # claimed again, deleted, failed or published meanwhile
        ref = min(int(m["rank"]) for m in run.members or [])
        database = files.job_database(job.generation, job.rank, ref)
        discard_late_work(ctx, job, [database], [files.rank_extract(job.generation, job.rank)])
        return
    ctx.report(1.0)
    ranks = len(run.members or [])
    ctx.on_queue(lambda q: rank_finished(q, ctx.settings, job, ranks))


def align(ctx: JobContext, job: IngestJob) -> None:
    run = _current(ctx, job)
    if run is None or job.generation is None:
        return
    generation = job.generation
    files = RunFiles(ctx.settings.runs_dir, run.id)
    try:
        report, workers = align_ranks(files, generation, run)
    except Exception as exc:
        # RankMissing too: every rank job counted its rank done, so a file went missing
        # under it (storage); retried, as a network filesystem may show it late.
        _failed_attempt(ctx, job, f"{run.original_filename}: aligning the ranks", exc)
        return
    ctx.report(0.9)
    fmt, facts = catalog_facts(run, report)
    # who built each rank's database (the extract says), kept with the run once ready
    facts["job"]["workers"] = {str(rank): name for rank, name in sorted(workers.items())}
    with ctx.catalog.session() as s:
        published = catalog_runs.mark_ready(s, run.id, generation, fmt, facts, report["findings"])
    if not published:  # claimed again, deleted, or published by another delivery meanwhile
        discard_late_work(ctx, job, [*files.databases(generation), files.report(generation)], [])
        return
    files.remove_generations_before(generation)
    for p in files.rank_extracts(generation):  # read into the report: no longer needed
        p.unlink(missing_ok=True)


def register_rank_jobs() -> None:
    register(JobKind.RANK, ingest_rank)
    register(JobKind.ALIGN, align)
