"""Timeline lanes of a trace database, queried by time window at a given pixel width.

Built once per trace (:func:`build_timeline_tables`, at ingest) into the trace's DuckDB
file:

- ``tl_lanes``: one row per lane — a GPU stream, one nesting depth of GPU annotations, or
  one row of a host thread's flame chart: an annotation depth, an operator depth, its
  runtime/driver calls, a Python frame depth. A thread's lanes share its ``thread`` key
  and label, so the page draws them as one collapsible group;
- ``tl_events``: every lane event no longer than ``long_ns``, times relative to ``t0_ns``,
  with ``ref``, its rowid in the canonical table its ``kind`` names (:mod:`web.timeline_event`
  looks one up for the details panel),
  inserted in start order so DuckDB's per-row-group min/max skip everything outside a
  window (the filter ``start_ns >= window_start - long_ns`` bounds the look-back);
- ``tl_long``: the few longer events (steps, long ranges), always scanned whole;
- ``tl_agg``: ``tl_events`` pre-aggregated into ``AGG_BUCKETS`` equal buckets over the
  whole trace (count, busy time, longest event per lane and bucket). Wide windows are
  answered from it instead of from every event, so a full zoom-out reads a few hundred
  thousand rows however many millions of events the trace has;
- ``tl_agg_fine``: the same in ``AGG_FINE_BUCKETS`` (16x finer), for middle windows;
- ``tl_meta``: ``t0_ns``, ``span_ns``, ``long_ns``, ``agg_ns`` / ``agg_fine_ns`` (the
  bucket widths) and
  ``version`` (:data:`TIMELINE_VERSION`; a database built by another version raises
  :class:`OutdatedTimelineError`, and the service re-ingests the run from its original).

:func:`timeline_window` answers one window. A lane holding more events in the window than
there are pixels comes back as per-pixel buckets (event count, busy fraction, the name of
its longest event) computed in SQL, plus its long events; other lanes come back as events.
So the answer's size is bounded by lanes x pixels however many events the trace holds.

Times in and out are nanoseconds since ``t0_ns`` (the first event): absolute profiler
timestamps exceed what a JavaScript number holds exactly.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np

from ingest.schema import SCHEMA_VERSION, stored_schema_version

# Bumped whenever the tl_* tables change shape or meaning, or what they are built from
# does (4: trace schema 2, gap causes from evidence; 5: flame-chart rows per thread,
# runtime calls, event refs): an older run is re-ingested when
# opened, so its report and timeline follow the current rules.
TIMELINE_VERSION = 5
MAX_WIDTH_PX = 8192
RANGE_DEPTHS = 4
# Flame-chart rows kept per thread: operators, and Python frames (deeper ones are left out).
OP_DEPTHS = 16
PY_DEPTHS = 24
AGG_BUCKETS = 16384
# A window is answered from tl_agg when a pixel spans at least this many of its buckets,
# so a pre-aggregated bucket straddling a pixel edge shifts at most 1/4 pixel.
AGG_MIN_BUCKETS_PER_PX = 4
# tl_agg is held in memory (numpy) for runs up to this many rows: a wide window is then
# aggregated without a query. Larger runs aggregate in DuckDB.
AGG_IN_MEMORY_MAX_ROWS = 500_000
# A second level, 16x finer, in DuckDB only: windows between a few percent and a third of
# the trace (at 1500 px) read its buckets instead of every event in them.
AGG_FINE_BUCKETS = 16 * AGG_BUCKETS
_TABLES = ("tl_lanes", "tl_events", "tl_long", "tl_agg", "tl_agg_fine", "tl_meta")

# Each operator's row in its thread's flame chart: how many operators (or, for a Python
# frame, how many Python frames) enclose it. Counted along parent_id rather than taken from
# cpu_ops.depth, so operators under thirty Python frames still start at row 0 of theirs.
_OP_ROWS = """
CREATE OR REPLACE TEMP TABLE _tl_op_rows AS
WITH RECURSIVE walk(op_id, n_op, n_py) AS (
    SELECT o.op_id, CAST(o.category <> 'python_function' AS INTEGER),
           CAST(o.category = 'python_function' AS INTEGER)
    FROM cpu_ops o
    WHERE o.parent_id IS NULL
       OR NOT EXISTS (SELECT 1 FROM cpu_ops p WHERE p.op_id = o.parent_id)
    UNION ALL
    SELECT c.op_id, w.n_op + CAST(c.category <> 'python_function' AS INTEGER),
           w.n_py + CAST(c.category = 'python_function' AS INTEGER)
    FROM cpu_ops c JOIN walk w ON c.parent_id = w.op_id
)
SELECT o.rowid AS ref, o.pid, o.tid, o.name, o.start_ns, o.end_ns,
       o.category = 'python_function' AS py,
       CASE WHEN o.category = 'python_function' THEN w.n_py ELSE w.n_op END - 1 AS row
