"""``kernel_ops``: which CPU operator launched each kernel.

Kernel -> runtime call by correlation id -> the operator whose external id the call
carries (Kineto records the innermost operator active at launch). Where a trace has no
external ids (Nsight exports, old profilers), the innermost operator or annotation range
on the launching thread that encloses the call is used instead.
"""

from __future__ import annotations

from ingest.asof_lanes import lane_key
from ingest.derive_gaps import LAUNCH_CALLS, SYNC_CALLS
from ingest.profiler_steps import is_not_step
from ingest.schema import Column, sql_list
from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import ENGINE_STEP_SQL
from tracelens.derived.table import DerivedTable

UNATTRIBUTED = "(no operator)"
# A kernel whose launch call precedes every recorded one: the host side of the trace starts
# later than its GPU side, so no operator can be known.
BEFORE_HOST_TRACE = "(launched before the host trace began)"
CUDA_GRAPH = "CUDA graph replay"
HIP_GRAPH = "HIP graph replay"

# Host ranges stand in for operators, except the profiler's step markers, the LLM
# request/step annotations and the serving engines' step labels: a kernel launched outside
# any operator is unattributed, as it is in a trace that has operator records.
_RANGES_AS_OPS = f"""(
    SELECT * FROM ranges
    WHERE device_id IS NULL AND {is_not_step()} AND name NOT LIKE 'llm.%'
      AND NOT {ENGINE_STEP_SQL}
)"""

# The operator an external id names, with its time: a launch call is taken to be that
# operator's only while the operator was running (the profiler numbers operators per
# session, so a call can carry the id of an operator recorded seconds apart: an A100
# AlexNet capture gave a weight-init kernel to an activation 12.7 s later). A call that
# falls outside goes to the operator enclosing it, as a call without an id does.
_EXT_BY_OP = """
    SELECT external_id, arg_min(op_id, op_id) AS op_id, arg_min(name, op_id) AS op_name,
           arg_min(start_ns, op_id) AS op_start, arg_min(end_ns, op_id) AS op_end
    FROM cpu_ops WHERE external_id IS NOT NULL GROUP BY external_id
"""
# Ranges carry no external id: nothing to look up, every kernel goes through ``enclosing``.
_EXT_NONE = (
    "SELECT NULL::BIGINT AS external_id, NULL::BIGINT AS op_id, NULL::VARCHAR AS op_name, "
    "NULL::BIGINT AS op_start, NULL::BIGINT AS op_end WHERE false"
)
# Times are often written in whole microseconds: a call may appear to start that much
# before its operator.
_EXT_SLACK_NS = 1_000


# Operator ids of replayed kernels matched to a capture: one per (replay, captured operator
# call), apart from real operator ids (positive) and unmatched replays (minus the
# correlation id).
REPLAY_OP_SPAN = 1_048_576
_REPLAY_OP_ID = f"-(r.corr * {REPLAY_OP_SPAN} + cl.op_seq)"

# Kernels of each graph replay, numbered in the order they ran, matched by position to the
# launches recorded while a graph was captured (ingest/graph_captures.py). A replay is
# matched to the capture with as many launches whose kernel names agree most (a capture
# trace without kernel names on its calls matches by position alone); a kernel whose name
# differs from the captured launch at its position stays unmatched.
_REPLAY_MATCH = f"""
        replay AS (
            SELECT k.krow, kn.name AS kernel_name, a.correlation_id AS corr,
                   row_number() OVER (PARTITION BY a.correlation_id
                                      ORDER BY k.start_ns, k.krow) AS pos,
                   count(*) OVER (PARTITION BY a.correlation_id) AS n
            FROM k JOIN api a USING (correlation_id) LEFT JOIN kn USING (name_rank)
            WHERE a.graph > 0
        ),
        cap_size AS (
            SELECT capture_id, count(*) AS n FROM captured_launches GROUP BY capture_id
        ),
        fit AS (
            SELECT r.corr, c.capture_id,
                   count(*) FILTER (WHERE cl.kernel_name IS NULL
                                       OR cl.kernel_name = r.kernel_name) AS agree
            FROM replay r JOIN cap_size c ON c.n = r.n
            JOIN captured_launches cl ON cl.capture_id = c.capture_id AND cl.seq = r.pos
            GROUP BY r.corr, c.capture_id
        ),
        best AS (
            SELECT corr, arg_max(capture_id, [agree, -capture_id]) AS capture_id
            FROM fit GROUP BY corr
        ),
        replay_ops AS (
            SELECT r.krow, {_REPLAY_OP_ID} AS op_id, cl.op_name, b.capture_id
            FROM replay r JOIN best b USING (corr)
            JOIN captured_launches cl ON cl.capture_id = b.capture_id AND cl.seq = r.pos
            WHERE (cl.kernel_name IS NULL OR cl.kernel_name = r.kernel_name)
              AND cl.op_name IS NOT NULL
        ),"""
