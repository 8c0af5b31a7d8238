"""A job run of several ranks on the queue: a job per rank, on whichever workers take
them, then one align job that publishes the CLI's job report.

The first tests call the rank and align steps and handlers themselves, against a real
catalog (PostgreSQL where TRACELENS_TEST_POSTGRES_URL names one, else SQLite) and a data
directory; the last runs the whole deployment (web app, Redis, two ``tracelens worker``
processes) and uploads an 8-rank job.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("saq", reason="the queue extra (saq) is not installed")

from queue_stack import REDIS_URL, Stack, job_record, wait_for
from saq.job import Status
from web_helpers import make_settings

from tracelens.cli import main as cli_main
from tracelens.testing.planted_ranks import PlantedJob, write_job
from web.catalog import Catalog, Run, RunKind, RunStatus, job_runs
from web.catalog import runs as catalog_runs
from web.ingest_worker import IngestWorker
from web.job_ingest import RankMissing, align_ranks, build_job_run, build_rank
from web.queue import rank_jobs
from web.queue.connection import make_queue
from web.queue.fanout import fan_out
from web.queue.jobs import JobContext
from web.queue.payload import IngestJob, JobKind
from web.queue.rank_jobs import align, discard_late_work, ingest_rank
from web.queue.recovery import recover_lost_runs
from web.settings import Settings
from web.storage import RunFiles

RANKS = 8


def _cli_job(folder: Path) -> dict[str, Any]:
    res = CliRunner().invoke(cli_main, ["analyze", str(folder), "--format", "json", "-q"])
    assert res.exit_code == 0, res.output
    return dict(json.loads(res.output))


def _same_analysis(report: dict[str, Any], cli: dict[str, Any]) -> None:
    """The job analysis of the CLI: all of it but where each rank's file is named."""
    assert report["schema"] == cli["schema"] == "tracelens.job/1"
    for part in ("world_size", "clock", "collectives", "stragglers", "findings", "notes"):
        assert report[part] == cli[part], part
    strip = ("file",)
    assert [{k: v for k, v in r.items() if k not in strip} for r in report["ranks"]] == [
        {k: v for k, v in r.items() if k not in strip} for r in cli["ranks"]
    ]
    assert report["rank_reports"].keys() == cli["rank_reports"].keys()
    for rank, rep in report["rank_reports"].items():
        assert rep["findings"] == cli["rank_reports"][rank]["findings"]
        assert rep["metrics"] == cli["rank_reports"][rank]["metrics"]


@pytest.fixture
def planted(tmp_path: Path) -> PlantedJob:
    return write_job(tmp_path / "job", ranks=RANKS, slow_rank=5)


class JobRun:
    """A job run of the planted ranks in a real catalog and data directory."""

    def __init__(self, tmp: Path, catalog_url: str, planted: PlantedJob) -> None:
        self.settings: Settings = make_settings(tmp / "data", database_url=catalog_url)
        self.catalog = Catalog(catalog_url)
        self.engine = IngestWorker(self.settings, self.catalog)
        run_id = catalog_runs.new_run_id()
        self.files = RunFiles(self.settings.runs_dir, run_id)
        (self.files.dir / "ranks").mkdir(parents=True)
        members = []
        for rank, path in enumerate(planted.files):
            source_file = f"ranks/rank-{rank}.json"
            shutil.copyfile(path, self.files.source(source_file))
            data = path.read_bytes()
            members.append(
                {
                    "rank": rank,
                    "filename": path.name,
                    "source_file": source_file,
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "size_bytes": len(data),
                }
            )
        new = catalog_runs.NewRun(
            id=run_id,
            sha256=hashlib.sha256(run_id.encode()).hexdigest(),
            name="planted job",
            tags=",",
            original_filename="rank-0.json and 7 more",
            size_bytes=sum(int(m["size_bytes"]) for m in members),
            source_file="ranks",
            source_redaction=10**6,  # kept redacted: nothing to redact first
            kind=RunKind.JOB,
            members=members,
        )
        with self.catalog.session() as s:
            catalog_runs.create_run(s, new)

    @property
    def id(self) -> str:
        return self.files.dir.name

    def claim(self) -> int:
        with self.catalog.session() as s:
            generation = job_runs.claim_delivery(s, self.id)
        assert generation is not None
        return generation

    def run(self) -> Run:
        with self.catalog.session() as s:
            run = catalog_runs.get_run(s, self.id)
        assert run is not None
        return run

    def ctx(self, attempt: int = 1, max_attempts: int = 3) -> JobContext:
        return JobContext(
            settings=self.settings,
            catalog=self.catalog,
            engine=self.engine,
            worker_name="worker-here",
            attempt=attempt,
            max_attempts=max_attempts,
        )

    def build_ranks(self, generation: int, ranks: range = range(RANKS)) -> None:
        run = self.run()
        for rank in ranks:
            build_rank(self.files, generation, run, rank, self.engine.limits, f"worker-{rank % 2}")

    def close(self) -> None:
        self.engine.shutdown()
        self.catalog.dispose()


