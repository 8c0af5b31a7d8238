"""Communication/computation overlap: NCCL time, how much of it compute hides, bandwidth.

NCCL kernels (names matching ``nccl``) are the communication; every other kernel is
compute. Per device, the union of communication intervals minus its intersection with the
union of compute intervals is the *exposed* communication: time the GPU only communicates.
Overlapped communication is free; exposed communication is what better overlap (DDP
bucketing, FSDP prefetch, async collectives) can give back, so it is the impact.

Each NCCL kernel is matched to the collective call that launched it (the profiler's
``record_param_comms`` operator enclosing the launch, with element count, dtype and group
size), giving per-collective message sizes and achieved bandwidth (algorithm bandwidth =
bytes / kernel time, the bytes being an all-gather's output and a reduce-scatter's input,
as nccl-tests count them; bus bandwidth scales it by 2(n-1)/n for all-reduce, (n-1)/n for
all-gather/reduce-scatter, as nccl-tests report it).

A collective kernel starts when its own rank launches it and ends only after every peer
has joined, so its duration is transfer plus *waiting for peers*. The transfer part of each
kernel is estimated as its bytes at the best bandwidth this rank reached for that collective
(for kernels without sizes, the fastest instance of the same kernel and launch
configuration); the rest is waiting: load imbalance between ranks, not slow communication.
Of each kernel's exposed time, waiting claims its share first; the exposed-communication
finding keeps the rest, so the two never add up to more than the NCCL time. Waiting is
reported with the steps where it happened.
"""

from __future__ import annotations

from ingest.profiler_steps import STEP_INTERVALS
from tracelens.analyzers.contract import finding
from tracelens.core.findings import Finding, TimeRange
from tracelens.core.interval_sql import covered, covered_at, merged
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_bytes, fmt_ns
from tracelens.core.workload import Workload, workload_of

ANALYZER = "communication"


def comm_kernel_sql(column: str = "name") -> str:
    """The SQL predicate of an NCCL/RCCL kernel on ``column`` (shared with cross-rank code)."""
    return f"({column} ILIKE '%nccl%' OR {column} ILIKE '%rccl%')"


_COMM = comm_kernel_sql()
_COMM_K = comm_kernel_sql("k.name")

# Bytes per element of the dtype names the profiler writes.
_DTYPE_BYTES = """CASE lower(dtype)
    WHEN 'float' THEN 4 WHEN 'float32' THEN 4 WHEN 'int' THEN 4 WHEN 'int32' THEN 4
    WHEN 'double' THEN 8 WHEN 'long' THEN 8 WHEN 'int64' THEN 8 WHEN 'float64' THEN 8
    WHEN 'half' THEN 2 WHEN 'bfloat16' THEN 2 WHEN 'float16' THEN 2 WHEN 'short' THEN 2
    WHEN 'byte' THEN 1 WHEN 'char' THEN 1 WHEN 'bool' THEN 1 WHEN 'uint8' THEN 1
    WHEN 'int8' THEN 1 WHEN 'unsigned char' THEN 1 WHEN 'signed char' THEN 1
    WHEN 'c10::half' THEN 2 WHEN 'c10::bfloat16' THEN 2 WHEN 'unsigned short' THEN 2
    WHEN 'unsigned int' THEN 4 WHEN 'unsigned long' THEN 8 WHEN 'long int' THEN 8
    WHEN 'float8_e4m3fn' THEN 1 WHEN 'float8_e5m2' THEN 1 END"""


# An all-gather's recorded input is one rank's shard (its output is the group size times
# that); ``c10d::_allgather_base_`` records the output tensor as its first argument.
_IS_ALL_GATHER = "replace(lower(o.collective), '_', '') LIKE '%allgather%'"
_FIRST_NUMEL = (
    "TRY_CAST(list_reduce(TRY_CAST({0} AS BIGINT[][])[{1}], lambda x, y: x * y) AS BIGINT)"
)
_GATHER_OUT = _FIRST_NUMEL.format("g.input_shapes", 1)
_GATHER_IN = _FIRST_NUMEL.format("g.input_shapes", 2)

# Each collective call's bytes moved per rank, as nccl-tests count them for its algorithm
# bandwidth: the output of an all-gather (the input of a reduce-scatter, the buffer of an
# all-reduce, the send buffer of an all-to-all). Kineto's ``nccl:_all_gather_base`` range
# records only the input shard, so an all-gather takes its output from ``Out msg nelems``,
# the input times the group size, or the enclosing ``c10d::_allgather_base_`` operator's
# output tensor, in that order; without any of them its size is unknown (NULL), not a
# group-size-fold undercount. The group size, where not recorded, follows from that
# operator's output over its input.
_COMM_SIZES = f"""
SELECT o.pid, o.tid, o.start_ns, o.end_ns, o.collective, o.dtype,
       coalesce(o.group_size,
                CASE WHEN {_IS_ALL_GATHER} AND {_GATHER_IN} > 0
                     THEN ({_GATHER_OUT} // {_GATHER_IN})::INTEGER END) AS group_size,
       CASE WHEN {_IS_ALL_GATHER}
            THEN coalesce(o.out_nelems, o.in_nelems * o.group_size, {_GATHER_OUT})
            ELSE o.in_nelems END * ({_DTYPE_BYTES}) AS bytes
FROM comm_ops o LEFT JOIN (
    SELECT pid, tid, start_ns, end_ns, input_shapes FROM cpu_ops
    WHERE name = 'c10d::_allgather_base_'
) g ON {_IS_ALL_GATHER} AND g.pid = o.pid AND g.tid = o.tid
   AND g.start_ns <= o.start_ns AND g.end_ns >= o.end_ns
WHERE o.in_nelems IS NOT NULL
"""


def kernel_collectives_sql() -> str:
    """Every collective kernel (all devices) with the collective of the call that launched
    it, as the per-rank reports name it (``collective``: all_to_all, all_reduce, ...; NULL
    where no recorded call encloses the launch). Kernel names do not say it: NCCL runs
    all-reduces, all-gathers and all-to-alls alike as ``ncclKernel_SendRecv_*`` kernels."""
    return f"""
SELECT k.device_id, k.stream_id, k.name, k.start_ns, k.end_ns,
       CASE WHEN c.end_ns >= k.api_start THEN c.collective END AS collective
FROM (
    SELECT k.device_id, k.stream_id, k.name, k.start_ns, k.end_ns, a.pid, a.tid,
           a.start_ns AS api_start
    FROM kernels k LEFT JOIN (
        SELECT correlation_id, min(pid) AS pid, min(tid) AS tid, min(start_ns) AS start_ns
        FROM api_calls WHERE correlation_id IS NOT NULL GROUP BY correlation_id
    ) a USING (correlation_id)
    WHERE {_COMM_K}
) k ASOF LEFT JOIN ({_COMM_SIZES}) c
    ON c.pid = k.pid AND c.tid = k.tid AND c.start_ns <= k.api_start
"""


