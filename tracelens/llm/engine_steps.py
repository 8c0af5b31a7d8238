"""Engine steps: the time, GPU work and tokens of every step vLLM or SGLang labelled.

From the step labels (:mod:`tracelens.llm.engine_labels`) this module builds, in SQL:

- ``engine_steps``: one row per step. Its GPU work is what it *launched*: the kernels,
  copies and memsets whose runtime call (by correlation id) started inside the step's range
  on the step's thread, wherever on the GPU timeline they ran. A step is done when both its
  range and that work have ended (a token exists only once its GPU work is done). It begins
  at its range start, or when the previous step on its thread was done if that is later:
  engines that schedule asynchronously (vLLM's async scheduling, SGLang's overlap
  scheduler, graph replays) open the next range while the GPU still runs the previous
  step, and one step's time must not count twice. The first step of a capture whose GPU
  work started only after its range ended (the GPU was still busy with earlier, unrecorded
  work) begins when that work starts. Host time from one step being done to the next one's
  range start is ``gap_before_ns``: scheduling, sampling and detokenizing between steps.
- ``engine_step_idle`` and ``engine_between_idle``: per step, device and gap cause, the GPU
  idle time (the derived ``gaps``) inside the step and in the host time before it. GPU busy
  time in a step is its overlap with each device's activity window minus that idle time.

A decode step's duration is the inter-token latency every request in it sees, and a mixed
step's is the one its decode requests see: the engine-side ITL distribution counts each
such step once per decode request in it. TTFT needs request arrival times, which engine
steps do not carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.llm.engine_labels import read_engine_labels
from tracelens.llm.latency_metrics import PERCENTILES, summarize
from tracelens.llm.model import (
    BetweenSteps,
    Distribution,
    Engine,
    EnginePhase,
    EnginePhaseName,
    EnginePhases,
    EngineStep,
    EngineStepsSection,
    MixedSteps,
)

if TYPE_CHECKING:
    import numpy as np

# At most this many steps are listed one by one in the report (the first ones in time).
MAX_LISTED = 2_000
# Warn about asynchronous steps when at least this share of them outlive their range.
_ASYNC_MIN_SHARE = 0.1

TTFT_NOTE = (
    "TTFT needs request arrival times, which engine steps do not carry: annotate requests "
    "with tracelens.annotate, or read the benchmark's result file (vllm bench serve, "
    "sglang.bench_serving) for it"
)
ITL_BASIS = (
    "each decode step's duration once per request in it, and each mixed step's once per "
    "decode request in it: the inter-token latency the engine gives every running request "
    "(the client also sees network and detokenizer time)"
)

# Each launch call to the step whose range on its thread holds the call's start. Where a
# thread's steps never overlap (engines run them one after another) that step is the last
# one starting at or before the call, an ASOF lookup; otherwise every step on the thread
# is compared with every call ({calls}: the range join, quadratic in steps x calls: 15 s
# for 20 k steps beside 1 M calls, against 0.13 s).
_STEP_CALLS_ASOF = """
    SELECT s.step_id, a.correlation_id
    FROM api_calls a ASOF JOIN engine_step_labels s
      ON a.pid = s.pid AND a.tid = s.tid AND a.start_ns >= s.range_start_ns
    WHERE a.start_ns < s.range_end_ns AND a.correlation_id IS NOT NULL
"""
_STEP_CALLS_JOIN = """
    SELECT s.step_id, a.correlation_id
    FROM engine_step_labels s
    JOIN api_calls a ON a.pid = s.pid AND a.tid = s.tid
     AND a.start_ns >= s.range_start_ns AND a.start_ns < s.range_end_ns
    WHERE a.correlation_id IS NOT NULL
