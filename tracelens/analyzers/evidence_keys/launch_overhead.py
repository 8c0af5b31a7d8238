"""The evidence of ``launch_overhead`` findings (:mod:`tracelens.analyzers.launch_overhead`)."""

from __future__ import annotations

from tracelens.analyzers.evidence_keys.model import (
    COUNT,
    NS,
    PCT,
    ROWS,
    TEXT,
    AnalyzerEvidence,
    Key,
)

EVIDENCE = AnalyzerEvidence(
    "launch_overhead",
    "One finding per device whose launch gaps (gap cause `launch_overhead`) reach "
    "`launch_min_gap_pct` % of its window, or whose kernels are mostly tiny",
    keys=(
        Key("device_id", COUNT, "The device"),
        Key("kernel_count", COUNT, "Kernels on the device"),
        Key("short_kernel_threshold_ns", NS, "What counts as tiny: `launch_short_kernel_ns`"),
        Key(
            "short_kernel_count",
            COUNT,
            "Tiny kernels launched one by one (kernels replayed from a CUDA graph do not count)",
        ),
        Key("short_kernel_pct", PCT, "`short_kernel_count` as a share of `kernel_count`"),
        Key("short_kernel_ns", NS, "Their summed duration"),
        Key("graph_launched_kernels", COUNT, "Kernels launched by a graph launch"),
        Key("median_kernel_ns", NS, "Median kernel duration on the device"),
        Key(
            "idle_launch_count",
            COUNT,
            "Launches that found the GPU idle (their kernel ends a gap the call started in): "
            "the ones launch latency is measured on",
        ),
        Key(
            "launch_latency_p50_ns",
            NS,
            "Median time from the launch call's start to its kernel's start, over those "
            "launches; 0 when there are none",
        ),
        Key("launch_latency_p95_ns", NS, "Its 95th percentile; 0 when there are none"),
        Key("launch_call_p50_ns", NS, "Median host time in a launch call, over every launch"),
        Key("launch_call_total_ns", NS, "Host time in launch calls, over every launch"),
        Key("launch_gap_count", COUNT, "Gaps of cause `launch_overhead` on the device"),
        Key(
            "launch_in_progress_at_gap_start",
            COUNT,
            "Of those, the gaps whose next launch call had started when the gap began",
        ),
        Key(
            "launch_issued_after_gap_start",
            COUNT,
            "The others: the next launch call started after the gap began",
        ),
        Key(
            "launch_issue_delay_p50_ns",
            NS,
            "Median time from the gap start to that call's start, over those; 0 when there "
            "are none",
        ),
        Key("launch_gap_ns", NS, "Summed duration of the launch gaps: the impact"),
        Key("launch_gap_pct_of_window", PCT, "`launch_gap_ns` as a share of the device's window"),
        Key(
            "top_tiny_kernel_operators",
            ROWS,
            "Operators that launched the most tiny kernels (graph-replayed ones included), up to 5",
            fields=(
                Key("operator", TEXT, "Operator name (kernel_ops.op_name)"),
                Key("tiny_kernels", COUNT, "Tiny kernels it launched"),
                Key("tiny_ns", NS, "Their summed duration"),
            ),
        ),
    ),
)
