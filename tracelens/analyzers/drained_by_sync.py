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
"""

from __future__ import annotations

from dataclasses import dataclass

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
),
-- where each call was made: the innermost Python function around it outside PyTorch's
-- own package (the program's code that asked for the sync), else the innermost one that
-- is not a built-in (whose repr names an object address): `moca/.../profile.py(34):
-- run_torch_profiler` around `torch/cuda/__init__.py(1030): synchronize` around
-- `<built-in function _cuda_synchronize>`
framed AS (
    SELECT p.*, (SELECT arg_max(o.name, [CASE WHEN o.name LIKE 'torch/%' THEN 0 ELSE 1 END,
                                         o.depth])
                 FROM cpu_ops o
                 WHERE o.pid = p.pid AND o.tid = p.tid AND o.category = 'python_function'
                   AND o.name NOT LIKE '<built-in%'
                   AND o.start_ns <= p.b_start AND o.end_ns >= p.b_end) AS frame
    FROM pairs p
),
hit AS (
    SELECT start_ns, any_value(ns) AS ns, arg_max(name, b_end) AS call,
           arg_max(coalesce(frame, top_op, annotation), b_end) AS site
    FROM framed GROUP BY start_ns
),
-- the call with the most of that time, and where it was made in its longest gap
top_call AS (
    SELECT call, arg_max(site, ns) AS site FROM hit GROUP BY call
    ORDER BY sum(ns) DESC, call LIMIT 1
)
SELECT count(*) AS n, coalesce(sum(ns), 0) AS ns, any_value(top_call.call) AS call,
       any_value(top_call.site) AS site
FROM hit LEFT JOIN top_call ON true
"""


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


def drained_by_sync(db: TraceDB, gaps: str, cause: str, t: Thresholds) -> DrainedBySync:
    """The gaps of ``cause`` (a subquery named ``gaps``) a blocking call opened."""
    require(db, BLOCKING_CALLS)
    slack = t.idle_after_sync_ns
    sql = _DRAINED.format(gaps=gaps, thread=with_launching_thread("g", keep_unmatched=False))
    row = db.dicts(sql, [cause, slack, slack])[0]
    return DrainedBySync(int(row["n"]), int(row["ns"]), row["call"], row["site"])
