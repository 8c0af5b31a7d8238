"""A note where the recording opens on a GPU still busy with work issued before it.

The analysed window starts at a device's first recorded work. Where that work's launch
call returned long before it started, and nothing recorded ran on the device before it,
the GPU was busy with work the recording does not hold (the previous engine step, an
earlier pass): the host was that far ahead of it. A vLLM decode capture on an MI300X issues
the step's first copy 7.8 ms before it runs: the step is GPU-bound, and the host's time
is not where it goes. The report says so once; no finding, since nothing in the window is
idle for it.
"""

from __future__ import annotations

from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns

# A first launch this far ahead of its work is the GPU busy elsewhere, not launch latency
# (tens of microseconds) or a slow copy's staging.
_MIN_LEAD_NS = 1_000_000

# Each device's first recorded work item, the launch call that issued it, and how long
# before the item started that call returned.
_FIRST_WORK = """
WITH work AS (
    SELECT device_id, start_ns, correlation_id, 'kernel' AS what FROM kernels
    UNION ALL SELECT device_id, start_ns, correlation_id, 'copy' FROM memcpys
    UNION ALL SELECT device_id, start_ns, correlation_id, 'memset' FROM memsets
),
first AS (
    SELECT device_id, arg_min(correlation_id, start_ns) AS correlation_id,
           arg_min(what, start_ns) AS what, min(start_ns) AS start_ns
    FROM work GROUP BY device_id
)
SELECT f.device_id, f.what, a.name, f.start_ns - a.end_ns AS lead_ns
FROM first f JOIN api_calls a USING (correlation_id)
WHERE f.start_ns - a.end_ns >= ?
ORDER BY f.device_id
"""


def queued_at_start_notes(db: TraceDB) -> list[str]:
    """One note per device whose first recorded work waited on work the recording lacks."""
    return [
        f"GPU {dev}'s first recorded work (a {what}, from `{call}`) started {fmt_ns(lead)} "
        "after its call returned, with nothing recorded running before it: the GPU was "
        "still busy with work issued before the recording began, the host that far ahead "
        "of it. The window starts at that work; where this holds through the run, the GPU "
        "paces it and the host is not the lever."
        for dev, what, call, lead in db.rows(_FIRST_WORK, [_MIN_LEAD_NS])
    ]