_OVERLAP = f"""
WITH c AS {merged(f"SELECT device_id, start_ns, end_ns FROM kernels WHERE {_COMM}")},
k AS {covered(merged(f"SELECT device_id, start_ns, end_ns FROM kernels WHERE NOT ({_COMM})"))},
comm AS (SELECT device_id, sum(end_ns - start_ns) AS comm_ns FROM c GROUP BY device_id),
ov AS (
    SELECT c.device_id, sum({covered_at("ke", "c.end_ns")} - {covered_at("ks", "c.start_ns")})
               AS overlap_ns
    FROM c
    ASOF LEFT JOIN k ks ON ks.device_id = c.device_id AND c.start_ns >= ks.start_ns
    ASOF LEFT JOIN k ke ON ke.device_id = c.device_id AND c.end_ns >= ke.start_ns
    GROUP BY c.device_id
)
SELECT comm.device_id, comm.comm_ns, coalesce(ov.overlap_ns, 0) AS overlap_ns
FROM comm LEFT JOIN ov USING (device_id) ORDER BY comm.device_id
"""

_PER_COLLECTIVE = f"""
WITH k AS (
    SELECT k.device_id, k.name, k.start_ns, k.end_ns, a.pid, a.tid, a.start_ns AS api_start
    FROM kernels k LEFT JOIN (
        SELECT correlation_id, min(pid) AS pid, min(tid) AS tid,
               min(start_ns) AS start_ns
        FROM api_calls WHERE correlation_id IS NOT NULL GROUP BY correlation_id
    ) a USING (correlation_id)
    WHERE k.device_id = ? AND {_COMM_K}
),
c AS ({_COMM_SIZES}),
m AS (
    SELECT k.*, CASE WHEN c.end_ns >= k.api_start THEN c.collective END AS collective,
           CASE WHEN c.end_ns >= k.api_start THEN c.bytes END AS bytes,
           CASE WHEN c.end_ns >= k.api_start THEN c.group_size END AS group_size
    FROM k ASOF LEFT JOIN c ON c.pid = k.pid AND c.tid = k.tid AND c.start_ns <= k.api_start
)
SELECT coalesce(collective, regexp_extract(name, 'ncclKernel_([A-Za-z]+)|nccl([A-Za-z]+)', 1),
                'nccl') AS collective,
       count(*) AS count, sum(end_ns - start_ns) AS kernel_ns,
       -- a real call's size: an interpolated median of 3 KiB and 400 MiB calls is neither
       quantile_disc(bytes, 0.5) AS median_bytes, sum(bytes) AS total_bytes,
       min(bytes) AS min_bytes, max(bytes) AS max_bytes,
       max(group_size) AS group_size,
       -- a rate has no "real call" to keep: the median of two calls is their midpoint
       median(bytes / nullif(end_ns - start_ns, 0)) AS median_algbw_gbps,
       max(bytes / nullif(end_ns - start_ns, 0)) AS best_algbw_gbps,
       arg_max(bytes / nullif(end_ns - start_ns, 0), bytes) AS largest_algbw_gbps
FROM m GROUP BY 1 ORDER BY kernel_ns DESC, 1
"""


def _size_text(c: dict) -> str:
    """The largest collective's sizes and bandwidth for the summary: one size with its
    median bandwidth, or the range with the largest message's, and the best rate where
    another call reached a higher one (mixed sizes have no typical call: a few-KiB split
    exchange beside 400 MiB payloads)."""
    if not c["median_bytes"] or c["median_algbw_gbps"] is None:
        return ""
    if c["min_bytes"] == c["max_bytes"]:
        return f", {fmt_bytes(c['max_bytes'])} each at {c['median_algbw_gbps']} GB/s"
    # the largest message's rate, which need not be the best one: say which it is
    best = c.get("best_algbw_gbps")
    return (
        f", {fmt_bytes(c['min_bytes'])} to {fmt_bytes(c['max_bytes'])}, the largest message "
        f"at {c['largest_algbw_gbps']} GB/s"
        + (f" (the best {best} GB/s)" if best and best != c["largest_algbw_gbps"] else "")
    )


# A collective kind is named beside the largest when it holds at least this share of the
# communication time: an all-reduce as long as the all-to-all is part of the picture.
_NAMED_SHARE = 0.15


def long_queues(queued: list[dict], collectives: list[dict]) -> dict[str, dict]:
    """Per collective kind, its stream row where it queued behind other kinds for at least
    the share of the exposed time the summary names a collective at. Time queued before a
    kernel starts is not its exposed kernel time (the kernel had not begun), but it is
    what a process group of the collective's own would give back: an all-reduce compute
    hides once it runs can still be held 100 ms behind all-to-alls on a shared stream."""
    total = sum(int(c.get("exposed_ns") or 0) for c in collectives)
    out: dict[str, dict] = {}
    for r in queued:
        if total > 0 and r["queued"] and r["queued_ns"] >= _NAMED_SHARE * total:
            best = out.get(r["collective"])
            if best is None or r["queued_ns"] > best["queued_ns"]:
                out[r["collective"]] = r
    return out


def _queued_head(row: dict) -> str:
    return (
        f"{row['queued']} of them queued {fmt_ns(row['queued_ns'])} behind "
        f"{_kinds_text(row['behind'])} on NCCL stream {row['stream_id']} before starting"
    )


def _collectives_text(
    collectives: list[dict], waited: bool, queues: dict[str, dict] | None = None
) -> str:
    """The collectives that hold the communication time, largest first, with the largest's
    sizes and bandwidth (a lower bound on the link's where kernels also wait for peers),
    and any that queued long behind another kind (``queues``, from :func:`long_queues`),
    however little of their kernel time is exposed."""
    queues = queues or {}
    total = sum(int(c["kernel_ns"]) for c in collectives) or 1
    named = [
        c
        for i, c in enumerate(collectives)
        if i == 0 or c["kernel_ns"] >= _NAMED_SHARE * total or c["collective"] in queues
    ]
    parts = []
    for i, c in enumerate(named):
        head = f"`{c['collective']}` ×{c['count']:,}"
        row = queues.get(str(c["collective"]))
        if row is not None:
            head += f" ({fmt_ns(int(c['kernel_ns']))}; {_queued_head(row)})"
        elif len(named) > 1:
            head += f" ({fmt_ns(int(c['kernel_ns']))})"
        sizes = _size_text(c) if i == 0 else ""
        if sizes and waited:
            sizes += ", a lower bound as the kernels' time includes waiting for peers"
        parts.append(head + sizes)
    return "; " + "; ".join(parts)


