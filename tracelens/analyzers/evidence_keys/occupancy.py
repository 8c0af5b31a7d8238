"""The evidence of ``occupancy`` findings (:mod:`tracelens.analyzers.occupancy`)."""

from __future__ import annotations

from tracelens.analyzers.evidence_keys.model import (
    BYTES,
    COUNT,
    INTS,
    NS,
    PCT,
    ROWS,
    TEXT,
    TEXTS,
    AnalyzerEvidence,
    Key,
    Kind,
)


def _kernel(launches: str) -> tuple[Key, ...]:
    return (
        Key("kernel", TEXT, "The kernel's name"),
        Key("launches", COUNT, launches),
        Key("kernel_ns", NS, "Their summed duration"),
        Key("share_pct", PCT, "`kernel_ns` as a share of all kernel time (every device)"),
    )


EVIDENCE = AnalyzerEvidence(
    "occupancy",
    "Grids too small for the GPU, kernels at low estimated occupancy, and FP32 math on a GPU "
    "with tensor cores (Matrix Cores on AMD: blocks are workgroups, SMs compute units, warps "
    "wavefronts)",
    keys=(Key("device_id", COUNT, "The device the kernels ran on"),),
    kinds=(
        Kind(
            "underfilled_grid",
            "A kernel whose launches have fewer blocks than the device has SMs times "
            "`occupancy_min_blocks_per_sm`",
            "median_blocks",
            keys=(
                *_kernel("Its launches on this device with an underfilled grid"),
                Key("median_blocks", COUNT, "Median blocks per launch (grid x × y × z)"),
                Key("sm_count", COUNT, "SMs (compute units) of the device"),
                Key("grid", INTS, "Grid (x, y, z) of its longest launch"),
                Key("block", INTS, "Block (x, y, z) of its longest launch"),
                Key("warps_per_block", COUNT, "Warps (wavefronts) per block of that launch"),
                Key("warp_lanes", COUNT, "Threads per warp: 32, or 64 on AMD"),
                Key("idle_pct", PCT, "Share of SMs the median grid leaves without a block"),
                Key(
                    "idle_sm_ns",
                    NS,
                    "Each launch's duration times its idle-SM share, summed: an upper bound "
                    "on what filling every SM gives back",
                ),
                Key(
                    "idle_sm_ns_in_hot_ops",
                    NS,
                    "The part of `idle_sm_ns` in operators a hot_ops finding already counts, "
                    "left out of the impact",
                ),
                Key(
                    "idle_sm_ns_in_fault_stalls",
                    NS,
                    "The part of `idle_sm_ns` in the kernel's time stalled on unified-memory "
                    "page faults (the page-fault finding's), left out of the impact",
                ),
            ),
        ),
        Kind(
            "low_occupancy",
            "A kernel whose profiler-estimated occupancy averages below `occupancy_low_pct` "
            "(informational)",
            "est_occupancy_pct",
            keys=(
                *_kernel("Its launches on this device with an occupancy estimate"),
                Key("est_occupancy_pct", PCT, "Mean estimated achieved occupancy of its launches"),
                Key(
                    "registers_per_thread",
                    COUNT,
                    "Most registers per thread over its launches",
                ),
                Key(
                    "shared_memory_bytes",
                    BYTES,
                    "Most shared memory per block over its launches",
                ),
            ),
        ),
        Kind(
            "fp32_on_tensor_cores",
            "FP32 GEMMs and single-precision convolutions on a GPU of compute capability 7.0 "
            "or more",
            "fp32_ns",
            keys=(
                Key(
                    "compute_capability",
                    TEXT,
                    "The device's compute capability (major.minor, as the trace writes it)",
                ),
                Key("fp32_ns", NS, "Kernel time of the FP32 GEMM and convolution kernels"),
                Key("share_pct", PCT, "`fp32_ns` as a share of all kernel time"),
                Key(
                    "claimed_by_hot_ops",
                    TEXTS,
                    "Every operator a `hot_ops` finding gives an impact: FP32 kernel time in "
                    "them is left out here",
                ),
                Key(
                    "unclaimed_ns",
                    NS,
                    "FP32 kernel time in other operators, outside explicit attention: half of "
                    "it is the impact",
                ),
                Key(
                    "kernels",
                    ROWS,
                    "The FP32 kernels by time, up to 5",
                    fields=(
                        Key("kernel", TEXT, "Kernel name"),
                        Key("ns", NS, "Its kernel time"),
                    ),
                ),
            ),
        ),
    ),
)
