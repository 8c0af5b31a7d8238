"""Communication/computation overlap: NCCL time, how much of it compute hides, bandwidth.

NCCL kernels (names matching ``nccl``) are the communication; every other kernel is
compute. Per device, the union of communication intervals minus its intersection with the
union of compute intervals is the *exposed* communication: time the GPU only communicates.
Overlapped communication is free; exposed communication is what better overlap (DDP
bucketing, FSDP prefetch, async collectives) can give back, so it is the impact.

Each NCCL kernel is matched to the collective call that launched it (the profiler's
``record_param_comms`` operator enclosing the launch, with element count, dtype and group
size), giving per-collective message sizes and achieved bandwidth (algorithm bandwidth =
bytes / kernel time; bus bandwidth scales it by 2(n-1)/n for all-reduce, (n-1)/n for
all-gather/reduce-scatter, as nccl-tests report it).
"""

from __future__ import annotations

from tracelens.core.findings import Finding, TimeRange, finding_id, severity_for
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_bytes, fmt_ns

ANALYZER = "communication"

_COMM = "name ILIKE '%nccl%'"

# Bytes per element of the dtype names the profiler writes.
_DTYPE_BYTES = """CASE lower(dtype)
    WHEN 'float' THEN 4 WHEN 'float32' THEN 4 WHEN 'int' THEN 4 WHEN 'int32' THEN 4
    WHEN 'double' THEN 8 WHEN 'long' THEN 8 WHEN 'int64' THEN 8 WHEN 'float64' THEN 8
    WHEN 'half' THEN 2 WHEN 'bfloat16' THEN 2 WHEN 'float16' THEN 2 WHEN 'short' THEN 2
    WHEN 'byte' THEN 1 WHEN 'char' THEN 1 WHEN 'bool' THEN 1 WHEN 'uint8' THEN 1
    WHEN 'int8' THEN 1 END"""


def _merged(sel: str) -> str:
    """SQL merging the (device_id, start_ns, end_ns) rows of ``sel`` into disjoint intervals."""
    return f"""(
        WITH x AS ({sel}),
        m AS (
            SELECT *, max(end_ns) OVER (PARTITION BY device_id ORDER BY start_ns, end_ns
                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
            FROM x
        ),
        g AS (
            SELECT *, sum(CASE WHEN prev_end IS NULL OR start_ns > prev_end THEN 1 ELSE 0 END)
                      OVER (PARTITION BY device_id ORDER BY start_ns, end_ns
                            ROWS UNBOUNDED PRECEDING) AS grp
            FROM m
        )
        SELECT device_id, min(start_ns) AS start_ns, max(end_ns) AS end_ns
        FROM g GROUP BY device_id, grp
    )"""


_OVERLAP = f"""
WITH c AS {_merged(f"SELECT device_id, start_ns, end_ns FROM kernels WHERE {_COMM}")},
k AS {_merged(f"SELECT device_id, start_ns, end_ns FROM kernels WHERE NOT ({_COMM})")},
comm AS (SELECT device_id, sum(end_ns - start_ns) AS comm_ns FROM c GROUP BY device_id),
ov AS (
    SELECT c.device_id,
           sum(least(c.end_ns, k.end_ns) - greatest(c.start_ns, k.start_ns)) AS overlap_ns
    FROM c JOIN k ON k.device_id = c.device_id AND k.start_ns < c.end_ns
                 AND k.end_ns > c.start_ns
    GROUP BY c.device_id
)
SELECT comm.device_id, comm.comm_ns, coalesce(ov.overlap_ns, 0) AS overlap_ns
FROM comm LEFT JOIN ov USING (device_id) ORDER BY comm.device_id
"""

