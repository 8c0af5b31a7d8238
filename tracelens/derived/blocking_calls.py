"""``blocking_calls`` and ``sync_gaps``: the host's blocking calls, and the gaps they caused.

Blocking calls are the explicit synchronizes (device, stream, event), synchronous copies
and device-to-pageable-host async copies (which cannot return before the data lands);
stream waits order GPU work and never block the host. Each call gets the operators that
enclose it on its thread (its *site* is the outermost, not the ``ProfilerStep`` wrapper
nor a Python frame) and a *pattern* from that chain: a scalar read, a ``bool(tensor)``
check, a data-dependent shape, a blocking tensor copy, or an explicit synchronize. Read by
the ``sync_stalls`` analyzer.
"""

from __future__ import annotations

from ingest.derive_gaps import STREAM_WAIT_CALLS, SYNC_CALLS, async_copy_call
from ingest.profiler_steps import is_not_step
from ingest.schema import Column, sql_list
from tracelens.core.tracedb import TraceDB
from tracelens.derived.table import DerivedTable

# Checked in this order against the enclosing operator chain; the first match wins.
PATTERNS: list[tuple[str, str]] = [
    ("bool_check", r"aten::is_nonzero"),
    ("scalar_read", r"aten::item|aten::_local_scalar_dense"),
    (
        "data_dependent_shape",
        r"aten::nonzero|aten::masked_select|aten::_unique|aten::unique|"
        r"aten::repeat_interleave|aten::bincount|aten::histc",
    ),
    ("tensor_copy", r"aten::to\b|aten::_to_copy|aten::copy_|aten::cpu|aten::numpy|tolist"),
]


def _pattern_sql(has_ops: str) -> str:
    cases = "\n".join(f"WHEN regexp_matches(chain, '{rx}') THEN '{key}'" for key, rx in PATTERNS)
    return f"""CASE {cases}
        WHEN name IN ('cudaDeviceSynchronize', 'cuCtxSynchronize', 'hipDeviceSynchronize',
                      'hipCtxSynchronize') THEN 'device_synchronize'
        WHEN name IN ('cudaStreamSynchronize', 'cuStreamSynchronize', 'hipStreamSynchronize')
            THEN 'stream_synchronize'
        WHEN name IN ('cudaEventSynchronize', 'cuEventSynchronize', 'hipEventSynchronize')
            THEN 'event_synchronize'
        WHEN copy_kind = 'DtoH' AND {has_ops} THEN 'tensor_copy'
        ELSE 'sync_copy' END"""


def _calls_select(db: TraceDB) -> str:
    names = sql_list(SYNC_CALLS)
    waits = sql_list(STREAM_WAIT_CALLS)
    has_ops = "true" if db.scalar("SELECT count(*) > 0 FROM cpu_ops") else "false"
    return f"""
        WITH copies AS (
            SELECT correlation_id, any_value(kind) AS kind, any_value(dst_mem) AS dst_mem
            FROM memcpys WHERE correlation_id IS NOT NULL GROUP BY correlation_id
        ),
        blk AS (
            SELECT row_number() OVER (ORDER BY a.start_ns) AS call_id, a.pid, a.tid, a.name,
                   a.start_ns, a.end_ns, c.kind AS copy_kind
            FROM api_calls a LEFT JOIN copies c USING (correlation_id)
            WHERE (a.name IN ({names})
               OR ({async_copy_call("a.name")} AND c.kind = 'DtoH'
                   AND c.dst_mem = 'pageable'))
              AND a.name NOT IN ({waits})
        ),
        -- Enclosing operators, one ASOF lookup per nesting depth: at each depth only the
        -- latest operator started before the call can contain it. A plain interval join
        -- would compare every call with every operator on its thread.
        enc AS (
            SELECT x.call_id, o.name, o.depth, o.category
            FROM (SELECT * FROM blk, (SELECT DISTINCT depth FROM cpu_ops) ds) x
            ASOF JOIN cpu_ops o
              ON o.pid = x.pid AND o.tid = x.tid AND o.depth = x.depth
             AND o.start_ns <= x.start_ns
            WHERE o.end_ns >= x.end_ns AND {is_not_step("o.name")}
        ),
        chains AS (
            SELECT call_id,
                   string_agg(name, ' > ' ORDER BY depth)
                       FILTER (WHERE category <> 'python_function') AS chain,
                   arg_min(name, depth) FILTER (WHERE category <> 'python_function') AS top_op,
                   arg_max(name, depth) FILTER (WHERE category = 'python_function') AS frame
            FROM enc GROUP BY call_id
        ),
        ann AS (
            SELECT b.call_id, arg_max(r.name, r.depth) AS annotation,
                   arg_min(r.name, r.depth) AS outer_range,
                   string_agg(r.name, ' > ' ORDER BY r.depth) AS range_chain
            FROM (SELECT * FROM blk,
                      (SELECT DISTINCT depth FROM ranges WHERE device_id IS NULL) ds) b
            ASOF JOIN (SELECT * FROM ranges WHERE device_id IS NULL) r
              ON r.pid = b.pid AND r.tid = b.tid AND r.depth = b.depth
             AND r.start_ns <= b.start_ns
            WHERE r.end_ns >= b.end_ns AND {is_not_step("r.name")}
            GROUP BY b.call_id
        ),
        -- Without operator events (Nsight exports) the NVTX ranges carry the operator names
        -- (emit_nvtx), so they stand in for the operator chain and the outermost operator.
        calls AS (
            SELECT b.*,
                   coalesce(c.chain, CASE WHEN NOT {has_ops} THEN a.range_chain END, '')
                       AS chain,
                   coalesce(c.top_op, CASE WHEN NOT {has_ops} THEN a.outer_range END) AS top_op,
                   c.frame, a.annotation
            FROM blk b LEFT JOIN chains c USING (call_id) LEFT JOIN ann a USING (call_id)
        )
        SELECT *, {_pattern_sql(has_ops)} AS pattern,
               coalesce(top_op, annotation, '(no operator)') AS site
        FROM calls
        """


