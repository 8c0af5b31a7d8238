"""Planted host-side bottlenecks: launch overhead, synchronization stalls, data loading, steps.

Every scenario states its right answers in ``expected``; the numbers follow from the
constants below by arithmetic a reader can check by hand.
"""

from __future__ import annotations

from tracelens.testing.scenario import Scenario

US = 1_000
BF16_GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn"
ADD_KERNEL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3>)"
)


def launch_bound(kernels: int = 400) -> Scenario:
    """A decode-style loop of tiny kernels the host cannot launch fast enough.

    Every 8 us the host runs an ``aten::add`` (7 us) whose ``cudaLaunchKernel`` starts 1 us
    in and lasts 5 us; the 3 us kernel starts 4 us after the call starts. So kernel ``i``
    runs [8i+5, 8i+8) us and the GPU idles 5 us before each next kernel: ``kernels - 1``
    launch-overhead gaps, every kernel tiny, launch latency exactly 4 us.
    """
    sc = Scenario(name="planted_launch_bound")
    for i in range(kernels):
        s = i * 8 * US
        op = sc.op("aten::add", s, 7 * US, [[64], [64]])
        sc.launch(op, ADD_KERNEL, s + 1 * US, s + 5 * US, 3 * US, api_dur_ns=5 * US)
    sc.expected = {
        "kernel_count": kernels,
        "short_kernel_count": kernels,
        "launch_gap_count": kernels - 1,
        "launch_gap_ns": (kernels - 1) * 5 * US,
        "launch_latency_p50_ns": 4 * US,
        "launch_call_p50_ns": 5 * US,
        "window_ns": (kernels - 1) * 8 * US + 3 * US,
        "top_operator": "aten::add",
    }
    return sc


SYNC_STEP_NS = 4_000 * US


def sync_stalls(steps: int = 10) -> Scenario:
    """Each 4 ms step has two 1.5 ms GEMMs, each followed by a host stall.

    1. ``loss.item()``: ``aten::item`` > ``aten::_local_scalar_dense`` issues a 4-byte DtoH
       ``cudaMemcpyAsync`` into pageable memory that blocks until the first GEMM ends
       (1,477 us), then a 5 us ``cudaStreamSynchronize``; the host then works 325 us before
       launching the second GEMM, so the GPU idles 345 us (from 1,515 to 1,860 us).
    2. ``torch.cuda.synchronize()`` inside a ``log_metrics`` annotation (no operator):
       ``cudaDeviceSynchronize`` blocks 1,452 us until the second GEMM ends at 3,360 us; the
       next step's GEMM starts at 4,010 us, a 650 us gap (not after the last step).
    """
    sc = Scenario(name="planted_sync_stalls")
    for k in range(steps):
        s = k * SYNC_STEP_NS
        sc.range(f"ProfilerStep#{k}", s, SYNC_STEP_NS)
        mm = sc.op("aten::mm", s, 20 * US, [[4096, 4096], [4096, 4096]])
        sc.launch(mm, BF16_GEMM, s + 5 * US, s + 10 * US, 1_500 * US, api_dur_ns=5 * US)
        item = sc.op("aten::item", s + 30 * US, 1_500 * US)
        lsd = sc.op("aten::_local_scalar_dense", s + 35 * US, 1_492 * US)
        sc.copy(
            lsd,
            "DtoH",
            "device",
            "pageable",
            4,
            api_start_ns=s + 40 * US,
            gpu_start_ns=s + 1_510 * US,
            gpu_dur_ns=5 * US,
            api_dur_ns=1_477 * US,  # returns at 1,517 us, when the value has landed
        )
        sc.api("cudaStreamSynchronize", s + 1_520 * US, 5 * US)
        assert item.start_ns + item.dur_ns >= s + 1_525 * US
        sc.op("postprocess", s + 1_540 * US, 300 * US)
        mm2 = sc.op("aten::mm", s + 1_850 * US, 20 * US, [[4096, 4096], [4096, 4096]])
        sc.launch(mm2, BF16_GEMM, s + 1_855 * US, s + 1_860 * US, 1_500 * US, api_dur_ns=5 * US)
        sc.range("log_metrics", s + 1_900 * US, 1_800 * US)
        sc.api("cudaDeviceSynchronize", s + 1_910 * US, 1_452 * US)  # returns at 3,362 us
    sc.expected = {
        "scalar_read": {
            "site": "aten::item",
            "calls": 2 * steps,
            "blocked_ns": steps * (1_477 + 5) * US,
            "idle_after_ns": steps * 345 * US,
            "recoverable_ns": steps * 345 * US,
        },
        "device_synchronize": {
            "site": "log_metrics",
            "calls": steps,
            "blocked_ns": steps * 1_452 * US,
            "idle_after_ns": (steps - 1) * 650 * US,
            "recoverable_ns": (steps - 1) * 650 * US,
        },
        "window_ns": (steps - 1) * SYNC_STEP_NS + 3_360 * US - 10 * US,
    }
    return sc


def uneven_steps(steps: int = 8, slow: int = 5) -> Scenario:
    """Steps of 2 ms, each one 1.5 ms bf16 GEMM, except ``ProfilerStep#slow``: its GEMM
    takes 4.5 ms and the step 5 ms. Median 2 ms, slowest 2.5x, 3 ms above the median, all
    of it GEMM time.
    """
    sc = Scenario(name="planted_uneven_steps")
    t = 0
    for k in range(steps):
        gemm = 4_500 * US if k == slow else 1_500 * US
        dur = gemm + 500 * US
        sc.range(f"ProfilerStep#{k}", t, dur)
        mm = sc.op("aten::mm", t + 5 * US, 20 * US, [[4096, 4096], [4096, 4096]])
        sc.launch(mm, BF16_GEMM, t + 10 * US, t + 20 * US, gemm, api_dur_ns=5 * US)
        t += dur
    sc.expected = {
        "step_count": steps,
        "median_step_ns": 2_000 * US,
        "slowest_step": f"ProfilerStep#{slow}",
        "max_step_ns": 5_000 * US,
        "excess_ns": 3_000 * US,
        "kernel": BF16_GEMM,
        "kernel_delta_ns": 3_000 * US,
    }
    return sc