_PER_COLLECTIVE = f"""
WITH k AS (
    SELECT k.device_id, k.name, k.start_ns, k.end_ns, a.pid, a.tid, a.start_ns AS api_start
    FROM kernels k LEFT JOIN (
        SELECT correlation_id, any_value(pid) AS pid, any_value(tid) AS tid,
               min(start_ns) AS start_ns
        FROM api_calls WHERE correlation_id IS NOT NULL GROUP BY correlation_id
    ) a USING (correlation_id)
    WHERE k.device_id = ? AND k.{_COMM}
),
c AS (
    SELECT pid, tid, start_ns, end_ns, collective, dtype, group_size,
           in_nelems * ({_DTYPE_BYTES}) AS bytes
    FROM comm_ops WHERE in_nelems IS NOT NULL
),
m AS (
    SELECT k.*, CASE WHEN c.end_ns >= k.api_start THEN c.collective END AS collective,
           CASE WHEN c.end_ns >= k.api_start THEN c.bytes END AS bytes,
           CASE WHEN c.end_ns >= k.api_start THEN c.group_size END AS group_size
    FROM k ASOF LEFT JOIN c ON c.pid = k.pid AND c.tid = k.tid AND c.start_ns <= k.api_start
)
SELECT coalesce(collective, regexp_extract(name, 'ncclKernel_([A-Za-z]+)|nccl([A-Za-z]+)', 1),
                'nccl') AS collective,
       count(*) AS count, sum(end_ns - start_ns) AS kernel_ns,
       CAST(median(bytes) AS BIGINT) AS median_bytes, sum(bytes) AS total_bytes,
       max(group_size) AS group_size,
       median(bytes / nullif(end_ns - start_ns, 0)) AS median_algbw_gbps
FROM m GROUP BY 1 ORDER BY kernel_ns DESC, 1
"""


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
        per = db.dicts(_PER_COLLECTIVE, [dev])
        collectives = []
        for p in per:
            algbw = p["median_algbw_gbps"]
            factor = _bus_factor(p["collective"], p["group_size"])
            collectives.append(
                {
                    "collective": p["collective"],
                    "count": int(p["count"]),
                    "kernel_ns": int(p["kernel_ns"]),
                    "median_bytes": p["median_bytes"],
                    "total_bytes": int(p["total_bytes"]) if p["total_bytes"] is not None else None,
                    "group_size": p["group_size"],
                    "median_algbw_gbps": round(algbw, 3) if algbw is not None else None,
                    "median_busbw_gbps": round(algbw * factor, 3)
                    if algbw is not None and factor is not None
                    else None,
                }
            )
        longest = db.dicts(
            f"""SELECT start_ns, end_ns FROM kernels WHERE device_id = ? AND {_COMM}
                ORDER BY end_ns - start_ns DESC, start_ns LIMIT 5""",
            [dev],
        )
        pct = db.pct_of_window(exposed)
        overlap_pct = 100.0 * overlap_ns / comm_ns if comm_ns else 0.0
        top = collectives[0] if collectives else None
        size_text = (
            f"; `{top['collective']}` ×{top['count']:,}, median "
            f"{fmt_bytes(top['median_bytes'])} at {top['median_algbw_gbps']} GB/s"
            if top and top["median_bytes"] and top["median_algbw_gbps"] is not None
            else ""
        )
        findings.append(
            Finding(
                id=finding_id(ANALYZER, dev),
                analyzer=ANALYZER,
                title=f"GPU {dev}: {fmt_ns(exposed)} of NCCL communication not hidden by compute "
                f"({share:.1f}% of its window)",
                severity=severity_for(pct, t),
                impact_ns=exposed,
                impact_pct=pct,
                impact_basis="Communication kernel time (union over streams) minus the part "
                "that overlaps compute kernels on the same GPU: the time the GPU only "
                "communicates, which overlap can hide. NCCL kernels also spin while waiting for "
                "slower ranks, so part of it may be load imbalance rather than transfer.",
                summary=f"NCCL kernels ran {fmt_ns(comm_ns)} on GPU {dev}; "
                f"{overlap_pct:.0f}% of it overlapped compute{size_text}.",
                evidence={
                    "device_id": dev,
                    "comm_ns": comm_ns,
                    "overlapped_ns": overlap_ns,
                    "exposed_ns": exposed,
                    "overlap_pct": round(overlap_pct, 2),
                    "collectives": collectives,
                    "bandwidth_note": "Kernel time includes waiting for peer ranks, so the "
                    "achieved bandwidth is a lower bound on the link's.",
                },
                advice=_advice(overlap_pct, collectives),
                time_ranges=[
                    TimeRange(int(k["start_ns"]), int(k["end_ns"]), dev, "NCCL") for k in longest
                ],
            )
        )
    return findings


def _advice(overlap_pct: float, collectives: list[dict]) -> str:
    parts = []
    if overlap_pct < 50:
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
    small = [c for c in collectives if c["median_bytes"] and c["median_bytes"] < 1024 * 1024]
    if small:
        parts.append(
            "Collectives of under 1 MiB ("
            + ", ".join(f"`{c['collective']}`" for c in small[:3])
            + ") are latency-bound: batch them (coalesce tensors, larger buckets)."
        )
    parts.append(
        "Compare the achieved bandwidth with the interconnect (NVLink hundreds of GB/s, PCIe "
        "tens, network per NIC); far below it, check topology (`NCCL_DEBUG=INFO`) and rank "
        "placement."
    )
    return " ".join(parts)
