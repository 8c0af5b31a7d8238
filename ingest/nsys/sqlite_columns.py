"""Bulk copy of a SQLite table's integer columns into DuckDB, without a Python object per value.

The standard library's cursor builds a Python ``int`` for every value and a tuple for every
row, which caps it near 400k rows/s for a 14-column kernel table. Here SQLite itself turns
each column of a batch of rows into one comma-separated string (``group_concat``, inside
``sqlite3_step``, which runs without the GIL), numpy parses the strings in C, and DuckDB
scans the arrays. Batches are rowid ranges read by a small thread pool, so both cores work
and memory stays bounded by a few batches in flight. What is left is SQLite's own cost of
decoding and printing each value, about 0.1 us.

All aggregates of a batch come from one ``SELECT`` and so see the rows in the same order;
with ``with_rowid`` the rowid travels along, so text columns read separately can be joined
back by it.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import duckdb
import numpy as np

# Stands in for NULL inside the comma-separated text; no timestamp, id or size reaches it.
# Written as an expression: SQLite reads the literal -9223372036854775808 as a REAL.
NULL_SENTINEL = -9223372036854775807
_NULL_SQL = "(-9223372036854775807)"

BATCH_ROWS = 262_144
WORKERS = 2

Connect = Callable[[], sqlite3.Connection]


class ColumnCountMismatch(Exception):
    """A batch parsed into fewer values than it has rows: a value was not an integer."""


def rowid_range(table: str) -> str:
    """SQL for the lowest and highest rowid of ``table`` (NULLs when it is empty).

    Each in its own subquery: SQLite reads min(rowid) or max(rowid) off the B-tree only
    when it is the query's single aggregate; both in one SELECT scan the whole table
    (0.12 CPU-s per million kernels).
    """
    return f'SELECT (SELECT min(rowid) FROM "{table}"), (SELECT max(rowid) FROM "{table}")'


def copy_int_columns(
    connect: Connect,
    table: str,
    columns: dict[str, str],
    con: duckdb.DuckDBPyConnection,
    target: str,
    select: str = "SELECT * FROM _sqlite_batch",
    params: dict[str, int] | None = None,
    offsets: dict[str, int] | None = None,
    with_rowid: bool = False,
    batch_rows: int = BATCH_ROWS,
    workers: int = WORKERS,
) -> int:
    """Read ``columns`` of every row of SQLite ``table`` into DuckDB table ``target``.

    ``columns`` maps a name to a SQLite integer expression over ``table`` (``:name``
    placeholders take ``params``). Each batch is visible to ``select`` as the relation
    ``_sqlite_batch`` with those names (plus ``row_id`` first, ``with_rowid``), NULLs
    intact, and the result of ``select`` is appended to ``target``. ``offsets`` are added to
    columns that SQLite emitted relative to a base: shorter numbers print faster.
    ``connect`` opens a fresh read-only SQLite connection (one per batch and thread).
    Returns the number of source rows read.
    """
    first = connect()
    try:
        lo, hi = first.execute(rowid_range(table)).fetchone()
    finally:
        first.close()
    if lo is None:
        return 0
    exprs = {"row_id": "rowid", **columns} if with_rowid else dict(columns)
    names = list(exprs)
    aggs = ", ".join(
        f"group_concat(coalesce(CAST(({e}) AS INTEGER), {_NULL_SQL}))" for e in exprs.values()
    )
    sql = f'SELECT count(*), {aggs} FROM "{table}" WHERE rowid BETWEEN :lo AND :hi'
    add = offsets or {}
    raw = ", ".join(
        f"nullif({n}, {NULL_SENTINEL}){f' + {int(add[n])}' if n in add else ''} AS {n}"
        for n in names
    )
    insert = f"INSERT INTO {target} WITH _sqlite_batch AS (SELECT {raw} FROM _sqlite_raw) {select}"
    base = dict(params or {})

    def read(start: int) -> dict[str, np.ndarray] | None:
        src = connect()
        try:
            row = src.execute(sql, {**base, "lo": start, "hi": start + batch_rows - 1}).fetchone()
        finally:
            src.close()
        n = row[0]
        if not n:
            return None
        arrays = {}
        for name, text in zip(names, row[1:], strict=True):
            arr = np.fromstring(text, dtype=np.int64, sep=",")
            if len(arr) != n:
                raise ColumnCountMismatch(f"{table}.{name}")
            arrays[name] = arr
        return arrays

    total = 0
    pending: deque[Future] = deque()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sqlite-read") as pool:
        for start in range(lo, hi + 1, batch_rows):
            pending.append(pool.submit(read, start))
            if len(pending) > workers:
                total += _insert(con, insert, pending.popleft().result())
        while pending:
            total += _insert(con, insert, pending.popleft().result())
    return total


def _insert(con: duckdb.DuckDBPyConnection, insert: str, arrays: dict | None) -> int:
    if arrays is None:
        return 0
    con.register("_sqlite_raw", arrays)
    try:
        con.execute(insert)
    finally:
        con.unregister("_sqlite_raw")
    return len(next(iter(arrays.values())))
