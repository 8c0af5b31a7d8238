"""What the cross-rank analyses need from one rank, taken while its database is open.

A collective is one NCCL/RCCL kernel; its *key* is its kind and its ordinal among that
kind's kernels on the rank (the i-th all_reduce), which is how the same collective is found
on every rank without a sequence number in the trace. The kind is the collective of the
call that launched the kernel, as the rank's report names it (NCCL runs most collectives
as ``ncclKernel_SendRecv_*`` kernels, so the kernel name alone would make every one a
SendRecv); the kernel name's where no call is recorded. For each collective the extract
keeps what the rank did since its previous one: GPU compute time and idle time, and the
idle time's leading cause, so a late rank's reason is known without its tables.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from tracelens.analyzers.communication import (
    collective_kernels,
    comm_kernel_sql,
    kernel_collectives_sql,
)
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import workload_of

_COMM = comm_kernel_sql()

# Collective kernels in launch order with their kind, and the work since the previous one
# on the same device: compute-kernel time (union not needed: a sum of kernels on one
# device is the GPU time they held) and idle gaps by cause. One device at a time ($1).
#
# The time of intervals (kernels, gaps) inside [since, start) is F(start) - F(since), with
# F(t) the time they held before t: t * (how many began before t) - (the sum of those
# beginnings) - the same for their ends. Each term is a running count and sum found by an
# ASOF join, so the query is sorts and merges: an interval join would compare every
# kernel with every collective (seconds on a 100 MB rank). Exact integers (HUGEINT).
_RUNNING = """{name} AS (
    SELECT t, sum(n) OVER (ORDER BY t) AS n, sum(st) OVER (ORDER BY t) AS st
    FROM (SELECT {col} AS t, count(*) AS n, sum({col}::HUGEINT) AS st
          FROM {table} GROUP BY 1)
)"""


def _held(at: str, prefix: str) -> str:
    """F(``at``) from the running tables ``{prefix}s`` (beginnings) and ``{prefix}e`` (ends)
    joined as ``{prefix}s_{at}`` / ``{prefix}e_{at}``."""
    s, e = f"{prefix}s_{at}", f"{prefix}e_{at}"
    return (
        f"(od.{at}::HUGEINT * coalesce({s}.n, 0) - coalesce({s}.st, 0)"
        f" - od.{at}::HUGEINT * coalesce({e}.n, 0) + coalesce({e}.st, 0))"
    )


def _joins(prefix: str) -> str:
    return " ".join(
        f"ASOF LEFT JOIN {prefix}{x} {prefix}{x}_{at} ON od.{at} > {prefix}{x}_{at}.t"
        for at in ("start_ns", "since_ns")
        for x in ("s", "e")
    )


_COLLECTIVES = f"""
WITH c AS (
    SELECT device_id, start_ns, end_ns,
           coalesce(collective,
               nullif(regexp_extract(name,
                   'ncclKernel_([A-Za-z]+)|nccl(?:DevKernel_)?([A-Za-z]+)', 1), ''),
               nullif(regexp_extract(name, 'nccl(?:DevKernel_)?([A-Za-z]+)', 1), ''),
               'collective') AS kind
    FROM ({kernel_collectives_sql()})
), o AS (
    SELECT *, row_number() OVER (PARTITION BY kind ORDER BY start_ns, end_ns) - 1 AS ordinal,
           coalesce(lag(end_ns) OVER (PARTITION BY device_id ORDER BY start_ns, end_ns),
                    (SELECT min(start_ns) FROM kernels)) AS since_ns
    FROM c
), od AS (
    SELECT * FROM o WHERE device_id = $1
), k AS (
    SELECT start_ns, end_ns FROM kernels WHERE device_id = $1 AND NOT {_COMM}
), g AS (
    SELECT start_ns, end_ns, cause FROM gaps WHERE device_id = $1
),
{_RUNNING.format(name="ks", col="start_ns", table="k")},
{_RUNNING.format(name="ke", col="end_ns", table="k")},
{_RUNNING.format(name="gs", col="start_ns", table="g")},
{_RUNNING.format(name="ge", col="end_ns", table="g")},
held AS (
    SELECT od.kind, od.ordinal,
           {_held("start_ns", "k")} - {_held("since_ns", "k")} AS compute_ns,
           {_held("start_ns", "g")} - {_held("since_ns", "g")} AS idle_ns
    FROM od {_joins("k")} {_joins("g")}
),
-- a gap is idle time, so no collective runs during it: it lies in one interval at most,
-- the one of the first collective starting at or after its end
cause AS (
    SELECT kind, ordinal, arg_max(cause, ov) AS cause FROM (
        SELECT od.kind, od.ordinal, g.cause,
               least(g.end_ns, od.start_ns) - greatest(g.start_ns, od.since_ns) AS ov
        FROM g ASOF JOIN od ON g.end_ns <= od.start_ns
    ) WHERE ov > 0 GROUP BY kind, ordinal
)
SELECT od.kind, od.ordinal, od.device_id, od.start_ns, od.end_ns, od.since_ns,
       CAST(held.compute_ns AS BIGINT) AS compute_ns, CAST(held.idle_ns AS BIGINT) AS idle_ns,
       cause.cause AS idle_cause