# One row per NCCL kernel on a device: its collective and bytes (as _PER_COLLECTIVE matches
# them), the step its launch fell in, and its time not overlapped by compute kernels.
_PER_KERNEL = f"""
WITH k AS (
    SELECT row_number() OVER (ORDER BY k.start_ns, k.end_ns, k.stream_id, k.name) AS kid,
           k.device_id, k.stream_id, k.name, k.start_ns, k.end_ns, k.grid_x, k.grid_y,
           k.grid_z, k.block_x, k.block_y, k.block_z, a.pid, a.tid, a.start_ns AS api_start
    FROM kernels k LEFT JOIN (
        SELECT correlation_id, min(pid) AS pid, min(tid) AS tid, min(start_ns) AS start_ns
        FROM api_calls WHERE correlation_id IS NOT NULL GROUP BY correlation_id
    ) a USING (correlation_id)
    WHERE k.device_id = ? AND {_COMM_K}
),
c AS ({_COMM_SIZES}),
m AS (
    SELECT k.*, CASE WHEN c.end_ns >= k.api_start THEN c.collective END AS collective,
           CASE WHEN c.end_ns >= k.api_start THEN c.bytes END AS bytes
    FROM k ASOF LEFT JOIN c ON c.pid = k.pid AND c.tid = k.tid AND c.start_ns <= k.api_start
),
cu AS {
    covered(
        merged(
            f"SELECT device_id, start_ns, end_ns FROM kernels WHERE device_id = ? AND NOT {_COMM}"
        )
    )
},
ov AS (
    SELECT m.kid, {covered_at("ce", "m.end_ns")} - {covered_at("cs", "m.start_ns")} AS ns
    FROM m
    ASOF LEFT JOIN cu cs ON m.start_ns >= cs.start_ns
    ASOF LEFT JOIN cu ce ON m.end_ns >= ce.start_ns
),
steps AS (SELECT DISTINCT name, start_ns, end_ns FROM ({STEP_INTERVALS}))
SELECT m.kid, m.name, m.stream_id, m.api_start, m.start_ns, m.end_ns,
       m.end_ns - m.start_ns AS d,
       m.end_ns - m.start_ns - coalesce(ov.ns, 0) AS exposed,
       coalesce(m.collective, regexp_extract(m.name,
                'ncclKernel_([A-Za-z]+)|nccl(?:DevKernel_)?([A-Za-z]+)', 1), 'nccl') AS coll,
       m.bytes, concat_ws(',', m.grid_x, m.grid_y, m.grid_z, m.block_x, m.block_y, m.block_z)
           AS launch,
       (SELECT min(s.name) FROM steps s
        WHERE s.start_ns <= coalesce(m.api_start, m.start_ns)
          AND s.end_ns > coalesce(m.api_start, m.start_ns)) AS step
FROM m LEFT JOIN ov USING (kid) ORDER BY m.kid
"""


def collective_kernels(db: TraceDB, device_id: int) -> list[dict]:
    """One row per collective kernel on ``device_id``, in launch order: its collective, bytes
    (None where no ``record_param_comms`` gives them), ``stream_id``, ``api_start`` (its
    launch call's start, None without one), duration ``d``, ``exposed`` time (not
    overlapped by compute) and the ``step`` its launch fell in. Kept for the life of ``db``
    (the job's extract reads them again for small-collective storms); not to be mutated."""
    return db.memo(
        ("collective_kernels", device_id), lambda: db.dicts(_PER_KERNEL, [device_id, device_id])
    )


def _waiting(kernels: list[dict]) -> list[dict]:
    """Each kernel's waiting for peers: its duration beyond the transfer estimate."""
    best: dict[str, float] = {}
    fastest: dict[tuple, int] = {}
    count: dict[tuple, int] = {}
    for k in kernels:
        if k["bytes"] and k["d"] > 0:
            best[k["coll"]] = max(best.get(k["coll"], 0.0), k["bytes"] / k["d"])
        key = (k["name"], k["launch"], k["coll"])
        fastest[key] = min(fastest.get(key, k["d"]), k["d"])
        count[key] = count.get(key, 0) + 1
    out = []
    for k in kernels:
        d = int(k["d"])
        if k["bytes"] and best.get(k["coll"]):
            transfer = min(d, round(k["bytes"] / best[k["coll"]]))
        elif count[(k["name"], k["launch"], k["coll"])] >= 2:
            transfer = fastest[(k["name"], k["launch"], k["coll"])]
        else:
            transfer = d
        wait = d - transfer
        out.append(k | {"wait": wait, "wait_exposed": max(0, min(wait, int(k["exposed"])))})
    return out


# A collective that starts this long after its launch call waited for something: its
# stream's earlier work, or an event it waits on.
_LATE_START_NS = 1_000_000


def queued_behind(kernels: list[dict], filtered: bool) -> list[dict]:
    """Collectives that share a stream with another collective kind, and how often they
    queued behind it there.

    A stream runs its kernels in order, and NCCL gives each communicator (each process
    group) one stream per device: collectives of one group queue behind each other
    whatever the framework meant to overlap. A kernel launched while a kernel of another
    kind on its stream had not yet ended started only after it (``queued``; the time from
    its launch to that end is ``queued_ns``). In a trace filtered after recording the
    kernel it queued behind may be missing: one starting at least ``_LATE_START_NS`` after
    its launch with nothing recorded on its stream meanwhile is counted apart
    (``unexplained``), only where the trace is filtered (otherwise such a wait is for an
    event, not the stream). Each such kernel is listed in ``waits`` (its launch and start,
    and the kernel it queued behind where recorded), so the ranks of a job can be set side
    by side: a collective one rank's filter left unexplained may be queued on another's.
    One row per collective and stream, in first-launch order."""
    by_stream: dict[object, list[dict]] = {}
    for k in kernels:
        if k.get("stream_id") is not None:
            by_stream.setdefault(k["stream_id"], []).append(k)
    rows: dict[tuple[str, object], dict] = {}
    for stream, ks in by_stream.items():
        kinds = {str(k["coll"]) for k in ks}
        if len(kinds) < 2:
            continue
        ks = sorted(ks, key=lambda k: (k["start_ns"], k["end_ns"]))
        for i, k in enumerate(ks):
            coll = str(k["coll"])
            row = rows.setdefault(
                (coll, stream),
                {
                    "collective": coll,
                    "stream_id": stream,
                    "shares_with": sorted(kinds - {coll}),
                    "kernels": 0,
                    "queued": 0,
                    "queued_ns": 0,
                    "behind": [],
                    "unexplained": 0,
                    "unexplained_ns": [],
                    "waits": [],
                    "first_ns": k["start_ns"],
                },
            )
            row["kernels"] += 1
            launch = k.get("api_start")
            if launch is None:
                continue
            prev = ks[i - 1] if i else None
            if prev is not None and prev["end_ns"] > launch:
                if str(prev["coll"]) != coll:
                    row["queued"] += 1
                    row["queued_ns"] += int(prev["end_ns"] - launch)
                    if str(prev["coll"]) not in row["behind"]:
                        row["behind"].append(str(prev["coll"]))
                    row["waits"].append(
                        {
                            "launch_ns": int(launch),
                            "start_ns": int(k["start_ns"]),
                            "behind": str(prev["coll"]),
                            "behind_start_ns": int(prev["start_ns"]),
                            "behind_end_ns": int(prev["end_ns"]),
                        }
                    )
            elif filtered and k["start_ns"] - launch >= _LATE_START_NS:
                row["unexplained"] += 1
                row["unexplained_ns"].append(int(k["start_ns"] - launch))
                row["waits"].append(
                    {
                        "launch_ns": int(launch),
                        "start_ns": int(k["start_ns"]),
                        "behind": None,
                        "behind_start_ns": None,
                        "behind_end_ns": None,
                    }
                )
    out = sorted(rows.values(), key=lambda r: r["first_ns"])
    for r in out:
        del r["first_ns"]
    return out


