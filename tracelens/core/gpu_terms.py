"""The words each GPU vendor uses for the same hardware, so advice reads as its users speak.

An MI300X user looks for compute units, workgroups, wavefronts and Matrix Cores, and tunes
with rocprof-compute; telling them about SMs, warps and Nsight Compute is advice for
someone else's GPU. Analyzers take their nouns from ``terms_for(vendor)``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuTerms:
    unit: str  # the short name of one compute unit: "SM" | "CU"
    units: str  # plural, spelled out where the short one is ambiguous
    block: str  # a thread block / workgroup
    blocks: str
    warp: str  # a warp (32 lanes) / wavefront (64 on CDNA)
    warps: str
    warp_lanes: int  # threads per warp/wavefront (64 on CDNA, the Instinct GPUs)
    matrix_cores: str  # tensor cores / Matrix Cores
    vector_cores: str  # where plain FP32 math runs
    kernel_profiler: str  # the per-kernel profiler to confirm a bound
    clock_query: str  # the command that shows clocks and throttling
    graphs: str  # CUDA graphs / HIP graphs


NVIDIA = GpuTerms(
    unit="SM",
    units="SMs",
    block="block",
    blocks="blocks",
    warp="warp",
    warps="warps",
    warp_lanes=32,
    matrix_cores="tensor cores",
    vector_cores="CUDA cores",
    kernel_profiler="Nsight Compute",
    clock_query="`nvidia-smi -q -d CLOCK,PERFORMANCE`",
    graphs="CUDA graphs",
)

AMD = GpuTerms(
    unit="CU",
    units="compute units",
    block="workgroup",
    blocks="workgroups",
    warp="wavefront",
    warps="wavefronts",
    warp_lanes=64,
    matrix_cores="Matrix Cores",
    vector_cores="vector ALUs",
    kernel_profiler="rocprof-compute (Omniperf)",
    clock_query="`amd-smi metric --clock` (or `rocm-smi --showclocks`)",
    graphs="HIP graphs",
)


def terms_for(vendor: str | None) -> GpuTerms:
    """AMD's words for an AMD GPU; NVIDIA's otherwise (the common case, and CUDA's own)."""
    return AMD if vendor == "amd" else NVIDIA