@pytest.fixture
def job_run(tmp_path: Path, catalog_url: str, planted: PlantedJob) -> Any:
    made = JobRun(tmp_path, catalog_url, planted)
    try:
        yield made
    finally:
        made.close()


def test_ranks_built_apart_then_aligned_give_the_embedded_and_cli_report(
    job_run: JobRun, planted: PlantedJob
) -> None:
    whole = build_job_run(
        job_run.files, job_run.claim(), job_run.run(), job_run.engine.limits, lambda _: None
    )
    generation = job_run.claim()
    job_run.build_ranks(generation)
    # every rank's database, complete and in place, and its extract
    assert len(job_run.files.databases(generation)) == RANKS
    assert len(job_run.files.rank_extracts(generation)) == RANKS
    split, workers = align_ranks(job_run.files, generation, job_run.run())
    assert split == whole
    # a second align delivery builds the same report and leaves the one in place
    kept = job_run.files.report(generation).stat()
    assert align_ranks(job_run.files, generation, job_run.run())[0] == split
    assert job_run.files.report(generation).stat().st_ino == kept.st_ino
    assert list(job_run.files.dir.glob(".*.partial")) == []
    assert workers == {r: f"worker-{r % 2}" for r in range(RANKS)}
    _same_analysis(split, _cli_job(planted.files[0].parent))
    # the planted slow rank leads: the job waits for it
    top = split["findings"][0]
    assert (top["analyzer"], top["rank"], top["impact_ns"]) == ("ranks", 5, 20_000_000)


def test_jobs_of_an_older_generation_do_nothing(job_run: JobRun) -> None:
    old = job_run.claim()
    job_run.build_ranks(old, range(RANKS - 1))
    new = job_run.claim()  # the run claimed again (a redelivery): generation old is gone
    assert new == old + 1
    ctx = job_run.ctx()
    # the old generation's last rank, then its align job (every rank's files but one there)
    ingest_rank(
        ctx, IngestJob(kind=JobKind.RANK, run_id=job_run.id, rank=RANKS - 1, generation=old)
    )
    assert not job_run.files.rank_extract(old, RANKS - 1).exists()
    assert not job_run.files.rank_database(old, RANKS - 1).exists()
    job_run.build_ranks(old, range(RANKS - 1, RANKS))
    align(ctx, IngestJob(kind=JobKind.ALIGN, run_id=job_run.id, generation=old))
    run = job_run.run()
    assert (run.status, run.generation, run.finding_count) == (RunStatus.INGESTING, new, 0)
    assert not job_run.files.report(old).exists()


