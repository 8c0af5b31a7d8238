"""What a selected stretch of the timeline holds: its kernel time and GPU busy share.

Per device: kernels overlapping ``[start_ns, end_ns)`` (ns since the timeline's
``t0_ns``), their time clipped to it, and the union of that time (busy: concurrent
kernels on several streams count once), as a share of the stretch.
"""

from __future__ import annotations

from typing import Any

import duckdb


def range_summary(
    con: duckdb.DuckDBPyConnection, meta: dict[str, Any], start_ns: int, end_ns: int
) -> dict[str, Any]:
    t0 = int(meta["t0_ns"])
    s, e = t0 + max(0, start_ns), t0 + max(start_ns + 1, end_ns)
    rows = con.execute(
        """
        WITH k AS (SELECT device_id, greatest(start_ns, $s) AS s, least(end_ns, $e) AS e
                   FROM kernels WHERE start_ns < $e AND end_ns > $s AND device_id IS NOT NULL),
             o AS (SELECT *, max(e) OVER (PARTITION BY device_id ORDER BY s, e ROWS BETWEEN
                                          UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
                   FROM k)
        SELECT device_id, count(*), sum(e - s),
               sum(greatest(0, e - greatest(s, coalesce(before, s))))
        FROM o GROUP BY device_id ORDER BY device_id
        """,
        {"s": s, "e": e},
    ).fetchall()
    length = e - s
    devices = [
        {
            "device_id": int(d),
            "kernels": int(n),
            "kernel_ns": int(k),
            "busy_ns": int(b),
            "busy_pct": round(100.0 * int(b) / length, 2),
        }
        for d, n, k, b in rows
    ]
    return {
        "start_ns": s - t0,
        "end_ns": e - t0,
        "length_ns": length,
        "kernels": sum(d["kernels"] for d in devices),
        "kernel_ns": sum(d["kernel_ns"] for d in devices),
        "devices": devices,
    }
