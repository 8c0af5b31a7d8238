"""Idle GPU time: how much of each device's window it sat idle, and why.

One finding per device and gap cause (see :mod:`ingest.derive_gaps` for how a cause is
judged from evidence), with the evidence that decided it (how many gaps had the next work
queued, how long blocking calls blocked inside them, whether the launch came after the GPU
ran dry), the longest gaps, and what the host was doing during them: the innermost
operator, range or Python function covering the host part of each gap, or "untraced host
code". Advice fits the workload (:func:`tracelens.core.workload.workload_of`): no PyTorch
API for a CUDA C or HIP program, HIP terms on AMD, no graph capture where graphs already
replay.
"""

from __future__ import annotations

from typing import Any

from ingest.derive_gaps import CAUSE_RULES, LAUNCH_ISSUE_SLACK_NS, SYNC_CALLS
from tracelens.analyzers.contract import finding
from tracelens.core.findings import Finding, TimeRange, finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.core.workload import Workload, workload_of

ANALYZER = "idle_gpu"


def idle_finding_id(device_id: int, cause: str) -> str:
    """The id of the finding about ``device_id``'s gaps of ``cause``.

    The analyzers that explain one cause in depth list it in ``supersedes``.
    """
    return finding_id(ANALYZER, device_id, cause)


def idle_subject(f: Finding) -> tuple[int, str] | None:
    """The device and gap cause an idle_gpu finding is about; None for other findings."""
    if f.analyzer != ANALYZER:
        return None
    return f.evidence["device_id"], f.evidence["cause"]


CAUSE_TITLES = {
    "data_loading": "waiting on the data loader",
    "synchronization": "the host was blocked in synchronizing calls",
    "launch_overhead": "the GPU ran dry while the host was issuing launches",
    "gpu_dependency": "work was queued but waited on the GPU (another stream, event, "
    "device or collective)",
    "host_compute": "the host was busy in traced code before the next launch",
    "untraced": "the host ran code the trace does not record",
}
_NOTHING = "nothing recorded on the host explains it"
_UVM_TITLE = "idle between unified-memory migrations (managed memory faulting between host and GPU)"


# What a GPU-side wait was, from its evidence: the GPU's own gap between back-to-back
# kernels, a kernel's first launch (lazy module loading), a wait the host sat blocked in
# too, or a dependency on other work (another stream, an event, a collective's peer).
_GPU_SIDE = """
WITH g AS (
    SELECT start_ns, end_ns, end_ns - start_ns AS d, detail, launch_start_ns, launch_end_ns
    FROM gaps WHERE device_id = ? AND cause = 'gpu_dependency'
),
firsts AS (SELECT name, min(start_ns) AS first_start FROM kernels WHERE device_id = ?
           GROUP BY name),
blocked AS (
    SELECT g.start_ns,
           max(least(a.end_ns, g.end_ns) - greatest(a.start_ns, g.start_ns)) AS blocked_ns,
           arg_max(a.name, least(a.end_ns, g.end_ns) - greatest(a.start_ns, g.start_ns))
               AS blocking_call
    FROM g JOIN api_calls a
      ON a.start_ns < g.end_ns AND a.end_ns > g.start_ns
     AND a.name IN (SELECT unnest(?::VARCHAR[]))
    WHERE g.d >= ?
    GROUP BY g.start_ns
),
-- Long waits during which no device in the trace ran anything: what the queued work waited
-- for is not in this trace (work issued before recording began, another process or rank).
busy_elsewhere AS (
    SELECT DISTINCT g.start_ns
    FROM g JOIN (SELECT start_ns, end_ns FROM kernels
                 UNION ALL SELECT start_ns, end_ns FROM memcpys
                 UNION ALL SELECT start_ns, end_ns FROM memsets) w
      ON w.start_ns < g.end_ns AND w.end_ns > g.start_ns
    WHERE g.d >= ?
),
cls AS (
    SELECT g.d, b.blocking_call,
           CASE WHEN g.d <= ? THEN 'kernel_switch'
                WHEN g.launch_end_ns - g.launch_start_ns >= ? AND f.first_start = g.end_ns
                    THEN 'first_launch'
                WHEN ? AND g.d >= ? AND e.start_ns IS NULL THEN 'unrecorded_producer'
                WHEN coalesce(b.blocked_ns, 0) >= 0.5 * g.d THEN 'host_blocked'
                -- issued as the GPU went idle and started one launch latency later: the
                -- GPU ran dry waiting for the launch to arrive
                WHEN g.launch_start_ns > g.start_ns AND g.end_ns - g.launch_start_ns <= ?
                    THEN 'launch_latency'
                ELSE 'dependency' END AS kind
    FROM g LEFT JOIN firsts f ON f.name = g.detail LEFT JOIN blocked b USING (start_ns)
    LEFT JOIN busy_elsewhere e USING (start_ns)
)
SELECT kind, count(*) AS n, sum(d) AS ns, CAST(median(d) AS BIGINT) AS p50_ns,
       mode(blocking_call) AS blocking_call
FROM cls GROUP BY kind ORDER BY ns DESC, kind
"""
_GPU_SIDE_TITLES = {
    "kernel_switch": "short gaps between back-to-back queued kernels (the GPU's own "
    "per-kernel overhead)",
    "first_launch": "a kernel's first launch waited for its module to load (one-off)",
    "host_blocked": "queued work waited on a GPU-side event while the host blocked too",
    "unrecorded_producer": "queued work waited on work this trace does not record (nothing "
    "ran on any GPU meanwhile)",
    "launch_latency": "each next kernel was issued as the GPU went idle and arrived one "
    "launch latency later",
    "dependency": CAUSE_TITLES["gpu_dependency"],
}


