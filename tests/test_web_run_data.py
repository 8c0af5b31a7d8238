"""The database cache of the web process: every open database is a DuckDB instance of its
own, so what each may take and how many stay open bound the process."""

from __future__ import annotations

from pathlib import Path

from test_web_job_timeline import planted_job

from ingest import load_trace
from web.run_data import (
    RANK_READER_MEMORY_LIMIT,
    READER_MEMORY_LIMIT,
    RunData,
)
from web.storage import RunFiles
from web.timeline_store import build_timeline_tables

RUN = "0123456789ab"


def _job_files(tmp: Path, ranks: int) -> Path:
    """A job run's databases as ingest leaves them: the reference rank's is the run's."""
    job = planted_job(tmp / "job", ranks=ranks, steps=2)
    runs = tmp / "runs"
    files = RunFiles(runs, RUN)
    files.dir.mkdir(parents=True)
    for r, path in enumerate(job.files):
        t = load_trace(path)
        build_timeline_tables(t.con)
        out = files.database(1) if r == 0 else files.rank_database(1, r)
        t.con.execute(f"ATTACH '{out}' AS f; COPY FROM DATABASE memory TO f; DETACH f")
        t.close()
    return runs


def _settings(cur: object) -> tuple[str, int]:
    limit, threads = cur.execute(  # type: ignore[attr-defined]
        "SELECT current_setting('memory_limit'), current_setting('threads')"
    ).fetchone()
    return str(limit), int(threads)


def _mib(setting: str) -> float:
    return float(setting.removesuffix("MiB").removesuffix(" "))


def test_rank_databases_are_small_and_single_threaded(tmp_path: Path) -> None:
    """A job's other ranks are many (an aligned view reads 64): each gets one thread and a
    small memory share; the run's own database keeps the larger one."""
    data = RunData(_job_files(tmp_path, ranks=3))
    run_cur, _ = data.database(RUN, 1)
    rank_cur, _ = data.database(RUN, 1, 2)
    run_limit, _ = _settings(run_cur)
    rank_limit, rank_threads = _settings(rank_cur)
    assert _mib(run_limit) == _mib(READER_MEMORY_LIMIT)
    assert _mib(rank_limit) == _mib(RANK_READER_MEMORY_LIMIT) < _mib(run_limit)
    assert rank_threads == 1
    run_cur.close()
    rank_cur.close()


def test_a_jobs_ranks_do_not_push_the_runs_databases_out(tmp_path: Path) -> None:
    """Opening more ranks than the cache holds (a job's clock opens every rank) evicts
    ranks, not the run databases pages are reading."""
    data = RunData(_job_files(tmp_path, ranks=6), databases=2, rank_databases=3)
    cur, _ = data.database(RUN, 1)
    cur.close()
    run_key = (RUN, 1, None)
    held = data._dbs.get(run_key)
    for r in range(1, 6):
        c, _ = data.database(RUN, 1, r)
        c.close()
    assert data._dbs.get(run_key) is held is not None
