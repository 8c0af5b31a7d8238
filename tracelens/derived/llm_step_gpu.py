"""``llm_step_gpu``: what the GPU did during each prefill and decode step.

Busy time in a step is the step's overlap with each device's activity window minus its
overlap with that device's derived idle gaps (``gaps``), i.e. the union of kernel, memcpy
and memset intervals inside the step, summed over devices. Kernels are counted in the step
in which they start on the GPU.
"""

from __future__ import annotations

from ingest.schema import Column
from tracelens.derived.llm_annotations import LLM_STEPS
from tracelens.derived.table import DerivedTable

LLM_STEP_GPU = DerivedTable(
    "llm_step_gpu",
    "Each LLM step with the GPU busy time and kernels inside it",
    (
        Column("step_id", "BIGINT", "The step (llm_steps.step_id)"),
        Column("kind", "VARCHAR", "prefill or decode"),
        Column("start_ns", "BIGINT", "Step start"),
        Column("end_ns", "BIGINT", "Step end"),
        Column("dur_ns", "BIGINT", "Step duration (ns)"),
        Column("n_requests", "BIGINT", "Requests in the step"),
        Column("busy_ns", "HUGEINT", "GPU busy time inside the step, summed over devices (ns)"),
        Column("kernels", "BIGINT", "Kernels that started in the step"),
        Column("median_kernel_ns", "DOUBLE", "Their median duration (ns); NULL if none"),
    ),
    """
    WITH dev AS (
        SELECT device_id, min(start_ns) AS ws, max(end_ns) AS we FROM (
            SELECT device_id, start_ns, end_ns FROM kernels
            UNION ALL SELECT device_id, start_ns, end_ns FROM memcpys WHERE kind NOT LIKE 'UVM%'
            UNION ALL SELECT device_id, start_ns, end_ns FROM memsets
        ) WHERE device_id IS NOT NULL GROUP BY device_id
    ),
    win AS (
        SELECT s.step_id,
               sum(greatest(0, least(s.end_ns, d.we) - greatest(s.start_ns, d.ws)))
                   AS in_window_ns
        FROM llm_steps s CROSS JOIN dev d GROUP BY s.step_id
    ),
    idle AS (
        SELECT s.step_id,
               sum(least(s.end_ns, g.end_ns) - greatest(s.start_ns, g.start_ns)) AS idle_ns
        FROM llm_steps s JOIN gaps g ON g.start_ns < s.end_ns AND g.end_ns > s.start_ns
        GROUP BY s.step_id
    ),
    k AS (
        SELECT s.step_id, count(*) AS kernels, median(k.end_ns - k.start_ns) AS median_kernel_ns
        FROM llm_steps s JOIN kernels k ON k.start_ns >= s.start_ns AND k.start_ns < s.end_ns
        GROUP BY s.step_id
    )
    SELECT s.step_id, s.kind, s.start_ns, s.end_ns, s.end_ns - s.start_ns AS dur_ns,
           s.n_requests,
           coalesce(win.in_window_ns, 0) - coalesce(idle.idle_ns, 0) AS busy_ns,
           coalesce(k.kernels, 0) AS kernels, k.median_kernel_ns
    FROM llm_steps s LEFT JOIN win USING (step_id) LEFT JOIN idle USING (step_id)
    LEFT JOIN k USING (step_id)
    """,
    requires=(LLM_STEPS,),
)