def _whole_job_recorded(db: TraceDB) -> bool:
    """One process, unfiltered: a wait with no GPU busy then waited on unrecorded work.

    In a job of several ranks the wait is most likely on a peer (a collective), and a
    filtered or sampled capture leaves out work that did run: neither says the producer
    was issued before recording began.
    """
    world = db.info.get("world_size")
    return (world is None or int(world) <= 1) and not workload_of(db).filtered


def _gpu_side(db: TraceDB, device_id: int, t: Thresholds) -> list[dict]:
    return db.dicts(
        _GPU_SIDE,
        [
            device_id,
            device_id,
            list(SYNC_CALLS),
            t.idle_blocked_min_gap_ns,
            t.idle_blocked_min_gap_ns,
            t.idle_kernel_switch_ns,
            t.idle_slow_first_launch_ns,
            _whole_job_recorded(db),
            t.idle_blocked_min_gap_ns,
            t.idle_launch_latency_ns,
        ],
    )


def _title(cause: str, details: list[dict], ns: int, kinds: list[dict] | None = None) -> str:
    if cause == "gpu_dependency" and kinds:
        return _GPU_SIDE_TITLES[kinds[0]["kind"]]
    named = sum(int(d["ns"]) for d in details if d["detail"])
    if cause == "untraced" and 2 * named < ns:
        return _NOTHING
    if cause == "host_compute" and details and details[0]["detail"]:
        share = "mostly" if 2 * int(details[0]["ns"]) >= ns else "longest"
        top = _short(details[0]["detail"])
        return f"the host was busy ({share} in `{top}`) before the next launch"
    return CAUSE_TITLES.get(cause, cause)


def _short(name: str, limit: int = 80) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _top(details: list[dict]) -> str:
    return ", ".join(
        f"`{_short(d['detail'])}` ({d['n']}×, {fmt_ns(d['ns'])})" for d in details if d["detail"]
    )


