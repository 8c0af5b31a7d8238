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

# The recorded run, replayed once per trace and barrier threshold: each item of every
# device's work with its release, its segment (the blocking calls that waited at least
# the threshold split the timeline) and its place in the segment's recorded order, with
# the running sum of durations before the faster kernels change any (``s0``). Releases
# count from the first item's start: the faster kernels' sums are floating point, which
# at epoch-scale nanoseconds (~1.7e18) would round to 256 ns.
_BASE = """
CREATE OR REPLACE TEMP TABLE {name} AS
WITH work AS (
    SELECT device_id, start_ns, end_ns, correlation_id FROM kernels WHERE device_id IS NOT NULL
    UNION ALL
    SELECT device_id, start_ns, end_ns, correlation_id FROM memcpys WHERE device_id IS NOT NULL
    UNION ALL
    SELECT device_id, start_ns, end_ns, correlation_id FROM memsets WHERE device_id IS NOT NULL
),
calls AS (SELECT correlation_id, max(end_ns) AS end_ns FROM api_calls GROUP BY correlation_id),
barriers AS (
    SELECT end_ns, row_number() OVER (ORDER BY end_ns) AS seg FROM blocking_calls
    WHERE end_ns - start_ns >= {min_wait}
),
t0 AS (SELECT coalesce(min(start_ns), 0) AS t0 FROM work),
items AS (
    SELECT w.device_id, w.start_ns, w.end_ns, w.end_ns - w.start_ns AS dur,
           least(w.start_ns, coalesce(c.end_ns, w.start_ns)) AS release
    FROM work w LEFT JOIN calls c USING (correlation_id)
),
segmented AS (
    SELECT i.*, coalesce(b.seg, 0) AS seg
    FROM items i ASOF LEFT JOIN barriers b ON i.release >= b.end_ns
)
SELECT device_id, seg, start_ns, end_ns, dur, release - t0 AS release,
       row_number() OVER w AS rn, sum(dur) OVER w AS s0
FROM segmented, t0
WINDOW w AS (PARTITION BY device_id, seg ORDER BY start_ns, dur, release
             ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
"""

# ``{sel}`` selects the faster kernels as (device_id, start_ns, end_ns); parameters: the
# selection's, then the share of their time the faster kernels keep. Only the segments
# that hold a faster kernel end sooner. A segment's last item ends at
# ``S_n + max_j(release_j - S_(j-1))``: durations are never negative (both readers drop
# such rows), so the running sum and the running maximum only grow and the last row's
# end is the segment's, an aggregate instead of a second window.
_REPLAY = """
WITH subj AS (SELECT DISTINCT device_id, start_ns, end_ns FROM ({sel})),
marked AS (
    SELECT b.device_id, b.seg, b.rn, b.dur, b.release, b.s0,
           s.device_id IS NOT NULL AS faster
    FROM {base} b LEFT JOIN subj s ON s.device_id = b.device_id AND s.start_ns = b.start_ns
     AND s.end_ns = b.end_ns
),
touched AS (SELECT DISTINCT device_id, seg FROM marked WHERE faster),
items AS (
    SELECT m.*, CASE WHEN faster THEN dur * ?::DOUBLE ELSE dur END AS dur1
    FROM marked m SEMI JOIN touched t ON m.device_id = t.device_id AND m.seg = t.seg
),
summed AS (
    SELECT *, sum(dur1) OVER (PARTITION BY device_id, seg ORDER BY rn
                              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS s1
    FROM items
)
SELECT coalesce(sum(e0 - e1), 0) FROM (
    SELECT max(s0) + max(release - (s0 - dur)) AS e0,
           max(s1) + max(release - (s1 - dur1)) AS e1
    FROM summed GROUP BY device_id, seg
)
"""


def _base_table(db: TraceDB, min_wait_ns: int) -> str:
    """The recorded run's replay (:data:`_BASE`) as a temporary table, built once per trace
    and threshold: every replay reads the same joins and order, only the faster kernels
    differ."""

    def build() -> str:
        require(db, BLOCKING_CALLS)
        name = f"launch_replay_{int(min_wait_ns)}"
        db.con.execute(_BASE.format(name=name, min_wait=int(min_wait_ns)))
        return name

    return db.memo(("launch_replay", int(min_wait_ns)), build)


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
    base = _base_table(db, min_wait_ns)
    got = db.scalar(_REPLAY.format(sel=sel, base=base), [*params, keep])
    return max(0, int(got or 0))
