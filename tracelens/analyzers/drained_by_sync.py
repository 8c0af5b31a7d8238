"""Host gaps a blocking call opened: the GPU drained its queue while the host waited.

A gap judged host compute (or untraced host code) says the launching thread was busy on
the CPU before issuing the next work. Where that thread was inside a blocking call (a
device or stream synchronize, a synchronous copy, `.item()`) as the GPU ran dry, and the
call returned at once, the sync is why nothing was queued: it let the queue empty, and
the host's next work, however short, then runs on an idle GPU. On MI300X Qwen inference a
profiling harness calls `torch.cuda.synchronize()` for 13 ms while 463 kernels issued
before the capture drain; it returns 1.6 µs after the GPU goes idle, and the model's
next forward takes 624 µs of Python to issue its first kernel. Profiling that Python
helps less than not synchronizing there.

The queue does not refill at once: after the drain, host and GPU run in lockstep, each
short host stretch an idle gap, until the host gets ahead again (a launch waits for the GPU
at least ``idle_ramp_lead_ns``). Those gaps are the drain's too, its ramp-up: after the
harness's sync Qwen's forward leaves 18 host gaps (3.2 ms) over the next 6 ms, then its
launches wait 200-300 µs for the GPU and no host gap follows. A blocking call counts as a
drain only where it waited at least ``idle_drain_min_wait_ns``: the forward's mask check
makes a 34 µs blocking copy 1 µs after the last kernel ended, on a queue already empty. But
where the drain is a profiling or benchmark harness's own, such a call during the refill
would have drained the queue itself without the harness: the refill's gaps after it are
its, and only those before it the harness's. Where the
host never gets ahead again (a program bound by its host code), only the gaps the call
itself opened are counted, and a gap longer than ``idle_ramp_max_gap_ns`` ends the
ramp-up: a host phase of its own (AlexNet's 10 s of allocations and cuDNN autotuning after
a sync is no refill).
"""

from __future__ import annotations

from dataclasses import dataclass

from ingest.derive_gaps import LAUNCH_CALLS
from ingest.schema import sql_list
from tracelens.analyzers.launching_thread import with_launching_thread
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.blocking_calls import BLOCKING_CALLS

