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
    TEXTS,
    AnalyzerEvidence,
    Key,
    Kind,
    Type,
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
                            "exposed_ns",
                            NS,
                            "The part of each kernel no compute kernel overlaps, summed: what "
                            "decides whether its advice is given (a share of the collectives' "
                            "exposed time)",
                        ),
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
                            "kernel time includes waiting for peers; the midpoint of the "
                            "middle two of an even count)",
                            null="sizes are unknown",
                        ),
                        Key(
                            "largest_algbw_gbps",
                            GBPS,
                            "Algorithm bandwidth of the largest message's call (not "
                            "necessarily the best: see `best_algbw_gbps`)",
                            null="sizes are unknown",
                        ),
                        Key(
                            "best_algbw_gbps",
                            GBPS,
                            "The highest algorithm bandwidth of any of its calls",
                            null="sizes are unknown",
                        ),
                        Key(
                            "best_busbw_gbps",
                            GBPS,
                            "`best_algbw_gbps` scaled to bus bandwidth as `median_busbw_gbps`",
                            null="sizes or the group size are unknown",
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
                Key(
                    "queued_behind",
                    ROWS,
                    "Per collective and stream, where the stream also runs other "
                    "collectives (one process group: they run in the order issued), how "
                    "often it queued behind them; in first-launch order",
                    fields=(
                        Key("collective", TEXT, "The collective"),
                        Key("stream_id", COUNT, "The stream"),
                        Key("shares_with", TEXTS, "The other collectives on that stream"),
                        Key("kernels", COUNT, "Its kernels on that stream"),
                        Key(
                            "queued",
                            COUNT,
                            "Those launched while the stream's previous kernel, another "
                            "collective, had not ended: they started only after it",
                        ),
                        Key(
                            "queued_ns",
                            NS,
                            "From each such launch to the end of the kernel it queued "
                            "behind, summed",
                        ),
                        Key("behind", TEXTS, "The collectives they queued behind"),
                        Key(
                            "unexplained",
                            COUNT,
                            "In a filtered trace only: those starting at least 1 ms after "
                            "their launch with no kernel recorded on the stream meanwhile "
                            "(the filter may have dropped what they queued behind)",
                        ),
                        Key(
                            "unexplained_ns",
                            Type("list", item=NS),
                            "Each such kernel's time from launch to start",
                        ),
                        Key(
                            "waits",
                            ROWS,
                            "Each queued or unexplained kernel, in start order",
                            fields=(
                                Key("launch_ns", NS, "Its launch call's start (trace clock)"),
                                Key("start_ns", NS, "Its kernel's start (trace clock)"),
                                Key(
                                    "behind",
                                    TEXT,
                                    "The collective it queued behind",
                                    null="unexplained: nothing recorded ran on the stream",
                                ),
                                Key(
                                    "behind_start_ns",
                                    NS,
                                    "That collective's kernel start (trace clock)",
                                    null="unexplained",
                                ),
                                Key(
                                    "behind_end_ns",
                                    NS,
                                    "That collective's kernel end (trace clock)",
                                    null="unexplained",
                                ),
                            ),
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
