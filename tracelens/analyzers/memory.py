"""GPU memory: peak use, headroom, fragmentation, and allocator churn inside steps.

From the profiler's ``[memory]`` events (``profile_memory=True``): the peak of the caching
allocator's allocated and reserved totals per device, reserved far above allocated at the
reserved peak (fragmentation: blocks cached but unusable for the sizes requested), and a
reserved peak near the device's capacity (the next larger batch or sequence runs out of
memory). Older traces carry no totals; there the running sum of allocation sizes gives the
growth within the trace only, and that is what the evidence says.

Allocator churn is ``cudaMalloc``/``cudaFree`` (and their async/driver forms) inside
``ProfilerStep`` ranges: a warmed-up caching allocator makes neither, and ``cudaFree``
synchronizes the device. Its impact is the host time in those calls. Peak and
fragmentation findings cost no time; they carry risk, so they are not ranked by impact.
"""

from __future__ import annotations

from ingest.profiler_steps import STEP_INTERVALS
from ingest.schema import sql_list
from tracelens.analyzers.contract import finding
from tracelens.core.findings import Finding, Severity, TimeRange
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_bytes, fmt_ns
from tracelens.core.workload import Workload, workload_of

ANALYZER = "memory"

_ALLOC_CALLS = (
    "cudaMalloc",
    "cudaFree",
    "cudaMallocAsync",
    "cudaFreeAsync",
    "cuMemAlloc",
    "cuMemFree",
    "cudaMallocHost",
    "cudaFreeHost",
    "cudaHostAlloc",
)

# Per device: peak allocated and reserved, each the maximum over the whole trace (from the
# totals, or the running sum without them), and the first moment each was reached. Ties are
# broken on time and then on the event's own columns, so the same file always gives the
# same answer.
_PEAKS = """
WITH e AS (
    SELECT device_id, ts_ns, total_allocated, total_reserved,
           sum(bytes) OVER (PARTITION BY device_id ORDER BY ts_ns, bytes, addr,
                                         total_allocated, total_reserved
                            ROWS UNBOUNDED PRECEDING) AS running
    FROM memory_events WHERE device_id >= 0
),
p AS (
    SELECT device_id, count(*) AS events,
           count(total_allocated) > 0 AS has_totals,
           coalesce(max(total_allocated), max(running)) AS peak_allocated,
           max(total_reserved) AS peak_reserved
    FROM e GROUP BY device_id
)
SELECT p.*,
       (SELECT min(ts_ns) FROM e WHERE e.device_id = p.device_id
          AND coalesce(e.total_allocated, e.running) = p.peak_allocated) AS peak_allocated_ts,
       (SELECT min(ts_ns) FROM e WHERE e.device_id = p.device_id
          AND e.total_reserved = p.peak_reserved) AS peak_reserved_ts
FROM p ORDER BY device_id
"""


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    findings: list[Finding] = []
    capacity = {
        int(r[0]): r[1]
        for r in db.rows("SELECT device_id, total_memory_bytes FROM devices")
        if r[1] is not None
    }
    for p in db.dicts(_PEAKS):
        findings.extend(_peak_findings(db, t, p, capacity.get(int(p["device_id"]))))
    churn = _churn_finding(db, t)
    if churn is not None:
        findings.append(churn)
    return findings


def _peak_findings(db: TraceDB, t: Thresholds, p: dict, cap: int | None) -> list[Finding]:
    dev = int(p["device_id"])
    out: list[Finding] = []
    peak_alloc = int(p["peak_allocated"] or 0)
    evidence = {
        "device_id": dev,
        "memory_events": int(p["events"]),
        "has_allocator_totals": bool(p["has_totals"]),
        "peak_allocated_bytes": peak_alloc,
        "peak_reserved_bytes": int(p["peak_reserved"]) if p["peak_reserved"] is not None else None,
        "device_memory_bytes": cap,
        "peak_allocated_offset_ns": int(p["peak_allocated_ts"] - db.t0_ns),
    }
    if not p["has_totals"]:
        # Without allocator totals only growth inside the recording is known: no judgement.
        return out
    reserved = int(p["peak_reserved"] or 0)
    ranges = [TimeRange(int(p["peak_reserved_ts"]), int(p["peak_reserved_ts"]) + 1, dev, "peak")]
    if cap and 100.0 * reserved / cap >= t.memory_near_capacity_pct:
        share = 100.0 * reserved / cap
        out.append(
            finding(
                ANALYZER,
                (dev, "near_capacity"),
                0,
                db,
                t,
                severity=Severity.MEDIUM,
                title=f"GPU {dev} memory peaks at {fmt_bytes(reserved)} reserved, {share:.0f}% "
                f"of its {fmt_bytes(cap)}",
                impact_basis="Not a time cost: a risk. A larger batch, longer sequence or "
                "fragmentation spike will fail with an out-of-memory error.",
                summary=f"Peak allocated {fmt_bytes(peak_alloc)}, peak reserved "
                f"{fmt_bytes(reserved)} of {fmt_bytes(cap)} device memory.",
                evidence={**evidence, "peak_reserved_pct_of_device": round(share, 2)},
                advice=_capacity_advice(workload_of(db)),
                time_ranges=ranges,
            )
        )
    # Fragmentation compares the two peaks: reserved memory the allocator holds beyond the
    # most the program ever had allocated at once is memory no tensor could use. Allocated
    # at the moment reserved peaked says nothing: reserved stays at its maximum long after
    # tensors are freed (a cache, not fragmentation), so any low point of allocated while
    # it stays there would make a false ratio.
    slack = reserved - peak_alloc
    if (
        peak_alloc > 0
        and reserved >= t.memory_reserved_over_allocated * peak_alloc
        and slack >= t.memory_min_slack_bytes
    ):
        ratio = reserved / peak_alloc
        out.append(
            finding(
                ANALYZER,
                (dev, "fragmentation"),
                0,
                db,
                t,
                severity=Severity.LOW,
                title=f"GPU {dev}: {fmt_bytes(reserved)} reserved but at most "
                f"{fmt_bytes(peak_alloc)} ever allocated ({ratio:.1f}x): allocator "
                "fragmentation",
                impact_basis="Not a time cost: memory held by the caching allocator that no "
                "tensor uses, unavailable to larger batches or other processes.",
                summary=f"Peak reserved exceeds peak allocated by {fmt_bytes(slack)}: even at "
                "its fullest the program used only "
                f"{100.0 * peak_alloc / reserved:.0f}% of what the allocator held.",
                evidence={
                    **evidence,
                    "reserved_over_peak_allocated": round(ratio, 3),
                    "unused_reserved_bytes": slack,
                    "peak_reserved_offset_ns": int(p["peak_reserved_ts"] - db.t0_ns),
                },
                advice=_FRAGMENTATION_ADVICE,
                time_ranges=ranges,
            )
        )
    return out