FROM od JOIN held USING (kind, ordinal) LEFT JOIN cause USING (kind, ordinal)
"""

_OPS = f"""
SELECT op_name, sum(dur_ns) AS ns FROM kernel_ops
WHERE NOT {comm_kernel_sql("kernel_name")} AND op_name IS NOT NULL
GROUP BY op_name ORDER BY ns DESC, op_name LIMIT 200
"""


@dataclass(frozen=True)
class Collective:
    kind: str
    ordinal: int
    device_id: int
    start_ns: int
    end_ns: int
    since_ns: int  # end of the rank's previous collective (or its first kernel)
    compute_ns: int  # compute-kernel time since then
    idle_ns: int  # GPU idle time since then
    idle_cause: str | None  # the cause of most of that idle time

    @property
    def key(self) -> tuple[str, int]:
        return (self.kind, self.ordinal)


@dataclass(frozen=True)
class SmallCollectives:
    """A rank's collectives under the small-message size (``comm_small_collective_bytes``)."""

    count: int
    kernel_ns: int  # their kernel time
    exposed_ns: int  # the part of it no compute kernel overlaps
    bytes: int
    median_ns: int  # one small collective's median kernel time: its latency, near enough
    steps: int  # profiler steps their launches fell in (0: the trace has none)
    kinds: tuple[str, ...]  # their collectives, most frequent first
    best_large_gbps: float | None  # the best bytes/ns of this rank's large collectives


@dataclass
class RankExtract:
    rank: int
    path: Path
    report: dict[str, Any]  # the rank's own report (JSON dict)
    collectives: list[Collective] = field(default_factory=list)
    op_ns: dict[str, int] = field(default_factory=dict)  # compute kernel time per operator
    idle_ns_by_cause: dict[str, int] = field(default_factory=dict)
    compute_ns: int = 0
    comm_ns: int = 0
    exposed_comm_ns: int = 0
    # Kineto's baseTimeNanoseconds: the realtime instant its (relative) times count from
    base_time_ns: int | None = None
    t0_ns: int | None = None  # the earliest recorded time, to tell relative times from epoch
    small: SmallCollectives | None = None  # None: no collective with a known size
    # The trace kept a sample of its launches (``Workload.sampled_calls``): its compute and
    # idle time are those of the kept kernels, not the rank's.
    sampled: bool = False


