"""Per-run data for requests: the stored report and a read-only trace database.

Reports are computed once at ingest; pages read them from a small in-memory cache keyed by
(run, generation), so a request for the whole trace never re-runs the analyzers. A request
restricted to a part of the trace (:mod:`web.run_restriction`) does: its results are kept in
a cache of their own, and at most a few such analyses run at once. A stored report that does
not have the shape this version declares (``tracelens.report.model.Report``: one written by an
older or newer tracelens) raises :class:`OutdatedReportError`, and the service ingests the
run again. Trace databases stay open (read-only) in bounded caches; each request takes
its own cursor, which DuckDB lets run in parallel. Every open database is a DuckDB instance
of its own (its buffer pool, its worker threads), so a run's database and a job's other
ranks' are cached apart, the ranks' many and small: an aligned view reads up to 64 of them
side by side, eight at a time, each on one thread. An evicted database closes when the
last cursor a request holds on it is closed (the cursors keep it alive until then).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import msgspec

from ingest.duckdb_connect import connect
from tracelens.ranks.grouping import as_trace_finding
from tracelens.ranks.job import JOB_SCHEMA
from tracelens.report.model import Finding, Report
from web.storage import RunFiles
from web.timeline_aligned import MAX_ALIGNED_RANKS
from web.timeline_store import OutdatedTimelineError, timeline_meta

T = TypeVar("T")


def finding_without_rank(f: dict[str, Any]) -> dict[str, Any]:
    """A job's finding as a :class:`Finding` has it (the ranks it names set apart)."""
    return as_trace_finding(f)


# A run's database (a trace's, or a job's reference rank's): a wide timeline query on a big
# trace sorts and aggregates, on the instance's default threads.
READER_MEMORY_LIMIT = "512MiB"
# A job's other ranks' databases: one thread each (an aligned request reads eight ranks at
# once) and a small share, so 64 of them hold at most 8 GiB, not 64 x 512 MiB.
RANK_READER_MEMORY_LIMIT = "128MiB"
RANK_READER_THREADS = 1
# Restricted analyses running at once: each copies part of a trace into a database of its
# own and runs every analyzer on it, as an ingest does; more would wait for a slot.
RESTRICTED_ANALYSES_AT_ONCE = 2


class OutdatedReportError(Exception):
    """The stored report does not have the shape of this version's reports."""


def _check_shape(report: dict[str, Any]) -> None:
    """A trace's report is a :class:`Report`; a job's (``tracelens.job/1``) holds one per
    rank, and findings that are each a :class:`Finding` naming its rank."""
    if report.get("schema") != JOB_SCHEMA:
        Report.of(report)
        return
    for rep in report["rank_reports"].values():
        Report.of(rep)
    for f in report["findings"]:
        msgspec.convert(finding_without_rank(f), Finding)


class _Lru:
    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> Any:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        return None

    def put(self, key: tuple[Any, ...], value: Any) -> Any:
        with self.lock:
            if key in self.items:  # another request loaded it first: keep theirs
                return self.items[key]
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)
            return value

    def drop_run(self, run_id: str) -> None:
        with self.lock:
            for key in [k for k in self.items if k[0] == run_id]:
                del self.items[key]


