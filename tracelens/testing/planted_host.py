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
    """Each 4 ms step has two 1.5 ms GEMMs, each followed by a host sync.

    1. ``loss.item()``: ``aten::item`` > ``aten::_local_scalar_dense`` issues a 4-byte DtoH
       ``cudaMemcpyAsync`` into pageable memory that blocks until the first GEMM ends
       (1,477 us, returning at 1,517 us), then a ``cudaStreamSynchronize`` that returns 23 us
       later (a blocking sync waking up); the second GEMM is launched at once (1,542 us,
       running from 1,547 us). The GPU idles 32 us (1,515 to 1,547 us), 25 us of it with the
       launching thread blocked: a ``synchronization`` gap.
    2. ``torch.cuda.synchronize()`` inside a ``log_metrics`` annotation (no operator):
       ``cudaDeviceSynchronize`` blocks 1,139 us until the second GEMM ends at 3,047 us and
       returns 2 us later; ``log_metrics`` goes on to 3,700 us and the next step's GEMM starts
       at 4,010 us: a 963 us gap (not after the last step) in which the sync blocked 2 us, so
       it is host code (``log_metrics`` covers 653 us of it), not synchronization.
    """
    sc = Scenario(name="planted_sync_stalls")
    for k in range(steps):
        s = k * SYNC_STEP_NS
        sc.range(f"ProfilerStep#{k}", s, SYNC_STEP_NS)
        mm = sc.op("aten::mm", s, 20 * US, [[4096, 4096], [4096, 4096]])
        sc.launch(mm, BF16_GEMM, s + 5 * US, s + 10 * US, 1_500 * US, api_dur_ns=5 * US)
        sc.op("aten::item", s + 30 * US, 1_511 * US)
        lsd = sc.op("aten::_local_scalar_dense", s + 35 * US, 1_506 * US)
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
        sc.api("cudaStreamSynchronize", s + 1_517 * US, 23 * US)  # returns at 1,540 us
        mm2 = sc.op("aten::mm", s + 1_541 * US, 20 * US, [[4096, 4096], [4096, 4096]])
        sc.launch(mm2, BF16_GEMM, s + 1_542 * US, s + 1_547 * US, 1_500 * US, api_dur_ns=5 * US)
        sc.range("log_metrics", s + 1_900 * US, 1_800 * US)
        sc.api("cudaDeviceSynchronize", s + 1_910 * US, 1_139 * US)  # returns at 3,049 us
    sc.expected = {
        "scalar_read": {
            "site": "aten::item",
            "calls": 2 * steps,
            "blocked_ns": steps * (1_477 + 23) * US,
            "idle_after_ns": steps * 32 * US,
            "recoverable_ns": steps * 25 * US,
        },
        "device_synchronize": {
            "site": "log_metrics",
            "calls": steps,
            "blocked_ns": steps * 1_139 * US,
            "idle_after_ns": 0,
            "recoverable_ns": 0,
        },
        "host_gap_ns": (steps - 1) * 963 * US,
        "host_gap_detail": "log_metrics",
        "window_ns": (steps - 1) * SYNC_STEP_NS + 3_047 * US - 10 * US,
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