BLOCKING_CALLS = DerivedTable(
    "blocking_calls",
    "Blocking host calls (synchronizes, synchronous copies, copies to pageable host "
    "memory) with the code that made them",
    (
        Column("call_id", "BIGINT", "Call number, in start order"),
        Column("pid", "BIGINT", "Host process id"),
        Column("tid", "BIGINT", "Host thread id"),
        Column("name", "VARCHAR", "API function (cudaStreamSynchronize, cudaMemcpy, ...)"),
        Column("start_ns", "BIGINT", "Call start (ns on the trace clock)"),
        Column("end_ns", "BIGINT", "Call end (ns on the trace clock)"),
        Column(
            "copy_kind", "VARCHAR", "Direction of the copy it made (memcpys.kind); NULL if none"
        ),
        Column(
            "chain",
            "VARCHAR",
            "Enclosing operators, outermost first, joined by ' > ' (NVTX ranges without "
            "operators); '' if none",
        ),
        Column("top_op", "VARCHAR", "Outermost enclosing operator (or range); NULL if none"),
        Column("frame", "VARCHAR", "Innermost enclosing Python function; NULL if none"),
        Column("annotation", "VARCHAR", "Innermost enclosing host annotation range; NULL if none"),
        Column(
            "pattern",
            "VARCHAR",
            "What blocked: bool_check, scalar_read, data_dependent_shape, tensor_copy, "
            "device/stream/event_synchronize or sync_copy",
        ),
        Column("site", "VARCHAR", "Where: top_op, else annotation, else '(no operator)'"),
    ),
    _calls_select,
)

# Each synchronization gap goes to the blocking call on its launching thread that blocked
# longest inside it (before the next work was issued: the span ingest judged the gap
# on); the recoverable time is the blocked time ingest measured in the gap
# (``gaps.blocked_ns``), so the sync findings and idle_gpu agree on gaps and time.
_GAPS_SELECT = """
    WITH act AS (
        SELECT device_id, start_ns, correlation_id FROM kernels
        -- migrations too: busy time and the derived gaps count them
        UNION ALL SELECT device_id, start_ns, correlation_id FROM memcpys
        UNION ALL SELECT device_id, start_ns, correlation_id FROM memsets
    ),
    api AS (
        SELECT correlation_id, any_value(pid) AS pid, any_value(tid) AS tid,
               any_value(start_ns) AS call_start, any_value(end_ns) AS call_end
        FROM api_calls WHERE correlation_id IS NOT NULL GROUP BY correlation_id
    ),
    g AS (
        SELECT g.device_id, g.start_ns, g.end_ns, any_value(a.pid) AS pid,
               any_value(a.tid) AS tid, any_value(g.blocked_ns) AS blocked_ns,
               any_value(a.call_start) AS call_start, any_value(a.call_end) AS call_end,
               any_value(greatest(g.start_ns, least(g.end_ns,
                         coalesce(g.launch_end_ns, g.end_ns)))) AS block_end
        FROM gaps g
        JOIN act k ON k.device_id = g.device_id AND k.start_ns = g.end_ns
        LEFT JOIN api a ON a.correlation_id = k.correlation_id
        WHERE g.cause = 'synchronization'
        GROUP BY g.device_id, g.start_ns, g.end_ns
    ),
    ov AS (
        SELECT g.device_id, g.start_ns, g.end_ns, g.blocked_ns, s.call_id,
               least(s.end_ns, g.block_end) - greatest(s.start_ns, g.start_ns) AS inside_ns,
               -- the call issued the work that ends the gap (a synchronous copy from
               -- pageable memory staging its data before its own transfer starts)
               s.start_ns = g.call_start AND s.end_ns = g.call_end AS own_work
        FROM g JOIN blocking_calls s
          ON s.pid = g.pid AND s.tid = g.tid
         AND s.start_ns < g.block_end AND s.end_ns > g.start_ns
    )
    SELECT device_id, start_ns, end_ns,
           arg_max(call_id, [inside_ns, -call_id]) AS call_id,
           any_value(blocked_ns) AS recoverable_ns,
           coalesce(arg_max(own_work, [inside_ns, -call_id]), false) AS own_work
    FROM ov GROUP BY device_id, start_ns, end_ns
"""

SYNC_GAPS = DerivedTable(
    "sync_gaps",
    "Gaps judged 'synchronization', each given to the blocking call that blocked longest inside it",
    (
        Column("device_id", "INTEGER", "Device that was idle"),
        Column("start_ns", "BIGINT", "Gap start (gaps.start_ns)"),
        Column("end_ns", "BIGINT", "Gap end (gaps.end_ns)"),
        Column("call_id", "BIGINT", "The blocking call (blocking_calls.call_id)"),
        Column(
            "recoverable_ns",
            "BIGINT",
            "Time the thread was blocked inside the gap (gaps.blocked_ns): what the call cost",
        ),
        Column(
            "own_work",
            "BOOLEAN",
            "The call issued the work that ends the gap itself (a synchronous copy staging "
            "pageable memory before its own transfer starts)",
        ),
    ),
    _GAPS_SELECT,
    requires=(BLOCKING_CALLS,),
)
