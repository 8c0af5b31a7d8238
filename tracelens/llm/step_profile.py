"""What the GPU did during prefill and decode steps: busy time, idle causes, kernel counts.

Per step, busy time and kernels are ``llm_step_gpu`` (:mod:`tracelens.derived.llm_step_gpu`,
which says how busy time is measured); idle time by cause comes from the derived ``gaps``.
"""

from __future__ import annotations

from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.llm_annotations import LLM_STEPS
from tracelens.derived.llm_step_gpu import LLM_STEP_GPU
from tracelens.llm.model import StepKind, StepProfile, StepProfiles

# Idle time inside steps of one kind, by the cause ingest judged for each gap.
IDLE_BY_CAUSE_SQL = """
SELECT g.cause, count(*) AS gaps,
       sum(least(s.end_ns, g.end_ns) - greatest(s.start_ns, g.start_ns)) AS ns
FROM llm_steps s JOIN gaps g ON g.start_ns < s.end_ns AND g.end_ns > s.start_ns
WHERE s.kind = ? GROUP BY g.cause ORDER BY ns DESC
"""


def step_profile(db: TraceDB) -> StepProfiles:
    """Per step kind: count, time, GPU busy share, kernels per step, idle time by cause."""
    require(db, LLM_STEP_GPU, LLM_STEPS)
    return StepProfiles(prefill=_profile(db, "prefill"), decode=_profile(db, "decode"))


def _profile(db: TraceDB, kind: StepKind) -> StepProfile:
    r = db.dicts(
        """SELECT count(*) AS steps, coalesce(sum(dur_ns), 0) AS total_ns,
                  avg(dur_ns) AS mean_ns, median(dur_ns) AS p50_ns,
                  avg(n_requests) AS mean_batch, max(n_requests) AS max_batch,
                  coalesce(sum(busy_ns), 0) AS busy_ns, coalesce(sum(kernels), 0) AS kernels,
                  median(median_kernel_ns) AS median_kernel_ns
           FROM llm_step_gpu WHERE kind = ?""",
        [kind],
    )[0]
    steps, total = int(r["steps"]), int(r["total_ns"])
    has_gpu, busy = bool(db.devices), int(r["busy_ns"])
    return StepProfile(
        steps=steps,
        total_ns=total,
        mean_ns=r["mean_ns"],
        p50_ns=r["p50_ns"],
        mean_batch=r["mean_batch"],
        max_batch=None if r["max_batch"] is None else int(r["max_batch"]),
        gpu_busy_ns=busy if has_gpu else None,
        gpu_busy_pct=100.0 * busy / (total * len(db.devices)) if has_gpu and total else None,
        kernels_per_step=int(r["kernels"]) / steps if has_gpu and steps else None,
        median_kernel_ns=r["median_kernel_ns"] if has_gpu else None,
        idle_by_cause={c["cause"]: int(c["ns"]) for c in db.dicts(IDLE_BY_CAUSE_SQL, [kind])}
        if has_gpu
        else {},
    )


# Steps whose GPU work, launched inside the step, finishes only after the step has ended.
OUTLIVED_SQL = """
SELECT s.kind, count(DISTINCT s.step_id) AS steps
FROM llm_steps s
JOIN api_calls a ON a.start_ns >= s.start_ns AND a.start_ns < s.end_ns
JOIN (
    SELECT correlation_id, end_ns FROM kernels
    UNION ALL SELECT correlation_id, end_ns FROM memcpys WHERE kind NOT LIKE 'UVM%'
) g ON g.correlation_id = a.correlation_id
WHERE a.correlation_id IS NOT NULL AND g.end_ns > s.end_ns
GROUP BY s.kind ORDER BY s.kind
"""


def early_step_warnings(db: TraceDB, min_share: float = 0.1) -> list[str]:
    """Warn when step ranges end before the GPU work they launched (async annotation).

    Token times are the step ends; if a step's kernels still run after it, the step range
    closed at launch time and every token time, TTFT and ITL derived from it is too early.
    """
    if not db.devices:
        return []
    require(db, LLM_STEPS)
    totals = dict(db.rows("SELECT kind, count(*) FROM llm_steps GROUP BY kind"))
    out = []
    for kind, steps in db.rows(OUTLIVED_SQL):
        total = totals.get(kind, 0)
        if total and steps >= min_share * total:
            out.append(
                f"{steps:,} of {total:,} {kind} steps end before the GPU work they launched "
                "finishes, so their token times are launch times, too early: end each step "
                "range after its sampled tokens reach the host"
            )
    return out
