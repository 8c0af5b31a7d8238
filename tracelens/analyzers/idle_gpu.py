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

import re
from typing import Any

from ingest.derive_gaps import (
    CAUSE_RULES,
    GRAPH_LAUNCH_CALLS,
    LAUNCH_CALLS,
    LAUNCH_ISSUE_SLACK_NS,
    STREAM_WAIT_CALLS,
    SYNC_CALLS,
    WRAPPER_PATTERN,
)
from tracelens.analyzers.communication import comm_kernel_sql, torchrec_pipeline
from tracelens.analyzers.contract import finding
from tracelens.analyzers.drained_by_sync import DrainedBySync, drained_by_sync
from tracelens.analyzers.harness_flush import flush_in_gaps
from tracelens.analyzers.idle_scope import Claim, claim_of
from tracelens.analyzers.known_host_reads import known_host_read_advice
from tracelens.analyzers.launching_thread import with_launching_thread
from tracelens.analyzers.recording_caveats import profiler_overhead_caveat
from tracelens.core.clipped import clipped
from tracelens.core.end_to_start import end_to_start
from tracelens.core.findings import Finding, TimeRange, finding_id
from tracelens.core.module_loads import MODULE_LOAD_API
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_bytes, fmt_count, fmt_ns
from tracelens.core.workload import Workload, workload_of, wsl_host

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
    FROM {gaps} WHERE cause = 'gpu_dependency'
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
-- for is not in this trace (work issued before recording began, another process, or GPU
-- records a filter dropped). Not a peer rank: a collective's kernel runs while it waits for
-- its peers, so a wait on one shows GPU work.
busy_elsewhere AS (
    SELECT DISTINCT g.start_ns
    FROM g JOIN (SELECT start_ns, end_ns FROM kernels
                 UNION ALL SELECT start_ns, end_ns FROM memcpys
                 UNION ALL SELECT start_ns, end_ns FROM memsets) w
      ON w.start_ns < g.end_ns AND w.end_ns > g.start_ns
    WHERE g.d >= ?
),
-- Module loads (lazy loading at a first launch) running during each gap: only these say
-- a first launch waited for its module.
loads AS (
    SELECT g.start_ns,
           sum(least(l.end_ns, g.end_ns) - greatest(l.start_ns, g.start_ns)) AS load_ns
    FROM g JOIN (SELECT start_ns, end_ns FROM api_calls WHERE {module_load}) l
      ON l.start_ns < g.end_ns AND l.end_ns > g.start_ns
    GROUP BY g.start_ns
),
cls AS (
    SELECT g.d, b.blocking_call, coalesce(lo.load_ns, 0) AS load_ns,
           coalesce(g.launch_end_ns - g.launch_start_ns, 0) AS call_ns,
           greatest(0, g.end_ns - coalesce(g.launch_end_ns, g.end_ns)) AS after_call_ns,
           CASE WHEN g.d <= ? THEN 'kernel_switch'
                WHEN g.launch_end_ns - g.launch_start_ns >= ? AND f.first_start = g.end_ns
                    THEN 'first_launch'
                WHEN g.d >= ? AND e.start_ns IS NULL THEN 'unrecorded_producer'
                WHEN coalesce(b.blocked_ns, 0) >= 0.5 * g.d THEN 'host_blocked'
                -- issued as the GPU went idle, or returned just before it did, and started
                -- within one launch latency of its call's return: the host was barely
                -- ahead, and the GPU ran dry waiting for the launch to arrive (MI300X Qwen:
                -- calls returning 0.4-15 µs before the queue emptied, kernels starting
                -- 18-25 µs after them)
                WHEN g.end_ns - g.launch_end_ns <= ? THEN 'launch_latency'
                -- the device's only stream, no other device, no collective: no recorded
                -- work for the queued kernel to have waited on
                WHEN ? THEN 'one_stream'
                ELSE 'dependency' END AS kind
    FROM g LEFT JOIN firsts f ON f.name = g.detail LEFT JOIN blocked b USING (start_ns)
    LEFT JOIN busy_elsewhere e USING (start_ns) LEFT JOIN loads lo USING (start_ns)
)
SELECT kind, count(*) AS n, sum(d) AS ns, CAST(median(d) AS BIGINT) AS p50_ns,
       mode(blocking_call) AS blocking_call, sum(load_ns) AS module_load_ns,
       sum(call_ns) AS launch_call_ns, sum(after_call_ns) AS after_call_ns
FROM cls GROUP BY kind ORDER BY ns DESC, kind
"""


def _switch_note(kinds: list[dict] | None, n: int, end_to_start: bool = False) -> str:
    """Where most of a cause's gaps are the GPU's own kernel-to-kernel switch but most of its
    time is not, the count in the summary is theirs: say so (MI300X Qwen: 1,000 of 1,033
    gaps, 8.7 µs of 706 µs). ``end_to_start``: the runtime records queued kernels 0-1 ns
    apart (:mod:`tracelens.core.end_to_start`), so those gaps are the recording's, the
    switch itself inside the kernels' durations."""
    k = next((k for k in kinds or [] if k["kind"] == "kernel_switch"), None)
    if k is None or not kinds or kinds[0] is k or 2 * int(k["n"]) < n:
        return ""
    what = (
        "are kernels recorded back to back (this runtime records queued work as starting "
        "when the previous item ends, so the switch is inside the kernels' durations)"
        if end_to_start
        else "are the GPU's own switch between back-to-back kernels"
    )
    return (
        f" {int(k['n']):,} of the gaps ({fmt_ns(k['ns'])} in all, median {fmt_ns(k['p50_ns'])})"
        f" {what}; the time is in the other {n - int(k['n']):,}."
    )


_GPU_SIDE_TITLES = {
    "kernel_switch": "short gaps between back-to-back queued kernels (the GPU's own "
    "per-kernel overhead)",
    # a kernel's first launch started late, once per process; what the driver did then is
    # said only where the trace shows it (_first_launch_title: a module load in the wait)
    "first_launch": "a kernel's first launch started late (once per process)",
    "host_blocked": "queued work waited on a GPU-side event while the host blocked too",
    "unrecorded_producer": "queued work waited on work this trace does not record (nothing "
    "ran on its GPUs meanwhile)",
    "launch_latency": "each next kernel was issued as the GPU went idle (or just before) "
    "and arrived one launch latency later",
    "one_stream": "the next kernel was already queued on the device's only stream and "
    "started late (nothing recorded for it to wait on)",
    "dependency": CAUSE_TITLES["gpu_dependency"],
}


def _gaps(device_id: int, lo: int, hi: int) -> str:
    """The device's gaps clipped to its claimable range, as a subquery named ``gaps``."""
    return f"""(SELECT device_id, greatest(start_ns, {int(lo)}) AS start_ns,
                       least(end_ns, {int(hi)}) AS end_ns, cause, detail, launch_start_ns,
                       launch_end_ns, blocked_ns
                FROM gaps WHERE device_id = {int(device_id)} AND end_ns > {int(lo)}
                  AND start_ns < {int(hi)}) AS gaps"""


def _gpu_side(db: TraceDB, device_id: int, t: Thresholds, gaps: str) -> list[dict]:
    return db.dicts(
        _GPU_SIDE.format(gaps=gaps, module_load=MODULE_LOAD_API),
        [
            device_id,
            list(SYNC_CALLS),
            t.idle_blocked_min_gap_ns,
            t.idle_blocked_min_gap_ns,
            t.idle_kernel_switch_ns,
            t.idle_slow_first_launch_ns,
            t.idle_blocked_min_gap_ns,
            t.idle_launch_latency_ns,
            _one_stream(db, device_id),
        ],
    )


# first_launch evidence: module loads during its waits, the launch calls' time, and the
# wait after the calls returned; under WSL2, how late the trace's other work started.
_FIRST_LAUNCH_KEYS = ("module_load_ns", "launch_call_ns", "after_call_ns")
_WSL_KEYS = ("other_work", "other_work_min_start_after_call_ns")

# The launched work other than each kernel's first launch: how soon after its call the
# earliest of it started on the GPU.
_OTHER_WORK_LATENCY = """
WITH w AS (
    SELECT name, start_ns, correlation_id,
           row_number() OVER (PARTITION BY name ORDER BY start_ns) AS nth
    FROM kernels WHERE device_id = ?
    UNION ALL SELECT NULL, start_ns, correlation_id, 2 FROM memcpys
              WHERE device_id = ? AND kind NOT LIKE 'UVM%'
    UNION ALL SELECT NULL, start_ns, correlation_id, 2 FROM memsets WHERE device_id = ?
)
SELECT count(*) AS n, min(w.start_ns - a.start_ns) AS min_ns
FROM w JOIN api_calls a USING (correlation_id)
WHERE w.nth > 1 AND w.correlation_id IS NOT NULL AND w.start_ns >= a.start_ns
"""