def _bus_factor(collective: str, n: int | None) -> float | None:
    if not n or n < 2:
        return None
    c = collective.lower().replace("_", "")
    if "allreduce" in c:
        return 2 * (n - 1) / n
    if "allgather" in c or "reducescatter" in c:
        return (n - 1) / n
    return 1.0


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    findings: list[Finding] = []
    # Most traces have no collective at all; skip merging every other kernel's intervals.
    if not db.scalar(f"SELECT count(*) > 0 FROM (SELECT 1 FROM kernels WHERE {_COMM} LIMIT 1)"):
        return findings
    for row in db.dicts(_OVERLAP):
        dev = int(row["device_id"])
        comm_ns, overlap_ns = int(row["comm_ns"]), int(row["overlap_ns"])
        exposed = comm_ns - overlap_ns
        stats = next((d for d in db.devices if d.device_id == dev), None)
        window = stats.window_ns if stats else db.window_ns
        share = 100.0 * exposed / window if window else 0.0
        if share < t.comm_min_exposed_pct:
            continue
        wl = workload_of(db)
        kernels = _waiting(collective_kernels(db, dev))
        # waiting claims its share of the exposed time first, never more than all of it
        waited = min(exposed, sum(k["wait_exposed"] for k in kernels))
        wait_share = 100.0 * waited / window if window else 0.0
        if wait_share >= t.comm_min_wait_pct:
            findings.append(_waiting_finding(db, t, dev, kernels, waited, comm_ns, wl))
        else:
            waited = 0
        transfer_exposed = exposed - waited
        per = db.dicts(_PER_COLLECTIVE, [dev])
        exposed_by: dict[str, int] = {}
        for k in kernels:
            exposed_by[str(k["coll"])] = exposed_by.get(str(k["coll"]), 0) + int(k["exposed"])
        collectives = []
        for p in per:
            algbw = p["median_algbw_gbps"]
            best = p["best_algbw_gbps"]
            factor = _bus_factor(p["collective"], p["group_size"])
            collectives.append(
                {
                    "collective": p["collective"],
                    "count": int(p["count"]),
                    "kernel_ns": int(p["kernel_ns"]),
                    "exposed_ns": exposed_by.get(str(p["collective"]), 0),
                    "median_bytes": p["median_bytes"],
                    "total_bytes": int(p["total_bytes"]) if p["total_bytes"] is not None else None,
                    "group_size": p["group_size"],
                    "min_bytes": p["min_bytes"],
                    "max_bytes": p["max_bytes"],
                    "median_algbw_gbps": round(algbw, 3) if algbw is not None else None,
                    "largest_algbw_gbps": round(p["largest_algbw_gbps"], 3)
                    if p["largest_algbw_gbps"] is not None
                    else None,
                    "median_busbw_gbps": round(algbw * factor, 3)
                    if algbw is not None and factor is not None
                    else None,
                    "best_algbw_gbps": round(best, 3) if best is not None else None,
                    "best_busbw_gbps": round(best * factor, 3)
                    if best is not None and factor is not None
                    else None,
                }
            )
        queued = queued_behind(kernels, wl.filtered)
        longest = db.dicts(
            f"""SELECT start_ns, end_ns FROM kernels WHERE device_id = ? AND {_COMM}
                ORDER BY end_ns - start_ns DESC, start_ns LIMIT 5""",
            [dev],
        )
        overlap_pct = 100.0 * overlap_ns / comm_ns if comm_ns else 0.0
        queues = long_queues(queued, collectives)
        size_text = _collectives_text(collectives, waited > 0, queues) if collectives else ""
        # A trace that kept a sample of its launches dropped compute kernels beside the
        # collectives and collectives too: the exposed time is not measured either way, so
        # like the idle gaps it is listed, not costed.
        sampled = wl.sampled_calls is not None
        findings.append(
            finding(
                ANALYZER,
                (dev,),
                0 if sampled else transfer_exposed,
                db,
                t,
                subject_ns=int(exposed),
                costed=not sampled,
                title=f"GPU {dev}: {_bound_word(wl)}{fmt_ns(exposed)} of "
                f"{'RCCL' if wl.amd else 'NCCL'} communication not hidden by "
                f"{'kept ' if wl.sampled_calls else ''}compute "
                f"({share:.1f}% of its window{_trace_word(wl)})",
                impact_basis=(_SAMPLED_NOT_COSTED if sampled else "")
                + "Communication kernel time (union over streams) minus the part "
                "that overlaps compute kernels on the same GPU: the time the GPU only "
                "communicates, which overlap can hide."
                + (
                    f" {fmt_ns(waited)} of it is waiting for peer ranks: the peer-waiting "
                    "finding's."
                    if waited and sampled
                    else f" {fmt_ns(waited)} of it is waiting for peer ranks, counted by the "
                    "peer-waiting finding, not again here."
                    if waited
                    else ""
                )
                + (_FILTERED_LOWER_BOUND if wl.filtered and not sampled else ""),
                summary=f"{'RCCL' if wl.amd else 'NCCL'} kernels ran {fmt_ns(comm_ns)} on GPU "
                f"{dev}; "
                f"{overlap_pct:.0f}% of it overlapped compute{size_text}.",
                evidence={
                    "device_id": dev,
                    "comm_ns": comm_ns,
                    "overlapped_ns": overlap_ns,
                    "exposed_ns": exposed,
                    "exposed_waiting_for_peers_ns": waited,
                    "exposed_transfer_ns": transfer_exposed,
                    "overlap_pct": round(overlap_pct, 2),
                    "collectives": collectives,
                    "queued_behind": queued,
                    "bandwidth_note": "Kernel time includes waiting for peer ranks, so the "
                    "achieved bandwidth is a lower bound on the link's.",
                },
                advice=_advice(
                    overlap_pct,
                    collectives,
                    wl,
                    sdd_pipeline=torchrec_pipeline(db),
                    ddp_reducer=bool(db.scalar(_DDP_REDUCER)),
                    small_a2a=_small_all_to_alls(kernels),
                    quantized=bool(db.scalar(_QUANTIZED_COMMS)),
                    queued=queued,
                    torchrec=bool(db.scalar(_TORCHREC)),
                    fp32_all_reduce=bool(db.scalar(_FP32_ALL_REDUCE)),
                    shampoo_gather=bool(db.scalar(_SHAMPOO_GATHER)),
                    gpus=host_gpus(db),
                ),
                time_ranges=[
                    TimeRange(int(k["start_ns"]), int(k["end_ns"]), dev, "NCCL") for k in longest
                ],
            )
        )
    return findings


# A trace filtered after recording may have lost collective kernels too (one rank of a
# sampled job records a backward all-to-all its peer's trace lacks, while that peer's GPU
# sits idle for as long): what is counted is what was kept.
_FILTERED_LOWER_BOUND = (
    " A lower bound: this trace was filtered after recording (it keeps no runtime call but "
    "launches and copies), and the filter may have dropped collective kernels as well, "
    "whose time is not counted; the GPU's idle time waiting on work the trace does not "
    "record may be such collectives."
)


