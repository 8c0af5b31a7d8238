"""The evidence of ``memory`` findings (:mod:`tracelens.analyzers.memory`)."""

from __future__ import annotations

from tracelens.analyzers.evidence_keys.model import (
    BYTES,
    COUNT,
    FLAG,
    NS,
    NUMBER,
    PCT,
    ROWS,
    TEXT,
    AnalyzerEvidence,
    Key,
    Kind,
)

_PEAKS = ("near_capacity", "fragmentation")

EVIDENCE = AnalyzerEvidence(
    "memory",
    "GPU memory from the profiler's memory events: a reserved peak near the device's "
    "capacity, reserved far above the allocated peak, and allocator calls inside steps",
    keys=(
        Key("device_id", COUNT, "The device", only=_PEAKS),
        Key("memory_events", COUNT, "Its allocator events", only=_PEAKS),
        Key(
            "has_allocator_totals",
            FLAG,
            "Whether the events carry the allocator's totals (always true here: without "
            "them no peak finding is made)",
            only=_PEAKS,
        ),
        Key(
            "peak_allocated_bytes",
            BYTES,
            "Most memory allocated at once over the trace",
            only=_PEAKS,
        ),
        Key(
            "peak_reserved_bytes",
            BYTES,
            "Most memory the caching allocator held at once",
            only=_PEAKS,
        ),
        Key(
            "device_memory_bytes",
            BYTES,
            "The device's memory",
            null="the trace does not give it",
            only=_PEAKS,
        ),
        Key(
            "peak_allocated_offset_ns",
            NS,
            "When allocated first reached its peak, from trace.t0_ns",
            only=_PEAKS,
        ),
    ),
    kinds=(
        Kind(
            "near_capacity",
            "The reserved peak is at least `memory_near_capacity_pct` % of the device's "
            "memory (a risk, not time)",
            "peak_reserved_pct_of_device",
            keys=(
                Key(
                    "peak_reserved_pct_of_device",
                    PCT,
                    "`peak_reserved_bytes` as a share of `device_memory_bytes`",
                ),
            ),
        ),
        Kind(
            "fragmentation",
            "The reserved peak is at least `memory_reserved_over_allocated` times the "
            "allocated peak (memory no tensor could use)",
            "unused_reserved_bytes",
            keys=(
                Key(
                    "reserved_over_peak_allocated",
                    NUMBER,
                    "`peak_reserved_bytes` / `peak_allocated_bytes`",
                ),
                Key(
                    "unused_reserved_bytes",
                    BYTES,
                    "`peak_reserved_bytes` - `peak_allocated_bytes`",
                ),
                Key(
                    "peak_reserved_offset_ns",
                    NS,
                    "When reserved first reached its peak, from trace.t0_ns",
                ),
            ),
        ),
        Kind(
            "allocator_churn",
            "Device allocation calls (cudaMalloc, cudaFree and their forms) inside "
            "ProfilerStep ranges",
            "by_call",
            keys=(
                Key("calls", COUNT, "Allocation calls inside steps"),
                Key("host_ns", NS, "Host time in them: the impact"),
                Key("steps", COUNT, "Profiled steps in the trace"),
                Key(
                    "by_call",
                    ROWS,
                    "The calls by runtime function, most host time first",
                    fields=(
                        Key("api", TEXT, "Runtime function"),
                        Key("calls", COUNT, "Its calls inside steps"),
                        Key("ns", NS, "Host time in them"),
                    ),
                ),
            ),
        ),
    ),
)