def _other_work_latency(db: TraceDB, device_id: int) -> dict[str, int]:
    """Under WSL2 every launch and copy goes through the Windows driver: how soon after
    its call the rest of the trace's work started says whether a late first launch is the
    first launch's own (an RTX 3060: no work started sooner than 125 µs after its call)."""
    r = db.dicts(_OTHER_WORK_LATENCY, [device_id] * 3)[0]
    if not r["n"]:
        return {}
    return {"other_work": int(r["n"]), "other_work_min_start_after_call_ns": int(r["min_ns"])}


def _first_launch_title(k: dict[str, Any]) -> str:
    """What a late first launch was, claiming only what the trace shows: a module load
    during the wait, or under WSL2 all work starting late after its call."""
    if k.get("module_load_ns"):
        return (
            "a kernel's first launch waited for its module to load (once per process: lazy "
            "module loading)"
        )
    if k.get("other_work_min_start_after_call_ns") is not None:
        return (
            "a kernel's first launch started late (under WSL2 all work starts long after its call)"
        )
    return _GPU_SIDE_TITLES["first_launch"]


def _first_launch_advice(k: dict[str, Any], w: Workload) -> str:
    if w.amd:
        return (
            "The first launch of a kernel loads its code object, and the GPU waits for it "
            "once per process: not a steady-state cost. Launch once before timing."
        )
    if k.get("module_load_ns"):
        return (
            f"A module load (lazy loading) ran for {fmt_ns(k['module_load_ns'])} of the "
            "wait: the first launch of a kernel loads its module, and the GPU waits for it "
            "once per process, not a steady-state cost. Launch once before timing, or set "
            "`CUDA_MODULE_LOADING=EAGER` to load modules at start-up."
        )
    call = (
        f"The launch call took {fmt_ns(k['launch_call_ns'])}, and the kernel started "
        f"{fmt_ns(k['after_call_ns'])} after it returned; no module load ran during the "
        "wait, so eager module loading would not shorten it. "
        if k.get("launch_call_ns")
        else "No module load ran during the wait, so eager module loading would not shorten it. "
    )
    wsl = k.get("other_work_min_start_after_call_ns")
    if wsl is not None:
        return call + (
            "The host is WSL2, where the GPU is driven through the Windows driver: none of "
            f"the other {fmt_count(int(k['other_work']), 'launch or copy', 'launches and copies')} "
            f"started sooner than {fmt_ns(wsl)} after its call (a few µs on native Linux), so "
            "this wait is not the first launch's alone. Launch once before timing, queue work "
            "ahead of the GPU (asynchronous calls, no device-wide synchronize between "
            "launches, or a CUDA graph), and measure latency on native Linux."
        )
    return call + (
        "It is paid once per process, not a steady-state cost: launch once before timing."
    )


_ONE_STREAM = f"""
WITH work AS (SELECT device_id, stream_id FROM kernels
              UNION ALL SELECT device_id, stream_id FROM memcpys
              UNION ALL SELECT device_id, stream_id FROM memsets)
SELECT (SELECT count(DISTINCT stream_id) FROM work WHERE device_id = ?) = 1
   AND (SELECT count(DISTINCT device_id) FROM work) = 1
   AND NOT EXISTS (SELECT 1 FROM comm_ops)
   AND NOT EXISTS (SELECT 1 FROM kernels WHERE {comm_kernel_sql()})
   AND NOT EXISTS (SELECT 1 FROM api_calls WHERE name IN (SELECT unnest(?::VARCHAR[])))
"""


def _one_stream(db: TraceDB, device_id: int) -> bool:
    """Whether all of the trace's GPU work ran on one stream of this device, with no
    collective and no stream-wait call: a queued kernel then had no other stream, event,
    device or peer to wait on. Once per device: the warm-up split judges the gaps again."""
    return db.memo(
        ("one_stream", device_id),
        lambda: bool(db.scalar(_ONE_STREAM, [device_id, list(STREAM_WAIT_CALLS)])),
    )


# Allocation calls that take at least this share of a cause's gaps are named in its title.
_ALLOC_TITLE_FRACTION = 0.2
# ... and from this share of the gaps' counted time up, the allocation advice stands alone.
_ALLOC_ONLY_FRACTION = 0.8


def _title(
    cause: str,
    details: list[dict],
    ns: int,
    kinds: list[dict] | None = None,
    alloc: dict[str, Any] | None = None,
    in_graph: dict[str, Any] | None = None,
    flush_ns: int = 0,
    flush_name: str | None = None,
    drained: DrainedBySync | None = None,
    refill_ns: int = 0,
    refill_call: str | None = None,
) -> str:
    if cause == "launch_overhead" and in_graph and _mostly_in_graph_launch(in_graph, ns):
        call = in_graph["graph_launch_call"]
        if _one_stall(in_graph) and _dispatch_lead_ns(in_graph) > 0:
            # whether the device or the dispatch stalled, one replay cannot tell (advice)
            return (
                f"one {fmt_ns(in_graph['in_graph_launch_longest_ns'])} stall inside a graph "
                f"replay (`{call}`)"
            )
        return f"the GPU waited on a graph launch still running (`{call}`)"
    if cause == "gpu_dependency" and kinds:
        if kinds[0]["kind"] == "first_launch":
            return _first_launch_title(kinds[0])
        return _GPU_SIDE_TITLES[kinds[0]["kind"]]
    named = sum(int(d["ns"]) for d in details if d["detail"])
    if cause == "untraced" and 2 * named < ns:
        return _NOTHING
    if cause == "host_compute" and details and details[0]["detail"]:
        # the code covering the largest share: "mostly" from half of the time up
        share = (
            "all"
            if int(details[0]["ns"]) >= ns
            else "mostly"
            if 2 * int(details[0]["ns"]) >= ns
            else "most time"
        )
        top = _site(details[0]["detail"])
        allocating = ""
        if alloc and alloc.get("alloc_ns", 0) >= _ALLOC_TITLE_FRACTION * ns:
            # summed over the gaps, wherever each call ran: not inside the code named first
            allocating = f"; {fmt_ns(alloc['alloc_ns'])} of the gaps in `{alloc['alloc_call']}`"
        if 2 * flush_ns >= ns - flush_ns and flush_name:
            # the harness's flush is most of it: name that, then what the passes paid (the
            # pool refilled after a flush that freed it is the harness's too)
            if refill_ns:
                call = f" in `{refill_call}`" if refill_call else ""
                allocating = (
                    f"; {fmt_ns(refill_ns)} of the gaps{call} growing the pool again after it "
                    "freed memory, not counted either"
                )
            return (
                f"the host was busy ({fmt_ns(flush_ns)} in the harness's cache flush "
                f"`{clipped(flush_name)}` between passes, not counted{allocating}) before the "
                "next launch"
            )
        if drained is not None and drained.call and 2 * drained.ns >= ns:
            # most of the time follows a sync that let the queue run dry: name the sync,
            # whose removal gives it back, not the code that refilled the queue
            where = f" from `{_site(drained.site)}`" if drained.site else ""
            if 2 * drained.harness_ns >= ns:
                where = f" from `{_site(drained.harness_site)}`" if drained.harness_site else ""
                return (
                    f"the harness's sync (`{drained.harness_call}`{where}) let the queue run dry "
                    f"before the host's next work ({share} in `{top}`{allocating}; the "
                    "harness's, not counted)"
                )
            if 0 < drained.harness_ns < drained.ns:
                # the harness emptied the queue and the program's own sync found it empty
                # (MI300X Qwen: a 34 µs mask check): the time is the host refilling an
                # empty queue at the forward's start, which no removed sync gives back
                return (
                    f"the host refilled a queue the harness's sync had emptied, slower than "
                    f"the GPU until it got ahead ({share} in `{top}`{allocating})"
                )
            return (
                f"a sync (`{drained.call}`{where}) let the queue run dry before the host's "
                f"next work ({share} in `{top}`{allocating})"
            )
        return f"the host was busy ({share} in `{top}`{allocating}) before the next launch"
    return CAUSE_TITLES.get(cause, cause)


def _zero_grad_fills(db: TraceDB) -> int:
    """How many ``aten::zero_`` calls ran inside ``Optimizer.zero_grad`` (the profiler's
    record of ``optimizer.zero_grad()``, one fill per parameter per step): an operator
    record in 2021 traces, a user annotation (a range) in later ones. Once per trace."""
    return db.memo("zero_grad_fills", lambda: _count_zero_grad_fills(db))


