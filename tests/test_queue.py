"""The scale-out mode end to end: the real web app, real Redis, the real catalog
(PostgreSQL where TRACELENS_TEST_POSTGRES_URL names one) and real ``tracelens worker``
processes, killed and restarted as a deployment would see them.

Each test has a queue of its own (its name, so its Redis keys, are unique) and removes
its keys afterwards (the processes are started by ``queue_stack``). The slow ingest the
kill tests need is a test-only setting (``TRACELENS_TEST_ONLY_JOB_DELAY_S``: every job
sleeps that long once it has claimed its run), so "mid-ingest" is a state the test waits
for, not a race it hopes to win.
"""

from __future__ import annotations

import json
import re
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from queue_stack import REDIS_URL, Stack, drop_queue_keys, job_record, wait_for
from web_helpers import write_planted

pytest.importorskip("saq", reason="the queue extra (saq) is not installed")

from tracelens.cli import main as cli_main

UPLOADS = 20


def _cli_findings(path: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(cli_main, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["findings"]


def upload(c: httpx.Client, path: Path) -> httpx.Response:
    return c.post("/api/runs", files={"file": (path.name, path.read_bytes())})


def all_finished(c: httpx.Client, ids: list[str]) -> list[dict[str, Any]] | None:
    runs = [c.get(f"/api/runs/{i}").json() for i in ids]
    return runs if all(r["status"] in ("ready", "failed") for r in runs) else None


def test_twenty_concurrent_uploads_on_two_workers_match_the_cli(stack: Stack) -> None:
    traces = [
        write_planted(stack.tmp / f"trace-{i:02d}.pt.trace.json.gz", host=f"node-{i:02d}")
        for i in range(UPLOADS)
    ]
    stack.worker("worker-a")
    stack.worker("worker-b")
    stack.web()
    with ThreadPoolExecutor(max_workers=UPLOADS) as pool, stack.client() as c:
        answers = list(pool.map(lambda p: upload(c, p), traces))
        assert [a.status_code for a in answers] == [201] * UPLOADS, [a.text for a in answers]
        ids = [a.json()["id"] for a in answers]
        # The CLI's answer for a sample of the traces, while the workers ingest them all.
        sampled = {i: _cli_findings(traces[i]) for i in (0, UPLOADS - 1)}
        runs = wait_for("all runs finished", lambda: all_finished(c, ids), timeout=300)
        assert [r["status"] for r in runs] == ["ready"] * UPLOADS, [r["error"] for r in runs]
        findings = [c.get(f"/api/runs/{i}/findings").json() for i in ids]
        for i, expected in sampled.items():
            assert findings[i] == expected
        # The planted findings do not depend on the host name (the samples say so), so
        # every run must have the CLI's findings.
        assert all(f == sampled[0] for f in findings)
        # The tests' 2 s visibility window can lapse for a job whose worker is starved of
        # CPU by the rest of the suite: the sweep puts it back, and a worker takes the
        # duplicate, finds its run finished and drops it (`claim_delivery`). So the queue
        # is judged once it has drained, not at the instant the last run is ready.
        health = wait_for(
            "the queue drained",
            lambda: (h := c.get("/api/health").json())["queue"]["waiting"] == 0 and h,
            timeout=120,
        )
    assert health["queue"]["status"] == "ok" and health["queue"]["workers"] == 2
    assert health["status"] == "ok"
    # Both workers ran jobs: the queue keeps which worker ran each.
    ran_on = _job_workers(stack.queue, ids)
    assert set(ran_on.values()) == {"worker-a", "worker-b"}, ran_on


def _job_workers(queue: str, run_ids: list[str]) -> dict[str, str]:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        records = client.mget([f"saq:job:{queue}:run:{i}" for i in run_ids])
    finally:
        client.close()
    return {i: json.loads(r)["meta"]["worker"] for i, r in zip(run_ids, records, strict=True) if r}


def _job(c: httpx.Client, run_id: str) -> dict[str, Any]:
    return c.get(f"/api/runs/{run_id}").json()


def test_a_worker_killed_mid_ingest_loses_no_run(stack: Stack) -> None:
    trace = write_planted(stack.tmp / "killed.pt.trace.json.gz", host="killed")
    stack.env_extra["TRACELENS_TEST_ONLY_JOB_DELAY_S"] = "2"
    workers = {name: stack.worker(name) for name in ("worker-a", "worker-b")}
    stack.web()
    with stack.client() as c:
        run_id = upload(c, trace).json()["id"]

        def running_on() -> str | None:
            run = _job(c, run_id)
            job = run["ingest_job"] or {}
            return job.get("worker") if run["status"] == "ingesting" else None

        doomed = wait_for("the job running on a worker", running_on)
        workers[doomed].send_signal(signal.SIGKILL)
        workers[doomed].wait(timeout=10)
        (survivor,) = set(workers) - {doomed}
        run = wait_for(
            "the run ready", lambda: (r := _job(c, run_id))["status"] in ("ready", "failed") and r
        )
        assert run["status"] == "ready", run["error"]
        assert c.get(f"/api/runs/{run_id}/findings").json() == _cli_findings(trace)
        health = c.get("/api/health").json()
    assert health["queue"]["workers"] == 1  # the killed one has dropped out
    record = job_record(stack.queue, f"run:{run_id}")
    assert record["meta"]["worker"] == survivor
    assert record["attempts"] == 2 and record["status"] == "complete"


def test_a_web_restart_mid_ingest_loses_no_run(stack: Stack) -> None:
    import redis

    traces = [
        write_planted(stack.tmp / f"restart-{i}.pt.trace.json.gz", host=f"restart-{i}")
        for i in range(3)
    ]
    stack.env_extra["TRACELENS_TEST_ONLY_JOB_DELAY_S"] = "2"
    worker = stack.worker("worker-first")
    web = stack.web()
    with stack.client() as c:
        ids = [upload(c, t).json()["id"] for t in traces]
        wait_for("one run ingesting", lambda: any(_job(c, i)["status"] == "ingesting" for i in ids))
    # Everything stops mid-ingest, and the queue forgets its jobs (a Redis restarted
    # without persistence): only the catalog knows the runs are unfinished.
    for proc in (web, worker):
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        drop_queue_keys(client, stack.queue)
    finally:
        client.close()
    stack.web()
    with stack.client() as c:
        # The restarted web process found them and enqueued a job for each.
        before = [_job(c, i) for i in ids]
        assert {r["status"] for r in before} == {"queued"}, [r["status"] for r in before]
        assert all(r["ingest_job"] and r["ingest_job"]["status"] == "queued" for r in before), (
            before
        )
        stack.worker("worker-second")
        runs = wait_for("all runs finished", lambda: all_finished(c, ids))
        assert [r["status"] for r in runs] == ["ready"] * len(ids), [r["error"] for r in runs]
        assert c.get(f"/api/runs/{ids[0]}/findings").json() == _cli_findings(traces[0])


def test_uploads_beyond_the_queue_depth_answer_503_with_retry_after(stack: Stack) -> None:
    traces = [
        write_planted(stack.tmp / f"full-{i}.pt.trace.json.gz", host=f"full-{i}") for i in range(3)
    ]
    stack.web(TRACELENS_QUEUE_MAX_DEPTH="2")  # and no worker: nothing leaves the queue
    with stack.client() as c:
        assert [upload(c, t).status_code for t in traces[:2]] == [201, 201]
        refused = upload(c, traces[2])
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["retry-after"]) > 0
        assert "queue is full" in refused.json()["error"]
        assert c.get("/api/runs").json()["total"] == 2  # the refused upload left nothing
        health = c.get("/api/health").json()
    assert health["queue"] == {
        "status": "ok",
        "name": stack.queue,
        "waiting": 2,
        "active": 0,
        "workers": 0,
    }


def test_failing_attempts_are_retried_then_fail_the_run_with_the_last_error(stack: Stack) -> None:
    trace = write_planted(stack.tmp / "doomed.pt.trace.json.gz", host="doomed")
    stack.web(TRACELENS_QUEUE_ATTEMPTS="3")
    with stack.client() as c:
        run_id = upload(c, trace).json()["id"]
        # Every generation's report path is taken by a directory: each attempt's
        # publishing fails (an internal error, not a bad trace), as a full disk would.
        for gen in range(1, 8):
            (stack.data_dir / "runs" / run_id / f"report.{gen}.json").mkdir()
        stack.worker("worker-retrying", TRACELENS_QUEUE_ATTEMPTS="3")
        notes: set[str] = set()

        def finished() -> dict[str, Any] | None:
            run = _job(c, run_id)
            if run["status"] == "queued" and run["error"]:
                notes.add(run["error"])
            return run if run["status"] in ("ready", "failed") else None

        run = wait_for("the run failed", finished, every=0.1)
    assert run["status"] == "failed"
    error = run["error"]
    assert "\n" not in error and "Traceback" not in error
    assert error.startswith("doomed.pt.trace.json.gz: internal error (IsADirectoryError")
    # Between attempts the run said it would try again (each such state lasts the 1 s
    # retry delay, which a poll on two busy cores can miss once: either attempt will do).
    assert any(re.match(r"attempt [12] of 3 failed .*; retrying$", n) for n in notes), notes
    record = job_record(stack.queue, f"run:{run_id}")
    assert record["attempts"] == 3 and record["status"] == "failed"


def test_a_job_whose_workers_keep_dying_fails_its_run_in_one_line(stack: Stack) -> None:
    trace = write_planted(stack.tmp / "deadly.pt.trace.json.gz", host="deadly")
    # One attempt: the first worker's death spends it.
    stack.env_extra.update(TRACELENS_QUEUE_ATTEMPTS="1", TRACELENS_TEST_ONLY_JOB_DELAY_S="2")
    workers = {name: stack.worker(name) for name in ("worker-a", "worker-b")}
    stack.web()
    with stack.client() as c:
        run_id = upload(c, trace).json()["id"]

        def running_on() -> str | None:
            run = _job(c, run_id)
            return (run["ingest_job"] or {}).get("worker") if run["status"] == "ingesting" else None

        doomed = wait_for("the job running on a worker", running_on)
        workers[doomed].send_signal(signal.SIGKILL)
        workers[doomed].wait(timeout=10)
        # the survivor notices the dead worker's job on its next sweep; on two cores shared
        # with the rest of the suite that has taken longer than the default 40 s
        run = wait_for(
            "the run failed",
            lambda: (r := _job(c, run_id))["status"] == "failed" and r,
            timeout=120,
        )
    assert run["error"] == (
        "deadly.pt.trace.json.gz: the worker running it stopped answering (killed or out of "
        "memory); gave up after 1 attempt"
    )
    assert job_record(stack.queue, f"run:{run_id}")["status"] == "aborted"