# A trace that kept a sample of its launches dropped compute kernels as well as
# collectives: some of what looks exposed ran beside compute the trace no longer has, so
# its communication findings are listed, not costed, and say so first.
_SAMPLED_NOT_COSTED = (
    "Not costed, and not a bound either way: this trace kept a sample of its launches (see "
    "the notes), so compute kernels that ran beside these collectives may be missing, which "
    "makes the exposed time look longer, and collectives may be missing, which makes it "
    "look shorter. "
)


def _bound_word(wl: Workload) -> str:
    return "" if wl.sampled_calls else "at least " if wl.filtered else ""


def _trace_word(wl: Workload) -> str:
    return "; sampled trace" if wl.sampled_calls else "; filtered trace" if wl.filtered else ""


def _waiting_finding(
    db: TraceDB,
    t: Thresholds,
    dev: int,
    kernels: list[dict],
    waited: int,
    comm_ns: int,
    wl: Workload,
) -> Finding:
    lib = "RCCL" if wl.amd else "NCCL"
    by_step: dict[str, dict] = {}
    for k in kernels:
        s = by_step.setdefault(
            k["step"] or "(outside steps)", {"step": k["step"], "waiting_ns": 0, "kernels": 0}
        )
        s["waiting_ns"] += int(k["wait"])
        s["kernels"] += 1
    steps = sorted(by_step.values(), key=lambda s: (-s["waiting_ns"], s["step"] or ""))
    total_wait = sum(int(k["wait"]) for k in kernels)
    worst = sorted(kernels, key=lambda k: (-k["wait"], k["kid"]))[:5]
    where = f", most in `{steps[0]['step']}`" if steps and steps[0]["step"] else ""
    sampled = wl.sampled_calls is not None
    return finding(
        ANALYZER,
        (dev, "peer_waiting"),
        0 if sampled else waited,
        db,
        t,
        subject_ns=waited,
        costed=not sampled,
        title=f"GPU {dev}: {fmt_ns(waited)} of exposed {lib} time is waiting for peer ranks{where}"
        + (" (sampled trace)" if sampled else ""),
        impact_basis=(
            "Not costed: this trace kept a sample of its launches (see the notes). The "
            f"waiting the kept collectives show ({fmt_ns(total_wait)}, estimated as below) "
            "leaves out the collectives the trace dropped, and how much of it compute hid "
            "is not known, so the exposed part is no bound either way. "
            if sampled
            else ""
        )
        + "Each collective kernel's duration beyond its bytes at the best "
        "bandwidth this rank reached for that collective (or beyond the fastest instance of "
        "the same kernel when sizes are unknown) is time spent waiting for the slowest rank; "
        "counted only where no " + ("kept " if sampled else "") + "compute ran beside it.",
        summary=f"{lib} kernels ran {fmt_ns(comm_ns)}; {fmt_ns(total_wait)} of that was "
        "spent waiting for other ranks to arrive, so the spread of their durations is load "
        "imbalance between ranks rather than erratic communication.",
        evidence={
            "device_id": dev,
            "comm_ns": comm_ns,
            "waiting_ns": total_wait,
            "exposed_waiting_ns": waited,
            "by_step": steps[:10],
            "longest_waits": [
                {
                    "kernel": k["name"],
                    "collective": k["coll"],
                    "bytes": k["bytes"],
                    "duration_ns": int(k["d"]),
                    "waiting_ns": int(k["wait"]),
                    "step": k["step"],
                }
                for k in worst
            ],
        },
        # One rank's trace shows its kernels waiting, not who they wait for: a rank can wait
        # at one collective and be the straggler at the next, so nothing here says this
        # rank arrives first; the job's analysis, matching the ranks by clock, does.
        advice=f"This rank's {lib} kernels run long while they wait for peer ranks to join; "
        "one rank's trace cannot tell which peers are late, nor whether this rank is "
        "itself late at other collectives. Analyze the ranks' traces together (a folder of "
        "them is a job) or compare the ranks' start times of the same collectives to find "
        "the straggler, then look there for uneven work (variable "
        "sequence lengths or batch sizes per rank: bucket or pack them), data loading or host "
        "stalls, a slower GPU (clocks, thermal throttling) or a shared node. "
        + (
            "Per-rank step timing and `TORCH_NCCL_ENABLE_TIMING=1` with the flight "
            "recorder locate it (`torch.distributed.monitored_barrier` needs a gloo group, "
            '`dist.new_group(backend="gloo")`, and names ranks that miss a barrier, not '
            "ones milliseconds late)."
            if wl.is_pytorch
            else f"Per-rank timing around the collectives (`{lib}_DEBUG=INFO` for topology) "
            "locates it."
        ),
        time_ranges=[
            TimeRange(int(k["start_ns"]), int(k["end_ns"]), dev, "waiting for peers") for k in worst
        ],
    )


def _is_a2a_name(name: object) -> bool:
    n = str(name or "").lower()
    return "all_to_all" in n or "alltoall" in n


def _small_all_to_alls(kernels: list[dict]) -> dict | None:
    """The all-to-alls of at most a tenth of the largest one's bytes (where a sparse
    pipeline's input exchanges fall, beside the pooled embeddings' payloads): their sizes,
    kernel time and the part of it no compute hid; None without two sizes to tell apart."""
    sized = [k for k in kernels if _is_a2a_name(k["coll"]) and k["bytes"]]
    top = max((int(k["bytes"]) for k in sized), default=0)
    small = [k for k in sized if 10 * int(k["bytes"]) <= top]
    if not small:
        return None
    return {
        "min_bytes": min(int(k["bytes"]) for k in small),
        "max_bytes": max(int(k["bytes"]) for k in small),
        "kernel_ns": sum(int(k["d"]) for k in small),
        "exposed_ns": sum(int(k["exposed"]) for k in small),
        "wait_ns": sum(int(k.get("wait") or 0) for k in small),
    }


def _mostly_all_to_all(collectives: list[dict]) -> bool:
    """All-to-all is the largest collective and at least a third of collective time."""

    def is_a2a(c: dict) -> bool:
        return _is_a2a_name(c["collective"])

    total = sum(int(c["kernel_ns"] or 0) for c in collectives)
    a2a = sum(int(c["kernel_ns"] or 0) for c in collectives if is_a2a(c))
    largest = max(collectives, key=lambda c: int(c["kernel_ns"] or 0), default=None)
    return total > 0 and largest is not None and is_a2a(largest) and 3 * a2a >= total


# TorchRec's sparse-data-dist training pipeline marks its stages with these ranges.
_SDD_PIPELINE = "SELECT count(*) > 0 FROM ranges WHERE starts_with(name, '## sdd_')"


def torchrec_pipeline(db: TraceDB) -> bool:
    """TorchRec's sparse-data-dist pipeline runs (its ``## sdd_`` ranges); once per trace."""
    return db.memo("torchrec_pipeline", lambda: bool(db.scalar(_SDD_PIPELINE)))


# DDP's reducer issues the gradient all-reduces itself, from autograd hooks, bucket by
# bucket: its operators or the module's forward range say it runs.
_DDP_REDUCER = (
    "SELECT (SELECT count(*) FROM cpu_ops WHERE starts_with(name, 'torch::distributed::reducer')"
    " OR name = 'DistributedDataParallel.forward') + (SELECT count(*) FROM ranges WHERE "
    "name = 'DistributedDataParallel.forward') > 0"
)