def _advice(cause: str, details: list[dict], w: Workload, ev: dict) -> str:
    top = _top(details)
    torch = w.is_pytorch
    graph = "HIP graph" if w.amd else "CUDA graph"
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
        text = (
            f"The launching thread sat in blocking calls for {fmt_ns(ev['blocked_in_gaps_ns'])} "
            "of these gaps before it issued the next work"
            + (f" ({top})" if top else "")
            + ", so nothing new was queued meanwhile. "
        )
        if torch:
            return text + (
                "Remove syncs from the hot loop: avoid `.item()`, `.cpu()`, `print(tensor)`, "
                "`torch.cuda.synchronize()` and boolean checks on device "
                "tensors each step; keep metrics on the GPU and read them every N "
                "steps; copy with `non_blocking=True` into pinned buffers."
            )
        api = "hip" if w.amd else "cuda"
        return text + (
            f"Replace synchronous `{api}Memcpy` with `{api}MemcpyAsync` from pinned host memory "
            f"(`{api}HostAlloc`/`{api}HostRegister`) on a stream, and wait on an event "
            f"(`{api}EventSynchronize` or `{api}StreamWaitEvent`) only where the data is "
            f"needed instead of `{api}DeviceSynchronize`."
        )
    if cause == "launch_overhead":
        text = (
            f"In {ev['launch_in_progress_gaps']:,} of these gaps the next launch call was "
            "already running when the GPU ran dry, in the others it started within "
            f"{fmt_ns(ev['launch_issue_slack_ns'])} after: the GPU finishes each kernel before "
            "the host has issued the next. "
        )
        if w.cuda_graphs:
            return text + (
                f"{graph}s are already replayed here: capture more of the step in each graph, "
                "and fuse or enlarge the kernels launched outside it."
            )
        if torch:
            return text + (
                f"Capture the step in a {graph} (`torch.cuda.CUDAGraph`, "
                '`torch.compile(mode="reduce-overhead")`), fuse small ops with `torch.compile`, '
                "or give each kernel more work (larger batches)."
            )
        return text + (
            f"Capture the launch sequence in a {graph} "
            f"(`{'hipStreamBeginCapture' if w.amd else 'cudaStreamBeginCapture'}` ... "
            f"`{'hipGraphLaunch' if w.amd else 'cudaGraphLaunch'}`), fuse small kernels, or "
            "give each kernel more work."
        )
    if cause == "gpu_dependency":
        api = "hip" if w.amd else "cuda"
        kinds = ev.get("kinds") or []
        main = kinds[0]["kind"] if kinds else "dependency"
        if main == "kernel_switch":
            k = kinds[0]
            fuse = (
                "fuse them (`torch.compile`, fused kernels)"
                if torch and not w.torch_compile
                else "fuse them into fewer, larger kernels"
            )
            return (
                f"{k['n']:,} gaps of {fmt_ns(k['p50_ns'])} (median) between kernels that were "
                "already queued: nothing is waiting, this is the GPU's own switch from one "
                "kernel to the next. Graphs do not remove it; only fewer kernels do: "
                f"{fuse}, or give each kernel more work (larger batches)."
            )
        if main == "first_launch":
            loading = "HIP_MODULE_LOADING" if w.amd else "CUDA_MODULE_LOADING=EAGER"
            return (
                "The first launch of a kernel loads its module (lazy loading), and the GPU "
                "waits for it once per process: not a steady-state cost. Launch once before "
                f"timing, or set `{loading}` to load modules at start-up."
                if not w.amd
                else "The first launch of a kernel loads its code object, and the GPU waits "
                "for it once per process: not a steady-state cost. Launch once before timing."
            )
        if main == "launch_latency":
            k = kinds[0]
            graphs = (
                ""
                if w.cuda_graphs
                else f"capture the sequence in a {graph} so one launch runs many kernels, "
            )
            compile_hint = (
                '`torch.compile(mode="reduce-overhead")`, ' if torch and not w.torch_compile else ""
            )
            return (
                f"{k['n']:,} gaps (median {fmt_ns(k['p50_ns'])}) where the host issued the next "
                "kernel just as the GPU went idle and the kernel started one launch latency "
                "later: the GPU outruns the launcher. Launch fewer, larger kernels: "
                f"{graphs}{compile_hint}fuse small kernels, or batch more work per kernel."
            )
        if main == "unrecorded_producer":
            k = kinds[0]
            call = k.get("blocking_call")
            host = (
                f" (the host sat blocked in `{call}` behind it: a consequence, not the cause)"
                if call
                else ""
            )
            return (
                f"{k['n']:,} {'wait' if k['n'] == 1 else 'waits'} (median {fmt_ns(k['p50_ns'])}) "
                "where queued work waited on a "
                f"GPU-side event while no GPU in this trace ran anything{host}: the event's "
                "producer is not recorded. It is work issued before the profiler started "
                "(common at the start of a capture: an asynchronous or overlap scheduler's "
                "previous batch), or work of another process or rank. Record a steady state "
                "(start the profiler a few steps in and keep several steps) before acting on "
                "this time; if it recurs mid-trace, profile the process that signals the "
                "event together with this one."
            )
        if main == "host_blocked":
            call = kinds[0].get("blocking_call") or f"a synchronous {api} call"
            return (
                f"The queued work waited on a GPU-side dependency (an event recorded by work "
                "on another stream, or outside this trace) while the host sat blocked in "
                f"`{call}` behind it, so neither side made progress. Find what the waited "
                f"event belongs to (`{api}StreamWaitEvent` before the queued work); replace a "
                "synchronous copy behind queued work with an asynchronous one into pinned "
                "memory and synchronize only when the value is needed."
            )
        text = (
            f"In {ev['queued_before_gap']:,} of these gaps the next work had been launched "
            "before the GPU went idle, in "
            f"{ev['queued_during_gap']:,} it was queued for most of the gap: the host was not "
            "the bottleneck. The queued work waited on something on the GPU side"
            + (f" (next work: {top})" if top else "")
            + ": an event from another stream or device, or a collective's peer. "
        )
        if torch:
            return text + (
                f"Check cross-stream ordering (`wait_stream`/`record_stream` and the "
                f"`{api}StreamWaitEvent` they issue, events), overlap "
                "communication with independent compute, and balance work across ranks."
            )
        return text + (
            f"Check which `{api}StreamWaitEvent`/event dependencies the queued kernels wait on, "
            "put independent work on other streams so it can fill the wait, and fuse chains of "
            "small kernels."
        )
    if cause == "host_compute":
        text = (
            "The launching thread was busy on the CPU"
            + (f" (innermost code covering the gaps: {top})" if top else "")
            + " before issuing the next GPU work. "
        )
        if torch:
            extra = (
                f", capture steady-state steps in a {graph} or `torch.compile` them"
                if not w.cuda_graphs
                else ""
            )
            return text + (
                "Profile the host side (py-spy, `with_stack=True`), move CPU work off the "
                "critical path or to another thread, and queue more GPU work ahead of it "
                f"(avoid syncs that leave the queue empty){extra}."
            )
        return text + (
            "Profile the host code (perf, Nsight Systems with `--sample=cpu`), move it off the "
            "launching thread, or queue more GPU work ahead of it."
        )
    if 2 * ev.get("uvm_gaps", 0) >= ev.get("gap_count", 1) > 0:
        p = "hip" if w.amd else "cuda"
        return (
            f"{ev['uvm_gaps']:,} of these gaps end in a unified-memory migration, not in "
            "launched work: the GPU sat idle while pages of managed memory moved on demand "
            "(the host touching memory the GPU had, or the reverse). Order the migrations "
            f"yourself: `{p}MemPrefetchAsync` to the device after the host's last write and "
            f"before the kernels, back to `{p}CpuDeviceId` before host reads, "
            f"`{p}MemAdvise` for read-mostly data, or explicit device buffers and copies."
        )
    unlaunched = (
        "No launching call is recorded for the work that ended "
        f"{ev['no_launch_record']:,} of these gaps (for example unified-memory migrations "
        "or page faults), so nothing on the host explains those."
    )
    if any(d["detail"] for d in details):
        if torch:
            how = (
                "Record with `with_stack=True` (Python functions) and `record_function` ranges "
                "around host work"
            )
        else:
            how = (
                "Annotate host phases with NVTX/roctx ranges and record under Nsight Systems "
                "with `--trace=cuda,nvtx,osrt --sample=cpu`"
                + (" (or rocprof with `--roctx-trace`)" if w.amd else "")
            )
        return (
            "The launching thread ran code no recorded operator, range or function covers "
            f"(untraced host code) before issuing the next GPU work. {how} to see what it was."
            + (f" {unlaunched}" if ev["no_launch_record"] else "")
        )
    return unlaunched


