"""How much sooner a device's work would end with some kernels faster, the host unchanged.

A kernel finding's impact is its kernels' time beyond an ideal, as if the run ended that
much sooner. Where the GPU waits on the host (a data loader, host code between launches)
a faster kernel only lengthens the wait: a ResNet-50 on a V100 whose steps spend 70 ms in
a `num_workers=0` loader starts nearly every convolution within a millisecond of its
launch, so FP16 convolutions three times faster end each step barely sooner.
:mod:`host_paced` catches the kernels followed directly by such a wait; this replays the
whole device instead.

Each item of the device's work (kernels, copies, memsets) is released when its launch call
returned (its recorded start where no call is recorded, or where the call returned
later) and runs for its duration after the previous one, in recorded start order:
``end_i = max(release_i, end_(i-1)) + dur_i``, which is ``S_i + max_(j<=i)(release_j -
S_(j-1))`` with ``S`` the running sum of durations, so it runs as window functions. The
host's blocking calls that waited at least ``idle_drain_min_wait_ns`` split the timeline
into segments: the host returns from one as soon as the GPU work before it is done, so
every later launch moves as much earlier, and each segment's saving adds to the run's.
The replay is the recorded run's critical path with the host's own time held; the saving
of a finding is the replay's end with its kernels as recorded less its end with them at
the finding's ideal.

Items on several streams are replayed one after another, which makes the GPU look busier
than it was: the saving is then too large, never too small, so used as a cap on an
impact it only ever lowers one that cannot come back in this run.
"""

from __future__ import annotations

from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.blocking_calls import BLOCKING_CALLS

# ``{sel}`` selects the faster kernels as (device_id, start_ns, end_ns); parameters: the
# selection's, the least wait of a blocking call that splits the timeline, then the share
# of their time the faster kernels keep.
_REPLAY = """
WITH subj AS (SELECT DISTINCT device_id, start_ns, end_ns FROM ({sel})),
devs AS (SELECT DISTINCT device_id FROM subj),
work AS (
    SELECT device_id, start_ns, end_ns, correlation_id FROM kernels
    WHERE device_id IN (SELECT device_id FROM devs)
    UNION ALL
    SELECT device_id, start_ns, end_ns, correlation_id FROM memcpys
    WHERE device_id IN (SELECT device_id FROM devs)
    UNION ALL
    SELECT device_id, start_ns, end_ns, correlation_id FROM memsets
    WHERE device_id IN (SELECT device_id FROM devs)
),
calls AS (SELECT correlation_id, max(end_ns) AS end_ns FROM api_calls GROUP BY correlation_id),
barriers AS (
    SELECT end_ns, row_number() OVER (ORDER BY end_ns) AS seg FROM blocking_calls
    WHERE end_ns - start_ns >= ?
),
items AS (
    SELECT w.device_id, w.start_ns, w.end_ns - w.start_ns AS dur,
           least(w.start_ns, coalesce(c.end_ns, w.start_ns)) AS release,
           s.device_id IS NOT NULL AS faster
    FROM work w LEFT JOIN calls c USING (correlation_id)
    LEFT JOIN subj s ON s.device_id = w.device_id AND s.start_ns = w.start_ns
     AND s.end_ns = w.end_ns
),
segmented AS (
    SELECT i.*, coalesce(b.seg, 0) AS seg,
           CASE WHEN faster THEN dur * ?::DOUBLE ELSE dur END AS dur1
    FROM items i ASOF LEFT JOIN barriers b ON i.release >= b.end_ns
),
summed AS (
    SELECT *, sum(dur) OVER w AS s0, sum(dur1) OVER w AS s1 FROM segmented
    WINDOW w AS (PARTITION BY device_id, seg ORDER BY start_ns, dur
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
ran AS (
    SELECT device_id, seg, s0 + max(release - (s0 - dur)) OVER w AS end0,
           s1 + max(release - (s1 - dur1)) OVER w AS end1
    FROM summed
    WINDOW w AS (PARTITION BY device_id, seg ORDER BY start_ns, dur
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
SELECT coalesce(sum(e0 - e1), 0) FROM (
    SELECT max(end0) AS e0, max(end1) AS e1 FROM ran GROUP BY device_id, seg
)
"""


def host_waits_recorded(db: TraceDB, sel: str, params: list[object]) -> bool:
    """Whether the idle time of the devices of the kernels ``sel`` selects is mostly on
    recorded host work (a loader, operators, allocations, syncs). Holding the launches
    where they were claims the host was busy: where the waits are mostly time nothing
    recorded explains, the host may have waited on the GPU in a call the trace lacks, and
    faster kernels would bring its launches forward."""
    untraced, host_side = db.rows(
        f"""SELECT coalesce(sum(end_ns - start_ns) FILTER (WHERE cause = 'untraced'), 0),
                   coalesce(sum(end_ns - start_ns)
                            FILTER (WHERE cause <> 'gpu_dependency'), 0)
            FROM gaps WHERE device_id IN (SELECT DISTINCT device_id FROM ({sel}))""",
        params,
    )[0]
    return 2 * int(untraced) < int(host_side)


def replay_saving(
    db: TraceDB, sel: str, params: list[object], keep: float, min_wait_ns: int
) -> int:
    """How much sooner the devices of the kernels ``sel`` selects end their work with those
    kernels at ``keep`` of their recorded time, the host's launches held (see the module)."""
    require(db, BLOCKING_CALLS)
    got = db.scalar(_REPLAY.format(sel=sel), [*params, min_wait_ns, keep])
    return max(0, int(got or 0))