def ddp_reducer_runs(db: TraceDB) -> bool:
    """Whether DDP's reducer runs in the trace (its operators or module range)."""
    return bool(db.scalar(_DDP_REDUCER))


# FBGEMM's quantize operators (and their kernels), which TorchRec's quantized-communication
# codecs run around the exchange: it is already narrowed.
_QUANTIZED_COMMS = (
    "SELECT (SELECT count(*) FROM cpu_ops WHERE regexp_matches(name, "
    "'^fbgemm::FloatTo(HFP8|FP8Rowwise|Float16|Bfloat16)Quantized$')) "
    "+ (SELECT count(*) FROM kernels WHERE regexp_matches(name, "
    "'_float_to_hfp8|FP8rowwise_quantize|float_to_bfloat16_quantized')) > 0"
)


# TorchRec runs here: its sparse-data-dist pipeline's ranges, or its modules' names. Its
# `DistributedModelParallel` wraps the dense part in DDP itself, through a
# `data_parallel_wrapper`, and has no `register_comm_hook` of its own.
_TORCHREC = (
    "SELECT (SELECT count(*) FROM ranges WHERE starts_with(name, '## sdd_') "
    "OR name ILIKE '%torchrec%' OR name LIKE 'Sharded%Embedding%') "
    "+ (SELECT count(*) FROM cpu_ops WHERE name ILIKE '%torchrec%' "
    "OR name LIKE 'Sharded%Embedding%') > 0"
)
# Whether the all-reduces move fp32 (NULL: no all-reduce records its dtype): bf16
# communication halves fp32 bytes, and has nothing to halve in bf16 or fp16 ones.
_FP32_ALL_REDUCE = (
    "SELECT bool_and(lower(dtype) IN ('float', 'float32')) FROM comm_ops "
    "WHERE replace(lower(collective), '_', '') LIKE '%allreduce%' AND dtype IS NOT NULL"
)
# An all-gather launched inside a Shampoo optimizer step (`Optimizer.step#<class>.step`,
# the profiler's range around every optimizer's step): distributed Shampoo's gather of the
# blocks each rank preconditioned.
_SHAMPOO_GATHER = r"""
SELECT count(*) > 0 FROM comm_ops o
WHERE replace(lower(o.collective), '_', '') LIKE '%allgather%' AND EXISTS (
    SELECT 1 FROM (SELECT pid, tid, name, start_ns, end_ns FROM ranges
                   UNION ALL SELECT pid, tid, name, start_ns, end_ns FROM cpu_ops) s
    WHERE s.pid = o.pid AND s.tid = o.tid AND s.start_ns <= o.start_ns
      AND s.end_ns >= o.end_ns
      AND regexp_matches(s.name, '^Optimizer\.step#\w*Shampoo\w*\.step$')
)
"""


def _is_kind(name: object, kind: str) -> bool:
    return kind in str(name or "").lower().replace("_", "")


def _holds_share(c: dict, collectives: list[dict]) -> bool:
    """Whether a collective holds a real share of the exposed time: the share the summary
    names a collective at, of the collectives' exposed time. An all-reduce compute hides
    nearly all of gets no advice, however long its kernels run."""
    total = sum(int(x.get("exposed_ns") or 0) for x in collectives)
    return total > 0 and int(c.get("exposed_ns") or 0) >= _NAMED_SHARE * total


def _kinds_text(kinds: list[str]) -> str:
    return " and ".join(f"the `{k}`s" for k in kinds)


def _ns_range(values: list[int]) -> str:
    lo, hi = min(values), max(values)
    return fmt_ns(lo) if fmt_ns(lo) == fmt_ns(hi) else f"{fmt_ns(lo)} to {fmt_ns(hi)}"


def _queue_text(row: dict) -> str:
    """What the trace shows of one collective queuing behind other kinds on its stream."""
    seen = []
    if row["queued"]:
        it = "it" if row["queued"] == 1 and len(row["behind"]) == 1 else "them"
        # a start well after what it queued behind ended waited on something else too:
        # what a group of its own gives back is then less than the time behind them
        late = [
            int(w["start_ns"] - w["behind_end_ns"])
            for w in row.get("waits", [])
            if w["behind_end_ns"] is not None
            and w["start_ns"] - w["behind_end_ns"] >= _LATE_START_NS
        ]
        seen.append(
            f"{row['queued']} {'was' if row['queued'] == 1 else 'were'} launched while "
            f"{_kinds_text(row['behind'])} still ran there and started only after {it} "
            f"ended ({fmt_ns(row['queued_ns'])} from their launch to {it} ending"
            + (
                f"; {'it' if len(late) == 1 else 'they'} started "
                f"{_ns_range(late)} after that, with nothing recorded on the stream "
                "between, so part of the wait was for something else"
                if late
                else ""
            )
            + ")"
        )
    if row["unexplained"]:
        seen.append(
            f"{row['unexplained']} started {_ns_range(row['unexplained_ns'])} after "
            "their launch with nothing recorded running on that stream meanwhile (this "
            "filtered trace may have dropped what they queued behind)"
        )
    return "; ".join(seen)


def all_reduce_queue_row(queued: list[dict]) -> dict | None:
    """The all-reduce stream row that shows most of the all-reduces queuing behind other
    collectives: those seen queued behind a recorded kernel first, then those a filter
    left unexplained."""
    rows = [
        r
        for r in queued
        if _is_kind(r["collective"], "allreduce") and (r["queued"] or r["unexplained"])
    ]
    return max(
        rows,
        key=lambda r: (r["queued"], r["queued_ns"], r["unexplained"], r["kernels"]),
        default=None,
    )


def ddp_queue_text(r: dict, rank: int | None = None) -> str:
    """Why a process group of DDP's own: its all-reduces share a stream with other
    collectives (``r``, a ``queued_behind`` row; ``rank``: whose trace shows it, where
    that is another rank's than the finding's). One stream per communicator: the reducer's
    all-reduces wait for every other collective their process group issued first, however
    early their bucket was ready. A smaller bucket cap does not start them sooner; a group
    of their own does."""
    where = "" if rank is None else f"rank {rank}'s trace shows "
    return (
        f", but {where}they run on NCCL stream {r['stream_id']} with "
        f"{_kinds_text(r['shares_with'])} (one process group, whose collectives run in "
        f"the order issued): of the {r['kernels']} there, {_queue_text(r)}. A smaller "
        "`bucket_cap_mb` does not start them sooner; a process group of DDP's own "
        '(`dist.new_group(backend="nccl")`, its own communicator and stream) lets its '
        f"all-reduces run beside {_kinds_text(r['shares_with'])} instead of behind them."
    )


