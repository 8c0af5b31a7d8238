"""Which CPU operator launched each kernel.

Kernel -> runtime call by correlation id -> the operator whose external id the call
carries (Kineto records the innermost operator active at launch). Where a trace has no
external ids (Nsight exports, old profilers), the innermost operator or annotation range
on the launching thread that encloses the call is used instead.
"""

from __future__ import annotations

from tracelens.tracedb import TraceDB

UNATTRIBUTED = "(no operator)"

# Host ranges stand in for operators, except the profiler's step markers: a kernel launched
# outside any operator is unattributed, as it is in a trace that has operator records.
# Of ranges starting together the deepest is the innermost: keeping only it makes the
# ASOF join below pick the innermost enclosing range rather than any of them.
_RANGES_AS_OPS = """(
    SELECT * FROM ranges WHERE device_id IS NULL AND name NOT LIKE 'ProfilerStep#%'
    QUALIFY row_number() OVER (PARTITION BY pid, tid, start_ns
                               ORDER BY depth DESC, end_ns, range_id) = 1
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


def build_kernel_attribution(db: TraceDB) -> None:
    """Create temp table ``kernel_ops(kernel row, op_id, op_name, dur_ns)`` once per trace."""
    if db.scalar(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'kernel_ops' AND temporary"
    ):
        return
    has_ops = bool(db.scalar("SELECT count(*) > 0 FROM cpu_ops"))
    source = "cpu_ops" if has_ops else _RANGES_AS_OPS
    id_col = "op_id" if has_ops else "range_id"
    db.con.execute(
        f"""
        CREATE TEMP TABLE kernel_ops AS
        WITH k AS (
            SELECT row_number() OVER () AS krow, device_id, name AS kernel_name, start_ns,
                   end_ns - start_ns AS dur_ns, correlation_id
            FROM kernels
        ),
        api AS (
            SELECT correlation_id, any_value(pid) pid, any_value(tid) tid,
                   any_value(start_ns) start_ns, any_value(end_ns) end_ns,
                   any_value(external_id) external_id
            FROM api_calls WHERE correlation_id IS NOT NULL GROUP BY correlation_id
        ),
        ext AS ({_EXT_BY_OP if has_ops else _EXT_NONE}),
        ka AS (
            SELECT k.*, a.pid, a.tid, a.start_ns AS api_start, a.end_ns AS api_end, e.op_id,
                   e.op_name
            FROM k LEFT JOIN api a USING (correlation_id)
            LEFT JOIN ext e ON e.external_id = a.external_id
        ),
        enclosing AS (
            SELECT ka.krow, o.{id_col} AS op_id, o.name AS op_name, o.end_ns AS op_end
            FROM (SELECT * FROM ka WHERE op_id IS NULL AND pid IS NOT NULL) ka
            ASOF LEFT JOIN {source} o
              ON o.pid = ka.pid AND o.tid = ka.tid AND o.start_ns <= ka.api_start
        )
        SELECT ka.krow, ka.device_id, ka.kernel_name, ka.start_ns, ka.dur_ns,
               coalesce(ka.op_id, CASE WHEN en.op_end >= ka.api_end THEN en.op_id END) AS op_id,
               coalesce(ka.op_name, CASE WHEN en.op_end >= ka.api_end THEN en.op_name END,
                        '{UNATTRIBUTED}') AS op_name
        FROM ka LEFT JOIN enclosing en USING (krow)
        """
    )
