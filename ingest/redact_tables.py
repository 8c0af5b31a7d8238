"""Secrets are redacted once, at ingest, in everything a trace database stores.

Operator, kernel, range and thread names can carry what a program put in them (a command
line with ``--api-key``, a URL with credentials, a token in a job name). The readers store
names as the trace has them; this pass rewrites every text column of the canonical tables
and the trace facts with the rules of :mod:`ingest.redaction` before anything reads them,
so the CLI's ``--db`` files, reports and the web timeline never hold them.

One scan over every text column, grouped to its distinct values, and an RE2 match of each
(DuckDB ``regexp_matches`` with the candidate pattern of :mod:`ingest.redacted_copy`) finds
the few that could hold a secret; only those are redacted in Python and written back
through a mapping table.
"""

from __future__ import annotations

import duckdb

from ingest.redacted_copy import CANDIDATE_RE2
from ingest.redaction import REDACTED, is_secret_key, redact_text
from ingest.schema import TABLES


def _text_columns(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """(table, column) of every text column of the canonical tables but ``trace_info``."""
    tables = [t for t in TABLES if t != "trace_info"]
    return [
        (r[0], r[1])
        for r in con.execute(
            "SELECT table_name, column_name FROM duckdb_columns() "
            "WHERE data_type = 'VARCHAR' AND NOT internal AND list_contains(?, table_name) "
            "ORDER BY table_name, column_index",
            [tables],
        ).fetchall()
    ]


def redact_tables(con: duckdb.DuckDBPyConnection) -> int:
    """Redact secrets in every text column of the canonical tables; values rewritten."""
    columns = _text_columns(con)
    # One scan of every column: a query per column cost more than the scans themselves on
    # small traces (dozens of columns, most of them in empty tables).
    scan = " UNION ALL ".join(
        f'SELECT {i} AS col, "{col}" AS v FROM {table}' for i, (table, col) in enumerate(columns)
    )
    found: dict[int, list[str]] = {}
    if columns:
        # Names repeat (a kernel launched thousands of times): the pattern is tried on each
        # distinct value once. It is applied to min(v), an aggregate, because DuckDB pushes
        # a filter on a grouping key below the grouping and would try every row again.
        for i, value in con.execute(
            f"SELECT col, v FROM (SELECT col, min(v) AS v FROM ({scan}) "
            "WHERE v IS NOT NULL GROUP BY col, v) "
            "WHERE regexp_matches(v, ?) ORDER BY col, v",
            [CANDIDATE_RE2],
        ).fetchall():
            found.setdefault(i, []).append(value)
    changed = 0
    for i, values in found.items():
        table, col = columns[i]
        pairs = [(v, redact_text(v)) for v in values]
        pairs = [(old, new) for old, new in pairs if new != old]
        if not pairs:
            continue
        con.execute("CREATE OR REPLACE TEMP TABLE _redacted (old VARCHAR, new VARCHAR)")
        con.executemany("INSERT INTO _redacted VALUES (?, ?)", pairs)
        con.execute(
            f'UPDATE {table} SET "{col}" = r.new FROM _redacted r WHERE {table}."{col}" = r.old'
        )
        con.execute("DROP TABLE _redacted")
        changed += len(pairs)
    for key, value in con.execute("SELECT key, value FROM trace_info").fetchall():
        new = REDACTED if value and is_secret_key(key) else redact_text(value or "")
        if value and new != value:
            con.execute("UPDATE trace_info SET value = ? WHERE key = ?", [new, key])
            changed += 1
    return changed
