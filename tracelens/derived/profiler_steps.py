"""``profiler_steps``, ``profiler_step_kernels``, ``profiler_step_metrics``: per-iteration measures.

Steps are the profiler's ``ProfilerStep#N`` annotations (host ranges in current traces,
operators in 2021-era ones). A kernel belongs to the step in which its launch call started
(its own start where no call is recorded). Read by the ``steps`` analyzer.
"""

from __future__ import annotations

from ingest.derive_gaps import DATA_LOADER_PATTERN, GAP_CAUSES, SYNC_CALLS
from ingest.profiler_steps import STEP_INTERVALS
from ingest.schema import Column, sql_list
from tracelens.derived.table import DerivedTable

PROFILER_STEPS = DerivedTable(
    "profiler_steps",
    "The profiler's steps (ProfilerStep#N), one row per step name",
    (
        Column("name", "VARCHAR", "Step name (ProfilerStep#12)"),
        Column("start_ns", "BIGINT", "Step start: the earliest record of that name"),
        Column("end_ns", "BIGINT", "Step end: the latest end of a record of that name"),
        Column("dur_ns", "BIGINT", "end_ns - start_ns"),
        Column("step_no", "BIGINT", "The number after '#'"),
    ),
    f"""
    WITH s AS (
        SELECT name, min(start_ns) AS start_ns, max(end_ns) AS end_ns
        FROM ({STEP_INTERVALS}) GROUP BY name
    )
    SELECT name, start_ns, end_ns, end_ns - start_ns AS dur_ns,
           TRY_CAST(regexp_extract(name, '#([0-9]+)', 1) AS BIGINT) AS step_no
    FROM s
    """,
)

PROFILER_STEP_KERNELS = DerivedTable(
    "profiler_step_kernels",
    "Per step and kernel name, the kernels launched in that step (kernels launched outside "
    "every step are left out); one row per name, not per kernel: the steps' measures need "
    "only these sums, and a row per kernel held every kernel's name a second time",
    (
        Column("step", "VARCHAR", "Step name (profiler_steps.name)"),
        Column("kernel", "VARCHAR", "Kernel name"),
        Column("kernels", "BIGINT", "Kernels of that name launched in the step"),
        Column("kernel_ns", "HUGEINT", "Their summed duration (ns)"),
        Column("start_ns", "BIGINT", "The first one's start (ns on the trace clock)"),
        Column("end_ns", "BIGINT", "The last end among them (ns on the trace clock)"),
    ),
    """
    WITH launches AS (
        SELECT correlation_id, min(start_ns) AS launch_ns FROM api_calls
        WHERE correlation_id IS NOT NULL GROUP BY correlation_id
    ),
    k AS (
        SELECT k.name, k.start_ns, k.end_ns, coalesce(l.launch_ns, k.start_ns) AS t
        FROM kernels k LEFT JOIN launches l USING (correlation_id)
    )
    SELECT s.name AS step, k.name AS kernel, count(*) AS kernels,
           sum(k.end_ns - k.start_ns) AS kernel_ns,
           min(k.start_ns) AS start_ns, max(k.end_ns) AS end_ns
    FROM k ASOF JOIN profiler_steps s ON k.t >= s.start_ns
    WHERE k.t < s.end_ns
    GROUP BY s.name, k.name
    """,
    requires=(PROFILER_STEPS,),
)

_SYNC_LIST = sql_list(SYNC_CALLS)
_IDLE_COLS = ",\n".join(
    f"coalesce(sum(ov) FILTER (WHERE cause = '{c}'), 0) AS idle_{c}_ns" for c in GAP_CAUSES
)

PROFILER_STEP_METRICS = DerivedTable(
    "profiler_step_metrics",
    "Per step: its GPU work, the GPU idle inside it by gap cause, and the host's time in "
    "data loading and blocking calls",
    (
        Column("step", "VARCHAR", "Step name (profiler_steps.name)"),
        Column("step_no", "BIGINT", "The number after '#'"),
        Column("start_ns", "BIGINT", "Step start (ns on the trace clock)"),
        Column("end_ns", "BIGINT", "Step end (ns on the trace clock)"),
        Column("dur_ns", "BIGINT", "Step duration (ns)"),
        Column("kernel_count", "BIGINT", "Kernels launched in the step"),
        Column("kernel_ns", "HUGEINT", "Their summed duration (ns)"),
        Column("gpu_span_ns", "BIGINT", "First start to last end of those kernels (ns)"),
        *(
            Column(f"idle_{c}_ns", "HUGEINT", f"GPU idle inside the step in gaps judged {c} (ns)")
            for c in GAP_CAUSES
        ),
        Column("sync_blocked_ns", "HUGEINT", "Host time in blocking calls inside the step (ns)"),
        Column("loader_ns", "HUGEINT", "Host time in data-loader ranges or operators (ns)"),
    ),
    f"""
    WITH kern AS (
        SELECT step, CAST(sum(kernels) AS BIGINT) AS kernel_count, sum(kernel_ns) AS kernel_ns,
               max(end_ns) - min(start_ns) AS gpu_span_ns
        FROM profiler_step_kernels GROUP BY step
    ),
    idle AS (
        SELECT step, {_IDLE_COLS} FROM (
            SELECT s.name AS step, g.cause,
                   least(g.end_ns, s.end_ns) - greatest(g.start_ns, s.start_ns) AS ov
            FROM profiler_steps s JOIN gaps g ON g.start_ns < s.end_ns AND g.end_ns > s.start_ns
        ) GROUP BY step
    ),
    host AS (
        SELECT s.name AS step,
               coalesce(sum(least(a.end_ns, s.end_ns) - greatest(a.start_ns, s.start_ns)),
                        0) AS sync_blocked_ns
        FROM profiler_steps s
        JOIN (SELECT start_ns, end_ns FROM api_calls WHERE name IN ({_SYNC_LIST})) a
          ON a.start_ns < s.end_ns AND a.end_ns > s.start_ns
        GROUP BY s.name
    ),
    loader AS (
        SELECT s.name AS step,
               sum(least(r.end_ns, s.end_ns) - greatest(r.start_ns, s.start_ns)) AS loader_ns
        FROM profiler_steps s JOIN (
            SELECT start_ns, end_ns FROM ranges
            WHERE regexp_matches(name, '{DATA_LOADER_PATTERN}')
            UNION ALL SELECT start_ns, end_ns FROM cpu_ops
            WHERE regexp_matches(name, '{DATA_LOADER_PATTERN}') AND depth <= 1
        ) r ON r.start_ns < s.end_ns AND r.end_ns > s.start_ns
        GROUP BY s.name
    )
    SELECT s.name AS step, s.step_no, s.start_ns, s.end_ns, s.dur_ns,
           coalesce(kern.kernel_count, 0) AS kernel_count,
           coalesce(kern.kernel_ns, 0) AS kernel_ns,
           coalesce(kern.gpu_span_ns, 0) AS gpu_span_ns,
           {", ".join(f"coalesce(idle.idle_{c}_ns, 0) AS idle_{c}_ns" for c in GAP_CAUSES)},
           coalesce(host.sync_blocked_ns, 0) AS sync_blocked_ns,
           coalesce(loader.loader_ns, 0) AS loader_ns
    FROM profiler_steps s
    LEFT JOIN kern ON kern.step = s.name
    LEFT JOIN idle ON idle.step = s.name
    LEFT JOIN host ON host.step = s.name
    LEFT JOIN loader ON loader.step = s.name
    ORDER BY s.start_ns
    """,
    requires=(PROFILER_STEPS, PROFILER_STEP_KERNELS),
)
