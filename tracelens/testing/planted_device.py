"""Planted device-side problems: memory pressure, exposed communication, poor occupancy."""

from __future__ import annotations

from typing import Any

from tracelens.testing.planted_host import BF16_GEMM, US
from tracelens.testing.scenario import DeviceSpec, Scenario

GIB = 1024**3


def memory_pressure(steps: int = 4) -> Scenario:
    """An 80 GB A100 whose allocator reserves 76 GiB while 40 GiB is allocated.

    Each 10 ms step (one 8 ms GEMM) allocates 30 GiB on top of 10 GiB of weights, peaking at
    40 GiB allocated; reserved grows to 76 GiB (95% of 80 GiB) on the second step's
    allocation and stays. Every step also calls ``cudaFree`` (200 us) and ``cudaMalloc``
    (50 us) three times each: 6 calls, 750 us of host time per step.
    """
    sc = Scenario(name="planted_memory_pressure")
    cap = sc.devices[0].total_memory_bytes
    sc.memory(0, 10 * GIB, 10 * GIB, 12 * GIB)
    for k in range(steps):
        s = k * 10_000 * US
        sc.range(f"ProfilerStep#{k}", s, 10_000 * US)
        mm = sc.op("aten::mm", s + 100 * US, 20 * US, [[8192, 8192], [8192, 8192]])
        sc.launch(mm, BF16_GEMM, s + 110 * US, s + 200 * US, 8_000 * US)
        reserved = 40 * GIB if k == 0 else 76 * GIB
        sc.memory(s + 120 * US, 30 * GIB, 40 * GIB, reserved)
        sc.memory(s + 9_000 * US, -30 * GIB, 10 * GIB, reserved)
        for i in range(3):
            sc.api("cudaFree", s + 9_100 * US + i * 260 * US, 200 * US)
            sc.api("cudaMalloc", s + 9_300 * US + i * 260 * US, 50 * US)
    sc.expected = {
        "device_memory_bytes": cap,
        "peak_allocated_bytes": 40 * GIB,
        "peak_reserved_bytes": 76 * GIB,
        "reserved_over_peak_allocated": 1.9,
        "churn_calls": steps * 6,
        "churn_ns": steps * 3 * (200 + 50) * US,
    }
    return sc