def _ddp_all_reduce_text(
    queued: list[dict], torchrec: bool, fp32_all_reduce: bool | None, share: bool = True
) -> str:
    """The all-reduce advice where DDP's reducer runs: it buckets and goes async already.
    ``share``: the all-reduces hold a share of the exposed time (else they are advised on
    for their queuing alone)."""
    text = (
        f" For the all-reduce{' share' if share else 's'}: DDP's reducer already issues the "
        "gradient all-reduces asynchronously, bucket by bucket, from backward hooks"
    )
    r = all_reduce_queue_row(queued)
    rows = [r] if r is not None else []
    if r is not None:
        text += ddp_queue_text(r)
    else:
        text += "."
    if torchrec:
        text += (
            " Under TorchRec, `DistributedModelParallel` wraps the dense part in DDP itself "
            "and has no `register_comm_hook`: pass it "
            "`data_parallel_wrapper=DefaultDataParallelWrapper(allreduce_comm_precision="
            '"bf16", bucket_cap_mb=...)`'
            + (
                " to halve the all-reduces' bytes (their `nccl:all_reduce` records say fp32)"
                if fp32_all_reduce
                else " to halve the bytes of fp32 gradients"
                if fp32_all_reduce is None
                else " for the bucket size"
            )
            + (
                ", and for the separate group a wrapper of your own whose `wrap` builds "
                "`DistributedDataParallel` with that `process_group`."
                if rows
                else "."
            )
        )
    elif fp32_all_reduce is not False:
        text += (
            " A bf16 compression hook (`model.register_comm_hook(None, bf16_compress_hook)` "
            "from `torch.distributed.algorithms.ddp_comm_hooks.default_hooks`) halves the "
            "bytes of " + ("these fp32 gradients." if fp32_all_reduce else "fp32 gradients.")
        )
    return text


# Kineto gives each GPU it lists a process track whose pid is the device index, named
# like the host process; a host process's pid is the OS's and runs host events.
_GPU_TRACKS = """
SELECT count(DISTINCT pid) FROM threads
WHERE process_name IS NOT NULL AND pid BETWEEN 0 AND 63
  AND pid NOT IN (SELECT DISTINCT pid FROM cpu_ops WHERE pid IS NOT NULL
                  UNION SELECT DISTINCT pid FROM api_calls WHERE pid IS NOT NULL)
"""


def host_gpus(db: TraceDB) -> int | None:
    """The GPUs the trace lists for its host: ``deviceProperties``' (the active ones and
    ``host_gpus_without_work``), else Kineto's GPU process tracks (it names a track for
    every GPU the process sees, whether or not it ran work there). None where neither lists
    more than one GPU: a trace that lists only its own GPU does not say the host's count."""
    idle = [p for p in (db.info.get("host_gpus_without_work") or "").split(",") if p.strip()]
    listed = len(db.devices) + len(idle) if idle else 0
    if listed < 2:
        listed = int(db.scalar(_GPU_TRACKS) or 0)
        active = {d.device_id for d in db.devices}
        if active and max(active) >= listed:
            return None  # the tracks do not cover the GPUs that ran work: not the host's list
    return listed if listed >= 2 else None


def _shampoo_text(c: dict, gpus: int | None = None, kept: str = "") -> str:
    """Distributed Shampoo's all-gather: each step every rank gathers the blocks the others
    preconditioned, over the whole group unless the group is made smaller. The group is
    ``num_trainers_per_group`` ranks (all of them by default); with ``gpus`` per host known
    and a larger group, the gather crosses hosts, and a group of one host's GPUs keeps it
    on NVLink."""
    size = (
        f", {fmt_bytes(c['max_bytes'])} each"
        if c["max_bytes"] == c["min_bytes"] and c["max_bytes"]
        else ""
    )
    group = f" over {c['group_size']} ranks" if c["group_size"] else ""
    hidden = (
        f"all {fmt_ns(c['kernel_ns'])} of it"
        if fmt_ns(c["exposed_ns"]) == fmt_ns(c["kernel_ns"])
        else f"{fmt_ns(c['exposed_ns'])} of its {fmt_ns(c['kernel_ns'])}"
    )
    return (
        f" The `{c['collective']}` ×{c['count']}{size}{group} "
        f"({hidden} with no {kept}compute beside it) is distributed Shampoo's, launched inside "
        "its optimizer step: each step every rank gathers the blocks the others preconditioned. "
        + _shampoo_group_text(c.get("group_size"), gpus)
        + "; bf16 communication halves its bytes if it "
        "communicates fp32 (the trace cannot tell: the gathered buffer is recorded as int8 "
        "bytes). In facebookresearch/optimizers' current API both are "
        "`distributed_config=DDPDistributedConfig(communication_dtype=torch.bfloat16, "
        f"num_trainers_per_group={gpus or '<GPUs per node>'})`; older releases spell it "
        "`distributed_config=DDPShampooConfig(communication_dtype=CommunicationDType.BF16, "
        f"num_trainers_per_group={gpus or '<GPUs per node>'})`."
    )


