"""The evidence of ``idle_gpu`` findings (:mod:`tracelens.analyzers.idle_gpu`)."""

from __future__ import annotations

from ingest.derive_gaps import GAP_CAUSES
from tracelens.analyzers.evidence_keys.model import (
    BYTES,
    COUNT,
    NS,
    OBJECT,
    PCT,
    ROWS,
    TEXT,
    AnalyzerEvidence,
    Key,
    Kind,
    map_of,
)

# The causes whose gaps are explained by what the host did (all but a GPU-side wait).
_HOST_SIDE = tuple(c for c in GAP_CAUSES if c != "gpu_dependency")
_CAUSES = tuple(GAP_CAUSES)
_IN_GRAPH_LAUNCH = "graphs replay and a gap opened while a graph launch call was running"


def _detail_rows(detail: str) -> tuple[Key, ...]:
    return (
        Key("detail", TEXT, detail),
        Key("gaps", COUNT, "Gaps with that detail"),
        Key("ns", NS, "Their summed duration"),
    )


EVIDENCE = AnalyzerEvidence(
    "idle_gpu",
    "One finding per device and gap cause holding at least `idle_min_cause_pct` % of the "
    "device's window (gap causes are judged at ingest, ingest/derive_gaps.py)",
    keys=(
        Key("device_id", COUNT, "The idle device"),
        Key("device_name", TEXT, "Its name", null="the trace does not name the device"),
        Key("window_ns", NS, "The device's window: its first to last GPU activity", only=_CAUSES),
        Key("busy_ns", NS, "Union of its kernel, copy and memset time in the window", only=_CAUSES),
        Key("busy_pct", PCT, "`busy_ns` as a share of `window_ns`", only=_CAUSES),
        Key("idle_pct", PCT, "The rest of the window: 100 - `busy_pct`", only=_CAUSES),
        Key("cause", TEXT, "The gap cause this finding sums", choices=GAP_CAUSES, only=_CAUSES),
        Key(
            "cause_rule",
            TEXT,
            "That cause's rule, in words (what judged a gap this cause)",
            only=_CAUSES,
        ),
        Key("gap_count", COUNT, "Idle gaps of this cause on the device", only=_CAUSES),
        Key(
            "gap_ns",
            NS,
            "Their summed duration: the impact, before the warm-up span and more "
            "specific findings take their part",
            only=_CAUSES,
        ),
        Key(
            "idle_ns_by_cause",
            map_of("gap cause", NS),
            "Every idle gap on the device, summed by cause (this and the other causes)",
            choices=GAP_CAUSES,
            only=_CAUSES,
        ),
        Key(
            "judged_from_offset_ns",
            NS,
            "Start of the range whose gaps were judged, from trace.t0_ns: the window's start, "
            "or later (after a capture-start wait, the first launch when migrations open the "
            "window, the warm-up span)",
            only=_CAUSES,
        ),
        Key(
            "judged_to_offset_ns",
            NS,
            "End of that range: the window's end, or the end of the last launched work when "
            "migrations close the window",
            only=_CAUSES,
        ),
        Key(
            "alloc_ns",
            NS,
            "Time the launching thread sat in allocation calls (`cudaMalloc`/`cudaFree`, HIP "
            "and driver alike) in the gaps' host parts",
            when="such calls ran in them",
            only=("host_compute", "untraced"),
        ),
        Key(
            "alloc_calls",
            COUNT,
            "How many allocation calls those were",
            when="such calls ran in them",
            only=("host_compute", "untraced"),
        ),
        Key(
            "alloc_call",
            TEXT,
            "The allocation call that took most of that time",
            when="such calls ran in them",
            only=("host_compute", "untraced"),
        ),
        Key(
            "after_blocking_call",
            OBJECT,
            "The gaps that opened while a blocking call (synchronize, synchronous copy) on "
            "the thread that issued the next work was running, the call returning within "
            "`idle_after_sync_ns` of the gap's start: the sync let the queue empty. From 20% "
            "of the idle time the advice names the call",
            when="such gaps exist",
            only=("host_compute", "untraced"),
            fields=(
                Key("gaps", COUNT, "Those gaps"),
                Key("ns", NS, "Their summed duration"),
                Key("call", TEXT, "The blocking call with the most of their time"),
                Key(
                    "site",
                    TEXT,
                    "Where that call was made, in its longest such gap: the innermost Python "
                    "function around it outside PyTorch's package (else inside it; never a "
                    "built-in), else the outermost operator, else the annotation range",
                    null="nothing recorded encloses it",
                ),
            ),
        ),
        Key(
            "harness_flush_ns",
            NS,
            "Idle time inside a benchmark harness's cache-flush ranges between passes "
            "(`[param|clear_cache]`, `flush_cache`): left out of the impact",
            when="such a range covers part of the gaps",
            only=_CAUSES,
        ),
        Key(
            "harness_refill_ns",
            NS,
            "Allocation time in the gaps outside a harness's cache-flush ranges (`cudaMalloc`, "
            "`hipMalloc`) where the flush handed memory back to the driver (a free call inside "
            "the flush range): the pool growing again on a pass near the start, left out of "
            "the impact with the flush",
            when="a flush range that frees memory covers part of the gaps and allocation "
            "calls ran in them",
            only=_CAUSES,
        ),
        Key(
            "harness_sync_ns",
            NS,
            "Idle time in gaps a profiling or benchmark harness's device synchronize opened "
            "(the call made from a function, operator or range named for profiling or "
            "benchmarking), with the host's refill of the queue after it: left out of the "
            "impact",
            when="such a sync let the queue empty before some of the gaps",
            only=("host_compute", "untraced"),
        ),
        Key(
            "harness_flush_range",
            TEXT,
            "The name of that flush range",
            when="such a range covers part of the gaps",
            only=_CAUSES,
        ),
        Key(
            "host_activity",
            ROWS,
            "What the host did in these gaps: the detail of each gap (the loader, blocking "
            "call or innermost host code covering it, `untraced host code` when the launching "
            "thread ran unrecorded code), up to 5 details by idle time; gaps without a detail "
            "are left out",
            only=_HOST_SIDE,
            fields=_detail_rows("The loader, blocking call or host code (gaps.detail)"),
        ),
        Key(
            "next_work",
            ROWS,
            "The work that ended these gaps (the queued kernel or copy), up to 5 names by "
            "idle time",
            only=("gpu_dependency",),
            fields=_detail_rows("Name of the kernel or copy that ended the gaps"),
        ),
        Key(
            "longest_gaps",
            ROWS,
            "The longest gaps of this cause (`idle_top_gaps` of them), longest first",
            only=_CAUSES,
            fields=(
                Key("start_offset_ns", NS, "Gap start, from trace.t0_ns"),
                Key("end_offset_ns", NS, "Gap end, from trace.t0_ns"),
                Key("duration_ns", NS, "Gap length"),
                Key(
                    "host_activity",
                    TEXT,
                    "The gap's detail (as in `host_activity`)",
                    null="nothing recorded names it",
                    only=_HOST_SIDE,
                ),
                Key(
                    "next_work",
                    TEXT,
                    "The name of the work that ended the gap",
                    null="the work is not named",
                    only=("gpu_dependency",),
                ),
            ),
        ),
    ),
    kinds=(
        Kind(
            "gpu_dependency",
            "The next work was queued before the gap and the GPU still waited",
            "cause",
            "gpu_dependency",
            keys=(
                Key("queued_before_gap", COUNT, "Gaps whose next work was launched before the gap"),
                Key(
                    "queued_during_gap",
                    COUNT,
                    "Gaps whose next work was launched during the gap, and queued for most of it",
                ),
                Key(
                    "queued_lead_p50_ns",
                    NS,
                    "Median time from the launch call's end to the gap start, over the gaps "
                    "queued before it; 0 when none was",
                ),
                Key(
                    "gpu_side_kinds",
                    ROWS,
                    "What the GPU-side waits were, by kind, most idle time first",
                    fields=(
                        Key(
                            "kind",
                            TEXT,
                            "What the waits were: `kernel_switch` the gap between back-to-back "
                            "queued kernels (at most `idle_kernel_switch_ns`), `first_launch` a "
                            "kernel's first launch starting late (a slow launch call), "
                            "`unrecorded_producer` a long wait with no GPU busy in a trace of the"
                            " whole job, `host_blocked` the host sat in a blocking call for half "
                            "the wait or more, `launch_latency` the kernel was issued as the GPU "
                            "went idle and started one launch latency later, `one_stream` the "
                            "kernel was queued on the device's only stream in a trace with no "
                            "other device or collective (nothing recorded to wait on), "
                            "`dependency` the rest",
                            choices=(
                                "kernel_switch",
                                "first_launch",
                                "unrecorded_producer",
                                "host_blocked",
                                "launch_latency",
                                "one_stream",
                                "dependency",
                            ),
                        ),
                        Key("n", COUNT, "Gaps of this kind"),
                        Key("ns", NS, "Their summed duration"),
                        Key("p50_ns", NS, "Their median duration"),
                        Key(
                            "blocking_call",
                            TEXT,
                            "The blocking call the host sat in most often during these waits",
                            when="`kind` is `host_blocked` or `unrecorded_producer`",
                            null="no blocking call overlapped them",
                        ),
                        Key(
                            "module_load_ns",
                            NS,
                            "Module-load calls (lazy loading) running during these waits: "
                            "0 where none did, so no module load delayed the launch",
                            when="`kind` is `first_launch`",
                        ),
                        Key(
                            "launch_call_ns",
                            NS,
                            "The launch calls' summed duration",
                            when="`kind` is `first_launch`",
                        ),
                        Key(
                            "after_call_ns",
                            NS,
                            "The waits' time after the launch calls returned (the kernel "
                            "queued, not started)",
                            when="`kind` is `first_launch`",
                        ),
                        Key(
                            "other_work",
                            COUNT,
                            "The device's other launched work (kernels past their first "
                            "launch, copies, memsets) with a recorded call",
                            when="`kind` is `first_launch` and the host is WSL2 (its kernel "
                            "release says so)",
                        ),
                        Key(
                            "other_work_min_start_after_call_ns",
                            NS,
                            "How soon after its call the earliest of that work started: "
                            "under WSL2 all work starts late, not only a first launch",
                            when="`kind` is `first_launch` and the host is WSL2 (its kernel "
                            "release says so)",
                        ),
                    ),
                ),
            ),
        ),
        Kind(
            "data_loading",
            "A data-loader range covered the gap",
            "cause",
            "data_loading",
        ),
        Kind(
            "synchronization",
            "The launching thread was blocked in synchronizing calls",
            "cause",
            "synchronization",
            keys=(
                Key(
                    "blocked_in_gaps_ns",
                    NS,
                    "Time the launching thread spent in blocking calls inside these gaps, "
                    "until the next work was issued (gaps.blocked_ns summed)",
                ),
            ),
        ),
        Kind(
            "launch_overhead",
            "The GPU ran dry while the host was issuing launches",
            "cause",
            "launch_overhead",
            keys=(
                Key(
                    "launch_in_progress_gaps",
                    COUNT,
                    "Gaps whose next launch call had started by the time the gap began",
                ),
                Key(
                    "launch_after_gap_start",
                    COUNT,
                    "Gaps whose next launch call started after the gap began",
                ),
                Key(
                    "launch_delay_p50_ns",
                    NS,
                    "Median time from the gap start to that launch call's start, over the "
                    "gaps in `launch_after_gap_start`; 0 when there are none",
                ),
                Key(
                    "in_graph_launch_gaps",
                    COUNT,
                    "Gaps that opened while the graph launch call (cudaGraphLaunch, "
                    "hipGraphLaunch) that launched the next work was still running",
                    when=_IN_GRAPH_LAUNCH,
                ),
                Key(
                    "in_graph_launch_ns",
                    NS,
                    "Their summed duration; from half of the cause's idle time up the title "
                    "names the graph launch and the advice is about it",
                    when=_IN_GRAPH_LAUNCH,
                ),
                Key("in_graph_launch_longest_ns", NS, "The longest of them", when=_IN_GRAPH_LAUNCH),
                Key(
                    "in_graph_launch_longest_node",
                    COUNT,
                    "Position of the kernel after the longest of them among the kernels its "
                    "graph launch call launched (1 is the first)",
                    when=_IN_GRAPH_LAUNCH,
                ),
                Key(
                    "in_graph_launch_longest_prev",
                    TEXT,
                    "The kernel that ended as the longest of them began",
                    when=_IN_GRAPH_LAUNCH,
                    null="no kernel on the device ends exactly there",
                ),
                Key(
                    "in_graph_launch_longest_call_offset_ns",
                    NS,
                    "How far into its graph launch call the longest of them began; with "
                    "the call's mean time per kernel it tells whether the kernel after it "
                    "would have been dispatched already at a steady pace",
                    when=_IN_GRAPH_LAUNCH,
                ),
                Key(
                    "in_graph_launch_longest_next",
                    TEXT,
                    "The kernel that began as the longest of them ended",
                    when=_IN_GRAPH_LAUNCH,
                    null="no kernel on the device starts exactly there",
                ),
                Key(
                    "graph_launches",
                    COUNT,
                    "The graph launch calls they opened in",
                    when=_IN_GRAPH_LAUNCH,
                ),
                Key(
                    "graph_launch_call",
                    TEXT,
                    "The call with the most of that idle time",
                    when=_IN_GRAPH_LAUNCH,
                    choices=("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"),
                ),
                Key("graph_launch_call_ns", NS, "That call's duration", when=_IN_GRAPH_LAUNCH),
                Key(
                    "graph_launch_kernels",
                    COUNT,
                    "Kernels that call launched (same correlation id)",
                    when=_IN_GRAPH_LAUNCH,
                ),
            ),
        ),
        Kind(
            "host_compute",
            "The host was busy in traced code before the next launch",
            "cause",
            "host_compute",
        ),
        Kind(
            "untraced",
            "Nothing recorded explains the gap (unified-memory migrations among them)",
            "cause",
            "untraced",
            keys=(
                Key(
                    "no_launch_record",
                    COUNT,
                    "Gaps whose ending work has no recorded launching call (unified-memory "
                    "migrations, page faults)",
                ),
            ),
        ),
        Kind(
            "capture_start",
            "Information: the capture opens with a wait on work issued before recording "
            "began, before (almost) any recorded GPU work; idle_gpu judges the time after it",
            "kind",
            "capture_start",
            keys=(
                Key("kind", TEXT, "`capture_start`", choices=("capture_start",)),
                Key("gap_start_offset_ns", NS, "The wait's start, from trace.t0_ns"),
                Key("gap_end_offset_ns", NS, "Its end, from trace.t0_ns"),
                Key("duration_ns", NS, "Its length"),
                Key("next_work", TEXT, "The queued work that waited", null="it is not named"),
                Key(
                    "launch_start_offset_ns",
                    NS,
                    "When that work's launch call began, from trace.t0_ns",
                    null="no launch call is recorded",
                ),
                Key(
                    "gpu_busy_before_ns",
                    NS,
                    "GPU work on any device before the wait (at most "
                    "`idle_capture_start_busy_pct` % of its length)",
                ),
            ),
        ),
        Kind(
            "host_uvm_phases",
            "Information: unified-memory migrations open or close the window, and the idle "
            "before the first launched work was queued and after the last ended is the "
            "host's time with managed memory, not GPU time to give back",
            "kind",
            "host_uvm_phases",
            keys=(
                Key("kind", TEXT, "`host_uvm_phases`", choices=("host_uvm_phases",)),
                Key("idle_before_first_launch_ns", NS, "Idle before the first work was queued"),
                Key("idle_after_last_work_ns", NS, "Idle after the last launched work ended"),
                Key(
                    "first_launch_offset_ns",
                    NS,
                    "Start of the judged range, from trace.t0_ns: when the first work was queued",
                ),
                Key(
                    "last_work_end_offset_ns",
                    NS,
                    "End of the judged range, from trace.t0_ns: when the last launched work ended",
                ),
                Key(
                    "migrations",
                    ROWS,
                    "The migrations outside that range, by phase and direction",
                    fields=(
                        Key(
                            "phase",
                            TEXT,
                            "Before the first launch or after the last work",
                            choices=("before_first_launch", "after_last_work"),
                        ),
                        Key("kind", TEXT, "Direction (memcpys.kind)"),
                        Key("n", COUNT, "Migrations"),
                        Key("bytes", BYTES, "Their bytes"),
                    ),
                ),
            ),
        ),
    ),
)
