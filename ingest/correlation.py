"""Whether no two API calls share a correlation id: then grouping calls by it changes nothing.

Gap derivation, kernel attribution and the launch latency each look up the launch call of
a correlation id. A runtime call and the driver call made inside it may share one, so each
groups the calls by correlation id, and on a million calls that is a hash table of a
million groups (0.15-0.3 CPU-s each). Every trace of the corpus has one call per id, and
finding out costs a sort of the ids (~0.05 CPU-s per million): where it holds, the
queries read the calls as they are, which gives the rows the grouping would.
"""

from __future__ import annotations

import duckdb


def correlation_ids_unique(con: duckdb.DuckDBPyConnection) -> bool:
    """No correlation id is on two rows of ``api_calls`` (NULL ids are not counted)."""
    row = con.execute(
        """SELECT count(*) = 0 FROM (
               SELECT correlation_id = lag(correlation_id) OVER (ORDER BY correlation_id)
                   AS repeated
               FROM api_calls WHERE correlation_id IS NOT NULL)
           WHERE repeated"""
    ).fetchone()
    return bool(row and row[0])
