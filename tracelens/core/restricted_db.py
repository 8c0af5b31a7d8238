"""A trace database holding only the part of a trace a restriction selects.

Every analyzer measures against the analysed window (``TraceDB.window``, ``pct_of_window``)
and reads the canonical tables; filtering inside each of them would be fourteen chances
to disagree. Instead the canonical tables are copied, filtered, into a new in-memory
database and the gaps are judged again there (:func:`ingest.derive_gaps.derive_gaps`), so
analyzers, report and frames run on it unchanged and the window is the restriction's.

Which rows are kept, for intervals ``[start, end)``:

- GPU work (kernels, copies, memsets): work *issued* in an interval, i.e. whose launching
  runtime call started in it (the rule by which ``profiler_step_kernels`` gives a kernel
  to a step; the GPU runs behind the host, and a step's work is what it launched), or,
  without a recorded launch, work that overlaps it;
- host records and synchronizations (operators, runtime calls, ranges, collectives,
  syncs): those that overlap an interval, kept whole, so a gap's covering operator or
  data-loader range is still there to explain it;
- allocator events: those inside an interval;
- devices, threads and trace facts: all of them.

The copy goes through Arrow streams between the two connections (no row passes through
Python), so it works as well for a read-only database file as for an in-memory one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import duckdb

from ingest import LoadedTrace
from ingest.derive_gaps import derive_gaps
from ingest.duckdb_connect import connect
from ingest.limits import IngestLimits
from ingest.schema import create_schema, set_info
from tracelens.core.restriction import Interval, Restriction, merge_intervals
from tracelens.core.tracedb import TraceDB

# The intervals as a relation: two lists given as parameters, not SQL text.
_INTERVALS = "SELECT unnest($starts::BIGINT[]) AS s, unnest($ends::BIGINT[]) AS e"

# Merged intervals are disjoint and sorted, so the one that started last before a record
# ends is the only one it can overlap (an ASOF join: linear, whatever the count).
# Each rule first keeps the rows within the intervals' whole span (a plain filter, cheap on a
# large table) so the join sorts only those.
_OVERLAPPING = f"""
WITH iv AS ({_INTERVALS}),
t AS (SELECT * FROM {{table}} WHERE start_ns < $last AND greatest(end_ns, start_ns + 1) > $first)
SELECT t.* FROM t ASOF JOIN iv ON greatest(t.end_ns, t.start_ns + 1) > iv.s
WHERE t.start_ns < iv.e
"""

_ISSUED = f"""
WITH iv AS ({_INTERVALS}),
launch AS (
    SELECT correlation_id, min(start_ns) AS at_ns FROM api_calls
    WHERE correlation_id IS NOT NULL AND correlation_id <> 0 AND start_ns < $last
    GROUP BY correlation_id
),
w AS (
    SELECT t.*, coalesce(l.at_ns, t.start_ns) AS _from_ns,
           CASE WHEN l.at_ns IS NULL THEN greatest(t.end_ns, t.start_ns + 1)
                ELSE l.at_ns + 1 END AS _to_ns
    FROM {{table}} t LEFT JOIN launch l ON l.correlation_id = t.correlation_id
)
SELECT w.* EXCLUDE (_from_ns, _to_ns)
FROM (SELECT * FROM w WHERE _from_ns < $last AND _to_ns > $first) w
ASOF JOIN iv ON w._to_ns > iv.s
WHERE w._from_ns < iv.e
"""

_INSTANTS = f"""
WITH iv AS ({_INTERVALS})
SELECT t.* FROM (SELECT * FROM {{table}} WHERE ts_ns >= $first AND ts_ns < $last) t
ASOF JOIN iv ON t.ts_ns >= iv.s WHERE t.ts_ns < iv.e
"""

_ALL = "SELECT * FROM {table}"

# Each canonical table but gaps (judged again on the copy) with the rule that keeps its rows.
_KEEP: dict[str, str] = {
    "trace_info": _ALL,
    "devices": _ALL,
    "threads": _ALL,
    "kernels": _ISSUED,
    "memcpys": _ISSUED,
    "memsets": _ISSUED,
    "api_calls": _OVERLAPPING,
    "cpu_ops": _OVERLAPPING,
    "ranges": _OVERLAPPING,
    "syncs": _OVERLAPPING,
    "comm_ops": _OVERLAPPING,
    "memory_events": _INSTANTS,
}


class _ArrowStream:
    """A result of one connection as an Arrow stream another connection can read.

    DuckDB refuses to scan a relation of another database directly; the Arrow C stream
    interface carries it across without materialising it in Python.
    """

    def __init__(self, relation: duckdb.DuckDBPyRelation) -> None:
        self._relation = relation

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self._relation.__arrow_c_stream__(requested_schema)


def restricted_connection(
    source: duckdb.DuckDBPyConnection, intervals: list[Interval], note: str
) -> duckdb.DuckDBPyConnection:
    """A new in-memory trace database with the rows of ``source`` the (sorted, disjoint)
    ``intervals`` keep, its gaps judged again, and ``note`` as its ``restriction`` fact."""
    params = {
        "starts": [s for s, _ in intervals],
        "ends": [e for _, e in intervals],
        "first": intervals[0][0],
        "last": intervals[-1][1],
    }
    out = connect()
    try:
        # Bounded and spilling like an ingest's database: a copy of a large trace is one.
        IngestLimits.from_env().configure(out, None)
        create_schema(out, describe=False)
        reader = source.cursor()
        try:
            for table, rule in _KEEP.items():
                sql = rule.format(table=table)
                relation = reader.sql(sql, params=params if "$starts" in sql else None)
                # Same declarations on both sides, so the columns line up by position.
                out.from_arrow(_ArrowStream(relation)).insert_into(table)
        finally:
            reader.close()
        derive_gaps(out)
        set_info(out, {"restriction": note})
    except BaseException:
        out.close()
        raise
    return out


def restrict_loaded(loaded: LoadedTrace, restriction: Restriction) -> LoadedTrace:
    """``loaded`` as the restriction selects it, with a note saying so; ``loaded`` itself is
    closed (the restricted copy replaces it). Raises RestrictionError when it selects nothing.
    """
    try:
        intervals = restriction.intervals(TraceDB(loaded.con))
        restricted = restrict_to(loaded, intervals, restriction.describe(intervals))
    finally:
        loaded.close()
    return restricted


def restrict_to(loaded: LoadedTrace, intervals: list[Interval], note: str) -> LoadedTrace:
    """A new LoadedTrace of the rows of ``loaded`` within ``intervals``; ``loaded`` stays open."""
    con = restricted_connection(loaded.con, merge_intervals(intervals), note)
    # the copy is configured with the whole share (no retry under a higher limit to try)
    return dataclasses.replace(loaded, con=con, notes=[*loaded.notes, note], limits=None)