def _capacity_advice(wl: Workload) -> str:
    alloc = (
        "set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` so fragmentation does not tip "
        "it over"
    )
    if wl.is_training:
        return (
            "Headroom is thin. Cut activation memory with activation checkpointing "
            "(`torch.utils.checkpoint`), keep weights and activations in bf16/fp16, shard "
            "optimizer state (FSDP/ZeRO) or use 8-bit optimizers, and " + alloc + "."
        )
    if wl.kind == "serving":
        return (
            "Headroom is thin. Size the KV cache explicitly (e.g. vLLM "
            "`gpu_memory_utilization`, a lower `max_num_seqs` or context length), keep "
            "weights in bf16/fp16 or quantized (8-bit/4-bit), and " + alloc + "."
        )
    return (
        "Headroom is thin. Run inference under `torch.inference_mode()` so no autograd state "
        "is kept, keep weights in bf16/fp16 or quantized, lower the batch size or sequence "
        "length, and " + alloc + "."
    )


_FRAGMENTATION_ADVICE = (
    "The caching allocator keeps freed blocks whose sizes do not fit new requests. Set "
    "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` (segments grow instead of new ones "
    "being reserved), keep tensor shapes steady across steps (pad or bucket variable sequence "
    "lengths), and avoid `torch.cuda.empty_cache()` in the loop, which only moves the cost "
    "into cudaMalloc."
)


def _churn_finding(db: TraceDB, t: Thresholds) -> Finding | None:
    names = sql_list(_ALLOC_CALLS)
    rows = db.dicts(
        f"""WITH steps AS (
                SELECT DISTINCT start_ns, end_ns FROM ({STEP_INTERVALS})
            )
            SELECT a.name, count(*) AS calls, sum(a.end_ns - a.start_ns) AS ns,
                   count(DISTINCT s.start_ns) AS steps, min(a.start_ns) AS first_ns,
                   max(a.end_ns) AS last_ns
            FROM api_calls a JOIN steps s ON a.start_ns >= s.start_ns AND a.end_ns <= s.end_ns
            WHERE a.name IN ({names})
            GROUP BY a.name ORDER BY ns DESC, a.name"""
    )
    calls = sum(int(r["calls"]) for r in rows)
    if calls < t.memory_min_churn_calls:
        return None
    ns = sum(int(r["ns"]) for r in rows)
    step_count = int(db.scalar(f"SELECT count(DISTINCT name) FROM ({STEP_INTERVALS})") or 0)
    frees = sum(int(r["calls"]) for r in rows if "Free" in r["name"])
    return finding(
        ANALYZER,
        ("allocator_churn",),
        ns,
        db,
        t,
        title=f"Allocator churn: {calls:,} cudaMalloc/cudaFree calls inside steps "
        f"({fmt_ns(ns)} on the host)",
        impact_basis="Host time inside device allocation calls during profiled steps; a "
        "warmed-up caching allocator serves steady-state steps without any of them.",
        summary=f"{calls:,} allocation calls over {step_count} steps ({frees:,} frees, each of "
        "which synchronizes the device).",
        evidence={
            "calls": calls,
            "host_ns": ns,
            "steps": step_count,
            "by_call": [
                {"api": r["name"], "calls": int(r["calls"]), "ns": int(r["ns"])} for r in rows
            ],
        },
        advice="The caching allocator is releasing and re-acquiring device memory every step. "
        "Remove `torch.cuda.empty_cache()` from the loop, keep shapes stable (pad/bucket "
        "dynamic shapes) so cached blocks are reused, set `PYTORCH_CUDA_ALLOC_CONF="
        "expandable_segments:True`, and if memory is tight reduce the peak (checkpointing, "
        "bf16) instead of freeing between steps.",
        time_ranges=[
            TimeRange(int(r["first_ns"]), int(r["last_ns"]), None, r["name"]) for r in rows[:3]
        ],
    )