# Gaps of a cause (a subquery named ``gaps``) that opened while a blocking call on the
# thread that issued the next work was running and that call returned within the slack
# of the gap's start.
_DRAINED = """
WITH g AS (SELECT start_ns, end_ns, launch_start_ns FROM {gaps} WHERE cause = ?),
{thread},
pairs AS (
    SELECT gt.start_ns, gt.end_ns - gt.start_ns AS ns, b.pid, b.tid, b.name,
           b.start_ns AS b_start, b.end_ns AS b_end, b.top_op, b.annotation
    FROM gt JOIN blocking_calls b
      ON b.pid = gt.pid AND b.tid = gt.tid
     AND b.start_ns <= gt.start_ns
     -- host and GPU clocks differ by microseconds: a device synchronize can appear to
     -- return just before the last kernel ends
     AND b.end_ns BETWEEN gt.start_ns - ? AND gt.start_ns + ?
     -- it waited for queued work or a dependency: a call as short as its own copy found
     -- the queue empty already (Qwen's 34 us mask-check copy, 1 us after the last kernel)
     AND b.end_ns - b.start_ns >= ?
),
-- the ramp-up after each drain: until the thread's first launch that waited at least the
-- lead for the GPU (the host ahead again); none where it never does
leads AS (
    SELECT a.pid, a.tid, a.end_ns AS launched
    FROM api_calls a JOIN kernels k ON k.correlation_id = a.correlation_id
    WHERE a.name IN ({launch_calls}) AND k.start_ns - a.end_ns >= ?
),
-- ... and before the thread's first longer gap: a host phase of its own (allocations,
-- autotuning, a warm-up), not the refill of a queue
long_gaps AS (SELECT pid, tid, start_ns FROM gt WHERE end_ns - start_ns > ?),
ahead AS (
    SELECT p.*, (SELECT min(l.launched) FROM leads l
                 WHERE l.pid = p.pid AND l.tid = p.tid AND l.launched >= p.b_end) AS ahead_at,
           (SELECT min(x.start_ns) FROM long_gaps x
            WHERE x.pid = p.pid AND x.tid = p.tid AND x.start_ns > p.start_ns) AS phase_at
    FROM pairs p
),
-- no ramp-up where the host never gets ahead (least() would skip that NULL)
ramps AS (
    SELECT *, CASE WHEN ahead_at IS NOT NULL THEN least(ahead_at, coalesce(phase_at, ahead_at))
              END AS ramp_end
    FROM ahead
),
-- which drains a profiling or benchmark harness's device synchronize made
harness_ramps AS (
    SELECT r.* FROM ramps r
    WHERE r.ramp_end IS NOT NULL AND regexp_matches(r.name, '{device_syncs}')
      AND coalesce(regexp_matches(coalesce({frame_r}, r.top_op, r.annotation),
                                  '{harness_sites}'), false)
),
-- The program's own blocking calls during a harness drain's refill: the harness had
-- emptied the queue already, so each found it empty, but without the harness each would
-- drain it itself (Qwen's mask-check copy, every forward): the refill's gaps after one
-- are that call's, not the harness's.
own_calls AS (
    SELECT b.pid, b.tid, b.name, b.start_ns AS b_start, b.end_ns AS b_end, b.top_op,
           b.annotation, r.ramp_end
    FROM harness_ramps r JOIN blocking_calls b
      ON b.pid = r.pid AND b.tid = r.tid AND b.start_ns >= r.b_end
     AND b.start_ns < r.ramp_end
),
-- the drain's later gaps of the same thread, up to the end of its ramp-up
ramped AS (
    SELECT gt.start_ns, gt.end_ns - gt.start_ns AS ns, r.pid, r.tid, r.name, r.b_start,
           r.b_end, r.top_op, r.annotation
    FROM ramps r JOIN gt ON gt.pid = r.pid AND gt.tid = r.tid
     AND gt.start_ns > r.start_ns AND gt.start_ns < r.ramp_end
    UNION ALL
    SELECT start_ns, ns, pid, tid, name, b_start, b_end, top_op, annotation FROM pairs
    UNION ALL
    SELECT gt.start_ns, gt.end_ns - gt.start_ns, c.pid, c.tid, c.name, c.b_start, c.b_end,
           c.top_op, c.annotation
    FROM own_calls c JOIN gt ON gt.pid = c.pid AND gt.tid = c.tid
     AND gt.start_ns > c.b_start AND gt.start_ns < c.ramp_end
),
-- where each call was made: the innermost Python function around it outside PyTorch's
-- own package (the program's code that asked for the sync), else the innermost one that
-- is not a built-in (whose repr names an object address): `moca/.../profile.py(34):
-- run_torch_profiler` around `torch/cuda/__init__.py(1030): synchronize` around
-- `<built-in function _cuda_synchronize>`
framed AS (SELECT p.*, {frame_p} AS frame FROM ramped p),
hit AS (
    SELECT start_ns, any_value(ns) AS ns, arg_max(name, b_end) AS call,
           arg_max(coalesce(frame, top_op, annotation), b_end) AS site
    FROM framed GROUP BY start_ns
),
-- a device synchronize a profiling or benchmark harness makes around the measured work
harnessed AS (
    SELECT *, coalesce(regexp_matches(call, '{device_syncs}')
                       AND regexp_matches(site, '{harness_sites}'), false) AS harness
    FROM hit
),
-- the call with the most of that time, and where it was made in its longest gap
top_call AS (
    SELECT call, arg_max(site, ns) AS site FROM hit GROUP BY call
    ORDER BY sum(ns) DESC, call LIMIT 1
)
SELECT count(*) AS n, coalesce(sum(ns), 0) AS ns, any_value(top_call.call) AS call,
       any_value(top_call.site) AS site, (SELECT count(*) FROM pairs) AS drains,
       coalesce(sum(ns) FILTER (WHERE harness), 0) AS harness_ns,
       arg_max(harnessed.call, ns) FILTER (WHERE harness) AS harness_call,
       arg_max(harnessed.site, ns) FILTER (WHERE harness) AS harness_site,
       coalesce(list(harnessed.start_ns ORDER BY harnessed.start_ns)
                FILTER (WHERE harness), []) AS harness_starts
FROM harnessed LEFT JOIN top_call ON true
"""