FROM cpu_ops o JOIN walk w USING (op_id)
"""

# Lanes in display order (grp_order, a, b, c): GPU streams and GPU annotations, then per
# host thread (a, b = pid, tid) its annotation ranges by depth, its operators by row, its
# runtime/driver calls, then its Python frames (the page shows these on request).
# ``thread`` names the thread a lane belongs to ('' for GPU lanes); ``row`` is the lane's
# kind within it and ``depth`` its nesting level; ``ref`` is the event's rowid in its
# source table (which ``kind`` names), so one event can be looked up for its details.
_LANE_SOURCES = f"""
CREATE OR REPLACE TEMP TABLE _tl_src AS
SELECT 'gpu:' || device_id || ':' || coalesce(stream_id, -1) AS key, 0 AS grp_order,
       device_id AS a, coalesce(stream_id, -1) AS b, 0 AS c,
       'GPU ' || device_id || ' · stream ' || coalesce(stream_id, -1) AS label, 'gpu' AS grp,
       '' AS thread, 'gpu' AS row_kind, 0 AS depth,
       start_ns, end_ns, name, 'kernel' AS kind, rowid AS ref
FROM kernels WHERE device_id IS NOT NULL
UNION ALL
SELECT 'gpu:' || device_id || ':' || coalesce(stream_id, -1), 0, device_id,
       coalesce(stream_id, -1), 0,
       'GPU ' || device_id || ' · stream ' || coalesce(stream_id, -1), 'gpu', '', 'gpu', 0,
       start_ns, end_ns, 'Memcpy ' || kind, 'memcpy', rowid
FROM memcpys WHERE device_id IS NOT NULL  -- migrations too: they are busy time
UNION ALL
SELECT 'gpu:' || device_id || ':' || coalesce(stream_id, -1), 0, device_id,
       coalesce(stream_id, -1), 0,
       'GPU ' || device_id || ' · stream ' || coalesce(stream_id, -1), 'gpu', '', 'gpu', 0,
       start_ns, end_ns, 'Memset', 'memset', rowid
FROM memsets WHERE device_id IS NOT NULL
UNION ALL
SELECT 'range:' || device_id || ':' || depth, 1, device_id, 0, depth,
       'GPU ' || device_id || ' annotations' || CASE WHEN depth > 0 THEN ' · ' || depth ELSE '' END,
       'range', '', 'range', depth, start_ns, end_ns, name, 'range', rowid
FROM ranges WHERE depth < {RANGE_DEPTHS} AND device_id IS NOT NULL
UNION ALL
SELECT 'range:' || coalesce(pid, -1) || ':' || coalesce(tid, -1) || ':' || depth, 2,
       coalesce(pid, -1), coalesce(tid, -1), depth,
       'annotations' || CASE WHEN depth > 0 THEN ' · ' || depth ELSE '' END, 'range',
       coalesce(pid, -1) || ':' || coalesce(tid, -1), 'range', depth,
       start_ns, end_ns, name, 'range', rowid
