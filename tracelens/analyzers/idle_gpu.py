"""Idle GPU time: how much of each device's window it sat idle, and why.

One finding per device and gap cause (see :mod:`ingest.derive_gaps` for how a cause is
judged), with the longest gaps of that cause and what the host was doing during them.
"""

from __future__ import annotations

from tracelens.core.findings import Finding, TimeRange, finding_id, severity_for
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns

ANALYZER = "idle_gpu"

CAUSE_TITLES = {
    "data_loading": "waiting on the data loader",
    "synchronization": "host synchronizations drain the GPU queue",
    "launch_overhead": "kernel launch overhead between short kernels",
    "gpu_dependency": "queued work waits on another stream, device or collective",
    "host_compute": "host busy in Python/operators before the next launch",
    "untraced": "no recorded host activity explains it",
}


def _advice(cause: str, details: list[dict]) -> str:
    top = ", ".join(
        f"`{d['detail']}` ({d['n']}×, {fmt_ns(d['ns'])})" for d in details if d["detail"]
    )
    if cause == "data_loading":
        return (
            "The GPU waits while the next batch is prepared"
            + (f" (in {top})" if top else "")
            + ". Overlap loading with compute: `DataLoader(num_workers=N, pin_memory=True, "
            "prefetch_factor=2, persistent_workers=True)`, move decoding/augmentation off the "
            "training process, and copy batches with `.to(device, non_blocking=True)` so the "
            "next batch is ready when the step starts."
        )
    if cause == "synchronization":
        return (
            "The host blocks until the GPU drains"
            + (f" (in {top})" if top else "")
            + ", so nothing is queued when it resumes and the GPU idles while Python catches "
            "up. Remove syncs from the hot loop: avoid `.item()`, `.cpu()`, `print(tensor)`, "
            "`torch.cuda.synchronize()` and boolean checks on CUDA tensors each step; keep "
            "metrics on the GPU and read them every N steps; use `non_blocking=True` copies "
            "into pinned buffers."
        )
    if cause == "launch_overhead":
        return (
            "Many kernels are so short that the GPU finishes each before the next is launched. "
            "Capture the step in a CUDA graph (`torch.cuda.graphs` / `torch.compile(mode="
            '"reduce-overhead")`), fuse small ops with `torch.compile`, or raise the batch '
            "size so each kernel does more work."
        )
    if cause == "gpu_dependency":
        return (
            "Work was already queued but could not start: it waited on an event from another "
            "stream, a copy, another GPU or a collective. Check cross-stream "
            "`wait_stream`/`record_stream` ordering, overlap communication with independent "
            "compute, and balance work across ranks."
        )
    if cause == "host_compute":
        return (
            "The launching thread was busy on the CPU"
            + (f" (in {top})" if top else "")
            + " before issuing the next GPU work. Profile the host side (py-spy, "
            "`with_stack=True`), move CPU work off the critical path or to another thread, "
            "and reduce per-step Python overhead (CUDA graphs, `torch.compile`)."
        )
    return (
        "Nothing recorded on the host explains these gaps. Record with `with_stack=True` and "
        "Python functions, or under Nsight Systems with `--trace=cuda,nvtx,osrt`, to see what "
        "the process was doing."
    )


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    findings: list[Finding] = []
    t0 = db.t0_ns
    for dev in db.devices:
        by_cause = db.dicts(
            """SELECT cause, count(*) AS n, sum(end_ns - start_ns) AS ns FROM gaps
               WHERE device_id = ? GROUP BY cause ORDER BY ns DESC, cause""",
            [dev.device_id],
        )
        idle_by_cause = {r["cause"]: int(r["ns"]) for r in by_cause}
        for row in by_cause:
            cause, n, ns = row["cause"], int(row["n"]), int(row["ns"])
            share = 100.0 * ns / dev.window_ns if dev.window_ns else 0.0
            if share < t.idle_min_cause_pct:
                continue
            longest = db.dicts(
                """SELECT start_ns, end_ns, end_ns - start_ns AS duration_ns, detail FROM gaps
                   WHERE device_id = ? AND cause = ? ORDER BY duration_ns DESC, start_ns LIMIT ?""",
                [dev.device_id, cause, t.idle_top_gaps],
            )
            details = db.dicts(
                """SELECT detail, count(*) AS n, sum(end_ns - start_ns) AS ns FROM gaps
                   WHERE device_id = ? AND cause = ? AND detail IS NOT NULL
                   GROUP BY detail ORDER BY ns DESC, detail LIMIT 5""",
                [dev.device_id, cause],
            )
            impact_pct = db.pct_of_window(ns)
            label = f"GPU {dev.device_id}" + (f" ({dev.name})" if dev.name else "")
            findings.append(
                Finding(
                    id=finding_id(ANALYZER, dev.device_id, cause),
                    analyzer=ANALYZER,
                    title=f"GPU {dev.device_id} idle {fmt_ns(ns)} ({share:.1f}% of its window): "
                    f"{CAUSE_TITLES.get(cause, cause)}",
                    severity=severity_for(impact_pct, t),
                    impact_ns=ns,
                    impact_pct=impact_pct,
                    impact_basis=f"Sum of the {n:,} idle gaps on GPU {dev.device_id} judged "
                    f"'{cause}'; removing their cause gives back at most this much GPU time.",
                    summary=f"{label} was busy {dev.busy_pct:.2f}% of its "
                    f"{fmt_ns(dev.window_ns)} window. {n:,} idle gaps totalling {fmt_ns(ns)} "
                    f"({share:.1f}%) have this cause: {CAUSE_TITLES.get(cause, cause)}.",
                    evidence={
                        "device_id": dev.device_id,
                        "device_name": dev.name,
                        "window_ns": dev.window_ns,
                        "busy_ns": dev.busy_ns,
                        "busy_pct": round(dev.busy_pct, 3),
                        "idle_pct": round(dev.idle_pct, 3),
                        "cause": cause,
                        "gap_count": n,
                        "gap_ns": ns,
                        "idle_ns_by_cause": idle_by_cause,
                        "host_activity": [
                            {"detail": d["detail"], "gaps": int(d["n"]), "ns": int(d["ns"])}
                            for d in details
                        ],
                        "longest_gaps": [
                            {
                                "start_offset_ns": int(g["start_ns"] - t0),
                                "end_offset_ns": int(g["end_ns"] - t0),
                                "duration_ns": int(g["duration_ns"]),
                                "host_activity": g["detail"],
                            }
                            for g in longest
                        ],
                    },
                    advice=_advice(cause, details),
                    time_ranges=[
                        TimeRange(
                            int(g["start_ns"]), int(g["end_ns"]), dev.device_id, f"idle: {cause}"
                        )
                        for g in longest
                    ],
                )
            )
    return findings
