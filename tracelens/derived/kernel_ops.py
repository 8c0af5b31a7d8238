"""``kernel_ops``: which CPU operator launched each kernel.

Kernel -> runtime call by correlation id -> the operator whose external id the call
carries (Kineto records the innermost operator active at launch). Where a trace has no
external ids (Nsight exports, old profilers), the innermost operator or annotation range
on the launching thread that encloses the call is used instead.
"""

from __future__ import annotations

from ingest.profiler_steps import is_not_step
from ingest.schema import Column
from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import ENGINE_STEP_SQL
from tracelens.derived.table import DerivedTable

UNATTRIBUTED = "(no operator)"
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

_EXT_BY_OP = """
    SELECT external_id, any_value(op_id) AS op_id, any_value(name) AS op_name
    FROM cpu_ops WHERE external_id IS NOT NULL GROUP BY external_id
"""
# Ranges carry no external id: nothing to look up, every kernel goes through ``enclosing``.
_EXT_NONE = (
    "SELECT NULL::BIGINT AS external_id, NULL::BIGINT AS op_id, NULL::VARCHAR AS op_name "
    "WHERE false"
)


def _select(db: TraceDB) -> str:
    has_ops = bool(db.scalar("SELECT count(*) > 0 FROM cpu_ops"))
    source = "cpu_ops" if has_ops else _RANGES_AS_OPS
    id_col = "op_id" if has_ops else "range_id"
    return f"""
        WITH k AS (
            SELECT row_number() OVER (ORDER BY device_id, start_ns, correlation_id, name)
                       AS krow, device_id, name AS kernel_name, start_ns,
                   end_ns - start_ns AS dur_ns, correlation_id
            FROM kernels
        ),
        api AS (
            SELECT correlation_id, min(pid) pid, min(tid) tid,
                   min(start_ns) start_ns, max(end_ns) end_ns,
                   min(external_id) external_id, min(name) AS api_name
            FROM api_calls WHERE correlation_id IS NOT NULL GROUP BY correlation_id
        ),
        ext AS ({_EXT_BY_OP if has_ops else _EXT_NONE}),
        ka AS (
            SELECT k.*, a.pid, a.tid, a.start_ns AS api_start, a.end_ns AS api_end,
                   -- a graph replay launches many kernels from one call: name the replay,
                   -- not the Python or pybind11 wrapper around it
                   CASE WHEN a.api_name IN ('cudaGraphLaunch', 'cuGraphLaunch')
                        THEN coalesce(e.op_id, -a.correlation_id)
                        WHEN a.api_name = 'hipGraphLaunch'
                        THEN coalesce(e.op_id, -a.correlation_id)
                        ELSE e.op_id END AS op_id,
                   CASE WHEN a.api_name IN ('cudaGraphLaunch', 'cuGraphLaunch')
                        THEN '{CUDA_GRAPH}'
                        WHEN a.api_name = 'hipGraphLaunch' THEN '{HIP_GRAPH}'
                        ELSE e.op_name END AS op_name
            FROM k LEFT JOIN api a USING (correlation_id)
            LEFT JOIN ext e ON e.external_id = a.external_id
        ),
        src AS (SELECT {id_col} AS oid, pid, tid, depth, name, start_ns, end_ns FROM {source}),
        -- The innermost enclosing operator, by one ASOF lookup per nesting depth: at each
        -- depth only the latest operator started before the call can contain it (the latest
        -- overall may be a finished sibling while its parent still encloses the call).
        candidates AS (
            SELECT x.krow, o.oid, o.name, o.depth
            FROM (SELECT ka.krow, ka.pid, ka.tid, ka.api_start, ka.api_end, d.depth
                  FROM ka, (SELECT DISTINCT depth FROM src) d
                  WHERE ka.op_id IS NULL AND ka.pid IS NOT NULL) x
            ASOF JOIN src o
              ON o.pid = x.pid AND o.tid = x.tid AND o.depth = x.depth
             AND o.start_ns <= x.api_start
            WHERE o.end_ns >= x.api_end
        ),
        enclosing AS (
            SELECT krow, arg_max(oid, depth) AS op_id, arg_max(name, depth) AS op_name
            FROM candidates GROUP BY krow
        )
        SELECT ka.krow, ka.device_id, ka.kernel_name, ka.start_ns, ka.dur_ns,
               coalesce(ka.op_id, en.op_id) AS op_id,
               coalesce(ka.op_name, en.op_name, '{UNATTRIBUTED}') AS op_name
        FROM ka LEFT JOIN enclosing en USING (krow)
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
            f"'{UNATTRIBUTED}' if none",
        ),
    ),
    _select,
)