FROM ranges WHERE depth < {RANGE_DEPTHS} AND device_id IS NULL
UNION ALL
SELECT 'op:' || coalesce(pid, -1) || ':' || coalesce(tid, -1) || ':' || row, 2,
       coalesce(pid, -1), coalesce(tid, -1), 100 + row,
       'operators' || CASE WHEN row > 0 THEN ' · ' || row ELSE '' END, 'thread',
       coalesce(pid, -1) || ':' || coalesce(tid, -1), 'op', row,
       start_ns, end_ns, name, 'op', ref
FROM _tl_op_rows WHERE NOT py AND row < {OP_DEPTHS}
UNION ALL
SELECT 'api:' || coalesce(pid, -1) || ':' || coalesce(tid, -1), 2,
       coalesce(pid, -1), coalesce(tid, -1), 1000, 'runtime/driver calls', 'api',
       coalesce(pid, -1) || ':' || coalesce(tid, -1), 'api', 0,
       start_ns, end_ns, name, 'api', rowid
FROM api_calls
UNION ALL
SELECT 'py:' || coalesce(pid, -1) || ':' || coalesce(tid, -1) || ':' || row, 2,
       coalesce(pid, -1), coalesce(tid, -1), 2000 + row,
       'Python' || CASE WHEN row > 0 THEN ' · ' || row ELSE '' END, 'python',
       coalesce(pid, -1) || ':' || coalesce(tid, -1), 'py', row,
       start_ns, end_ns, name, 'py', ref