def test_late_work_goes_unless_it_is_the_published_runs(
    job_run: JobRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job delivered twice may finish after its generation moved on: what it wrote for
    an older generation goes; a second delivery of a published generation's rank leaves
    the published database as it is (never replaced: another machine may have it open)."""
    old = job_run.claim()
    job_run.build_ranks(old, range(1, 2))
    generation = job_run.claim()
    ctx = job_run.ctx()
    stale = IngestJob(kind=JobKind.RANK, run_id=job_run.id, rank=1, generation=old)
    ingest_rank(ctx, stale)  # delivered after the run was claimed again: it does nothing
    discard_late_work(
        ctx, stale, [job_run.files.rank_database(old, 1)], [job_run.files.rank_extract(old, 1)]
    )
    assert not job_run.files.rank_database(old, 1).exists()
    assert not job_run.files.rank_extract(old, 1).exists()
    job_run.build_ranks(generation)
    # A second delivery of rank 1 passes its generation check, then is held (the hook
    # every job takes once it has its generation) until the first deliveries published.
    began, go_on = threading.Event(), threading.Event()

    def held() -> None:
        began.set()
        assert go_on.wait(60)

    monkeypatch.setattr(rank_jobs, "test_delay", held)
    late = IngestJob(kind=JobKind.RANK, run_id=job_run.id, rank=1, generation=generation)
    errors: list[BaseException] = []

    def deliver() -> None:
        try:
            ingest_rank(ctx, late)
        except BaseException as exc:
            errors.append(exc)

    second = threading.Thread(target=deliver)
    second.start()
    try:
        assert began.wait(60)
        align(ctx, IngestJob(kind=JobKind.ALIGN, run_id=job_run.id, generation=generation))
        run = job_run.run()
        assert run.status == RunStatus.READY and run.generation == generation
        assert run.facts["job"]["workers"] == {str(r): f"worker-{r % 2}" for r in range(RANKS)}
        assert job_run.files.rank_extracts(generation) == []  # read into the report
        database = job_run.files.rank_database(generation, 1)
        published = database.stat()
    finally:
        go_on.set()
        second.join(120)
    assert not second.is_alive() and errors == []
    # the published database is the same file; what the late delivery built is gone
    assert database.stat().st_ino == published.st_ino
    assert database.stat().st_mtime_ns == published.st_mtime_ns
    assert not job_run.files.rank_extract(generation, 1).exists()
    assert list(job_run.files.dir.glob(".*")) == []
    assert len(job_run.files.databases(generation)) == RANKS
    assert job_run.files.report(generation).is_file()
    monkeypatch.undo()
    ingest_rank(ctx, late)  # delivered now: the run is published, it does nothing
    assert database.stat().st_ino == published.st_ino
    # a second align delivery after the publish changes nothing either
    align(ctx, IngestJob(kind=JobKind.ALIGN, run_id=job_run.id, generation=generation))
    assert job_run.run().status == RunStatus.READY
    assert job_run.files.report(generation).is_file()


def test_align_never_publishes_with_a_rank_missing(job_run: JobRun) -> None:
    generation = job_run.claim()
    job_run.build_ranks(generation)
    job = IngestJob(kind=JobKind.ALIGN, run_id=job_run.id, generation=generation)
    # a rank's database gone (its extract still there), then its extract too
    job_run.files.rank_database(generation, 3).unlink()
    with pytest.raises(RankMissing, match=r"rank 3 \(rank-3.json\) has no complete database"):
        align(job_run.ctx(attempt=1), job)
    run = job_run.run()
    assert run.status == RunStatus.INGESTING and run.generation == generation
    assert not job_run.files.report(generation).exists()
    job_run.files.rank_extract(generation, 3).unlink()
    job_run.build_ranks(generation, range(3, 4))
    job_run.files.rank_extract(generation, 6).unlink()
    # the last attempt fails the run, naming the rank; it is never shown ready
    with pytest.raises(RankMissing):
        align(job_run.ctx(attempt=3, max_attempts=3), job)
    run = job_run.run()
    assert run.status == RunStatus.FAILED
    assert run.error == (
        "rank-0.json and 7 more: aligning the ranks: internal error "
        "(RankMissing: rank 6 (rank-6.json) has no complete database)"
    )
    assert run.finding_count == 0 and not job_run.files.report(generation).exists()


def test_recovery_knows_a_job_runs_rank_jobs(
    job_run: JobRun, queue_name: str, tmp_path: Path
) -> None:
    """Live rank jobs: left alone. Lost ones (Redis lost its data): the run is queued again
    for a new generation. A rank job the queue gave up on: the run fails with its error."""
    settings = Settings.from_env(
        tmp_path / "data",
        queue_url=REDIS_URL,
        queue_name=queue_name,
        database_url=job_run.catalog.url,
        queue_attempts=3,
    )

    async def forget(queue: Any) -> None:
        await queue.redis.delete(
            *[k async for k in queue.redis.scan_iter(match=f"saq:*{queue_name}:*")]
        )

    async def scenario() -> list[Any]:
        queue = make_queue(settings)
        await queue.connect()
        try:
            seen: list[Any] = []
            generation = job_run.claim()
            await fan_out(queue, settings, job_run.id, generation, range(RANKS))
            seen.append(await recover_lost_runs(queue, settings, job_run.catalog))
            seen.append(job_run.run())
            await forget(queue)  # the queue loses every job of the run
            seen.append(await recover_lost_runs(queue, settings, job_run.catalog))
            seen.append(job_run.run())
            seen.append(await queue.job(IngestJob.for_run(job_run.id).key))
            # claimed again and fanned out; its rank 4's workers kept dying
            await queue.redis.delete(
                *[k async for k in queue.redis.scan_iter(match=f"saq:*{queue_name}:*")]
            )
            generation = job_run.claim()
            await fan_out(queue, settings, job_run.id, generation, range(RANKS))
            for rank in range(RANKS):
                key = IngestJob(
                    kind=JobKind.RANK, run_id=job_run.id, rank=rank, generation=generation
                ).key
                job = await queue.job(key)
                assert job is not None
                if rank == 4:
                    job.attempts = 3
                    job.error = "the worker running it stopped answering (killed or out of memory)"
                    await queue.finish_abort(job)
                else:
                    await job.finish(Status.COMPLETE)
            seen.append(await recover_lost_runs(queue, settings, job_run.catalog))
            seen.append(job_run.run())
            return seen
        finally:
            await queue.disconnect()

    live, left, lost, requeued, run_job, failing, failed = asyncio.run(scenario())
    assert live == 0 and (left.status, left.generation) == (RunStatus.INGESTING, 1)
    assert lost == 1 and requeued.status == RunStatus.QUEUED and run_job is not None
    assert failing == 0 and failed.status == RunStatus.FAILED
    assert failed.error == (
        "rank-0.json and 7 more: rank 4: the worker running it stopped answering (killed or "
        "out of memory); gave up after 3 attempts"
    )


def test_an_8_rank_job_is_ingested_by_both_workers_and_matches_the_cli(
    stack: Stack, planted: PlantedJob
) -> None:
    # Each rank job waits a moment once it has its generation (the test-only delay every
    # job takes), so neither worker can take all eight before the other takes one.
    stack.env_extra["TRACELENS_TEST_ONLY_JOB_DELAY_S"] = "0.5"
    # No worker dies here, so nothing needs the 2 s visibility the other tests use to find
    # dead workers fast. Under it, a test machine loaded by the rest of the suite let a
    # live worker's heartbeat slip past 2 s: the queue handed its rank job to the other
    # worker, both built it, and the job record named one worker while the run kept the
    # other's database (seen now and then in full runs of the suite).
    stack.env_extra["TRACELENS_QUEUE_VISIBILITY_S"] = "20"
    stack.worker("worker-a")
    stack.worker("worker-b")
    stack.web()
    with stack.client() as c:
        # two worker processes importing everything on a loaded machine: more than the
        # default wait, which timed out now and then
        wait_for(
            "both workers",
            lambda: c.get("/api/health").json()["queue"]["workers"] == 2,
            timeout=120,
        )
        answer = c.post(
            "/api/runs",
            files=[("file", (p.name, p.read_bytes(), "application/json")) for p in planted.files],
        )
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["id"]
        seen: list[dict[str, Any]] = []
        pages: list[str] = []

        def finished() -> dict[str, Any] | None:
            run = c.get(f"/api/runs/{run_id}").json()
            if run["status"] == "ingesting" and (run["ingest_job"] or {}).get("parts"):
                seen.append(run)
                if not pages:
                    pages.append(c.get(f"/runs/{run_id}").text)
            return run if run["status"] in ("ready", "failed") else None

        run = wait_for("the job run finished", finished, timeout=300, every=0.1)
        assert run["status"] == "ready", run["error"]
        report = c.get(f"/api/runs/{run_id}/report").json()
        findings = c.get(f"/api/runs/{run_id}/findings").json()
    _same_analysis(report, _cli_job(planted.files[0].parent))
    assert findings == report["findings"]
    assert run["facts"]["job"]["ranks"] == list(range(RANKS))
    # Each rank's job records the worker that ran it; the run keeps who built each rank.
    generation = _generation(stack)
    ran = {
        r: job_record(stack.queue, f"rank:{run_id}:g{generation}:r{r}")["meta"]["worker"]
        for r in range(RANKS)
    }
    assert run["facts"]["job"]["workers"] == {str(r): w for r, w in ran.items()}
    assert set(ran.values()) == {"worker-a", "worker-b"}, ran
    assert job_record(stack.queue, f"align:{run_id}:g{generation}")["status"] == "complete"
    # While it ingested, the run showed its rank jobs, each with its worker once running.
    assert seen, "the run was never seen mid-ingest"
    job = seen[-1]["ingest_job"]
    assert [p["rank"] for p in job["parts"] if p["kind"] == "rank"] == list(range(RANKS))
    assert {p["worker"] for p in job["parts"] if p["status"] == "complete"} <= {
        "worker-a",
        "worker-b",
    }
    assert re.search(r"rank jobs \d of 8 done, on \d workers", pages[0]), pages[0][:2000]
    progress = [r["progress"] for r in seen]
    assert progress == sorted(progress) and progress[0] >= 0 and progress[-1] <= 1


def _generation(stack: Stack) -> int:
    """The run's ingesting generation, from its align job's key on the queue."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = [k.decode() for k in client.scan_iter(match=f"saq:job:{stack.queue}:align:*")]
    finally:
        client.close()
    (key,) = keys
    return int(key.rsplit(":g", 1)[1])