class RunData:
    def __init__(
        self,
        runs_dir: Path,
        reports: int = 64,
        databases: int = 16,
        # a job's aligned timeline reads up to MAX_ALIGNED_RANKS ranks' databases per
        # request, and opening one costs tens of ms: kept open apart from the runs'
        rank_databases: int = MAX_ALIGNED_RANKS,
        restricted: int = 24,
        series_points: int = 4096,
    ) -> None:
        self.runs_dir = runs_dir
        self._reports = _Lru(reports)
        # A series reads a few numbers of each of its runs' reports: kept apart (and many,
        # being small) so a series page never pushes the run pages or their reports out.
        self._series_points = _Lru(series_points)
        self._dbs = _Lru(databases)
        self._rank_dbs = _Lru(rank_databases)
        self._memo = _Lru(reports * 2)
        self._restricted = _Lru(restricted)
        self._analyses = threading.BoundedSemaphore(RESTRICTED_ANALYSES_AT_ONCE)
        self._guard = threading.Lock()
        self._locks: dict[tuple[Any, ...], threading.Lock] = {}

    def _once(self, lru: _Lru, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        """``lru[key]``, made by one thread: concurrent first requests (a cold process under
        load) wait for it instead of all loading or rendering the same thing at once."""
        cached = lru.get(key)
        if cached is not None:
            return cached
        with self._guard:
            lock = self._locks.setdefault((id(lru), *key), threading.Lock())
        try:
            with lock:
                cached = lru.get(key)
                if cached is None:
                    cached = lru.put(key, make())
        finally:  # a make() that raised (a restriction selecting nothing) leaves no lock
            with self._guard:
                self._locks.pop((id(lru), *key), None)
        return cached

    def report(self, run_id: str, generation: int) -> dict[str, Any]:
        """The stored report's JSON form, checked against :class:`Report` once per load."""
        path = RunFiles(self.runs_dir, run_id).report(generation)

        def load() -> dict[str, Any]:
            report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            try:
                _check_shape(report)
            except msgspec.ValidationError as exc:
                raise OutdatedReportError(str(exc)) from None
            return report

        return self._once(self._reports, (run_id, generation), load)

    def database(
        self, run_id: str, generation: int, rank: int | None = None
    ) -> tuple[duckdb.DuckDBPyConnection, dict]:
        """A cursor on the run's trace database (a job's: one rank's, where ``rank`` is not
        its reference rank), and its timeline metadata."""
        files = RunFiles(self.runs_dir, run_id)
        path = files.database(generation) if rank is None else files.rank_database(generation, rank)

        def open_database() -> tuple[duckdb.DuckDBPyConnection, dict]:
            # Read-only, but a wide timeline query still sorts and aggregates: each open
            # database gets a bounded share so a few cached runs cannot grow the process.
            # (SET, not a connect-time config: every connection to one file in a process
            # must be opened with the same configuration.)
            con = connect(path, read_only=True)
            if rank is None:
                con.execute(f"SET memory_limit = '{READER_MEMORY_LIMIT}'")
            else:
                con.execute(f"SET memory_limit = '{RANK_READER_MEMORY_LIMIT}'")
                con.execute(f"SET threads = {RANK_READER_THREADS}")
            try:
                return con, timeline_meta(con)
            except OutdatedTimelineError:
                con.close()
                raise

        lru = self._dbs if rank is None else self._rank_dbs
        con, meta = self._once(lru, (run_id, generation, rank), open_database)
        return con.cursor(), meta

    def memo(self, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        """``make()``, computed once per ``key`` (whose first item is the run id).

        For what is derived from a ready run's report alone (rendered pages, serialized
        findings): the key includes the ingest generation, so a re-ingest never serves stale.
        """
        return self._once(self._memo, key, make)

    def series_point(self, run_id: str, generation: int, make: Callable[[], T]) -> T:
        """``make()`` once per run and generation: what a series needs of the run."""
        return self._once(self._series_points, (run_id, generation), make)

    def restricted(self, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        """``make()`` once per ``key`` (run id first, then the generation and the
        restriction), for what a restricted analysis gives: kept apart from :meth:`memo`, so
        the parts of traces people look at never push the run pages out, and small, since
        each is a whole report."""
        return self._once(self._restricted, key, make)

    @contextmanager
    def analysis_slot(self) -> Iterator[None]:
        """Wait for one of the few restricted analyses allowed to run at once."""
        with self._analyses:
            yield

    def forget(self, run_id: str) -> None:
        """Drop cached data of a run (deleted or re-ingested)."""
        self._reports.drop_run(run_id)
        self._dbs.drop_run(run_id)
        self._rank_dbs.drop_run(run_id)
        self._memo.drop_run(run_id)
        self._restricted.drop_run(run_id)
        self._series_points.drop_run(run_id)