def _shampoo_group_text(group: object, gpus: int | None) -> str:
    n = int(group) if isinstance(group, int) else None
    if n and gpus and n > gpus:
        hosts = -(-n // gpus)
        return (
            f"`num_trainers_per_group` is {n} here (the gather spans ~{hosts} nodes of "
            f"{gpus} GPUs, the trace listing {gpus} on this host); {gpus} keeps it inside a node "
            "(each node then computes every block)"
        )
    if n and gpus:
        return (
            f"`num_trainers_per_group` is {n} here, within one node of {gpus} GPUs: the "
            "gather already stays inside a node"
        )
    if n:
        return (
            f"`num_trainers_per_group` is {n} here; the GPUs per node keep that gather inside "
            "a node (each node then computes every block)"
        )
    return (
        "`num_trainers_per_group` set to the GPUs per node keeps that gather inside a node "
        "(each node then computes every block)"
    )


# A collective's bus bandwidth this high is what one network port gives a GPU (100 Gb/s:
# 12.5 GB/s, less protocol overhead): a trace does not record whether its ranks share a
# node, so such a rate may be the network's full speed, not far below NVLink's.
_NETWORK_PLAUSIBLE_GBPS = 10.0
_ONE_PORT_MAX_GBPS = 55.0  # a 400 Gb/s port's 50 GB/s; faster is several ports or NVLink


def _bandwidth_text(collectives: list[dict], wl: Workload, gpus: int | None = None) -> str:
    """Where the best rate stands against the links. ``gpus``: the GPUs the trace lists for
    its host; a collective whose group is larger crosses hosts, so its rate is the
    network's whether or not the recorded ranks share a node."""
    fabric = "Infinity Fabric" if wl.amd else "NVLink"
    debug = "RCCL_DEBUG=INFO" if wl.amd else "NCCL_DEBUG=INFO"
    rates = [
        (float(c["best_busbw_gbps"] or c["best_algbw_gbps"]), c)
        for c in collectives
        if c.get("best_busbw_gbps") or c.get("best_algbw_gbps")
    ]
    best = max(rates, key=lambda r: r[0], default=None)
    if best is None or not _NETWORK_PLAUSIBLE_GBPS <= best[0] <= _ONE_PORT_MAX_GBPS:
        return (
            f"Compare the achieved bandwidth with the interconnect ({fabric} hundreds of GB/s, "
            f"PCIe tens, network per NIC); far below it, check topology (`{debug}`) and rank "
            "placement."
        )
    rate, c = best
    kind = "bus" if c.get("best_busbw_gbps") else "algorithm"
    group = c.get("group_size")
    if gpus and isinstance(group, int) and group > gpus:
        return (
            f"The best rate, `{c['collective']}`'s {rate:.1f} GB/s {kind} bandwidth, is an "
            f"inter-node rate: its group of {group} ranks spans at least "
            f"{-(-group // gpus)} hosts of {gpus} GPUs (the trace lists {gpus} on this one), "
            "so its ring crosses the network, where one port gives a GPU 12.5-50 GB/s "
            f"(100-400 Gb/s): near what the network gives, not a slow {fabric}. `{debug}` "
            "names each channel's transport."
        )
    return (
        f"The best rate, `{c['collective']}`'s {rate:.1f} GB/s {kind} bandwidth, is what one "
        "network port gives a GPU (100-400 Gb/s: 12.5-50 GB/s); the trace does not say "
        f"whether these ranks share a node, so it cannot tell {fabric} from the network: "
        f"`{debug}` names each channel's transport, and only over {fabric} is this rate "
        "far below the link."
    )


def _advice(
    overlap_pct: float,
    collectives: list[dict],
    wl: Workload,
    sdd_pipeline: bool = False,
    quantized: bool = False,
    ddp_reducer: bool = False,
    small_a2a: dict | None = None,
    queued: list[dict] | None = None,
    torchrec: bool = False,
    fp32_all_reduce: bool | None = None,
    shampoo_gather: bool = False,
    gpus: int | None = None,
) -> str:
    parts = []
    # A collective compute hides gets no advice: the all-reduce's only where it holds the
    # share of the exposed time the summary names a collective at.
    all_reduce = next((c for c in collectives if _is_kind(c["collective"], "allreduce")), None)
    all_reduce_share = ""
    holds = all_reduce is not None and _holds_share(all_reduce, collectives)
    # an all-reduce held long behind another kind on its stream is advised on however
    # little of its own kernel time is exposed: the queuing is what a group of its own saves
    queues_long = all_reduce is not None and all_reduce["collective"] in long_queues(
        queued or [], collectives
    )
    if holds or queues_long:
        # Where DDP's reducer runs it already buckets the gradients and issues their
        # all-reduces asynchronously from backward hooks: "bucket and go async" is done.
        all_reduce_share = (
            _ddp_all_reduce_text(queued or [], torchrec, fp32_all_reduce, share=holds)
            if ddp_reducer
            else " For the all-reduce share, keep DDP gradient bucketing on and issue "
            "collectives with `async_op=True`."
        )
    if not wl.is_pytorch:
        lib = "RCCL" if wl.amd else "NCCL"
        parts.append(
            f"Overlap {lib} collectives with compute: issue them on their own stream, split "
            "the data so the exchange of one chunk runs while the next computes, and wait on an "
            "event only where the result is needed."
        )
    elif not wl.is_training:
        parts.append(
            "Overlap communication with compute: in tensor- or pipeline-parallel inference "
            "overlap the collectives with the next layer's GEMMs (async collectives, "
            "micro-batching), and prefer fused all-reduce kernels for small messages."
        )
    elif _mostly_all_to_all(collectives) and sdd_pipeline:
        # TorchRec's pipeline is meant to overlap the next batch's input exchange; it does
        # not pipeline the pooled embeddings' exchange, and an exchange whose peers arrive
        # late stays exposed however it is pipelined: say what the kernels show
        waits = ""
        if small_a2a and 2 * small_a2a["exposed_ns"] >= small_a2a["kernel_ns"] > 0:
            sizes = (
                fmt_bytes(small_a2a["max_bytes"])
                if small_a2a["min_bytes"] == small_a2a["max_bytes"]
                else f"{fmt_bytes(small_a2a['min_bytes'])} to {fmt_bytes(small_a2a['max_bytes'])}"
            )
            waits = (
                f" Here the smaller all-to-alls ({sizes}, where the input exchanges fall) "
                f"still ran {fmt_ns(small_a2a['exposed_ns'])} of their "
                f"{fmt_ns(small_a2a['kernel_ns'])} with no "
                f"{'kept ' if wl.sampled_calls else ''}compute beside them"
                + (
                    ", far longer than their bytes need: waiting for peer ranks. Pipelining "
                    "hides such a wait only where compute runs beside it"
                    + (
                        " (which this sampled trace cannot show: it dropped most kernels)"
                        if wl.sampled_calls
                        else ""
                    )
                    + ", and it does not make the late rank arrive sooner."
                    if 2 * small_a2a["wait_ns"] >= small_a2a["kernel_ns"]
                    else "."
                )
            )
        parts.append(
            "The largest collective is all-to-all, and TorchRec's sparse-data-dist pipeline "
            "already runs here (its `## sdd_…` ranges): it is meant to overlap the next "
            "batch's input exchange with this batch's compute, and it leaves the pooled "
            "embeddings' exchange in forward and backward exposed."
            + waits
            + " Find the straggler first (the ranks' traces together show it; the end of "
            "the previous step counts, its optimizer step included), and where its "
            "embedding lookups are the heavier, balance them across ranks (the sharding "
            "plan)"
            + (
                "; the exchange already looks quantized (FBGEMM's quantize and dequantize "
                "operators run, as TorchRec's quantized-communication codecs do)"
                if quantized
                else ", and narrow the exchange with TorchRec's quantized-communication "
                "codecs (FP16/BF16/FP8)"
            )
            + "."
            + all_reduce_share
        )
    elif _mostly_all_to_all(collectives):
        # embedding / expert exchanges, not gradient buckets: DDP settings do not touch them
        parts.append(
            "The largest collective is all-to-all (embedding or expert-parallel exchanges), "
            "which gradient bucketing does not touch: overlap it with the dense part of the "
            "step (pipeline the exchange of batch i+1 behind the compute of batch i, as "
            "sparse/MoE training loops do), and balance tokens or ids across ranks so no "
            "rank waits for a straggler." + all_reduce_share
        )
    elif overlap_pct < 50:
        parts.append(
            "Most communication runs while the GPU does nothing else. Overlap it with compute: "
            "for DDP keep gradient bucketing on (`bucket_cap_mb` 25-100, "
            "`gradient_as_bucket_view=True`) and avoid `find_unused_parameters=True`; for "
            "FSDP enable `forward_prefetch`/`backward_prefetch=BACKWARD_PRE`; issue "
            "collectives with `async_op=True` and wait only where the result is needed."
        )
    else:
        parts.append(
            "Compute already hides much of the communication; the exposed rest is usually the "
            "last bucket or a collective on the critical path. Shrink it (bf16 gradients via "
            "a DDP comm hook, fewer/larger buckets) or start it earlier."
        )
    gather = next((c for c in collectives if _is_kind(c["collective"], "allgather")), None)
    if (
        shampoo_gather
        and wl.is_pytorch
        and gather is not None
        and _holds_share(gather, collectives)
    ):
        parts.append(_shampoo_text(gather, gpus, "kept " if wl.sampled_calls else "").strip())
    small = [c for c in collectives if c["median_bytes"] and c["median_bytes"] < 1024 * 1024]
    if small:
        parts.append(
            "Collectives of under 1 MiB ("
            + ", ".join(f"`{c['collective']}`" for c in small[:3])
            + ") are latency-bound: batch them (coalesce tensors, larger buckets)."
        )
    parts.append(_bandwidth_text(collectives, wl, gpus))
    return " ".join(parts)