def extract(
    db: TraceDB, rank: int, path: Path, report: dict[str, Any], t: Thresholds | None = None
) -> RankExtract:
    """The cross-rank view of one loaded rank (its ``report`` already built)."""
    from tracelens.derived import require
    from tracelens.derived.kernel_ops import KERNEL_OPS

    out = RankExtract(rank=rank, path=path, report=report)
    out.sampled = workload_of(db).sampled_calls is not None
    info = db.info
    out.base_time_ns = _int_or_none(info.get("base_time_ns"))
    out.t0_ns = _int_or_none(info.get("t0_ns"))
    out.collectives = [
        Collective(
            kind=str(r[0]),
            ordinal=int(r[1]),
            device_id=int(r[2]),
            start_ns=int(r[3]),
            end_ns=int(r[4]),
            since_ns=int(r[5]),
            compute_ns=int(r[6]),
            idle_ns=int(r[7]),
            idle_cause=r[8],
        )
        for (dev,) in db.rows(f"SELECT DISTINCT device_id FROM kernels WHERE {_COMM}")
        for r in db.rows(_COLLECTIVES, [dev])
    ]
    out.collectives.sort(key=lambda c: (c.start_ns, c.kind, c.device_id))
    require(db, KERNEL_OPS)
    out.op_ns = {str(name): int(ns) for name, ns in db.rows(_OPS)}
    out.idle_ns_by_cause = {
        str(c): int(ns)
        for c, ns in db.rows(
            "SELECT cause, sum(end_ns - start_ns) FROM gaps GROUP BY cause ORDER BY cause"
        )
    }
    comp, comm = db.rows(
        f"""SELECT coalesce(sum(end_ns - start_ns) FILTER (WHERE NOT {_COMM}), 0),
                   coalesce(sum(end_ns - start_ns) FILTER (WHERE {_COMM}), 0) FROM kernels"""
    )[0]
    out.compute_ns, out.comm_ns = int(comp), int(comm)
    # The communication analyzer's exposed time per device: its overlap finding carries the
    # total, the waiting-for-peers finding a part of it, so the larger is the total.
    exposed: dict[int, int] = {}
    for f in report["findings"]:
        ev = f["evidence"]
        if f["analyzer"] == "communication" and "exposed_ns" in ev:
            dev = int(ev.get("device_id", 0))
            exposed[dev] = max(exposed.get(dev, 0), int(ev["exposed_ns"]))
    out.exposed_comm_ns = sum(exposed.values())
    if out.comm_ns:
        out.small = _small_collectives(db, (t or Thresholds()).comm_small_collective_bytes)
    return out


def _small_collectives(db: TraceDB, limit: int) -> SmallCollectives | None:
    rows = [
        k
        for (dev,) in db.rows(f"SELECT DISTINCT device_id FROM kernels WHERE {_COMM} ORDER BY 1")
        for k in collective_kernels(db, int(dev))
    ]
    sized = [k for k in rows if k["bytes"] is not None]
    if not sized:
        return None
    small = [k for k in sized if k["bytes"] < limit]
    large = [k["bytes"] / k["d"] for k in sized if k["bytes"] >= limit and k["d"] > 0]
    kinds = Counter(str(k["coll"]) for k in small)
    return SmallCollectives(
        count=len(small),
        kernel_ns=sum(int(k["d"]) for k in small),
        exposed_ns=sum(max(0, int(k["exposed"])) for k in small),
        bytes=sum(int(k["bytes"]) for k in small),
        median_ns=int(median(int(k["d"]) for k in small)) if small else 0,
        steps=len({k["step"] for k in small if k["step"] is not None}),
        kinds=tuple(k for k, _ in kinds.most_common()),
        best_large_gbps=max(large) if large else None,
    )


def _int_or_none(value: object) -> int | None:
    """Trace facts are text; an epoch in ns needs exact integer parsing (a float would
    round it by up to 128 ns)."""
    if value in (None, "", "None"):
        return None
    text = str(value)
    try:
        return int(text)
    except ValueError:
        try:
            return int(float(text))
        except ValueError:
            return None
