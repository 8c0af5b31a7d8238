"""What an enriched trace adds to the original: the findings as slices, and counters.

Everything goes into one extra process, "tracelens findings", so viewers show it as its
own group beside the trace's processes:

- one complete event ("X") per time range of a finding, named by the finding's title,
  with its id, severity, impact and permalink in ``args``. A viewer nests a thread's
  slices and drops ones that overlap without nesting, so each finding's ranges are packed
  into as few threads as keep them disjoint; a thread is named by its finding.
- counter events ("C"): each GPU's busy share (the union of its kernels' time, as the
  timeline's selected stretch counts it) per bucket of the trace, and each device's
  allocated and reserved memory where the trace recorded the allocator.

Text from the report passes through :func:`ingest.redaction.redact` again: the report
is redacted when it is built, and what leaves the service in a file is checked twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb

from ingest.redaction import redact
from tracelens.core.interval_sql import merged
from tracelens.core.units import fmt_ns
from web.chrome_event import chrome_event

# Beyond any operating system's process id (Linux's pid_max is at most 2**22) and any
# device index, so it never joins one of the trace's own processes; within 32 bits.
FINDINGS_PID = 2_000_000_000
PROCESS_NAME = "tracelens findings"
FINDING_CATEGORY = "tracelens.finding"
COUNTER_CATEGORY = "tracelens.counter"
# Buckets of the trace for the counters: the timeline's coarse level is 16,384, but a
# counter per bucket per device in a download needs far fewer to read at any zoom.
COUNTER_BUCKETS = 2000
_MIB = 1024 * 1024


def finding_events(findings: list[dict[str, Any]], permalink: Callable[[str], str]) -> list[bytes]:
    """The findings process: its name, a thread per lane of a finding, a slice per range."""
    events = [
        chrome_event(
            {"ph": "M", "name": "process_name", "pid": FINDINGS_PID, "args": {"name": PROCESS_NAME}}
        ),
        chrome_event(
            {
                "ph": "M",
                "name": "process_sort_index",
                "pid": FINDINGS_PID,
                "args": {"sort_index": -1},
            }
        ),
    ]
    tid = 0
    for f in findings:
        ranges = sorted(
            (int(r["start_ns"]), int(r["end_ns"]), r)
            for r in f.get("time_ranges") or []
            if r.get("start_ns") is not None
            and r.get("end_ns") is not None
            and int(r["end_ns"]) >= int(r["start_ns"])
        )
        if not ranges:
            continue
        title = str(redact(f["title"]))
        args = redact(
            {
                "id": f["id"],
                "severity": f["severity"],
                "impact": f"{fmt_ns(f['impact_ns'])} ({f['impact_pct']:.1f} % of the window)",
                "impact_ns": int(f["impact_ns"]),
                "analyzer": f["analyzer"],
                "summary": f["summary"],
                "permalink": permalink(f["id"]),
            }
        )
        lane_ends: list[int] = []  # per lane of this finding, where its last slice ends
        lane_tids: list[int] = []
        for start, end, r in ranges:
            lane = next((i for i, e in enumerate(lane_ends) if e <= start), None)
            if lane is None:
                tid += 1
                lane = len(lane_ends)
                lane_ends.append(end)
                lane_tids.append(tid)
                name = f"{f['severity']}: {title}" + (f" ({lane + 1})" if lane else "")
                events.append(
                    chrome_event(
                        {
                            "ph": "M",
                            "name": "thread_name",
                            "pid": FINDINGS_PID,
                            "tid": tid,
                            "args": {"name": name},
                        }
                    )
                )
                events.append(
                    chrome_event(
                        {
                            "ph": "M",
                            "name": "thread_sort_index",
                            "pid": FINDINGS_PID,
                            "tid": tid,
                            "args": {"sort_index": tid},
                        }
                    )
                )
            lane_ends[lane] = end
            extra = {k: r[k] for k in ("label", "device_id") if r.get(k) is not None}
            events.append(
                chrome_event(
                    {
                        "ph": "X",
                        "cat": FINDING_CATEGORY,
                        "name": title,
                        "pid": FINDINGS_PID,
                        "tid": lane_tids[lane],
                        "args": {**args, **redact(extra)},
                    },
                    start,
                    end - start,
                )
            )
    return events


def counter_events(cur: duckdb.DuckDBPyConnection, t0_ns: int, span_ns: int) -> list[bytes]:
    """Each GPU's busy % and each device's memory per bucket of ``[t0, t0 + span]``."""
    width = max(1000, -(-max(1, span_ns) // COUNTER_BUCKETS))
    params = {"t0": t0_ns, "w": width}
    union = merged(
        "SELECT device_id, start_ns, end_ns FROM kernels"
        " WHERE device_id IS NOT NULL AND end_ns > start_ns"
    )
    busy = cur.execute(
        f"""
        WITH m AS (SELECT device_id AS d, start_ns AS s, end_ns AS e FROM {union}),
             b AS (SELECT d, s, e,
                          unnest(range((s - $t0) // $w, (e - 1 - $t0) // $w + 1)) AS i
                   FROM m)
        SELECT d, i, sum(least(e, $t0 + (i + 1) * $w) - greatest(s, $t0 + i * $w))
        FROM b GROUP BY d, i ORDER BY d, i
        """,
        params,
    ).fetchall()
    events: list[bytes] = []
    by_device: dict[int, list[tuple[int, float]]] = {}
    for d, i, ns in busy:
        by_device.setdefault(int(d), []).append((int(i), round(100.0 * int(ns) / width, 1)))
    for d, points in by_device.items():
        events += _series(f"GPU {d} busy", "%", points, t0_ns, width)
    memory = cur.execute(
        """
        SELECT device_id, (ts_ns - $t0) // $w AS i, max(total_allocated), max(total_reserved)
        FROM memory_events WHERE device_id IS NOT NULL
        GROUP BY device_id, i ORDER BY device_id, i
        """,
        params,
    ).fetchall()
    allocated: dict[int, list[tuple[int, float]]] = {}
    reserved: dict[int, list[tuple[int, float]]] = {}
    for d, i, a, r in memory:
        if a is not None:
            allocated.setdefault(int(d), []).append((int(i), round(int(a) / _MIB, 1)))
        if r is not None:
            reserved.setdefault(int(d), []).append((int(i), round(int(r) / _MIB, 1)))
    for d in sorted(set(allocated) | set(reserved)):
        device = "host" if d < 0 else f"GPU {d}"
        # memory holds its value between events: no drop to zero between buckets
        events += _series(
            f"{device} memory allocated", "MiB", allocated.get(d, []), t0_ns, width, hold=True
        )
        events += _series(
            f"{device} memory reserved", "MiB", reserved.get(d, []), t0_ns, width, hold=True
        )
    return events


def _series(
    name: str,
    unit: str,
    points: list[tuple[int, float]],
    t0_ns: int,
    width: int,
    hold: bool = False,
) -> list[bytes]:
    """Counter events for ``points`` (bucket, value): a value where it changes; without
    ``hold``, a bucket missing from ``points`` is zero."""
    out: list[bytes] = []
    last: float | None = None
    prev_i: int | None = None

    def emit(i: int, value: float) -> None:
        nonlocal last
        if value != last:
            out.append(
                chrome_event(
                    {
                        "ph": "C",
                        "cat": COUNTER_CATEGORY,
                        "name": name,
                        "pid": FINDINGS_PID,
                        "args": {unit: value},
                    },
                    t0_ns + i * width,
                )
            )
            last = value

    if not hold and points and points[0][0] > 0:
        emit(0, 0.0)
    for i, value in points:
        if not hold and prev_i is not None and i > prev_i + 1:
            emit(prev_i + 1, 0.0)
        emit(i, value)
        prev_i = i
    if not hold and prev_i is not None:
        emit(prev_i + 1, 0.0)
    return out
