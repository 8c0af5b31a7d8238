"""Calls grouped by correlation id, or read as they are where no two share one: same rows."""

from __future__ import annotations

import duckdb

from ingest.correlation import correlation_ids_unique
from ingest.derive_gaps import derive_gaps
from ingest.duckdb_connect import connect
from ingest.schema import create_schema
from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.kernel_ops import KERNEL_OPS


def _trace(calls: list[tuple[str, int, int, int | None]]) -> duckdb.DuckDBPyConnection:
    """Launch calls (name, start, end, correlation id) on one thread; a kernel at 1000-1100
    with correlation id 5 after one that ends at 50, and an NVTX range around it all."""
    con = connect()
    create_schema(con)
    con.executemany(
        "INSERT INTO api_calls (pid, tid, name, kind, start_ns, end_ns, correlation_id) "
        "VALUES (1, 1, ?, 'runtime', ?, ?, ?)",
        [list(c) for c in calls],
    )
    con.execute(
        "INSERT INTO kernels (device_id, name, start_ns, end_ns, correlation_id) "
        "VALUES (0, 'k0', 0, 50, 4), (0, 'k1', 1000, 1100, 5)"
    )
    con.execute(
        "INSERT INTO ranges (range_id, pid, tid, name, start_ns, end_ns, depth) "
        "VALUES (1, 1, 1, 'forward', 0, 2000, 0)"
    )
    return con


def test_uniqueness_ignores_null_ids_and_sees_one_repeat() -> None:
    con = _trace([("cudaLaunchKernel", 10, 20, 4), ("a", 1, 2, None), ("b", 3, 4, None)])
    assert correlation_ids_unique(con)
    con.execute("INSERT INTO api_calls (name, correlation_id) VALUES ('cuLaunchKernel', 4)")
    assert not correlation_ids_unique(con)
    con.execute("DELETE FROM api_calls")
    assert correlation_ids_unique(con)


def test_a_shared_id_is_one_launch_call_spanning_both_and_one_kernel_row() -> None:
    # The runtime call and the driver call inside it share correlation id 5.
    shared = _trace(
        [
            ("cudaLaunchKernel", 10, 20, 4),
            ("cudaLaunchKernel", 300, 700, 5),
            ("cuLaunchKernel", 400, 600, 5),
        ]
    )
    alone = _trace([("cudaLaunchKernel", 10, 20, 4), ("cudaLaunchKernel", 300, 700, 5)])
    for con in (shared, alone):
        derive_gaps(con)
        assert con.execute(
            "SELECT start_ns, end_ns, launch_start_ns, launch_end_ns FROM gaps"
        ).fetchall() == [(50, 1000, 300, 700)]
        db = TraceDB(con)
        require(db, KERNEL_OPS)
        assert db.rows("SELECT kernel_name, op_id, op_name FROM kernel_ops ORDER BY krow") == [
            ("k0", 1, "forward"),
            ("k1", 1, "forward"),
        ]