_REPLAY_NONE = """
        replay_ops AS (
            SELECT NULL::BIGINT AS krow, NULL::BIGINT AS op_id, NULL::VARCHAR AS op_name,
                   NULL::INTEGER AS capture_id
            WHERE false
        ),"""


# The launch call of each correlation id: the first of its calls by name, their extremes.
_API_GROUPED = """
            SELECT g.*, an.graph FROM (
                SELECT a.correlation_id, min(a.pid) pid, min(a.tid) tid,
                       min(a.start_ns) start_ns, max(a.end_ns) end_ns,
                       min(a.external_id) external_id, min(an.name_rank) AS api_rank
                FROM api_calls a LEFT JOIN an USING (name)
                WHERE a.correlation_id IS NOT NULL GROUP BY a.correlation_id
            ) g LEFT JOIN an ON an.name_rank = g.api_rank"""
# The same rows where no two calls share a correlation id (ingest/correlation.py).
_API_BY_CALL = """
            SELECT a.correlation_id, a.pid, a.tid, a.start_ns, a.end_ns, a.external_id,
                   an.name_rank AS api_rank, an.graph
            FROM api_calls a LEFT JOIN an USING (name)
            WHERE a.correlation_id IS NOT NULL"""


def _select(db: TraceDB) -> str:
    has_ops = bool(db.scalar("SELECT count(*) > 0 FROM cpu_ops"))
    source = "cpu_ops" if has_ops else _RANGES_AS_OPS
    id_col = "op_id" if has_ops else "range_id"
    has_captures = bool(db.scalar("SELECT count(*) > 0 FROM captured_launches"))
    replay = _REPLAY_MATCH if has_captures else _REPLAY_NONE
    # Where launch calls carry external ids, few calls are left to look up by time, and
    # sorting every operator for them was half this query's memory: only the threads of
    # those calls are read. Without external ids every call is looked up, and the filter
    # would only hold the calls twice.
    ext_ids = has_ops and bool(
        db.scalar("SELECT count(*) > 0 FROM api_calls WHERE external_id IS NOT NULL")
    )
    only_open_threads = "\n            WHERE l.th IN (SELECT th FROM calls)" if ext_ids else ""
    # Names travel as their rank among the distinct names (the same order, NULLs last):
    # a million kernels carry a few thousand names, and sorting, joining and grouping
    # integers instead of the strings halves the work and the memory of this query.
    return f"""
        WITH kn AS (
            SELECT name, row_number() OVER (ORDER BY name) AS name_rank
            FROM (SELECT DISTINCT name FROM kernels WHERE name IS NOT NULL)
        ),
        k AS (
            SELECT row_number() OVER (ORDER BY k.device_id, k.start_ns, k.correlation_id,
                                               kn.name_rank) AS krow,
                   k.device_id, kn.name_rank, k.start_ns, k.end_ns - k.start_ns AS dur_ns,
                   k.correlation_id
            FROM kernels k LEFT JOIN kn USING (name)
        ),
        an AS (
            SELECT name, row_number() OVER (ORDER BY name) AS name_rank,
                   CASE WHEN name IN ('cudaGraphLaunch', 'cuGraphLaunch') THEN 1
                        WHEN name = 'hipGraphLaunch' THEN 2 ELSE 0 END AS graph
            FROM (SELECT DISTINCT name FROM api_calls
                  WHERE correlation_id IS NOT NULL AND name IS NOT NULL)
        ),
        api AS ({_API_BY_CALL if db.correlation_ids_unique else _API_GROUPED}),
        ext AS ({_EXT_BY_OP if has_ops else _EXT_NONE}),{replay}
        ka AS (
            SELECT k.*, a.pid, a.tid, a.start_ns AS api_start, a.end_ns AS api_end,
                   -- a graph replay launches many kernels from one call: the operator
                   -- recorded at capture, else the replay, never the Python or pybind11
                   -- wrapper around it
                   CASE WHEN a.graph > 0
                        THEN coalesce(ro.op_id, -a.correlation_id)
                        ELSE e.op_id END AS op_id,
                   CASE WHEN ro.op_name IS NOT NULL THEN ro.op_name
                        WHEN a.graph = 1 THEN '{CUDA_GRAPH}'
                        WHEN a.graph = 2 THEN '{HIP_GRAPH}'
                        ELSE e.op_name END AS op_name,
                   ro.capture_id
            FROM k LEFT JOIN api a USING (correlation_id)
            LEFT JOIN ext e ON e.external_id = a.external_id
                           AND a.start_ns BETWEEN e.op_start - {_EXT_SLACK_NS}
                                              AND e.op_end + {_EXT_SLACK_NS}
            LEFT JOIN replay_ops ro USING (krow)
        ),
        -- The lookups below are ASOF joins within a thread (th), and within a thread and a
        -- nesting depth (lane), keyed by the lane number above the time
        -- (ingest/asof_lanes.py): no equality condition, so no partitioned sort.
        lanes AS (
            SELECT pid, tid, depth, dense_rank() OVER (ORDER BY pid, tid) AS th,
                   row_number() OVER (ORDER BY pid, tid, depth) AS lane
            FROM (SELECT DISTINCT pid, tid, depth FROM {source}
                  WHERE pid IS NOT NULL AND tid IS NOT NULL AND depth IS NOT NULL)
        ),
        calls AS (
            SELECT ka.krow, ka.pid, ka.tid, ka.api_start, ka.api_end, t.th
            FROM ka LEFT JOIN (SELECT DISTINCT pid, tid, th FROM lanes) t USING (pid, tid)
            WHERE ka.op_id IS NULL AND ka.pid IS NOT NULL
        ),
        src AS (
            SELECT o.{id_col} AS oid, o.pid, o.tid, o.depth, o.name, o.start_ns, o.end_ns,
                   l.th, l.lane,
                   -- (thread, start, depth) as one ASOF key; depth can dip below zero where
                   -- a zero-length interval's end is counted before its start
                   {lane_key("l.th", "o.start_ns", "o.depth + 2147483648")} AS skey,
                   {lane_key("l.lane", "o.start_ns")} AS dkey,
                   max(o.depth) OVER (PARTITION BY o.pid, o.tid) AS max_depth
            FROM {source} o JOIN lanes l USING (pid, tid, depth){only_open_threads}
        ),
        -- The innermost enclosing operator is the deepest one that encloses the call.
        -- First the latest operator started before the call (the deepest of those starting
        -- at the same instant): when it encloses the call and no operator of its thread is
        -- deeper, no deeper candidate can exist, so it is the answer the per-depth lookup
        -- gives. (Partial overlaps and zero-length intervals can make an earlier interval
        -- deeper than a later one inside it: those calls take the per-depth lookup.) One
        -- LEFT lookup marks both outcomes, so the calls it leaves need no anti join.
        latest AS (
            SELECT x.krow, x.th, x.api_start, x.api_end, o.oid,
                   coalesce(o.th = x.th AND o.end_ns >= x.api_end
                            AND o.start_ns <= x.api_start AND o.depth = o.max_depth,
                            false) AS found
            FROM calls x ASOF LEFT JOIN src o
              ON o.skey <= {lane_key("x.th", "x.api_start", "4294967295")}
        ),
        -- Otherwise (the latest is a finished sibling), one ASOF lookup per nesting depth
        -- of the call's thread: at each depth only the latest operator started before the
        -- call can contain it; one candidate per depth, so the deepest is one row. Only for
        -- the calls the first lookup left on threads with operators: a trace whose
        -- operators stack hundreds deep on the same instants made this every call x every
        -- depth. A call the first lookup answered has that one candidate, so it skips the
        -- grouping.
        deepest AS (
            SELECT krow, oid AS op_id FROM latest WHERE found
            UNION ALL
            SELECT x.krow, arg_max(o.oid, o.depth)
            FROM (SELECT c.krow, c.api_start, c.api_end, l.lane
                  FROM (SELECT * FROM latest WHERE NOT found) c
                  JOIN lanes l USING (th)) x
            ASOF JOIN src o ON o.dkey <= {lane_key("x.lane", "x.api_start")}
            WHERE o.lane = x.lane AND o.end_ns >= x.api_end
            GROUP BY x.krow
        ),
        -- its name comes by its id
        enclosing AS (
            SELECT c.op_id, src.name AS op_name, c.krow
            FROM deepest c JOIN src ON src.oid = c.op_id
        )
        SELECT ka.krow, ka.device_id, kn.name AS kernel_name, ka.start_ns, ka.dur_ns,
               coalesce(ka.op_id, en.op_id) AS op_id,
               coalesce(ka.op_name, en.op_name,
                        CASE WHEN ka.pid IS NULL AND ka.correlation_id < (
                                  SELECT min(correlation_id) FROM api_calls)
                             THEN '{BEFORE_HOST_TRACE}' ELSE '{UNATTRIBUTED}' END) AS op_name,
               ka.capture_id
        FROM ka LEFT JOIN enclosing en USING (krow) LEFT JOIN kn USING (name_rank)
        """


