"""Each idle gap with the thread that issued the work ending it, as SQL.

A gap's ``launch_start_ns`` is the start of the launch call of the first work after it;
that call's (pid, tid) is the thread whose host time the gap's host part is. Two readings
use it: what that thread ran in the gap (idle_gpu's host parts) and whether it sat in a
blocking call as the GPU ran dry (drained_by_sync).
"""

from __future__ import annotations


def with_launching_thread(gaps: str, *, keep_unmatched: bool) -> str:
    """Two CTEs to follow a ``WITH`` clause that defines ``gaps`` (a CTE with a
    ``launch_start_ns`` column): ``t`` (each launch call's thread) and ``gt`` (``gaps``'
    rows with ``pid`` and ``tid``). A gap whose launch call is not in ``api_calls`` is kept
    with NULL thread where ``keep_unmatched``, else dropped."""
    join = "LEFT JOIN" if keep_unmatched else "JOIN"
    return f"""t AS (SELECT start_ns, any_value(pid) AS pid, any_value(tid) AS tid FROM api_calls
      WHERE start_ns IN (SELECT launch_start_ns FROM {gaps}) GROUP BY start_ns),
gt AS (SELECT {gaps}.*, t.pid, t.tid FROM {gaps} {join} t
       ON t.start_ns = {gaps}.launch_start_ns)"""