FROM _tl_op_rows WHERE py AND row < {PY_DEPTHS}
"""


def build_timeline_tables(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create the ``tl_*`` tables from the canonical tables in ``con``."""
    con.execute(_OP_ROWS)
    con.execute(_LANE_SOURCES)
    con.execute("DROP TABLE _tl_op_rows")
    t0, t1 = con.execute("SELECT min(start_ns), max(end_ns) FROM _tl_src").fetchone()  # type: ignore[misc]
    t0 = int(t0 or 0)
    span = max(1, int(t1 or 0) - t0)
    # Events longer than this are kept apart; at most ~2000 of them fit end to end in a lane.
    long_ns = max(span // 2000, 1000)
    for t in _TABLES:
        con.execute(f"DROP TABLE IF EXISTS {t}")
    con.execute(
        """
        CREATE TABLE tl_lanes AS
        SELECT row_number() OVER (ORDER BY grp_order, a, b, c, key) - 1 AS lane_id,
               key, label, grp, n AS event_count, thread,
               CASE WHEN thread = '' THEN '' ELSE 'thread ' || b END AS thread_label,
               row_kind, depth
        FROM (SELECT key, any_value(grp_order) grp_order, any_value(a) a, any_value(b) b,
                     any_value(c) c, any_value(label) label, any_value(grp) grp,
                     any_value(thread) thread, any_value(row_kind) row_kind,
                     any_value(depth) depth, count(*) n
              FROM _tl_src GROUP BY key)
        """
    )
    # Name threads after what the profiler called them, where it did.
    con.execute(
        """
        UPDATE tl_lanes SET thread_label = CASE
            WHEN t.thread_name LIKE '%' || split_part(thread, ':', 2) || '%' THEN t.thread_name
            ELSE 'thread ' || split_part(thread, ':', 2) || ' (' || t.thread_name || ')' END
        FROM threads t
        WHERE tl_lanes.thread <> '' AND t.thread_name IS NOT NULL AND t.thread_name <> ''
          AND thread = coalesce(t.pid, -1) || ':' || coalesce(t.tid, -1)
        """
    )
    select = """SELECT l.lane_id, s.start_ns - $t0 AS start_ns, s.end_ns - $t0 AS end_ns,
                       s.name, s.kind, s.ref
                FROM _tl_src s JOIN tl_lanes l USING (key)"""
    params = {"t0": t0, "long": long_ns}
    con.execute(
        f"CREATE TABLE tl_events AS {select} WHERE s.end_ns - s.start_ns <= $long "
        "ORDER BY start_ns",
        params,
    )
    con.execute(
        f"CREATE TABLE tl_long AS {select} WHERE s.end_ns - s.start_ns > $long ORDER BY start_ns",
        params,
    )
    agg_ns = max(1, -(-span // AGG_BUCKETS))
    fine_ns = max(1, -(-span // AGG_FINE_BUCKETS))
    for table, width_ns in (("tl_agg", agg_ns), ("tl_agg_fine", fine_ns)):
        con.execute(
            f"""
            CREATE TABLE {table} AS
            SELECT lane_id, b, count(*) AS n, sum(end_ns - start_ns) AS busy_ns,
                   arg_max(name, end_ns - start_ns) AS top, max(end_ns - start_ns) AS top_ns
            FROM (SELECT *, CAST(start_ns // $agg AS BIGINT) AS b FROM tl_events)
            GROUP BY lane_id, b ORDER BY b, lane_id
            """,
            {"agg": width_ns},
        )
    con.execute(
        "CREATE TABLE tl_meta AS SELECT $t0::BIGINT AS t0_ns, $span::BIGINT AS span_ns, "
        "$long::BIGINT AS long_ns, $agg::BIGINT AS agg_ns, $fine::BIGINT AS agg_fine_ns, "
        "$version::INTEGER AS version",
        {
            "t0": t0,
            "span": span,
            "long": long_ns,
            "agg": agg_ns,
            "fine": fine_ns,
            "version": TIMELINE_VERSION,
        },
    )
    con.execute("DROP TABLE _tl_src")


class OutdatedTimelineError(Exception):
    """The trace database has no timeline tables of this version, or tables of another
    schema: ingest it again."""


def timeline_meta(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    schema = stored_schema_version(con)
    if schema != SCHEMA_VERSION:
        # the analysis (a restricted report) reads columns an older database lacks
        raise OutdatedTimelineError(
            f"table schema {schema or 'unknown'}, expected {SCHEMA_VERSION}"
        )
    try:
        version = con.execute("SELECT version FROM tl_meta").fetchone()
    except duckdb.CatalogException:  # no tl_meta table, or one without a version
        version = None
    except duckdb.BinderException:
        version = None
    if version is None or version[0] != TIMELINE_VERSION:
        raise OutdatedTimelineError(
            f"timeline tables of version {version[0] if version else 'none'}, "
            f"expected {TIMELINE_VERSION}"
        )
    t0, span, long_ns, agg_ns, fine_ns = con.execute(  # type: ignore[misc]
        "SELECT t0_ns, span_ns, long_ns, agg_ns, agg_fine_ns FROM tl_meta"
    ).fetchone()
    lanes = [
        {
            "id": r[0],
            "key": r[1],
            "label": r[2],
            "group": r[3],
            "event_count": r[4],
            "thread": r[5],
            "thread_label": r[6],
            "row": r[7],
            "depth": r[8],
        }
        for r in con.execute(
            "SELECT lane_id, key, label, grp, event_count, thread, thread_label, row_kind, "
            "depth FROM tl_lanes ORDER BY lane_id"
        ).fetchall()
    ]
    return {
        "t0_ns": int(t0),
        "span_ns": int(span),
        "long_ns": int(long_ns),
        "agg_ns": int(agg_ns),
        "agg_fine_ns": int(fine_ns),
        "lanes": lanes,
        "agg": _load_agg(con),
    }


def _load_agg(con: duckdb.DuckDBPyConnection) -> dict[str, np.ndarray] | None:
    rows = con.execute("SELECT count(*) FROM tl_agg").fetchone()[0]  # type: ignore[index]
    if rows > AGG_IN_MEMORY_MAX_ROWS:
        return None
    cols = con.execute(
        "SELECT lane_id, b, n, busy_ns, top, top_ns FROM tl_agg ORDER BY b, lane_id"
    ).fetchnumpy()
    names, codes = np.unique(np.asarray(cols["top"], dtype=object).astype(str), return_inverse=True)
    return {
        "lane": np.asarray(cols["lane_id"], dtype=np.int64),
        "b": np.asarray(cols["b"], dtype=np.int64),
        "n": np.asarray(cols["n"], dtype=np.int64),
        "busy": np.asarray(cols["busy_ns"], dtype=np.float64),
        "top": codes.astype(np.int64),
        "top_ns": np.asarray(cols["top_ns"], dtype=np.int64),
        "names": names,
    }


def _agg_selection(agg: dict[str, np.ndarray], bs: int, be: int) -> slice:
    """Rows of buckets bs..be: tl_agg is sorted by bucket, so this is a slice."""
    lo = int(np.searchsorted(agg["b"], bs, side="left"))
    hi = int(np.searchsorted(agg["b"], be, side="right"))
    return slice(lo, hi)


def _agg_counts(agg: dict[str, np.ndarray], sel: slice) -> dict[int, int]:
    lanes = agg["lane"][sel]
    if not len(lanes):
        return {}
    sums = np.bincount(lanes, weights=agg["n"][sel])
    return {int(i): int(c) for i, c in enumerate(sums) if c}


def _agg_buckets(
    agg: dict[str, np.ndarray],
    sel: slice,
    dense: list[int],
    start: int,
    width: int,
    ns_per_px: float,
    agg_ns: int,
) -> list[tuple[int, int, int, float, str]]:
    """(lane, pixel, count, busy fraction, longest event's name) per dense lane and pixel."""
    lane = agg["lane"][sel]
    keep = np.isin(lane, dense)
    lane = lane[keep]
    b = agg["b"][sel][keep]
    px = np.clip(((b * agg_ns - start) // ns_per_px).astype(np.int64), 0, width - 1)
    key = lane * width + px
    order = np.lexsort((agg["top_ns"][sel][keep], key))  # by pixel, longest event last
    key = key[order]
    if not len(key):
        return []
    ends = np.flatnonzero(np.r_[key[1:] != key[:-1], True])
    starts = np.r_[0, ends[:-1] + 1]
    counts = np.add.reduceat(agg["n"][sel][keep][order], starts)
    busy = np.minimum(1.0, np.add.reduceat(agg["busy"][sel][keep][order], starts) / ns_per_px)
    tops = agg["names"][agg["top"][sel][keep][order][ends]]
    keys = key[ends]
    return list(
        zip(
            (keys // width).tolist(),
            (keys % width).tolist(),
            counts.tolist(),
            np.round(busy, 3).tolist(),
            tops.tolist(),
            strict=True,
        )
    )


def _memory_counters(
    con: duckdb.DuckDBPyConnection, t0: int, start: int, end: int, width: int, ns_per_px: float
) -> list[dict[str, Any]]:
    """Device memory allocated and reserved per pixel (the most in each), per device, from
    ``memory_events``; a pixel without events is left out (the value holds from the last)."""
    rows = con.execute(
        """
        WITH w AS (
            SELECT device_id, least($w - 1, greatest(0, CAST(floor((ts_ns - $t0 - $s) / $npp)
                                                       AS INTEGER))) AS px,
                   total_allocated, total_reserved
            FROM memory_events
            WHERE device_id >= 0 AND ts_ns >= $t0 + $s AND ts_ns < $t0 + $e
            UNION ALL  -- the value the window opens with
            SELECT device_id, 0, arg_max(total_allocated, ts_ns), arg_max(total_reserved, ts_ns)
            FROM memory_events WHERE device_id >= 0 AND ts_ns < $t0 + $s GROUP BY device_id)
        SELECT device_id, px, max(total_allocated), max(total_reserved)
        FROM w GROUP BY device_id, px ORDER BY device_id, px
        """,
        {"w": width, "t0": t0, "s": start, "e": end, "npp": ns_per_px},
    ).fetchall()
    by_device: dict[int, list[list[int]]] = {}
    for device, px, allocated, reserved in rows:
        by_device.setdefault(int(device), []).append(
            [int(px), int(allocated or 0), int(reserved or 0)]
        )
    return [
        {
            "device_id": d,
            "label": f"GPU {d} memory",
            "max_bytes": max(max(p[1], p[2]) for p in points),
            "points": points,
        }
        for d, points in sorted(by_device.items())
    ]


def timeline_window(
    con: duckdb.DuckDBPyConnection,
    start_ns: int | None,
    end_ns: int | None,
    width_px: int,
    meta: dict[str, Any] | None = None,
    *,
    exact: bool = False,
    only_lanes: set[int] | None = None,
    counters: bool = True,
) -> dict[str, Any]:
    """Lanes for the window ``[start_ns, end_ns)`` (relative ns), at ``width_px`` pixels.

    ``exact`` takes the window as given, even where it reaches outside the trace, so
    several traces' answers share one pixel grid (the job view's ranks, each shifted by
    its clock offset); otherwise it is clamped to the trace. ``only_lanes`` leaves the
    other lanes out of the answer; ``counters=False`` leaves out the memory counters.

    Each lane has ``events`` as ``[start_ns, end_ns, name_index, kind_index, ref]`` and,
    when aggregated, ``buckets`` as ``[pixel, count, busy_fraction, name_index]``; names and
    kinds are listed once in ``names`` / ``kinds``. ``counters`` holds each device's
    memory allocated and reserved as ``[pixel, allocated, reserved]`` (pixels with events).
    """
    meta = meta or timeline_meta(con)
    span = meta["span_ns"]
    start = 0 if start_ns is None else int(start_ns) if exact else max(0, int(start_ns))
    end = span if end_ns is None else int(end_ns) if exact else min(span, int(end_ns))
    if exact:
        end = max(end, start + 1)
    elif end <= start:
        end = min(span, start + 1)
        start = max(0, end - 1)
    width = max(1, min(MAX_WIDTH_PX, int(width_px)))
    ns_per_px = (end - start) / width
    p = {"s": start, "e": end, "long": meta["long_ns"]}
    short_window = "FROM tl_events WHERE start_ns < $e AND start_ns >= $s - $long AND end_ns > $s"
    # The coarsest level whose buckets are still a quarter pixel or less; none: every event.
    agg_table, agg_ns = "tl_agg", meta["agg_ns"]
    coarse = ns_per_px >= AGG_MIN_BUCKETS_PER_PX * agg_ns
    in_memory = meta.get("agg") if coarse else None
    if not coarse and ns_per_px >= AGG_MIN_BUCKETS_PER_PX * meta["agg_fine_ns"]:
        agg_table, agg_ns, coarse = "tl_agg_fine", meta["agg_fine_ns"], True
    agg_window = f"FROM {agg_table} WHERE b >= $bs AND b <= $be"
    agg_p = {"bs": start // agg_ns, "be": (end - 1) // agg_ns}
    if in_memory is not None:
        agg_sel = _agg_selection(in_memory, agg_p["bs"], agg_p["be"])
        counts = _agg_counts(in_memory, agg_sel)
    elif coarse:
        counts = dict(
            con.execute(
                f"SELECT lane_id, CAST(sum(n) AS BIGINT) {agg_window} GROUP BY lane_id", agg_p
            ).fetchall()
        )
    else:
        counts = dict(
            con.execute(f"SELECT lane_id, count(*) {short_window} GROUP BY lane_id", p).fetchall()
        )
    long_rows = con.execute(
        "SELECT lane_id, start_ns, end_ns, name, kind, ref FROM tl_long "
        "WHERE start_ns < $e AND end_ns > $s ORDER BY lane_id, start_ns",
        {"s": start, "e": end},
    ).fetchall()
    if only_lanes is not None:
        counts = {lane: n for lane, n in counts.items() if lane in only_lanes}
        long_rows = [r for r in long_rows if r[0] in only_lanes]
    dense = sorted(lane for lane, n in counts.items() if n > width)
    sparse = sorted(lane for lane, n in counts.items() if n <= width)

    names: dict[str, int] = {}
    kinds: dict[str, int] = {}

    def idx(table: dict[str, int], value: str | None) -> int:
        key = value or ""
        if key not in table:
            table[key] = len(table)
        return table[key]

    shown = [lane for lane in meta["lanes"] if only_lanes is None or lane["id"] in only_lanes]
    lanes: dict[int, dict[str, Any]] = {
        lane["id"]: {"id": lane["id"], "events": [], "buckets": None} for lane in shown
    }
    if sparse:
        rows = con.execute(
            f"SELECT lane_id, start_ns, end_ns, name, kind, ref {short_window} "
            "AND list_contains($lanes, lane_id) ORDER BY lane_id, start_ns",
            {**p, "lanes": sparse},
        ).fetchall()
        for lane_id, s, e, name, kind, ref in rows:
            lanes[lane_id]["events"].append([s, e, idx(names, name), idx(kinds, kind), ref])
    if dense and in_memory is not None:
        for lane_id in dense:
            lanes[lane_id]["buckets"] = []
        for lane_id, px, n, busy, top in _agg_buckets(
            in_memory, agg_sel, dense, start, width, ns_per_px, meta["agg_ns"]
        ):
            lanes[lane_id]["buckets"].append([px, n, busy, idx(names, top)])
    elif dense and coarse:
        # From the pre-aggregated buckets: each lands in the pixel holding its start.
        rows = con.execute(
            f"""
            SELECT lane_id, px, CAST(sum(n) AS BIGINT), least(1.0, sum(busy_ns) / $npp),
                   arg_max(top, top_ns)
            FROM (SELECT *, least($w - 1, greatest(0, CAST(floor((b * $agg - $s) / $npp)
                                                          AS INTEGER))) AS px
                  {agg_window} AND list_contains($lanes, lane_id))
            GROUP BY lane_id, px ORDER BY lane_id, px
            """,
            {
                **agg_p,
                "lanes": dense,
                "w": width,
                "npp": ns_per_px,
                "agg": agg_ns,
                "s": start,
            },
        ).fetchall()
        for lane_id in dense:
            lanes[lane_id]["buckets"] = []
        for lane_id, px, n, busy, top in rows:
            lanes[lane_id]["buckets"].append([px, n, round(float(busy), 3), idx(names, top)])
    elif dense:
        # Busy time is the clipped duration credited to the pixel where the event starts,
        # capped at the pixel's width: exact when events are shorter than a pixel, which
        # is the case whenever a lane has more events than pixels.
        rows = con.execute(
            f"""
            SELECT lane_id, px, count(*) AS n,
                   least(1.0, sum(least(end_ns, $e) - greatest(start_ns, $s)) / $npp) AS busy,
                   arg_max(name, end_ns - start_ns) AS top
            FROM (SELECT lane_id, start_ns, end_ns, name,
                         least($w - 1, CAST(floor((greatest(start_ns, $s) - $s) / $npp)
                                            AS INTEGER)) AS px
                  {short_window} AND list_contains($lanes, lane_id))
            GROUP BY lane_id, px ORDER BY lane_id, px
            """,
            {**p, "lanes": dense, "w": width, "npp": ns_per_px},
        ).fetchall()
        for lane_id in dense:
            lanes[lane_id]["buckets"] = []
        for lane_id, px, n, busy, top in rows:
            lanes[lane_id]["buckets"].append([px, n, round(float(busy), 3), idx(names, top)])
    for lane_id, s, e, name, kind, ref in long_rows:
        lanes[lane_id]["events"].append([s, e, idx(names, name), idx(kinds, kind), ref])
    return {
        "t0_ns": meta["t0_ns"],
        "span_ns": span,
        "start_ns": start,
        "end_ns": end,
        "width_px": width,
        "ns_per_px": ns_per_px,
        "lanes": [
            {**lane, **lanes[lane["id"]], "count": counts.get(lane["id"], 0)} for lane in shown
        ],
        "names": list(names),
        "kinds": list(kinds),
        "counters": _memory_counters(con, meta["t0_ns"], start, end, width, ns_per_px)
        if counters
        else [],
    }