# Where a blocking call (columns pid, tid, b_start, b_end of ``alias``) was made: the
# innermost Python function around it outside PyTorch's own package, else the innermost
# one that is not a built-in (see ``framed`` above).
_FRAME = """(SELECT arg_max(o.name, [CASE WHEN o.name LIKE 'torch/%' THEN 0 ELSE 1 END,
                                  o.depth])
          FROM cpu_ops o
          WHERE o.pid = {alias}.pid AND o.tid = {alias}.tid
            AND o.category = 'python_function' AND o.name NOT LIKE '<built-in%'
            AND o.start_ns <= {alias}.b_start AND o.end_ns >= {alias}.b_end)"""

# Device-wide synchronizes (a harness's `torch.cuda.synchronize()`), and the places a
# profiling or benchmark harness makes them: the Python function around the call outside
# PyTorch's package (`moca/library/profiling/profile.py(34): run_torch_profiler`), or an
# operator or range name. The program without its harness pays neither the sync nor the
# queue's refill after it.
_DEVICE_SYNCS = r"(?i)(Device|Ctx)Synchronize"
_HARNESS_SITES = (
    r"(?i)(profil(e|er|ing)\b|profil(e|er|ing)[/_.]|benchmark|\bbench_|_bench\b|bench\.py"
    r"|timeit|harness)"
)


@dataclass(frozen=True)
class DrainedBySync:
    """The gaps of one cause that a blocking call opened, and the call with most of
    their time."""

    gaps: int
    ns: int
    call: str | None
    # innermost Python function around it outside PyTorch (else inside it, never a
    # built-in), else the outermost operator, else the annotation range
    site: str | None
    # the gaps the calls themselves opened; the rest are their ramp-ups
    drains: int = 0
    # of ``ns``, the gaps a profiling or benchmark harness's device synchronize opened,
    # and that call and where it was made
    harness_ns: int = 0
    harness_call: str | None = None
    harness_site: str | None = None
    # the start of each gap the harness's sync opened (so the rest can be described alone)
    harness_starts: tuple[int, ...] = ()


def drained_by_sync(db: TraceDB, gaps: str, cause: str, t: Thresholds) -> DrainedBySync:
    """The gaps of ``cause`` (a subquery named ``gaps``) a blocking call opened."""
    require(db, BLOCKING_CALLS)
    slack = t.idle_after_sync_ns
    sql = _DRAINED.format(
        gaps=gaps,
        thread=with_launching_thread("g", keep_unmatched=False),
        launch_calls=sql_list(LAUNCH_CALLS),
        device_syncs=_DEVICE_SYNCS,
        harness_sites=_HARNESS_SITES,
        frame_r=_FRAME.format(alias="r"),
        frame_p=_FRAME.format(alias="p"),
    )
    params = [cause, slack, slack, t.idle_drain_min_wait_ns, t.idle_ramp_lead_ns]
    row = db.dicts(sql, [*params, t.idle_ramp_max_gap_ns])[0]
    return DrainedBySync(
        int(row["n"]),
        int(row["ns"]),
        row["call"],
        row["site"],
        int(row["drains"] or 0),
        int(row["harness_ns"]),
        row["harness_call"],
        row["harness_site"],
        tuple(int(v) for v in row["harness_starts"] or ()),
    )
