"""Which part of a device's window is GPU time a user can give back.

The window runs from the first to the last activity on the device, but two kinds of idle
inside it are not a cost of the program's GPU work, and ranking them as such sends the user
after time no change to that work recovers:

- *the capture's start*: a wait on work the trace does not record (the queued work's event
  producer was issued before recording began: no GPU in the trace runs anything during it)
  that comes before (almost) any recorded GPU work. It is how the capture was started, like
  warm-up: a steady-state recording does not contain it.
- *host phases with managed memory*: when unified-memory migrations, which the host's own
  page faults cause, open or close the window, the idle before the first launched work was
  queued (its launch call returned: the host writing managed memory, then a first launch
  loading its module) and after the last launched work ended (the host
  reading results) is the host's time. Nothing was queued on the GPU; the migrations are what
  the program did, and are reported as such.

:func:`claim_of` gives, per device, the range whose idle time counts and what lies outside
it; :mod:`tracelens.analyzers.idle_gpu` judges only the gaps inside it and reports the rest
as information.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import DeviceStats, TraceDB
from tracelens.core.workload import workload_of


@dataclass(frozen=True)
class Claim:
    """The range of a device's window whose idle time is GPU time to give back."""

    device_id: int
    lo_ns: int
    hi_ns: int
    # the wait at the capture's start (gap start/end, next work, its launch), if any
    capture_start: dict[str, Any] | None = None
    # idle outside launched work because migrations open/close the window
    uvm_before_ns: int = 0
    uvm_after_ns: int = 0
    migrations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ns(self) -> int:
        return max(0, self.hi_ns - self.lo_ns)


# Launched work: anything but unified-memory migrations, which no launch call issues.
_LAUNCHED = """
SELECT start_ns, end_ns, correlation_id FROM kernels WHERE device_id = ?
UNION ALL SELECT start_ns, end_ns, correlation_id FROM memcpys
          WHERE device_id = ? AND coalesce(kind, '') NOT LIKE 'UVM%'
UNION ALL SELECT start_ns, end_ns, correlation_id FROM memsets WHERE device_id = ?
"""

_LAUNCH_BOUNDS = f"""
WITH w AS ({_LAUNCHED})
SELECT min(least(w.start_ns, coalesce(a.end_ns, w.start_ns))) AS first_queued_ns,
       max(w.end_ns) AS last_end_ns
FROM w LEFT JOIN api_calls a
  ON a.correlation_id = w.correlation_id AND w.correlation_id IS NOT NULL
 AND w.correlation_id != 0
"""

# The first wait on unrecorded work: queued work waited (gpu_dependency) while no device ran
# anything, and the GPU work of the whole trace before it is a small share of its length.
_CAPTURE_START = """
WITH g AS (
    SELECT start_ns, end_ns, detail, launch_start_ns, launch_end_ns FROM gaps
    WHERE device_id = ? AND cause = 'gpu_dependency' AND end_ns - start_ns >= ?
    ORDER BY start_ns LIMIT 1
),
w AS (SELECT start_ns, end_ns FROM kernels UNION ALL SELECT start_ns, end_ns FROM memcpys
      UNION ALL SELECT start_ns, end_ns FROM memsets)
SELECT g.start_ns, g.end_ns, g.detail, g.launch_start_ns, g.launch_end_ns,
       (SELECT coalesce(sum(least(w.end_ns, g.start_ns) - w.start_ns), 0) FROM w
        WHERE w.start_ns < g.start_ns) AS busy_before_ns,
       (SELECT count(*) FROM w WHERE w.start_ns < g.end_ns AND w.end_ns > g.start_ns)
           AS overlapping
FROM g
"""

_MIGRATIONS = """
SELECT CASE WHEN end_ns <= ? THEN 'before_first_launch' ELSE 'after_last_work' END AS phase,
       kind, count(*) AS n, coalesce(sum(bytes), 0) AS bytes
FROM memcpys WHERE device_id = ? AND kind LIKE 'UVM%' AND (end_ns <= ? OR start_ns >= ?)
GROUP BY ALL ORDER BY phase, kind
"""


def _idle_between(db: TraceDB, device_id: int, lo: int, hi: int) -> int:
    if hi <= lo:
        return 0
    return int(
        db.scalar(
            """SELECT coalesce(sum(least(end_ns, ?) - greatest(start_ns, ?)), 0) FROM gaps
               WHERE device_id = ? AND end_ns > ? AND start_ns < ?""",
            [hi, lo, device_id, lo, hi],
        )
        or 0
    )


def whole_job_recorded(db: TraceDB) -> bool:
    """One process, unfiltered: a wait with no GPU busy then waited on unrecorded work.

    In a job of several ranks the wait is most likely on a peer (a collective), and a
    filtered or sampled capture leaves out work that did run: neither says the producer
    was issued before recording began.
    """
    world = db.info.get("world_size")
    return (world is None or int(world) <= 1) and not workload_of(db).filtered


def _claim(db: TraceDB, dev: DeviceStats, t: Thresholds) -> Claim:
    d = dev.device_id
    lo, hi = dev.start_ns, dev.end_ns
    first_issue, last_end = db.rows(_LAUNCH_BOUNDS, [d, d, d])[0]
    uvm_before = uvm_after = 0
    migrations: list[dict[str, Any]] = []
    has_uvm = bool(
        db.scalar("SELECT count(*) FROM memcpys WHERE device_id = ? AND kind LIKE 'UVM%'", [d])
    )
    if has_uvm:
        # Only migrations bound the window outside these: the host ran, nothing was queued.
        issue = hi if first_issue is None else max(lo, min(hi, int(first_issue)))
        done = issue if last_end is None else max(issue, min(hi, int(last_end)))
        uvm_before = _idle_between(db, d, lo, issue)
        uvm_after = _idle_between(db, d, done, hi)
        if uvm_before or uvm_after:
            migrations = db.dicts(_MIGRATIONS, [issue, d, issue, done])
            lo, hi = issue, done
    capture_start = None
    if whole_job_recorded(db):
        rows = db.dicts(_CAPTURE_START, [d, t.idle_blocked_min_gap_ns])
        if rows:
            g = rows[0]
            length = int(g["end_ns"]) - int(g["start_ns"])
            if (
                int(g["overlapping"]) == 0
                and int(g["busy_before_ns"]) * 100 <= t.idle_capture_start_busy_pct * length
                and int(g["end_ns"]) > lo
            ):
                capture_start = g
                lo = max(lo, int(g["end_ns"]))
    return Claim(d, lo, max(lo, hi), capture_start, uvm_before, uvm_after, migrations)


def claim_of(db: TraceDB, device_id: int, t: Thresholds) -> Claim:
    """The claimable range of ``device_id``'s window (computed once per trace)."""
    key = ("idle_claim", device_id, t.idle_blocked_min_gap_ns, t.idle_capture_start_busy_pct)

    def compute() -> Claim:
        dev = next(x for x in db.devices if x.device_id == device_id)
        return _claim(db, dev, t)

    return db.memo(key, compute)
