"""A job run's aligned timeline for a request: its clock, the ranks asked for, their
databases (see :mod:`web.timeline_aligned` for how ranks are shifted and merged)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import duckdb
from litestar.exceptions import ClientException

from web.catalog import Run, RunKind
from web.run_lookup import open_run_database, ready_report
from web.services import Services
from web.timeline_aligned import (
    RANKS_AT_ONCE,
    AlignedClock,
    BadRanksError,
    OpenRank,
    aligned_clock,
    parse_ranks,
)


def job_ranks(run: Run) -> list[int]:
    return sorted(int(m["rank"]) for m in run.members or [])


def chosen_ranks(run: Run, spec: str | None, *, limit: bool = True) -> list[int]:
    """The ranks ``spec`` names (``all`` or a list); 400 for a single trace or a bad list."""
    if run.kind != RunKind.JOB:
        raise ClientException(f"run {run.id} is one trace: it has no ranks to align")
    try:
        return parse_ranks(spec, job_ranks(run), limit=limit)
    except BadRanksError as e:
        raise ClientException(f"run {run.id}: {e}") from None


def rank_opener(svc: Services, run: Run) -> OpenRank:
    """Opens a rank's database by its rank number (the reference rank's is the run's)."""

    def open_rank(rank: int) -> tuple[duckdb.DuckDBPyConnection, dict[str, Any]]:
        return open_run_database(svc, run, rank)

    return open_rank


def job_clock(svc: Services, run: Run) -> AlignedClock:
    """The job's aligned clock, from its report and every rank's timeline origin: once per
    ingest generation (it opens every rank's database)."""

    def origin(rank: int) -> dict[str, int]:
        cur, meta = open_run_database(svc, run, rank)
        cur.close()
        return {"t0_ns": meta["t0_ns"], "span_ns": meta["span_ns"]}

    def make() -> AlignedClock:
        report = ready_report(svc, run)
        ranks = job_ranks(run)
        with ThreadPoolExecutor(max_workers=RANKS_AT_ONCE) as pool:
            metas = dict(zip(ranks, pool.map(origin, ranks), strict=True))
        return aligned_clock(report, metas)

    return svc.run_data.memo((run.id, run.generation, "aligned-clock"), make)