_CAUSE_EVIDENCE = """
SELECT count(*) FILTER (WHERE launch_end_ns <= start_ns) AS queued_before_gap,
       count(*) FILTER (WHERE launch_end_ns > start_ns) AS queued_during_gap,
       CAST(coalesce(median(start_ns - launch_end_ns)
                     FILTER (WHERE launch_end_ns <= start_ns), 0) AS BIGINT) AS queued_lead_p50_ns,
       coalesce(sum(blocked_ns), 0) AS blocked_in_gaps_ns,
       count(*) FILTER (WHERE launch_start_ns <= start_ns) AS launch_in_progress_gaps,
       count(*) FILTER (WHERE launch_start_ns > start_ns) AS launch_after_gap_start,
       CAST(coalesce(median(launch_start_ns - start_ns)
                     FILTER (WHERE launch_start_ns > start_ns), 0) AS BIGINT)
           AS launch_delay_p50_ns,
       count(*) FILTER (WHERE launch_start_ns IS NULL) AS no_launch_record
FROM gaps WHERE device_id = ? AND cause = ?
"""

# The evidence that decided each cause (see ingest.derive_gaps), shown in its finding.
_DECIDING = {
    "gpu_dependency": ("queued_before_gap", "queued_during_gap", "queued_lead_p50_ns"),
    "synchronization": ("blocked_in_gaps_ns",),
    "launch_overhead": (
        "launch_in_progress_gaps",
        "launch_after_gap_start",
        "launch_delay_p50_ns",
    ),
    "host_compute": (),
    "untraced": ("no_launch_record",),
    "data_loading": (),
}


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    findings: list[Finding] = []
    t0 = db.t0_ns
    w = workload_of(db)
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
            raw = db.dicts(_CAUSE_EVIDENCE, [dev.device_id, cause])[0]
            deciding = {k: int(raw[k]) for k in _DECIDING.get(cause, ())}
            ev_for_advice: dict[str, Any] = {**{k: int(v) for k, v in raw.items()}, **_slack()}
            label = f"GPU {dev.device_id}" + (f" ({dev.name})" if dev.name else "")
            kinds = _gpu_side(db, dev.device_id, t) if cause == "gpu_dependency" else None
            if cause == "untraced":
                ev_for_advice["uvm_gaps"] = int(
                    db.scalar(
                        """SELECT count(*) FROM gaps g WHERE g.device_id = ? AND g.cause = ?
                             AND EXISTS (SELECT 1 FROM memcpys m WHERE m.device_id = g.device_id
                                           AND m.kind LIKE 'UVM%' AND m.start_ns = g.end_ns)""",
                        [dev.device_id, cause],
                    )
                    or 0
                )
                ev_for_advice["gap_count"] = n
            if kinds:
                ev_for_advice["kinds"] = kinds
            title = _title(cause, details, ns, kinds)
            if cause == "untraced" and 2 * ev_for_advice.get("uvm_gaps", 0) >= n:
                title = _UVM_TITLE
            activity_key = "next_work" if cause == "gpu_dependency" else "host_activity"
            findings.append(
                finding(
                    ANALYZER,
                    (dev.device_id, cause),
                    ns,
                    db,
                    t,
                    title=f"GPU {dev.device_id} idle {fmt_ns(ns)} ({share:.1f}% of its window): "
                    f"{title}" + (" (filtered trace: cause uncertain)" if w.filtered else ""),
                    impact_basis=f"Sum of the {n:,} idle gaps on GPU {dev.device_id} judged "
                    f"'{cause}' ({CAUSE_RULES[cause]}); removing their cause gives back at "
                    "most this much GPU time."
                    + (
                        " The trace keeps only launch and copy runtime calls, so the events, "
                        "waits and syncs that decide a cause may be missing."
                        if w.filtered
                        else ""
                    ),
                    summary=f"{label} was busy {dev.busy_pct:.2f}% of its "
                    f"{fmt_ns(dev.window_ns)} window. {n:,} idle gaps totalling {fmt_ns(ns)} "
                    f"({share:.1f}%) have this cause: {title}.",
                    evidence={
                        "device_id": dev.device_id,
                        "device_name": dev.name,
                        "window_ns": dev.window_ns,
                        "busy_ns": dev.busy_ns,
                        "busy_pct": round(dev.busy_pct, 3),
                        "idle_pct": round(dev.idle_pct, 3),
                        "cause": cause,
                        "cause_rule": CAUSE_RULES[cause],
                        "gap_count": n,
                        "gap_ns": ns,
                        **deciding,
                        **(
                            {
                                "gpu_side_kinds": [
                                    {k: r[k] for k in ("kind", "n", "ns", "p50_ns")}
                                    | (
                                        {"blocking_call": r["blocking_call"]}
                                        if r["kind"] in ("host_blocked", "unrecorded_producer")
                                        else {}
                                    )
                                    for r in kinds
                                ]
                            }
                            if kinds
                            else {}
                        ),
                        "idle_ns_by_cause": idle_by_cause,
                        activity_key: [
                            {"detail": d["detail"], "gaps": int(d["n"]), "ns": int(d["ns"])}
                            for d in details
                        ],
                        "longest_gaps": [
                            {
                                "start_offset_ns": int(g["start_ns"] - t0),
                                "end_offset_ns": int(g["end_ns"] - t0),
                                "duration_ns": int(g["duration_ns"]),
                                activity_key: g["detail"],
                            }
                            for g in longest
                        ],
                    },
                    advice=_advice(cause, details, w, ev_for_advice),
                    time_ranges=[
                        TimeRange(
                            int(g["start_ns"]), int(g["end_ns"]), dev.device_id, f"idle: {cause}"
                        )
                        for g in longest
                    ],
                )
            )
    return findings


def _slack() -> dict[str, int]:
    return {"launch_issue_slack_ns": LAUNCH_ISSUE_SLACK_NS}