def cached_not_fragmented(steps: int = 6) -> Scenario:
    """A caching allocator that holds what the program needed, no more.

    Each step allocates 9.5 GiB of activations on top of 0.5 GiB of weights (10 GiB
    allocated at its peak) and frees them; reserved reaches 10.2 GiB on the first step and
    stays there, so it ties its maximum on every event, including every moment only the
    0.5 GiB of weights is allocated. Peak reserved over peak allocated is 1.02x: no
    fragmentation, whichever of the tied events one looks at.
    """
    sc = Scenario(name="planted_cached_not_fragmented")
    reserved = int(10.2 * GIB)
    sc.memory(0, GIB // 2, GIB // 2, reserved)
    for k in range(steps):
        s = k * 10_000 * US
        sc.range(f"ProfilerStep#{k}", s, 10_000 * US)
        mm = sc.op("aten::mm", s + 100 * US, 20 * US, [[8192, 8192], [8192, 8192]])
        sc.launch(mm, BF16_GEMM, s + 110 * US, s + 200 * US, 8_000 * US)
        act = int(9.5 * GIB)
        sc.memory(s + 120 * US, act, 10 * GIB, reserved, addr=k + 1)
        sc.memory(s + 9_000 * US, -act, GIB // 2, reserved, addr=k + 1)
    sc.expected = {
        "peak_allocated_bytes": 10 * GIB,
        "peak_reserved_bytes": reserved,
    }
    return sc


NCCL_ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def exposed_allreduce(steps: int = 5) -> Scenario:
    """Rank 0 of 4: each 6 ms step runs a 4 ms GEMM (stream 7) and a 2 ms all-reduce of
    25,000,000 floats (100 MB, stream 20) starting 1 ms before the GEMM ends: 1 ms of each
    all-reduce overlaps compute, 1 ms is exposed. Algorithm bandwidth 100 MB / 2 ms = 50 GB/s,
    bus bandwidth 50 x 2(4-1)/4 = 75 GB/s.
    """
    sc = Scenario(name="planted_exposed_allreduce", rank=0, world_size=4)
    for k in range(steps):
        s = k * 6_000 * US
        sc.range(f"ProfilerStep#{k}", s, 6_000 * US)
        mm = sc.op("aten::mm", s, 20 * US, [[8192, 8192], [8192, 8192]])
        sc.launch(mm, BF16_GEMM, s + 5 * US, s + 100 * US, 4_000 * US)
        sc.collective(
            "allreduce",
            s + 50 * US,
            30 * US,
            25_000_000,
            NCCL_ALLREDUCE,
            gpu_start_ns=s + 3_100 * US,
            gpu_dur_ns=2_000 * US,
            group_size=4,
        )
    sc.expected = {
        "comm_ns": steps * 2_000 * US,
        "overlapped_ns": steps * 1_000 * US,
        "exposed_ns": steps * 1_000 * US,
        "collective": "allreduce",
        "count": steps,
        "median_bytes": 100_000_000,
        "algbw_gbps": 50.0,
        "busbw_gbps": 75.0,
    }
    return sc


NCCL_ALLGATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
NCCL_REDUCE_SCATTER = (
    "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
)


def exposed_gather_scatter(steps: int = 4) -> Scenario:
    """Rank 0 of 4, each 8 ms step a 2 ms GEMM, then a 2 ms all-gather and a 2 ms
    reduce-scatter that nothing overlaps, sized the two ways Kineto records them:

    - the all-gather as Shampoo's ``_all_gather_base`` under an older PyTorch: a
      ``c10d::_allgather_base_`` operator whose inputs are the 100,000,000-byte int8 output
      and the 25,000,000-byte input shard, around a ``nccl:_all_gather_base`` range that
      records only the shard, and no group size;
    - the reduce-scatter as ``record_param_comms`` with 25,000,000 float input elements
      (100 MB) and 6,250,000 output elements (a quarter: the group size is 4).

    Each moves 100 MB per rank as nccl-tests counts it (all-gather: output; reduce-scatter:
    input): algorithm bandwidth 100 MB / 2 ms = 50 GB/s, bus bandwidth 50 x (4-1)/4 =
    37.5 GB/s. Counted from the all-gather's input, it would read a quarter of that.
    """
    sc = Scenario(name="planted_exposed_gather_scatter", rank=0, world_size=4)
    shard = 25_000_000
    for k in range(steps):
        s = k * 8_000 * US
        sc.range(f"ProfilerStep#{k}", s, 8_000 * US)
        mm = sc.op("aten::mm", s, 20 * US, [[8192, 8192], [8192, 8192]])
        sc.launch(mm, BF16_GEMM, s + 5 * US, s + 100 * US, 2_000 * US)
        sc.op(
            "c10d::_allgather_base_",
            s + 50 * US,
            60 * US,
            [[4 * shard], [shard], []],
            types=["signed char", "signed char", ""],
        )
        nccl = sc.op(
            "nccl:_all_gather_base",
            s + 55 * US,
            40 * US,
            [[shard]],
            category="user_annotation",
            types=["signed char"],
        )
        sc.launch(nccl, NCCL_ALLGATHER, s + 60 * US, s + 2_200 * US, 2_000 * US, stream_id=20)
        sc.collective(
            "reduce_scatter",
            s + 200 * US,
            30 * US,
            shard,
            NCCL_REDUCE_SCATTER,
            gpu_start_ns=s + 4_300 * US,
            gpu_dur_ns=2_000 * US,
            group_size=4,
        )
        sc.collectives[-1].out_nelems = shard // 4  # each rank keeps a quarter
    sc.expected = {
        "bytes": 100_000_000,
        "algbw_gbps": 50.0,
        "busbw_gbps": 37.5,
        "group_size": 4,
    }
    return sc


SMALL_GRID_KERNEL = "void splitk_reduce_small_kernel<float>(float*, float const*, int)"
LOW_OCC_KERNEL = "void my_layer_norm_kernel<float>(float*, float const*, int)"
FP32_GEMM = "ampere_sgemm_128x64_tn"


def occupancy_problems(steps: int = 10) -> Scenario:
    """On a 108-SM A100, each 10 ms step runs back to back:

    - a 1,000 us kernel with a 16-block grid (92 of 108 SMs idle),
    - a 1,000 us kernel at 12.5% estimated occupancy (grid large enough),
    - a 4,000 us FP32 GEMM from ``aten::mm`` (43% of kernel time: hot_ops claims it),
    - a 300 us FP32 GEMM from ``aten::bmm`` (3.2%, below hot_ops' 5% bar: unclaimed),
    - a 3,000 us bf16 GEMM (tensor cores already).
    """
    sc = Scenario(name="planted_occupancy")
    plan: list[tuple[str, str, int, dict[str, Any]]] = [
        ("my_op::small", SMALL_GRID_KERNEL, 1_000, {"grid": (16, 1, 1)}),
        ("my_op::norm", LOW_OCC_KERNEL, 1_000, {"est_occupancy_pct": 12.5}),
        ("aten::mm", FP32_GEMM, 4_000, {"grid": (32, 64, 1)}),
        ("aten::bmm", FP32_GEMM, 300, {"grid": (32, 64, 1)}),
        ("aten::linear", BF16_GEMM, 3_000, {"grid": (32, 64, 1)}),
    ]
    for k in range(steps):
        s = k * 10_000 * US
        gpu = s + 100 * US
        for i, (op_name, kernel, dur, kw) in enumerate(plan):
            op = sc.op(op_name, s + i * 20 * US, 10 * US)
            sc.launch(op, kernel, s + i * 20 * US + 2 * US, gpu, dur * US, **kw)
            gpu += dur * US
    sc.expected = {
        "sm_count": 108,
        "small_grid_idle_ns": round(steps * 1_000 * US * (108 - 16) / 108),
        "low_occupancy_pct": 12.5,
        "fp32_ns": steps * 4_300 * US,
        "claimed_by_hot_ops": ["aten::mm"],
        "fp32_impact_ns": steps * 300 * US // 2,
    }
    return sc


def pageable_copies_cuda_c(steps: int = 8) -> Scenario:
    """A CUDA C program (no framework operators) on an RTX 3060 (PCIe 4.0 x16, ~25 GB/s).

    Each 3 ms step copies 8 MiB from pageable memory to the GPU in 1,000 us with no kernel
    running (fully exposed), runs a 1,000 us kernel, then reads 8 MiB back into pageable
    memory in 1,000 us. Pinned, each copy would take 8 MiB / 25 GB/s + 2 us = 337,544 ns.
    """
    sc = Scenario(name="planted_pageable_cuda_c")
    sc.devices = [DeviceSpec(0, "NVIDIA GeForce RTX 3060", 28, 12 * GIB, 8, 6)]
    nbytes = 8 * 1024 * 1024
    for k in range(steps):
        s = k * 3_000 * US
        sc.copy(
            None,
            "HtoD",
            "pageable",
            "device",
            nbytes,
            s,
            s + 20 * US,
            1_000 * US,
            api_dur_ns=1_030 * US,
            api_name="cudaMemcpy",
        )
        sc.launch(
            None,
            "vecAdd(float const*, float const*, float*, int)",
            s + 1_050 * US,
            s + 1_060 * US,
            1_000 * US,
            grid=(8192, 1, 1),
            block=(256, 1, 1),
        )
        sc.copy(
            None,
            "DtoH",
            "device",
            "pageable",
            nbytes,
            s + 1_060 * US,
            s + 2_080 * US,
            1_000 * US,
            api_dur_ns=1_030 * US,
            api_name="cudaMemcpy",
        )
    per_copy_pinned = round(nbytes / 25 + 2_000)
    sc.expected = {
        "htod_ns": steps * 1_000 * US,
        "dtoh_ns": steps * 1_000 * US,
        "pin_save_per_direction_ns": steps * (1_000 * US - per_copy_pinned),
        "dtoh_copies": steps,
    }
    return sc


def small_copies(copies: int = 200) -> Scenario:
    """A CUDA C program on an A100 (PCIe 4.0 x16, ~25 GB/s) making many small uploads.

    Every 60 us it copies 4 KiB from pinned memory to the GPU in 10 us, then runs a 40 us
    kernel: each copy is latency, not bandwidth. Moved in one batch at 25 GB/s, 4 KiB takes
    164 ns, so batching gives back 10,000 - 164 = 9,836 ns per copy.
    """
    sc = Scenario(name="planted_small_copies")
    nbytes = 4 * 1024
    for k in range(copies):
        s = k * 60 * US
        sc.copy(None, "HtoD", "pinned", "device", nbytes, s, s + 2 * US, 10 * US)
        sc.launch(None, "scale(float*, int)", s + 12 * US, s + 14 * US, 40 * US)
    sc.expected = {
        "small_copies": copies,
        "small_bytes": copies * nbytes,
        "small_ns": copies * 10 * US,
        "batch_save_ns": copies * round(10 * US - nbytes / 25),
    }
    return sc