KERNEL_OPS = DerivedTable(
    "kernel_ops",
    "Every kernel with the operator that launched it (by external id, else the innermost "
    "operator or annotation range enclosing its launch call)",
    (
        Column("krow", "BIGINT", "Kernel number, in (device, start, correlation id, name) order"),
        Column("device_id", "INTEGER", "Device it ran on"),
        Column("kernel_name", "VARCHAR", "Kernel name"),
        Column("start_ns", "BIGINT", "Kernel start (ns on the trace clock)"),
        Column("dur_ns", "BIGINT", "Kernel duration (ns)"),
        Column(
            "op_id",
            "BIGINT",
            "The operator call (cpu_ops.op_id, ranges.range_id without operators; minus the "
            "correlation id for a graph replay); NULL if none",
        ),
        Column(
            "op_name",
            "VARCHAR",
            f"Its name; '{CUDA_GRAPH}' / '{HIP_GRAPH}' for graph launches, "
            f"'{BEFORE_HOST_TRACE}' if its launch precedes every recorded runtime call, "
            f"'{UNATTRIBUTED}' if none otherwise",
        ),
        Column(
            "capture_id",
            "INTEGER",
            "For a graph replay matched to a capture: which (captured_launches.capture_id; "
            "with the operator's position, minus op_id mod 2^20, it names the captured "
            "call and its shapes); NULL otherwise",
        ),
    ),
    _select,
    # DuckDB plans an ASOF join whose probe side it estimates under 64 rows as a nested
    # loop over every (probe, operator) pair. The estimates behind the filtered calls fall
    # far below the real count: a few thousand calls against a few thousand operators took
    # 14 times as long as the sorted lookup, which costs a sort of each side at any size.
    settings=(("asof_loop_join_threshold", "0"),),
)