def _count_zero_grad_fills(db: TraceDB) -> int:
    return int(
        db.scalar(
            """SELECT count(*) FROM cpu_ops o
               WHERE o.name = 'aten::zero_'
                 AND (EXISTS (SELECT 1 FROM cpu_ops p
                              WHERE p.op_id = o.parent_id
                                AND p.name LIKE 'Optimizer.zero_grad%')
                      OR EXISTS (SELECT 1 FROM ranges r
                                 WHERE r.name LIKE 'Optimizer.zero_grad%'
                                   AND r.pid = o.pid AND r.tid = o.tid
                                   AND r.start_ns <= o.start_ns AND r.end_ns >= o.end_ns))"""
        )
        or 0
    )


# A filtered trace lacks the calls that decide a cause: what to do first is record it whole.
_FILTERED_ADVICE = (
    "This trace keeps only launch and copy runtime calls (filtered or sampled after "
    "recording), so the syncs, event records and stream waits that decide this cause are "
    "missing: analyze the unfiltered trace before acting on the cause. What this one shows: "
)


# Untraced host time in a filtered trace: what the filter removed, not what the profiler
# missed, so recording more (stacks, ranges) is not the remedy; the unfiltered trace is.
_DROPPED_HOST_BASIS = (
    "Not costed: this trace was filtered after recording (it keeps no runtime call but "
    "launches and copies), so host time no kept event covers may be where dropped "
    "operators and ranges ran: neither what the host did there nor whether it held the GPU "
    "back is known. "
)
_DROPPED_HOST_ADVICE = (
    "This trace was filtered after recording (it keeps no runtime call but launches and "
    "copies), so host time that no kept event covers may be where the filter dropped "
    "operators and ranges, not code the profiler did not record: recording with "
    "`with_stack=True` or adding `record_function` ranges cannot show it. Re-analyze the "
    "unfiltered trace to see what the host ran in these gaps and whether it held the GPU "
    "back."
)


def _sampled_basis(sampled: tuple[int, int]) -> str:
    kept, numbered = sampled
    return (
        f"Not costed: this trace keeps {kept:,} of the ~{numbered:,} runtime calls its "
        "correlation ids number, so launches were dropped with their kernels, and the GPU "
        "may have run dropped kernels through these gaps: their length is not measured. "
    )


def _mostly_in_graph_launch(ev: dict[str, Any], gap_ns: int) -> bool:
    """Whether at least half of the launch-overhead idle time opened inside a graph launch."""
    return 2 * int(ev.get("in_graph_launch_ns") or 0) >= gap_ns > 0


# A Python function as the profiler names it: `path/to/file.py(276): function`.
_PY_FRAME = re.compile(r"^(?:.*/)?([^/]+\.py\(\d+\): .+)$")


def _site(name: str) -> str:
    """A call site for a title: a Python frame by its file's name, not its whole path
    (`/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py(276): …`
    reads as `cuda_graph_runner.py(276): populate_from_forward_batch`)."""
    m = _PY_FRAME.match(name)
    return clipped(m.group(1) if m else name)


