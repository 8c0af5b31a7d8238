"""Timeline events by name, for the run page's search box.

A substring (case-insensitive) or a regular expression (RE2, as DuckDB's
``regexp_matches``), over every event the timeline draws. The answer counts them all
and lists the first ``MAX_MATCHES`` in time order as ``[start_ns, end_ns, lane, kind,
ref]``, what the page steps through with next / previous.
"""

from __future__ import annotations

from typing import Any

import duckdb

MAX_MATCHES = 10_000
MAX_QUERY_CHARS = 500


class BadSearchError(ValueError):
    """The query is empty, too long, or not a valid regular expression."""


def search_events(
    con: duckdb.DuckDBPyConnection, query: str, regex: bool = False
) -> dict[str, Any]:
    if not query or len(query) > MAX_QUERY_CHARS:
        raise BadSearchError(f"search needs 1 to {MAX_QUERY_CHARS} characters")
    test = "regexp_matches(name, $q)" if regex else "contains(lower(name), lower($q))"
    sql = f"""
        WITH hits AS (
            SELECT start_ns, end_ns, lane_id, kind, ref FROM tl_events WHERE {test}
            UNION ALL
            SELECT start_ns, end_ns, lane_id, kind, ref FROM tl_long WHERE {test})
        SELECT start_ns, end_ns, lane_id, kind, ref, count(*) OVER () AS n
        FROM hits ORDER BY start_ns, lane_id LIMIT {MAX_MATCHES}
    """
    try:
        rows = con.execute(sql, {"q": query}).fetchall()
    except duckdb.InvalidInputException as e:
        raise BadSearchError(f"not a regular expression: {query!r} ({e})") from None
    return {
        "query": query,
        "regex": regex,
        "count": int(rows[0][5]) if rows else 0,
        "matches": [[int(r[0]), int(r[1]), int(r[2]), r[3], int(r[4])] for r in rows],
    }
