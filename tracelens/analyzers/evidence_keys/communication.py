"""The evidence of ``communication`` findings (:mod:`tracelens.analyzers.communication`)."""

from __future__ import annotations

from tracelens.analyzers.evidence_keys.model import (
    BYTES,
    COUNT,
    GBPS,
    NS,
    PCT,
    ROWS,
    TEXT,
    AnalyzerEvidence,
    Key,
    Kind,
)

_STEP = "The ProfilerStep the kernel's launch fell in"

EVIDENCE = AnalyzerEvidence(
    "communication",
    "Collective (NCCL/RCCL) kernel time per device not hidden by compute, and the part of it "
    "spent waiting for peer ranks",
    keys=(
        Key("device_id", COUNT, "The device"),
        Key("comm_ns", NS, "Union of its collective kernels' intervals (over streams)"),
    ),
    kinds=(
        Kind(
            "exposed",
            "Communication time during which no compute kernel ran on the device",
            "exposed_transfer_ns",
            keys=(
                Key("overlapped_ns", NS, "The part of `comm_ns` overlapped by compute kernels"),
                Key("exposed_ns", NS, "`comm_ns` - `overlapped_ns`: the GPU only communicated"),
                Key(
                    "exposed_waiting_for_peers_ns",
                    NS,
                    "The part of `exposed_ns` that is waiting for peers, counted by the "
                    "`peer_waiting` finding (0 when that finding is not made)",
                ),
                Key(
                    "exposed_transfer_ns",
                    NS,
                    "`exposed_ns` - `exposed_waiting_for_peers_ns`: the impact",
                ),
                Key("overlap_pct", PCT, "`overlapped_ns` as a share of `comm_ns`"),
                Key(
                    "collectives",
                    ROWS,
                    "Per collective (from the record_param_comms call that launched the "
                    "kernels, else the kernel name), most kernel time first",
                    fields=(
                        Key("collective", TEXT, "Collective name (allreduce, SendRecv, ...)"),
                        Key("count", COUNT, "Its kernels"),
                        Key("kernel_ns", NS, "Their summed duration"),
                        Key(
                            "median_bytes",
                            BYTES,
                            "Median message size, the bytes each rank moves as nccl-tests "
                            "count them (an all-gather's output, a reduce-scatter's input; a "
                            "real call's: the lower middle of an even count)",
                            null="no launching call records sizes",
                        ),
                        Key(
                            "min_bytes",
                            BYTES,
                            "Smallest message",
                            null="no launching call records sizes",
                        ),
                        Key(
                            "max_bytes",
                            BYTES,
                            "Largest message",
                            null="no launching call records sizes",
                        ),
                        Key(
                            "total_bytes",
                            BYTES,
                            "Summed message size",
                            null="no launching call records sizes",
                        ),
                        Key(
                            "group_size",
                            COUNT,
                            "Ranks in the process group",
                            null="no launching call records it",
                        ),
                        Key(
                            "median_algbw_gbps",
                            GBPS,
                            "Median algorithm bandwidth, bytes / kernel time (a lower bound: "
                            "kernel time includes waiting for peers; a real call's, as for "
                            "the size)",
                            null="sizes are unknown",
                        ),
                        Key(
                            "largest_algbw_gbps",
                            GBPS,
                            "Algorithm bandwidth of the largest message's call",
                            null="sizes are unknown",
                        ),
                        Key(
                            "median_busbw_gbps",
                            GBPS,
                            "The same scaled to bus bandwidth as nccl-tests do (2(n-1)/n for "
                            "all-reduce, (n-1)/n for all-gather and reduce-scatter)",
                            null="sizes or the group size are unknown",
                        ),
                    ),
                ),
                Key("bandwidth_note", TEXT, "Why the bandwidths are lower bounds (fixed text)"),
            ),
        ),
        Kind(
            "peer_waiting",
            "Collective kernel time beyond the transfer estimate: waiting for slower ranks",
            "by_step",
            keys=(
                Key(
                    "waiting_ns",
                    NS,
                    "Each collective kernel's duration beyond its transfer estimate (its bytes "
                    "at this rank's best bandwidth for the collective, else the fastest "
                    "same kernel), summed",
                ),
                Key(
                    "exposed_waiting_ns",
                    NS,
                    "The part of `waiting_ns` with no compute beside it: the impact",
                ),
                Key(
                    "by_step",
                    ROWS,
                    "Waiting per step, most first, up to 10",
                    fields=(
                        Key(
                            "step",
                            TEXT,
                            _STEP,
                            null="the launches fell outside every step",
                        ),
                        Key("waiting_ns", NS, "Waiting of its collective kernels"),
                        Key("kernels", COUNT, "Its collective kernels"),
                    ),
                ),
                Key(
                    "longest_waits",
                    ROWS,
                    "The kernels that waited longest, up to 5",
                    fields=(
                        Key("kernel", TEXT, "Kernel name"),
                        Key("collective", TEXT, "Its collective"),
                        Key(
                            "bytes",
                            BYTES,
                            "Its message size",
                            null="its launching call records no size",
                        ),
                        Key("duration_ns", NS, "Its duration"),
                        Key("waiting_ns", NS, "Its duration beyond the transfer estimate"),
                        Key("step", TEXT, _STEP, null="the launch fell outside every step"),
                    ),
                ),
            ),
        ),
    ),
)