def replay_attribution_notes(db: TraceDB) -> list[str]:
    """How many replayed kernels the capture traces attributed to operators (report notes)."""
    if not db.scalar("SELECT count(*) > 0 FROM captured_launches"):
        return []
    from tracelens.derived import require  # the registry imports this module

    require(db, KERNEL_OPS)
    replayed, matched = db.con.execute(
        f"""SELECT count(*) FILTER (WHERE op_id < 0),
                   count(*) FILTER (WHERE op_id < 0
                                    AND op_name NOT IN ('{CUDA_GRAPH}', '{HIP_GRAPH}'))
            FROM kernel_ops"""
    ).fetchone() or (0, 0)
    if not replayed:
        return ["graph capture traces were given, but no kernel in this trace is a graph replay"]
    how = (
        "by launch order and kernel name"
        if db.scalar("SELECT count(kernel_name) > 0 FROM captured_launches")
        else "by launch order (the capture names no kernels)"
    )
    return [
        f"graph replays: {matched:,} of {replayed:,} replayed kernels attributed to the "
        f"operators recorded at capture ({how})"
    ]


def before_host_trace_notes(db: TraceDB) -> list[str]:
    """A note when kernels were launched before the host side of the trace began."""
    from tracelens.core.units import fmt_ns
    from tracelens.derived import require  # the registry imports this module

    require(db, KERNEL_OPS)
    n, ns, total = db.con.execute(
        f"""SELECT count(*) FILTER (WHERE op_name = '{BEFORE_HOST_TRACE}'),
                   coalesce(sum(dur_ns) FILTER (WHERE op_name = '{BEFORE_HOST_TRACE}'), 0),
                   coalesce(sum(dur_ns), 0)
            FROM kernel_ops"""
    ).fetchone() or (0, 0, 0)
    if not n:
        return []
    head = (
        f"{n:,} kernels ({fmt_ns(int(ns))}, {100.0 * ns / max(total, 1):.1f}% of kernel time) "
        "were launched before the host side of the trace begins (their launch calls precede "
        "every recorded one)"
    )
    drained = db.con.execute(_DRAINED_BY_FIRST_SYNC).fetchone()
    if drained:
        # The host's first recorded call waits for them: work queued before the profiler
        # started (a previous pass or warm-up), not the recorded work; only a sync before
        # recording keeps it out, since the same span was recorded on both sides
        return [
            f"{head}: they are work queued before the profiler started (an earlier pass), "
            f"which the host's first recorded call, `{drained[0]}`, waits for until "
            f"{fmt_ns(int(drained[1]) - db.t0_ns)} into the window. They are no part of the "
            "recorded work, though shares of kernel time and of the window include them: "
            "synchronize the device before starting the profiler so a recording holds only "
            "its own work"
        ]
    return [
        f"{head}: their operators are unknown; record CPU and GPU activities over the same "
        "span to attribute them"
    ]


# A blocking call recorded before any launch that returns only once the kernels launched
# before the trace are done (within 1 ms of the last one's end): the host drained them.
_DRAINED_BY_FIRST_SYNC = f"""
WITH pre AS (
    SELECT max(start_ns + dur_ns) AS end_ns FROM kernel_ops WHERE op_name = '{BEFORE_HOST_TRACE}'
),
first_launch AS (
    SELECT min(start_ns) AS start_ns FROM api_calls WHERE name IN ({sql_list(LAUNCH_CALLS)})
)
SELECT a.name, a.end_ns FROM api_calls a, pre, first_launch f
WHERE a.name IN ({sql_list(SYNC_CALLS)}) AND a.start_ns < pre.end_ns
  AND a.end_ns >= pre.end_ns - 1000000 AND (f.start_ns IS NULL OR a.end_ns <= f.start_ns)
ORDER BY a.start_ns LIMIT 1
"""