def _top(details: list[dict]) -> str:
    return ", ".join(
        f"`{clipped(d['detail'])}` ({d['n']}×, {fmt_ns(d['ns'])})" for d in details if d["detail"]
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
        if w.cuda_graphs and _mostly_in_graph_launch(ev, ev["gap_ns"]):
            return _in_graph_launch_advice(ev, w)
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
            return _first_launch_advice(kinds[0], w)
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
            # beside host-side gaps at least as long, these are the same host-bound problem
            # seen once the host is barely ahead (BERT on an MI300X: 449 µs beside 2.63 ms
            # of host-busy gaps; Qwen: in the refill after a sync emptied the queue)
            host_ns = sum(
                int((ev.get("idle_ns_by_cause") or {}).get(c, 0))
                for c in ("host_compute", "launch_overhead", "untraced")
            )
            same_problem = (
                f" They are the short end of the {fmt_ns(host_ns)} of this GPU's host-side "
                "gaps (the host running code or launching before its next launch): one "
                "host-bound problem, the host at "
                "most a launch ahead of the GPU, so what keeps it ahead (no syncs that empty "
                "the queue, fewer launches) removes both."
                if host_ns >= int(k["ns"])
                else ""
            )
            return (
                f"{k['n']:,} gaps (median {fmt_ns(k['p50_ns'])}) where the host issued the next "
                "kernel just as the GPU went idle (or just before) and the kernel started one "
                "launch latency after its launch call returned: the GPU outruns the "
                "launcher. Launch fewer, larger kernels: "
                f"{graphs}{compile_hint}fuse small kernels, or batch more work per kernel."
                + same_problem
            )
        if main == "one_stream":
            k = kinds[0]
            fuse = (
                "fuse small ops (`torch.compile`, fused kernels)"
                if torch and not w.torch_compile
                else "fuse small kernels"
            )
            runtime = "the HIP runtime's and the GPU's" if w.amd else "the runtime's and the GPU's"
            return (
                f"{k['n']:,} gaps (median {fmt_ns(k['p50_ns'])}) where the next kernel was already "
                "queued on the device's only stream, yet started late. With one stream, one "
                "device and no collective in the trace, there is no other stream, event or "
                "peer for it to have waited on: the delay is in "
                f"{runtime} dispatch of that kernel. Fewer, larger kernels remove it: {fuse}, "
                "or batch more work per kernel."
            )
        if main == "unrecorded_producer" and w.filtered:
            k = kinds[0]
            return (
                f"{k['n']:,} {'wait' if k['n'] == 1 else 'waits'} (median {fmt_ns(k['p50_ns'])}) "
                "where queued work waited while no GPU in this trace ran anything. A wait on "
                "another stream, an event or a collective shows GPU work running meanwhile (a "
                "collective's kernel runs while it waits for its peers), so either this "
                "filtered trace dropped GPU records too (such a collective's kernel, say) or "
                "another process used the GPU: "
                "until an unfiltered capture shows the GPU's work, neither the cause of these "
                "waits nor their length is sure."
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
    if cause in ("host_compute", "untraced") and _harness_drained(ev):
        return _harness_advice(ev, torch)
    if cause == "host_compute":
        text = (
            "The launching thread was busy on the CPU"
            + (f" (innermost code covering the gaps: {top})" if top else "")
            + " before issuing the next GPU work. "
            + _drained_advice(ev)
        )
        if ev.get("flush_ns"):
            text += (
                f"{fmt_ns(ev['flush_ns'])} of it is the benchmark harness's cache flush "
                f"between passes (`{ev['flush_name']}`), a cold-cache benchmark's own step "
                "that the measured work never pays: it is not counted. "
            )
        if ev.get("refill_ns"):
            # after a flush that freed memory the pass grows its pool again: not steady state
            text += (
                f"{fmt_ns(ev['refill_ns'])} of it the thread sat in allocation calls (most "
                f"time in `{ev['refill_call']}`), growing the memory pool again after the "
                "harness's flush handed memory back to the driver"
                + (
                    " (and, with autograd on, while the previous pass's outputs still hold "
                    "their activations)"
                    if torch
                    else ""
                )
                + ": a loop past its first passes reuses what it has cached, so this is not "
                "counted either. To measure without it, flush without handing memory back"
                + (" (no `torch.cuda.empty_cache()` in the flush)" if torch else "")
                + " and run more passes before the measured ones"
                + (
                    ", under `torch.inference_mode()` with `model.eval()` so no pass keeps "
                    "activations for a backward that never comes"
                    if torch and w.kind in ("inference", "serving")
                    else ""
                )
                + ". "
            )
        elif ev.get("alloc_ns", 0) >= _ALLOC_TITLE_FRACTION * max(1, ev.get("gap_ns", 0)):
            call = ev["alloc_call"]
            empty = (
                (
                    "the harness's flush frees memory to the driver, emptying the caching "
                    "allocator, so each measured pass allocates again"
                    if ev.get("flush_frees")
                    else "`torch.cuda.empty_cache()` or a harness step clearing caches "
                    "between passes"
                )
                if torch
                else "freeing and re-allocating buffers each pass"
            )
            text += (
                f"{fmt_ns(ev['alloc_ns'])} of it the thread sat in `{call}` "
                f"({ev['alloc_calls']:,} allocation calls): memory was handed back to the "
                f"driver and requested again ({empty}). Keep allocations across passes: "
                + (
                    "do not empty the caching allocator inside the measured loop, and let a "
                    "warm-up pass size its pool. "
                    if torch
                    else "allocate buffers once, outside the loop. "
                )
            )
        if torch and ev.get("zero_grad_fills"):
            text += (
                "`optimizer.zero_grad()` fills every gradient with zeros here "
                f"({ev['zero_grad_fills']:,} `aten::zero_` calls in the trace, one per "
                "parameter per step): `zero_grad(set_to_none=True)` (the default from "
                "PyTorch 2.0) drops the gradients instead, with no call per parameter. "
            )
        # where allocation calls are nearly all of the time the finding counts, keeping
        # allocations is the advice: profiling the host's CPU work would find none
        counted = ev.get("gap_ns", 0) - ev.get("flush_ns", 0)
        if ev.get("alloc_ns", 0) >= _ALLOC_ONLY_FRACTION * max(1, counted):
            return text.rstrip()
        if torch:
            extra = (
                # a graph of the whole step cannot hold TorchRec's jagged exchanges, whose
                # sizes change from batch to batch
                ", `torch.compile` the dense part (a CUDA graph of the whole step cannot "
                "hold TorchRec's variable-size embedding exchanges)"
                if ev.get("torchrec_pipeline") and not w.cuda_graphs
                else f", capture steady-state steps in a {graph} or `torch.compile` them"
                if not w.cuda_graphs
                else ""
            )
            look = (
                "Read the capture's Python stacks over these gaps (its operators' `Call "
                "stack` fields) or profile with py-spy"
                if w.stacks_in_operators
                else "Read the capture's Python stacks over these gaps (its `python_function` "
                "events) or profile with py-spy"
                if w.python_stacks
                else "Profile the host side (py-spy, `with_stack=True`)"
            )
            return text + (
                f"{look}, move CPU work off the critical path or to another thread, and queue "
                f"more GPU work ahead of it (avoid syncs that leave the queue empty){extra}."
                + profiler_overhead_caveat(w)
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
            f"yourself: `{p}MemPrefetchAsync` to the device after the host's last access and "
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
                "Add `record_function` ranges around host work (the Python stacks are "
                "recorded already)"
                if w.python_stacks
                else "Record with `with_stack=True` (Python functions) and `record_function` "
                "ranges around host work"
            )
        else:
            how = (
                "Annotate host phases with NVTX/roctx ranges and record under Nsight Systems "
                "with `--trace=cuda,nvtx,osrt --sample=cpu`"
                + (" (or rocprof with `--roctx-trace`)" if w.amd else "")
            )
        return (
            "The launching thread ran code no recorded operator, range or function covers "
            f"(untraced host code) before issuing the next GPU work. {_drained_advice(ev)}"
            f"{how} to see what it was." + (f" {unlaunched}" if ev["no_launch_record"] else "")
        )
    return unlaunched


# From this share of a host cause's idle time in gaps a blocking call opened, the advice
# names the call: below it the sync is a detail of the evidence, not the lever.
_DRAINED_MENTION_SHARE = 0.2


def _harness_drained(ev: dict[str, Any]) -> bool:
    """Most of these gaps follow a profiling or benchmark harness's device synchronize."""
    return 2 * int(ev.get("drained_harness_ns", 0)) >= int(ev.get("gap_ns", 0)) > 0


def _harness_advice(ev: dict[str, Any], torch: bool) -> str:
    """Gaps a harness's sync opened: nothing in the program to change for them."""
    n = int(ev["drained_gaps"])
    site = ev.get("drained_harness_site")
    return (
        f"{'All' if n == int(ev.get('gap_count', -1)) else f'{n:,}'} of these gaps "
        f"({fmt_ns(ev['drained_harness_ns'])}) follow `{ev['drained_harness_call']}`"
        + (f" from `{site}`" if site else "")
        + ", a profiling or benchmark harness's own device synchronize: it let the queue "
        "empty, and the program's host work after it ran on an idle GPU"
        + (
            ", gap after gap, until the host got ahead again"
            if n > int(ev.get("drained_drains", n))
            else ""
        )
        + ". The program without the harness keeps its queue full here, so this time is "
        "the harness's and nothing in the program needs to change for it. To record the "
        "steady state instead, start recording after the harness's sync and a warm-up step"
        + (" (`torch.profiler.schedule(wait=1, warmup=1, active=...)`)." if torch else ".")
    )


def _drained_advice(ev: dict[str, Any]) -> str:
    """What to say where blocking calls let the queue empty before these gaps."""
    n = int(ev.get("drained_gaps", 0))
    if not n or int(ev["drained_ns"]) < _DRAINED_MENTION_SHARE * int(ev["gap_ns"]):
        return ""
    site = ev.get("drained_site")
    share = 100.0 * int(ev["drained_ns"]) / max(1, int(ev["gap_ns"]))
    if ev.get("drained_harness_ns") and int(ev["drained_ns"]) > int(ev["drained_harness_ns"]):
        return _harness_refill_advice(ev, n, share, site)
    return (
        f"{'All' if n == int(ev.get('gap_count', -1)) else f'{n:,}'} of these gaps "
        f"({fmt_ns(ev['drained_ns'])}, {share:.0f}% of the time) follow a sync that "
        f"returned as the GPU ran dry (most of the time after `{ev['drained_call']}`"
        + (f", from `{site}`" if site else "")
        + "): the sync let the queue empty, and the host work after it ran on an idle GPU"
        + (
            ", gap after gap, until the host got ahead again"
            if n > int(ev.get("drained_drains", n))
            else ""
        )
        + ". Removing the sync, or issuing the next work before it, hides that host time "
        "behind the queued kernels; shortening the host work helps only where it stays. "
        + (
            "Where the device synchronize is a benchmark's or profiling harness's own "
            "(around the measured step), the gap is the harness's: the program without it "
            "keeps its queue full. "
            if "DeviceSynchronize" in str(ev["drained_call"])
            or "CtxSynchronize" in str(ev["drained_call"])
            else ""
        )
        + (f"{known} " if (known := known_host_read_advice(site)) else "")
    )


def _harness_refill_advice(ev: dict[str, Any], n: int, share: float, site: str | None) -> str:
    """Gaps after a harness's device synchronize emptied the queue, the program's own sync
    during the refill finding it empty (MI300X Qwen: the harness's `hipDeviceSynchronize`,
    then transformers' 34 µs mask check): each pass starts on an empty queue anyway (the
    harness's sync here; in generation, each token's host read of the sampled token), so
    removing the program's sync gives back its own time only; what gives the rest back is
    a host ahead of the GPU from the pass's first kernel."""
    return (
        f"{'All' if n == int(ev.get('gap_count', -1)) else f'{n:,}'} of these gaps "
        f"({fmt_ns(ev['drained_ns'])}, {share:.0f}% of the time) follow syncs that left the "
        f"queue empty: {fmt_ns(ev['drained_harness_ns'])} of them the refill after "
        f"`{ev['drained_harness_call']}`"
        + (f" from `{ev['drained_harness_site']}`" if ev.get("drained_harness_site") else "")
        + ", a profiling or benchmark harness's own device synchronize (not counted), the "
        f"rest after the program's own `{ev['drained_call']}`"
        + (f" from `{site}`" if site else "")
        + ", which found the queue empty already. So removing that sync gives back only its "
        "own time: each pass starts on an empty queue anyway (the harness's sync here; in "
        "generation, the host's read of each sampled token), and the counted time is the "
        "host slower than the GPU at the pass's start, gap after gap, until it got ahead. "
        "A host ahead from the first kernel gives it back: capture the pass in a graph or "
        "compile it; shortening that host work helps too. "
        + (f"{known} " if (known := known_host_read_advice(site)) else "")
    )


def _one_stall(ev: dict[str, Any]) -> bool:
    """One graph launch whose in-launch idle time is nearly all its longest gap."""
    return int(ev["graph_launches"]) == 1 and int(
        ev["in_graph_launch_longest_ns"]
    ) >= _ONE_STALL_SHARE * int(ev["in_graph_launch_ns"])


def _dispatch_lead_ns(ev: dict[str, Any]) -> int:
    """How long before the longest in-launch gap began the launch call, at its mean rate
    per kernel, would have dispatched the kernel after it; 0 unless that comes at most
    half-way to the gap. The call's kernels are not timed one by one, so this is an
    estimate: for the kernel still to be undispatched, the kernels before it would have
    taken twice their share of the call or more. (SGLang's replay: kernel 32 of 544 due
    93 µs into a 1.57 ms call, the stall 594 µs in.)"""
    kernels = int(ev["graph_launch_kernels"])
    offset = int(ev["in_graph_launch_longest_call_offset_ns"])
    if kernels <= 0 or offset <= 0:
        return 0
    due = int(ev["in_graph_launch_longest_node"]) * int(ev["graph_launch_call_ns"]) / kernels
    return int(offset - due) if due <= 0.5 * offset else 0


def _in_graph_launch_advice(ev: dict[str, Any], w: Workload) -> str:
    call = ev["graph_launch_call"]
    gaps = int(ev["in_graph_launch_gaps"])
    launches = int(ev["graph_launches"])
    if _one_stall(ev):
        return _one_stall_advice(ev, w)
    text = (
        f"{fmt_ns(ev['in_graph_launch_ns'])} of this idle time opened while a `{call}` was "
        f"still running ({gaps:,} gap{'s' if gaps != 1 else ''}, the longest "
        f"{fmt_ns(ev['in_graph_launch_longest_ns'])}, in {launches:,} graph launch"
        f"{'es' if launches != 1 else ''}; the call with the most of it ran "
        f"{fmt_ns(ev['graph_launch_call_ns'])} for {int(ev['graph_launch_kernels']):,} "
        "kernels): the GPU caught up with the graph's own launch, not with kernels launched "
        "outside graphs, so capturing more of the step into the graph would lengthen the "
        "launch rather than remove the wait. "
    )
    if w.amd:
        return text + (
            "The HIP runtime dispatches a graph's kernels from inside `hipGraphLaunch`, so a "
            "graph of many small kernels can run faster than it is dispatched. Fewer, larger "
            "nodes (fused kernels) shorten the dispatch; the dispatch cost itself is the "
            "runtime's, so compare a newer ROCm release."
        )
    return text + (
        "A graph's first launch uploads it to the device: upload it ahead "
        "(`cudaGraphUpload`) or replay it once before the measured steps. A launch that "
        "is slow on every replay points at the graph's size: fewer, larger nodes (fused "
        "kernels) launch faster."
    )


def _one_stall_advice(ev: dict[str, Any], w: Workload) -> str:
    """One graph launch whose in-launch idle time is nearly all one gap: the graph's
    kernels otherwise ran back to back, so the dispatch kept up except once. One replay
    cannot tell a fixed point in the graph from a one-off, so the advice is to find out,
    not to shrink the graph."""
    call = ev["graph_launch_call"]
    longest = int(ev["in_graph_launch_longest_ns"])
    rest = int(ev["in_graph_launch_ns"]) - longest
    others = int(ev["in_graph_launch_gaps"]) - 1
    node = int(ev["in_graph_launch_longest_node"])
    prev, nxt = ev["in_graph_launch_longest_prev"], ev["in_graph_launch_longest_next"]
    # numbered from 1 in launch order: the stall is after kernel node - 1 ends
    where = (
        f"between graph kernels {node - 1:,} and {node:,} of {int(ev['graph_launch_kernels']):,}"
        if node > 1
        else f"before graph kernel {node:,} of {int(ev['graph_launch_kernels']):,}"
    )
    if prev and nxt:
        where += f" (`{clipped(prev, 60)}` ended, `{clipped(nxt, 60)}` started late)"
    runtime = (
        "the HIP runtime dispatching the graph's nodes from inside the call"
        if w.amd
        else "the driver submitting the graph"
    )
    kernels = int(ev["graph_launch_kernels"])
    lead = _dispatch_lead_ns(ev)
    return (
        f"{fmt_ns(longest)} of this idle time is one stall {where}, while the "
        f"`{call}` that launched them was still running ({fmt_ns(ev['graph_launch_call_ns'])} "
        f"on the host for {kernels:,} kernels)"
        + (
            # every other gap exactly 1 ns is no measurement: ROCm's trace records each
            # replayed kernel starting as the one before it ends (vLLM's 421 and SGLang's
            # 545 in-graph gaps are all 1 ns), so a bubble sits inside the next kernel's time
            f"; the graph's other kernels are recorded 1 ns apart ({others:,} gaps), too "
            "regular to be measured: this runtime's trace records a replayed kernel as "
            "starting when the one before it ends, so a bubble between them can sit inside "
            "the next kernel's time (an unusually slow instance of a kernel may be one), and "
            "this stall is the one the trace can show, not all there is"
            if others > 0 and rest == others
            else f"; the graph's other kernels ran back to back ({others:,} gaps, "
            f"{fmt_ns(rest)} in all)"
            if others > 0
            else ""
        )
        + (
            f". At the call's mean rate ({fmt_ns(int(ev['graph_launch_call_ns']) / kernels)} "
            f"a kernel) kernel {node:,} would have been dispatched about {fmt_ns(lead)} before "
            "the stall began, which points at the device (the kernel waiting on a signal, a "
            "barrier or memory); but that rate assumes the call dispatched its nodes at a "
            f"steady pace, and a pause in {runtime} at that node would look the same: the "
            "trace cannot tell the two apart. "
            if lead
            else f". So {runtime} kept up with the GPU except once. "
        )
        + "Either way it is not a graph too large to dispatch, and capturing more of the "
        "step would not remove it. "
        + "The trace holds one replay, which cannot tell a stall at a fixed point of the "
        "graph (it would recur at the same kernel on every replay: look at what that node "
        "waits for) from a one-off"
        + (
            " (the dispatching thread descheduled, or the runtime waiting for room in its queue)"
            if not lead
            else ""
        )
        + ": record several steps and check whether it repeats before weighing it."
    )


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
FROM {gaps} WHERE cause = ?
"""

# Launch-overhead gaps that open while a graph launch call is still running: the GPU
# caught up with the replay of one graph, not with the kernels launched around graphs. A
# HIP runtime dispatches a graph's kernels from inside hipGraphLaunch, so a long graph
# shows this on AMD; the launch with the most such idle time is named, with its kernels.
_GRAPH_LAUNCH_EVIDENCE = """
WITH g AS (
    SELECT gaps.end_ns - gaps.start_ns AS ns, a.name, a.correlation_id AS correlation,
           a.end_ns - a.start_ns AS call_ns, a.start_ns AS call_start, gaps.device_id,
           gaps.start_ns AS gs, gaps.end_ns AS ge
    FROM {gaps} JOIN api_calls a
      ON a.start_ns = gaps.launch_start_ns AND a.end_ns = gaps.launch_end_ns
    WHERE gaps.cause = ? AND gaps.launch_start_ns <= gaps.start_ns
      AND a.name IN (SELECT unnest(?::VARCHAR[]))
),
per_launch AS (
    SELECT correlation, any_value(name) AS name, any_value(call_ns) AS call_ns, sum(ns) AS ns
    FROM g GROUP BY correlation
),
top AS (SELECT * FROM per_launch ORDER BY ns DESC, correlation LIMIT 1),
agg AS (
    SELECT count(*) AS in_graph_launch_gaps, coalesce(sum(ns), 0) AS in_graph_launch_ns,
           coalesce(max(ns), 0) AS in_graph_launch_longest_ns,
           (SELECT count(*) FROM per_launch) AS graph_launches
    FROM g
),
-- the longest such gap, placed in its graph: the kernels either side of it, and the
-- position of the one after among the kernels its launch call launched (joins and
-- filters, not one scalar subquery each: DuckDB orders a cross product of many of
-- those exhaustively)
longest AS (SELECT * FROM g ORDER BY ns DESC, gs LIMIT 1),
placed AS (
    SELECT count(*) FILTER (WHERE k.correlation_id = l.correlation AND k.start_ns <= l.ge)
               AS in_graph_launch_longest_node,
           min(k.name) FILTER (WHERE k.end_ns = l.gs) AS in_graph_launch_longest_prev,
           min(k.name) FILTER (WHERE k.start_ns = l.ge) AS in_graph_launch_longest_next,
           any_value(l.gs - l.call_start) AS in_graph_launch_longest_call_offset_ns
    FROM longest l JOIN kernels k ON k.device_id = l.device_id
)
SELECT agg.in_graph_launch_gaps, agg.in_graph_launch_ns, agg.in_graph_launch_longest_ns,
       placed.in_graph_launch_longest_node, placed.in_graph_launch_longest_prev,
       placed.in_graph_launch_longest_next, placed.in_graph_launch_longest_call_offset_ns,
       agg.graph_launches,
       top.name AS graph_launch_call, top.call_ns AS graph_launch_call_ns,
       (SELECT count(*) FROM kernels k WHERE k.correlation_id = top.correlation)
           AS graph_launch_kernels
FROM agg CROSS JOIN placed LEFT JOIN top ON true
"""

# From this share of the in-graph-launch idle time, the longest gap is the story: one
# stall inside the replay, not a dispatch that keeps falling behind the GPU.
_ONE_STALL_SHARE = 0.8

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

# Allocation calls of the runtime: a caching allocator that goes back to the driver.
ALLOC_CALLS = ("cudaMalloc", "cudaFree", "hipMalloc", "hipFree", "cuMemAlloc", "cuMemFree")

# What the host ran in each gap's host part (from its start to the next launch call), at
# analysis time: the host code ingest named (innermost interval covering the gap's start),
# unless a range or operator that starts inside the host part covers at least half of it
# (the host moved on to it: a harness step between passes, the next operator's CPU side),
# and the time allocation calls on the launching thread took in it.
_HOST_PARTS = """
WITH g AS (
    SELECT start_ns, end_ns, detail, launch_start_ns,
           greatest(start_ns, least(coalesce(launch_start_ns, end_ns), end_ns)) AS host_end
    FROM {gaps} WHERE cause = ?
),
{thread},
iv AS (
    SELECT pid, tid, name, start_ns, end_ns FROM ranges
    WHERE device_id IS NULL AND NOT regexp_matches(name, ?)
    UNION ALL SELECT pid, tid, name, start_ns, end_ns FROM cpu_ops
    WHERE NOT regexp_matches(name, ?)
),
moved AS (
    SELECT gt.start_ns,
           -- two that each cover half of it overlap: the shorter is the inner one
           arg_min(iv.name, (iv.end_ns - iv.start_ns, iv.name)) AS name
    FROM gt JOIN iv ON iv.start_ns > gt.start_ns AND iv.start_ns < gt.host_end
     AND (gt.tid IS NULL OR (iv.pid IS NOT DISTINCT FROM gt.pid AND iv.tid = gt.tid))
     AND 2 * (least(iv.end_ns, gt.host_end) - iv.start_ns) >= gt.host_end - gt.start_ns
    GROUP BY gt.start_ns
),
alloc AS (
    SELECT gt.start_ns, sum(least(a.end_ns, gt.host_end) - greatest(a.start_ns, gt.start_ns))
               AS alloc_ns, count(*) AS alloc_calls, mode(a.name) AS alloc_call
    FROM gt JOIN api_calls a ON a.start_ns < gt.host_end AND a.end_ns > gt.start_ns
     AND a.name IN (SELECT unnest(?::VARCHAR[]))
     AND (gt.tid IS NULL OR (a.pid IS NOT DISTINCT FROM gt.pid AND a.tid = gt.tid))
    GROUP BY gt.start_ns
)
SELECT gt.start_ns, gt.end_ns, coalesce(m.name, gt.detail) AS detail,
       coalesce(al.alloc_ns, 0) AS alloc_ns, coalesce(al.alloc_calls, 0) AS alloc_calls,
       al.alloc_call
FROM gt LEFT JOIN moved m USING (start_ns) LEFT JOIN alloc al USING (start_ns)
"""

_RENAMED_CAUSES = ("host_compute", "untraced")


def _host_parts(db: TraceDB, gaps: str, cause: str) -> list[dict]:
    return db.dicts(
        _HOST_PARTS.format(gaps=gaps, thread=with_launching_thread("g", keep_unmatched=True)),
        [cause, WRAPPER_PATTERN, WRAPPER_PATTERN, list(ALLOC_CALLS)],
    )


def _counted_details(
    details: list[dict], parts: list[dict], drained: DrainedBySync | None, ns: int
) -> list[dict]:
    """The code to name in a title: where the harness's sync opened some of the gaps and
    those are not counted, the code covering the rest (MI300X Qwen: entering the model
    right after the sync is the harness's 889 µs; the counted 2.27 ms is the first layers'
    launches), so the title does not name what it leaves out."""
    if drained is None or not 0 < drained.harness_ns < drained.ns or 2 * drained.ns < ns:
        return details
    left_out = set(drained.harness_starts)
    rest = [p for p in parts if int(p["start_ns"]) not in left_out]
    return _summarise(rest)[0] if rest else details


def _summarise(parts: list[dict]) -> tuple[list[dict], list[dict], dict[str, Any]]:
    """Per detail (top 5) and the longest gaps, from per-gap host parts; allocation time."""
    by: dict[str, list[int]] = {}
    for p in parts:
        if p["detail"] is not None:
            acc = by.setdefault(p["detail"], [0, 0])
            acc[0] += 1
            acc[1] += int(p["end_ns"]) - int(p["start_ns"])
    details = [
        {"detail": d, "n": n, "ns": ns}
        for d, (n, ns) in sorted(by.items(), key=lambda kv: (-kv[1][1], kv[0]))[:5]
    ]
    longest = sorted(parts, key=lambda p: (-(int(p["end_ns"]) - int(p["start_ns"])), p["start_ns"]))
    alloc_ns = sum(int(p["alloc_ns"]) for p in parts)
    calls: dict[str, int] = {}
    for p in parts:
        if p["alloc_call"]:
            calls[p["alloc_call"]] = calls.get(p["alloc_call"], 0) + int(p["alloc_ns"])
    alloc = {
        "alloc_ns": alloc_ns,
        "alloc_calls": sum(int(p["alloc_calls"]) for p in parts),
        "alloc_call": max(calls, key=lambda c: (calls[c], c)) if calls else None,
    }
    return (
        details,
        [
            {
                "start_ns": p["start_ns"],
                "end_ns": p["end_ns"],
                "duration_ns": int(p["end_ns"]) - int(p["start_ns"]),
                "detail": p["detail"],
            }
            for p in longest
        ],
        alloc,
    )


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    return cause_findings(db, t) + [
        f for dev in db.devices if (f := _outside_finding(db, t, claim_of(db, dev.device_id, t)))
    ]


def cause_findings(db: TraceDB, t: Thresholds, after_ns: int | None = None) -> list[Finding]:
    """One finding per device and gap cause, over the gaps in the device's claimable range.

    ``after_ns``: judge only the idle time after it (the end of the warm-up span); the
    findings then say so in their titles, and a cause is reported when it reaches
    ``idle_min_cause_pct`` of the part of the range after it.
    """
    findings: list[Finding] = []
    t0 = db.t0_ns
    w = workload_of(db)
    for dev in db.devices:
        claim = claim_of(db, dev.device_id, t)
        lo = claim.lo_ns if after_ns is None else max(claim.lo_ns, after_ns)
        hi = max(lo, claim.hi_ns)
        gaps = _gaps(dev.device_id, lo, hi)
        by_cause = db.dicts(
            f"""SELECT cause, count(*) AS n, sum(end_ns - start_ns) AS ns FROM {gaps}
                GROUP BY cause ORDER BY ns DESC, cause"""
        )
        idle_by_cause = {r["cause"]: int(r["ns"]) for r in by_cause}
        for row in by_cause:
            cause, n, ns = row["cause"], int(row["n"]), int(row["ns"])
            share = 100.0 * ns / dev.window_ns if dev.window_ns else 0.0
            if hi <= lo or 100.0 * ns / (hi - lo) < t.idle_min_cause_pct:
                continue
            alloc: dict[str, Any] = {}
            parts: list[dict] = []
            if cause in _RENAMED_CAUSES:
                parts = _host_parts(db, gaps, cause)
                details, longest, alloc = _summarise(parts)
                longest = longest[: t.idle_top_gaps]
            else:
                longest = db.dicts(
                    f"""SELECT start_ns, end_ns, end_ns - start_ns AS duration_ns, detail
                        FROM {gaps} WHERE cause = ?
                        ORDER BY duration_ns DESC, start_ns LIMIT ?""",
                    [cause, t.idle_top_gaps],
                )
                details = db.dicts(
                    f"""SELECT detail, count(*) AS n, sum(end_ns - start_ns) AS ns FROM {gaps}
                        WHERE cause = ? AND detail IS NOT NULL
                        GROUP BY detail ORDER BY ns DESC, detail LIMIT 5""",
                    [cause],
                )
            raw = db.dicts(_CAUSE_EVIDENCE.format(gaps=gaps), [cause])[0]
            deciding = {k: int(raw[k]) for k in _DECIDING.get(cause, ())}
            ev_for_advice: dict[str, Any] = {
                **{k: int(v) for k, v in raw.items()},
                **_slack(),
                **alloc,
                "gap_ns": ns,
                # TorchRec's sparse-data-dist pipeline: steps of variable-size exchanges
                "torchrec_pipeline": torchrec_pipeline(db),
            }
            label = f"GPU {dev.device_id}" + (f" ({dev.name})" if dev.name else "")
            kinds = _gpu_side(db, dev.device_id, t, gaps) if cause == "gpu_dependency" else None
            for k in kinds or []:
                if k["kind"] == "first_launch" and wsl_host(db):
                    k |= _other_work_latency(db, dev.device_id)
            if cause == "untraced":
                ev_for_advice["uvm_gaps"] = int(
                    db.scalar(
                        f"""SELECT count(*) FROM {gaps} WHERE gaps.cause = ?
                             AND EXISTS (SELECT 1 FROM memcpys m
                                         WHERE m.device_id = gaps.device_id
                                           AND m.kind LIKE 'UVM%' AND m.start_ns = gaps.end_ns)""",
                        [cause],
                    )
                    or 0
                )
                ev_for_advice["gap_count"] = n
            if kinds:
                ev_for_advice["kinds"] = kinds
                ev_for_advice["idle_ns_by_cause"] = idle_by_cause
            in_graph: dict[str, Any] = {}
            if cause == "launch_overhead" and w.cuda_graphs:
                in_graph = db.dicts(
                    _GRAPH_LAUNCH_EVIDENCE.format(gaps=gaps), [cause, list(GRAPH_LAUNCH_CALLS)]
                )[0]
                if not in_graph["in_graph_launch_gaps"]:
                    in_graph = {}
                ev_for_advice |= in_graph
            if cause == "host_compute" and any(
                d["detail"] == "aten::zero_" or d["detail"].startswith("Optimizer.zero_grad")
                for d in details
            ):
                ev_for_advice["zero_grad_fills"] = _zero_grad_fills(db)
            drained = drained_by_sync(db, gaps, cause, t) if cause in _RENAMED_CAUSES else None
            if drained is not None and drained.gaps:
                ev_for_advice |= {
                    "drained_gaps": drained.gaps,
                    "drained_ns": drained.ns,
                    "drained_call": drained.call,
                    "drained_site": drained.site,
                    "drained_drains": drained.drains,
                    "drained_harness_ns": drained.harness_ns,
                    "drained_harness_call": drained.harness_call,
                    "drained_harness_site": drained.harness_site,
                    "gap_count": n,
                }
            flush = flush_in_gaps(db, gaps, cause)
            if flush.ns:
                ev_for_advice |= {
                    "flush_ns": flush.ns,
                    "flush_name": flush.name,
                    "flush_frees": flush.frees,
                    "refill_ns": flush.refill_ns,
                    "refill_call": flush.refill_call,
                }
            title = _title(
                cause,
                _counted_details(details, parts, drained, ns),
                ns,
                kinds,
                alloc,
                in_graph,
                flush.ns,
                flush.name,
                drained,
                flush.refill_ns,
                flush.refill_call,
            )
            if cause == "untraced" and 2 * ev_for_advice.get("uvm_gaps", 0) >= n:
                title = _UVM_TITLE
            amount = _title_amount(claim, ns, share, lo, hi, after_ns)
            scope = _scope_note(db, claim, lo, hi, after_ns)
            activity_key = "next_work" if cause == "gpu_dependency" else "host_activity"
            # A kernel's first launch waits for its module once per process: time the
            # program spends, but no change to the steady state gives it back.
            one_off = sum(int(k["ns"]) for k in kinds or [] if k["kind"] == "first_launch")
            # gaps a profiling or benchmark harness's device synchronize opened (and the
            # queue's refill after it): the program without its harness never pays them
            harness = (
                min(drained.harness_ns, max(0, ns - one_off - flush.ns))
                if drained is not None
                else 0
            )
            # allocations refilling the caching allocator's pool a harness flush handed back
            # to the driver: a program that keeps its pool never makes them
            refill = min(flush.refill_ns, max(0, ns - one_off - flush.ns - harness))
            # Waits with nothing running in a filtered trace: the filter may have dropped
            # the GPU work itself, so neither their cause nor their length is known, and no
            # time is claimed (the finding is listed with those whose savings are unknown).
            unsure = bool(w.filtered and kinds and kinds[0]["kind"] == "unrecorded_producer")
            # Host time no kept event covers, in a filtered trace: the filter itself makes
            # it, dropping the operators and ranges the recording had, so neither what the
            # host ran nor whether it held the GPU back is known, and more profiler ranges
            # cannot show it; listed, not costed. Not so "host busy": a kept operator's span
            # is as the recording measured it (the filter drops events, it does not shorten
            # them), so the host was busy inside it, and that finding keeps its cost, its
            # cause flagged uncertain as every idle cause of a filtered trace is.
            dropped_host = bool(w.filtered and cause == "untraced" and title != _UVM_TITLE)
            if dropped_host:
                title = "the host ran code this filtered trace does not keep"
            # A trace that kept a sample of its launches dropped their kernels too: what
            # looks idle between kept kernels may have run dropped ones, whatever the host
            # did meanwhile, so no gap's length is measured (listed, not costed).
            thinned = w.sampled_calls is not None and not (unsure or dropped_host)
            uncosted = unsure or dropped_host or thinned
            findings.append(
                finding(
                    ANALYZER,
                    (dev.device_id, cause),
                    0 if uncosted else ns - one_off - flush.ns - harness - refill,
                    db,
                    t,
                    subject_ns=ns,
                    costed=not uncosted,
                    title=f"GPU {dev.device_id} {amount}: {title}"
                    + (" (filtered trace: cause uncertain)" if w.filtered else ""),
                    impact_basis=(
                        "Not costed: in this filtered trace nothing ran on the GPU through "
                        "most of these waits, which a wait on another stream, an event or a "
                        "collective would show, so the filter may have dropped GPU work too: "
                        "neither their cause nor their length is known. "
                        if unsure
                        else _DROPPED_HOST_BASIS
                        if dropped_host
                        else _sampled_basis(w.sampled_calls)
                        if thinned and w.sampled_calls is not None
                        else ""
                    )
                    + f"Sum of the {n:,} idle gaps on GPU {dev.device_id} judged "
                    f"'{cause}' ({CAUSE_RULES[cause]}){scope}"
                    + (
                        ", as recorded."
                        if uncosted
                        else "; removing their cause gives back at most this much GPU time."
                    )
                    + (
                        f" {fmt_ns(one_off)} of it is kernels' first launches starting late, "
                        "once per process: not counted."
                        if one_off
                        else ""
                    )
                    + (
                        f" {fmt_ns(flush.ns)} of it is the benchmark harness flushing caches "
                        f"between passes (`{flush.name}`), which the measured work never "
                        "pays: not counted."
                        if flush.ns
                        else ""
                    )
                    + (
                        f" {fmt_ns(refill)} of it is allocation calls growing the memory "
                        "pool again after the flush handed memory back to the driver: a loop "
                        "past its first passes reuses what it has cached, so it is not "
                        "counted either."
                        if refill
                        else ""
                    )
                    + (
                        f" {fmt_ns(harness)} of it follows a profiling or benchmark harness's "
                        f"device synchronize (`{drained.harness_call}` from "
                        f"`{_site(drained.harness_site or '')}`) "
                        "that emptied the queue, and the host work refilling it: "
                        + (
                            "a loop that queues its passes back to back runs that host work "
                            "while the GPU still runs the previous pass (the program's own "
                            f"`{drained.call}` empties the queue only after it), so it is not "
                            "counted; a loop that waits for each pass's result pays it too."
                            if drained.harness_ns < drained.ns
                            and drained.call
                            and drained.call != drained.harness_call
                            else "the program without the harness never pays it, so it is "
                            "not counted."
                        )
                        if harness and drained is not None
                        else ""
                    )
                    + (
                        " The trace keeps only launch and copy runtime calls, so the events, "
                        "waits and syncs that decide a cause may be missing."
                        if w.filtered
                        else ""
                    ),
                    summary=f"{label} was busy {dev.busy_pct:.2f}% of its "
                    f"{fmt_ns(dev.window_ns)} window. {n:,} idle gaps totalling {fmt_ns(ns)} "
                    + _summary_share(db, claim, ns, share, lo, hi, after_ns)
                    + f" have this cause: {title}."
                    + _switch_note(kinds, n, end_to_start(db) is not None),
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
                        "judged_from_offset_ns": int(lo - t0),
                        "judged_to_offset_ns": int(hi - t0),
                        **deciding,
                        **in_graph,
                        **(
                            {
                                "after_blocking_call": {
                                    "gaps": drained.gaps,
                                    "ns": drained.ns,
                                    "call": drained.call,
                                    "site": drained.site,
                                }
                            }
                            if drained is not None and drained.gaps
                            else {}
                        ),
                        **(
                            {"harness_flush_ns": flush.ns, "harness_flush_range": flush.name}
                            if flush.ns
                            else {}
                        ),
                        **({"harness_sync_ns": harness} if harness else {}),
                        **({"harness_refill_ns": refill} if refill else {}),
                        **({k: v for k, v in alloc.items() if v} if alloc.get("alloc_ns") else {}),
                        **(
                            {
                                "gpu_side_kinds": [
                                    {k: r[k] for k in ("kind", "n", "ns", "p50_ns")}
                                    | (
                                        {"blocking_call": r["blocking_call"]}
                                        if r["kind"] in ("host_blocked", "unrecorded_producer")
                                        else {}
                                    )
                                    | (
                                        {
                                            k: r[k]
                                            for k in (*_FIRST_LAUNCH_KEYS, *_WSL_KEYS)
                                            if k in r
                                        }
                                        if r["kind"] == "first_launch"
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
                    advice=(
                        _DROPPED_HOST_ADVICE
                        if dropped_host
                        else (_FILTERED_ADVICE if w.filtered else "")
                        + _advice(cause, details, w, ev_for_advice)
                    ),
                    time_ranges=[
                        TimeRange(
                            int(g["start_ns"]), int(g["end_ns"]), dev.device_id, f"idle: {cause}"
                        )
                        for g in longest
                    ],
                )
            )
    return findings


def _title_amount(
    claim: Claim, ns: int, share: float, lo: int, hi: int, after_ns: int | None
) -> str:
    """The title's idle amount, as a share of the range it was judged over: the device's
    window, the part after a capture-start wait, or the part after the warm-up."""
    if after_ns is not None:
        return (
            f"idle {fmt_ns(ns)} after the warm-up ({100.0 * ns / (hi - lo):.0f}% of "
            f"the {fmt_ns(hi - lo)} after it)"
        )
    if claim.capture_start is not None:
        return (
            f"idle {fmt_ns(ns)} ({100.0 * ns / (hi - lo):.1f}% of the "
            f"{fmt_ns(hi - lo)} after the capture-start wait)"
        )
    return f"idle {fmt_ns(ns)} ({share:.1f}% of its window)"


def _summary_share(
    db: TraceDB, claim: Claim, ns: int, share: float, lo: int, hi: int, after_ns: int | None
) -> str:
    """The summary's share of the idle time, with what the judged range leaves out."""
    if after_ns is None:
        return f"({share:.1f}% of its window){_scope_note(db, claim, lo, hi, None)}"
    return (
        f"({100.0 * ns / (hi - lo):.0f}% of the {fmt_ns(hi - lo)} after "
        f"the warm-up, {share:.1f}% of its whole window)" + _scope_note(db, claim, lo, hi, None)
    )


def _scope_note(db: TraceDB, claim: Claim, lo: int, hi: int, after_ns: int | None) -> str:
    """What the judged range leaves out, for the basis and summary."""
    parts = []
    if after_ns is not None:
        parts.append("after the warm-up span")
    if claim.capture_start is not None:
        parts.append(f"after the capture-start wait (first {fmt_ns(claim.lo_ns - db.t0_ns)})")
    if claim.uvm_before_ns or claim.uvm_after_ns:
        parts.append("between the first launch and the end of the last launched work")
    return f" ({'; '.join(parts)})" if parts else ""


def _outside_finding(db: TraceDB, t: Thresholds, claim: Claim) -> Finding | None:
    """The idle the claimable range leaves out, reported as what the program did (info)."""
    dev = next(d for d in db.devices if d.device_id == claim.device_id)
    w = workload_of(db)
    t0 = db.t0_ns
    label = f"GPU {dev.device_id}" + (f" ({dev.name})" if dev.name else "")
    if claim.capture_start is not None:
        g = claim.capture_start
        ns = int(g["end_ns"]) - int(g["start_ns"])
        torch = w.is_pytorch
        how = (
            "start the profiler a few steps in (`torch.profiler.schedule(wait=..., warmup=...,"
            " active=...)`) and keep several steps"
            if torch
            else "start recording a few iterations in and keep several"
        )
        return finding(
            ANALYZER,
            (dev.device_id, "capture_start"),
            0,
            db,
            t,
            subject_ns=ns,
            title=f"GPU {dev.device_id}: the capture starts with a {fmt_ns(ns)} wait on work "
            "issued before recording began (not GPU time to give back)",
            impact_basis="Informational: queued work waited on an event whose producer is not "
            "in the trace while no GPU ran anything, before (almost) any recorded GPU work. "
            "It is how the capture began, not a cost of the recorded work; idle_gpu judges "
            "only the time after it.",
            summary=f"{label}: from {fmt_ns(int(g['start_ns']) - t0)} to "
            f"{fmt_ns(int(g['end_ns']) - t0)} of the window the queued "
            f"`{g['detail']}` waited; the GPU work recorded before it took "
            f"{fmt_ns(int(g['busy_before_ns']))}. The rest of the window is judged on its own.",
            evidence={
                "device_id": dev.device_id,
                "device_name": dev.name,
                "kind": "capture_start",
                "gap_start_offset_ns": int(int(g["start_ns"]) - t0),
                "gap_end_offset_ns": int(int(g["end_ns"]) - t0),
                "duration_ns": ns,
                "next_work": g["detail"],
                "launch_start_offset_ns": (
                    None if g["launch_start_ns"] is None else int(g["launch_start_ns"]) - t0
                ),
                "gpu_busy_before_ns": int(g["busy_before_ns"]),
            },
            advice="The wait at the start of the capture is on work the profiler did not record "
            "(an asynchronous or overlap scheduler's previous batch, issued before recording "
            f"began). Record a steady state: {how}; the time after this wait is what the "
            "other findings describe.",
            time_ranges=[
                TimeRange(int(g["start_ns"]), int(g["end_ns"]), dev.device_id, "capture start")
            ],
        )
    if not (claim.uvm_before_ns or claim.uvm_after_ns):
        return None
    p = "hip" if w.amd else "cuda"
    moved = {
        phase: [m for m in claim.migrations if m["phase"] == phase]
        for phase in ("before_first_launch", "after_last_work")
    }

    def said(rows: list[dict]) -> str:
        return ", ".join(
            f"{int(m['n']):,} {m['kind'].removeprefix('UVM_')} ({fmt_bytes(int(m['bytes']))})"
            for m in rows
        )

    parts = []
    if claim.uvm_before_ns:
        parts.append(
            f"{fmt_ns(claim.uvm_before_ns)} before the first work was launched"
            + (
                f" (migrations: {said(moved['before_first_launch'])})"
                if moved["before_first_launch"]
                else ""
            )
        )
    if claim.uvm_after_ns:
        parts.append(
            f"{fmt_ns(claim.uvm_after_ns)} after the last launched work ended"
            + (
                f" (migrations: {said(moved['after_last_work'])})"
                if moved["after_last_work"]
                else ""
            )
        )
    # a first launch call that takes as long as a warm-up call: the driver loading the
    # kernel's module on its first use (T4: a 39 ms `cudaLaunchKernel`)
    slow_first = db.rows(
        """SELECT name, end_ns - start_ns FROM api_calls
           WHERE name IN (SELECT unnest(?::VARCHAR[])) AND start_ns < ?
             AND end_ns >= ? - ? AND end_ns - start_ns >= ?
           ORDER BY start_ns LIMIT 1""",
        [
            list(LAUNCH_CALLS),
            claim.lo_ns,
            claim.lo_ns,
            t.idle_launch_latency_ns,
            t.warmup_min_call_ns,
        ],
    )
    if claim.uvm_before_ns and slow_first:
        name, ns = slow_first[0]
        parts[0] += (
            f", its last {fmt_ns(int(ns))} in the first launch call (`{name}`): the driver's "
            "one-off work at a kernel's first launch (loading its module, or compiling its "
            "PTX where the binary has no code for this GPU: build with `-gencode` for its "
            "architecture)"
        )
    total = claim.uvm_before_ns + claim.uvm_after_ns
    where = " and ".join(
        w
        for w, ns in (
            ("before the first launch", claim.uvm_before_ns),
            ("after the last launched work", claim.uvm_after_ns),
        )
        if ns
    )
    return finding(
        ANALYZER,
        (dev.device_id, "host_uvm_phases"),
        0,
        db,
        t,
        subject_ns=total,
        # "host time", not "traffic": migrations open and close these phases but need not
        # fill them (a T4 capture's 940 ms held stretches of 300 ms with none)
        title=f"GPU {dev.device_id}: {fmt_ns(total)} of its window is the host's time with "
        f"unified memory {where}, nothing queued on the GPU (not GPU time to give back)",
        impact_basis="Informational: only unified-memory migrations, which the host's own page "
        "faults and prefetches cause, open and close the window; nothing was queued on the GPU "
        "then, so its idle time is the host's (writing managed memory, reading results). "
        "idle_gpu judges only the time between the first launch and the end of the last "
        "launched work.",
        summary=f"{label}: " + "; ".join(parts) + ".",
        evidence={
            "device_id": dev.device_id,
            "device_name": dev.name,
            "kind": "host_uvm_phases",
            "idle_before_first_launch_ns": claim.uvm_before_ns,
            "idle_after_last_work_ns": claim.uvm_after_ns,
            "first_launch_offset_ns": claim.lo_ns - t0,
            "last_work_end_offset_ns": claim.hi_ns - t0,
            "migrations": [
                {k: m[k] for k in ("phase", "kind", "n", "bytes")} for m in claim.migrations
            ],
        },
        advice="This is the host's time, not the GPU's: the program's CPU work around the GPU's "
        "(filling inputs, checking results) and its page faults on managed memory. A host "
        "access, a read as much as a write, moves pages the GPU had back to the host, and the "
        "kernel faults them in again: keep host code off managed memory between a "
        f"`{p}MemPrefetchAsync` to the device and the kernels that use it, and prefetch "
        f"results to the host (`{p}CpuDeviceId`) before host code reads them. Where the CPU "
        "work itself is long, read its CPU samples (Nsight Systems `--sample=cpu`).",
        time_ranges=[
            *(
                [TimeRange(dev.start_ns, claim.lo_ns, dev.device_id, "host phase")]
                if claim.uvm_before_ns
                else []
            ),
            *(
                [TimeRange(claim.hi_ns, dev.end_ns, dev.device_id, "host phase")]
                if claim.uvm_after_ns
                else []
            ),
        ],
    )


def _slack() -> dict[str, int]:
    return {"launch_issue_slack_ns": LAUNCH_ISSUE_SLACK_NS}