"""
# Whether any step starts before an earlier one on its thread has ended, or with it (an
# ASOF lookup would pick either of two steps that start together).
_STEPS_OVERLAP = """
SELECT count(*) > 0 FROM (
    SELECT range_start_ns, max(range_end_ns) OVER w AS prev_end, lag(range_start_ns) OVER w
               AS prev_start
    FROM engine_step_labels
    WINDOW w AS (PARTITION BY pid, tid ORDER BY range_start_ns, range_end_ns, step_id
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
) WHERE range_start_ns < prev_end OR range_start_ns = prev_start
"""

_WORK_SQL = """
CREATE OR REPLACE TEMP TABLE engine_step_work AS
WITH work AS (
    SELECT device_id, start_ns, end_ns, correlation_id, true AS is_kernel FROM kernels
    UNION ALL
    SELECT device_id, start_ns, end_ns, correlation_id, false FROM memcpys
    WHERE kind NOT LIKE 'UVM%'
    UNION ALL
    SELECT device_id, start_ns, end_ns, correlation_id, false FROM memsets
)
SELECT s.step_id, min(w.start_ns) AS gpu_start_ns, max(w.end_ns) AS gpu_end_ns,
       count(*) FILTER (WHERE w.is_kernel) AS kernels,
       median(w.end_ns - w.start_ns) FILTER (WHERE w.is_kernel) AS median_kernel_ns
FROM ({calls}) s
JOIN work w ON w.correlation_id = s.correlation_id
GROUP BY s.step_id
"""

_STEPS_SQL = """
CREATE OR REPLACE TEMP TABLE engine_steps AS
WITH j AS (
    SELECT s.*, w.gpu_start_ns, w.gpu_end_ns, coalesce(w.kernels, 0) AS kernels,
           w.median_kernel_ns, greatest(s.range_end_ns, w.gpu_end_ns) AS done_ns
    FROM engine_step_labels s LEFT JOIN engine_step_work w USING (step_id)
),
l AS (
    SELECT *, lag(done_ns) OVER (PARTITION BY pid, tid ORDER BY range_start_ns, step_id)
                  AS prev_done_ns
    FROM j
),
-- A GPU-side wait for most of a step during which no device ran anything waited on work
-- the trace does not record (issued before recording began): the first step is timed from
-- its end, like a step whose work started only after its range ended.
activity AS (
    SELECT start_ns, end_ns FROM kernels
    UNION ALL SELECT start_ns, end_ns FROM memcpys
    UNION ALL SELECT start_ns, end_ns FROM memsets
),
unrecorded_wait AS (
    SELECT l.step_id, max(g.end_ns) AS wait_end_ns
    FROM l JOIN gaps g
      ON g.cause = 'gpu_dependency' AND g.start_ns < l.done_ns AND g.end_ns > l.range_start_ns
     AND 2 * (g.end_ns - g.start_ns) >= l.done_ns - l.range_start_ns
    WHERE l.prev_done_ns IS NULL
      AND NOT EXISTS (SELECT 1 FROM activity w
                      WHERE w.start_ns < g.end_ns AND w.end_ns > g.start_ns)
    GROUP BY l.step_id
),
b AS (
    SELECT l.*, CASE WHEN prev_done_ns IS NULL
                     THEN greatest(range_start_ns,
                                   CASE WHEN gpu_start_ns >= range_end_ns THEN gpu_start_ns END,
                                   u.wait_end_ns)
                     ELSE greatest(range_start_ns, prev_done_ns) END AS start_ns
    FROM l LEFT JOIN unrecorded_wait u USING (step_id)
)
SELECT step_id, pid, tid, engine, phase, requests, decode_requests, prefill_tokens,
       decode_tokens, context_tokens, range_start_ns, range_end_ns, gpu_start_ns, gpu_end_ns,
       kernels, median_kernel_ns, prev_done_ns, start_ns,
       greatest(done_ns, start_ns) AS end_ns,
       greatest(done_ns, start_ns) - start_ns AS dur_ns,
       range_end_ns - range_start_ns AS range_ns,
       CASE WHEN prev_done_ns IS NOT NULL THEN greatest(0, start_ns - prev_done_ns) END
           AS gap_before_ns,
       coalesce(gpu_end_ns > range_end_ns, false) AS outlives_range
FROM b
"""

_IDLE_SQL = """
CREATE OR REPLACE TEMP TABLE engine_step_idle AS
SELECT s.step_id, g.device_id, g.cause,
       sum(least(s.end_ns, g.end_ns) - greatest(s.start_ns, g.start_ns)) AS ns
FROM engine_steps s JOIN gaps g ON g.start_ns < s.end_ns AND g.end_ns > s.start_ns
GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE engine_between_idle AS
SELECT s.step_id, g.device_id, g.cause,
       sum(least(s.start_ns, g.end_ns) - greatest(s.prev_done_ns, g.start_ns)) AS ns
FROM engine_steps s JOIN gaps g ON g.start_ns < s.start_ns AND g.end_ns > s.prev_done_ns
WHERE s.gap_before_ns > 0
GROUP BY ALL
"""

_GPU_SQL = """
CREATE OR REPLACE TEMP TABLE engine_step_gpu AS
WITH dev AS (
    SELECT device_id, min(start_ns) AS ws, max(end_ns) AS we FROM (
        SELECT device_id, start_ns, end_ns FROM kernels
        UNION ALL SELECT device_id, start_ns, end_ns FROM memcpys WHERE kind NOT LIKE 'UVM%'
        UNION ALL SELECT device_id, start_ns, end_ns FROM memsets
    ) WHERE device_id IS NOT NULL GROUP BY device_id
),
win AS (
    SELECT s.step_id,
           sum(greatest(0, least(s.end_ns, d.we) - greatest(s.start_ns, d.ws))) AS in_window_ns
    FROM engine_steps s CROSS JOIN dev d GROUP BY s.step_id
),
idle AS (SELECT step_id, sum(ns) AS idle_ns FROM engine_step_idle GROUP BY step_id)
SELECT s.step_id, coalesce(win.in_window_ns, 0) AS in_window_ns,
       coalesce(win.in_window_ns, 0) - coalesce(idle.idle_ns, 0) AS gpu_busy_ns
FROM engine_steps s LEFT JOIN win USING (step_id) LEFT JOIN idle USING (step_id)
"""

_LISTED = (
    "start_ns",
    "dur_ns",
    "range_ns",
    "gap_before_ns",
    "gpu_busy_ns",
    "kernels",
    "phase",
    "requests",
    "decode_requests",
    "prefill_tokens",
    "decode_tokens",
    "context_tokens",
)


@dataclass
class EngineSteps:
    """The ``llm.engine_steps`` section (None when labels were seen but none was read)."""

    section: EngineStepsSection | None
    warnings: list[str] = field(default_factory=list)


def engine_steps(db: TraceDB) -> EngineSteps | None:
    """None when the trace has no vLLM or SGLang step label; computed once per TraceDB."""
    return db.memo("engine_steps", lambda: _engine_steps(db))


def _engine_steps(db: TraceDB) -> EngineSteps | None:
    labels = read_engine_labels(db)
    result: EngineSteps | None = None
    if labels.steps:
        overlap = bool(db.scalar(_STEPS_OVERLAP))
        db.con.execute(_WORK_SQL.format(calls=_STEP_CALLS_JOIN if overlap else _STEP_CALLS_ASOF))
        db.con.execute(_STEPS_SQL)
        db.con.execute(_IDLE_SQL)
        db.con.execute(_GPU_SQL)
        warnings = [*labels.warnings, *_async_warning(db), *_late_start_warning(db)]
        result = EngineSteps(_section(db, labels.source or "vllm"), warnings)
    elif labels.warnings:
        result = EngineSteps(None, labels.warnings)
    return result


def _async_warning(db: TraceDB) -> list[str]:
    n, outlive = db.rows(
        "SELECT count(*), count(*) FILTER (WHERE outlives_range) FROM engine_steps"
    )[0]
    if not outlive or outlive < _ASYNC_MIN_SHARE * n:
        return []
    return [
        f"{outlive:,} of {n:,} engine steps launch GPU work that is still running when their "
        "range ends (asynchronous scheduling or graph replay): each step is timed until that "
        "work is done, and not before the previous step was"
    ]


def _late_start_warning(db: TraceDB) -> list[str]:
    """The first step of a thread timed from the end of a wait on unrecorded work (see
    ``unrecorded_wait`` above), where that wait is longer than the step itself: its latency
    and throughput are of the GPU work after the wait, not of the host's step range."""
    rows = db.rows(
        """SELECT start_ns - range_start_ns AS waited, dur_ns, range_ns FROM engine_steps
           WHERE prev_done_ns IS NULL AND start_ns - range_start_ns > dur_ns
           ORDER BY range_start_ns, step_id"""
    )
    if not rows:
        return []
    waited, dur, span = (int(v) for v in rows[0])
    which = "the first engine step" if len(rows) == 1 else f"{len(rows):,} first engine steps"
    return [
        f"{which}'s range opens {fmt_ns(waited)} before its GPU work could start (the GPU "
        "waited on work issued before recording began: the capture-start finding), so it is "
        f"timed from the end of that wait ({fmt_ns(dur)}); the host's step range lasts "
        f"{fmt_ns(span)}, most of it that wait, which the step latencies and throughput "
        "here leave out: record from a steady state to time whole steps"
    ]


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


def _phase(db: TraceDB, phase: EnginePhaseName) -> EnginePhase:
    r = db.dicts(
        """SELECT count(*) AS steps, coalesce(sum(s.dur_ns), 0) AS total_ns,
                  avg(s.requests) AS mean_requests, max(s.requests) AS max_requests,
                  sum(s.prefill_tokens) AS prefill_tokens, sum(s.decode_tokens) AS decode_tokens,
                  coalesce(sum(g.gpu_busy_ns), 0) AS gpu_busy_ns,
                  coalesce(sum(g.in_window_ns), 0) AS in_window_ns,
                  coalesce(sum(s.kernels), 0) AS kernels,
                  median(s.median_kernel_ns) AS median_kernel_ns
           FROM engine_steps s JOIN engine_step_gpu g USING (step_id) WHERE s.phase = ?""",
        [phase],
    )[0]
    steps = int(r["steps"])
    has_gpu = bool(db.devices)
    if not steps:  # sums over no step are nothing, not unknown
        r["prefill_tokens"] = r["decode_tokens"] = 0
    in_window = int(r["in_window_ns"])
    return EnginePhase(
        steps=steps,
        total_ns=int(r["total_ns"]),
        step_ns=summarize(db, f"SELECT dur_ns AS v FROM engine_steps WHERE phase = '{phase}'"),
        mean_requests=r["mean_requests"],
        max_requests=_int(r["max_requests"]),
        prefill_tokens=_int(r["prefill_tokens"]),
        decode_tokens=_int(r["decode_tokens"]),
        gpu_busy_ns=int(r["gpu_busy_ns"]) if has_gpu else None,
        gpu_busy_pct=100.0 * int(r["gpu_busy_ns"]) / in_window if has_gpu and in_window else None,
        kernels_per_step=int(r["kernels"]) / steps if has_gpu and steps else None,
        median_kernel_ns=r["median_kernel_ns"] if has_gpu else None,
        idle_by_cause={
            c: int(ns)
            for c, ns in db.rows(
                """SELECT i.cause, sum(i.ns) AS ns FROM engine_step_idle i
                   JOIN engine_steps s USING (step_id) WHERE s.phase = ?
                   GROUP BY i.cause ORDER BY ns DESC, i.cause""",
                [phase],
            )
        },
    )


def weighted_summary(values: np.ndarray, weights: np.ndarray) -> Distribution:
    """:func:`summarize` of ``values`` with each repeated ``weights`` times, without repeating.

    Percentiles interpolate linearly between the closest ranks of the repeated list (DuckDB
    ``quantile_cont``, NumPy's default), so they equal those of the expanded data exactly.
    """
    # numpy only for traces with engine steps: every other analysis skips its import
    import numpy as np

    keep = weights > 0
    values, weights = values[keep].astype(float), weights[keep].astype(np.int64)
    n = int(weights.sum())
    out: dict[str, Any] = {"count": n, "mean": None, "max": None}
    out.update({f"p{p}": None for p in PERCENTILES})
    if n == 0:
        return msgspec.convert(out, Distribution)
    order = np.argsort(values, kind="stable")
    values, weights = values[order], weights[order]
    upper = np.cumsum(weights)  # expanded positions [upper - w, upper) hold each value

    def at(i: int) -> float:
        return float(values[int(np.searchsorted(upper, i, side="right"))])

    out["mean"] = float((values * weights).sum() / n)
    out["max"] = float(values[-1])
    for p in PERCENTILES:
        pos = p / 100 * (n - 1)
        lo = int(np.floor(pos))
        hi = min(lo + 1, n - 1)
        out[f"p{p}"] = at(lo) + (pos - lo) * (at(hi) - at(lo))
    return msgspec.convert(out, Distribution)


def _itl(db: TraceDB) -> Distribution:
    rows = db.rows(
        """SELECT dur_ns, decode_requests FROM engine_steps
           WHERE phase IN ('decode', 'mixed') AND decode_requests > 0 ORDER BY step_id"""
    )
    import numpy as np

    arr = np.array(rows, dtype=float).reshape(-1, 2)
    return weighted_summary(arr[:, 0], arr[:, 1])


def _mixed(db: TraceDB) -> MixedSteps:
    """How much mixed steps stretch the ITL of the decode requests that share them."""
    base = db.scalar("SELECT median(dur_ns) FROM engine_steps WHERE phase = 'decode'")
    r = db.dicts(
        """SELECT count(*) AS steps, avg(dur_ns) AS mean_ns,
                  coalesce(sum(decode_requests), 0) AS decode_intervals,
                  count(*) FILTER (WHERE decode_requests IS NULL) AS unknown_decode_requests,
                  sum(prefill_tokens) AS prefill_tokens
           FROM engine_steps WHERE phase = 'mixed'"""
    )[0]
    excess = None
    if base is not None and r["steps"]:
        excess = int(
            db.scalar(
                "SELECT sum(greatest(0, dur_ns - ?)) FROM engine_steps WHERE phase = 'mixed'",
                [base],
            )
            or 0
        )
    all_intervals = int(
        db.scalar(
            "SELECT coalesce(sum(decode_requests), 0) FROM engine_steps "
            "WHERE phase IN ('decode', 'mixed')"
        )
    )
    return MixedSteps(
        steps=int(r["steps"]),
        mean_ns=r["mean_ns"],
        decode_baseline_ns=None if base is None else float(base),
        excess_ns=excess,
        decode_intervals=int(r["decode_intervals"]),
        share_of_itl_pct=100.0 * int(r["decode_intervals"]) / all_intervals
        if all_intervals
        else None,
        unknown_decode_requests=int(r["unknown_decode_requests"]),
        prefill_tokens=_int(r["prefill_tokens"]),
    )


def _between(db: TraceDB) -> BetweenSteps:
    r = db.dicts(
        """SELECT count(*) FILTER (WHERE gap_before_ns > 0) AS intervals,
                  coalesce(sum(gap_before_ns), 0) AS ns FROM engine_steps"""
    )[0]
    causes = {
        c: int(ns)
        for c, ns in db.rows(
            "SELECT cause, sum(ns) AS ns FROM engine_between_idle GROUP BY cause "
            "ORDER BY ns DESC, cause"
        )
    }
    return BetweenSteps(
        intervals=int(r["intervals"]),
        ns=int(r["ns"]),
        gpu_idle_ns=sum(causes.values()) if db.devices else None,
        idle_by_cause=causes,
    )


def _section(db: TraceDB, source: Engine) -> EngineStepsSection:
    span = db.rows("SELECT min(start_ns), max(end_ns), count(*) FROM engine_steps")[0]
    span_ns = int(span[1] - span[0]) if span[2] else None
    totals = db.dicts(
        """SELECT sum(prefill_tokens) AS prefill, sum(decode_tokens) AS decode,
                  count(*) FILTER (WHERE prefill_tokens IS NULL OR decode_tokens IS NULL)
                      AS unknown
           FROM engine_steps"""
    )[0]
    seconds = span_ns / 1e9 if span_ns else None
    prefill = int(totals["prefill"] or 0)
    decode = int(totals["decode"] or 0)
    listed = db.dicts(
        f"""SELECT {", ".join(_LISTED)} FROM engine_steps JOIN engine_step_gpu USING (step_id)
            ORDER BY start_ns, step_id LIMIT {MAX_LISTED}"""
    )
    for row in listed:
        for k, v in row.items():
            if k != "phase" and v is not None:
                row[k] = int(v)
        if not db.devices:
            row["gpu_busy_ns"] = None
    count = int(span[2])
    return EngineStepsSection(
        source=source,
        count=count,
        by_phase=EnginePhases(
            prefill=_phase(db, "prefill"), decode=_phase(db, "decode"), mixed=_phase(db, "mixed")
        ),
        span_ns=span_ns,
        prefill_tokens=prefill,
        decode_tokens=decode,
        steps_with_unknown_tokens=int(totals["unknown"]),
        prefill_tokens_per_s=prefill / seconds if seconds else None,
        decode_tokens_per_s=decode / seconds if seconds else None,
        itl_ns=_itl(db),
        itl_basis=ITL_BASIS,
        ttft_note=TTFT_NOTE,
        mixed=_mixed(db),
        between_steps=_between(db),
        steps=msgspec.convert(listed, list[EngineStep]),
        steps_listed=len(listed),
    )
