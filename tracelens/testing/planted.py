"""Scenarios with planted bottlenecks whose right answers are known exactly.

``training_steps`` builds ``steps`` iterations of a small training loop, each with:

1. a 2,000 us data-loader range with nothing queued on the GPU (a ``data_loading`` gap
   of 2,050 us before the step's first copy, from the second step on);
2. a pageable HtoD copy of 4 MiB taking 400 us;
3. a 5 ms FP32 GEMM launched by ``aten::mm`` (the hot operator);
4. 20 elementwise kernels from ``aten::add_``: 18 of 10 us and 2 of 100 us (the
   high-variance kernel: median 10 us, 90 us above it twice per step);
5. ``cudaStreamSynchronize`` blocking the host until the GPU drains (it returns 5 us into
   the gap), then 1,000 us of host work in ``Optimizer.step#SGD.step`` before the optimizer
   kernel is launched: a ``host_compute`` gap of 1,030 us per step. The sync left nothing
   queued, but it blocked only 5 us of the gap; the optimizer's host code is the gap;
6. a 140 us optimizer kernel ending exactly when the next step begins.
"""

from __future__ import annotations

from tracelens.testing.scenario import Scenario

US = 1_000
STEP_NS = 9_000 * US
H2D_BYTES = 4 * 1024 * 1024


def training_steps(steps: int = 10, name: str = "planted_training") -> Scenario:
    sc = Scenario(name=name)
    for k in range(steps):
        s = k * STEP_NS
        sc.range(f"ProfilerStep#{k}", s, STEP_NS)
        sc.range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", s, 2_000 * US)
        cp = sc.op("aten::copy_", s + 2_000 * US, 50 * US, [[1024, 1024], [1024, 1024]])
        sc.copy(
            cp,
            "HtoD",
            "pageable",
            "device",
            H2D_BYTES,
            api_start_ns=s + 2_010 * US,
            gpu_start_ns=s + 2_050 * US,
            gpu_dur_ns=400 * US,
            api_dur_ns=30 * US,
        )
        mm = sc.op("aten::mm", s + 2_060 * US, 20 * US, [[4096, 4096], [4096, 4096]])
        sc.launch(
            mm,
            "ampere_sgemm_128x64_tn",
            s + 2_065 * US,
            s + 2_450 * US,
            5_000 * US,
            api_dur_ns=10 * US,
            grid=(32, 64, 1),
            block=(256, 1, 1),
            registers_per_thread=128,
        )
        t_gpu = s + 7_450 * US
        for i in range(20):
            dur = 100 * US if i % 10 == 9 else 10 * US
            add = sc.op("aten::add_", s + 2_100 * US + i * 20 * US, 15 * US, [[1024], [1024]])
            sc.launch(
                add,
                "void at::native::vectorized_elementwise_kernel<4, at::native::"
                "CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, "
                "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
                s + 2_102 * US + i * 20 * US,
                t_gpu,
                dur,
                api_dur_ns=8 * US,
                grid=(4, 1, 1),
                block=(128, 1, 1),
            )
            t_gpu += dur
        assert t_gpu == s + 7_830 * US
        sc.api("cudaStreamSynchronize", s + 2_500 * US, 5_335 * US)  # returns at s + 7,835 us
        step = sc.op("Optimizer.step#SGD.step", s + 7_840 * US, 1_010 * US, category="cpu_op")
        sc.launch(
            step,
            "void at::native::sgd_update_kernel<float>(float*, float const*, float)",
            s + 8_840 * US,
            s + 8_860 * US,
            140 * US,
            api_dur_ns=10 * US,
        )
    gemm_ns = steps * 5_000 * US
    elementwise_ns = steps * (18 * 10 + 2 * 100) * US
    busy_ns = steps * (400 + 5_000 + 380 + 140) * US
    window_ns = steps * STEP_NS - 2_050 * US  # first activity is step 0's copy
    sc.expected = {
        "kernel_count": steps * 22,
        "memcpy_count": steps,
        "h2d_bytes": steps * H2D_BYTES,
        "h2d_pageable_bytes": steps * H2D_BYTES,
        "h2d_time_ns": steps * 400 * US,
        "busy_ns": busy_ns,
        "window_ns": window_ns,
        "gap_ns_by_cause": {
            "data_loading": (steps - 1) * 2_050 * US,
            "host_compute": steps * 1_030 * US,
        },
        "host_compute_detail": "Optimizer.step#SGD.step",
        "sync_blocked_in_gaps_ns": steps * 5 * US,
        "hot_kernel": "ampere_sgemm_128x64_tn",
        "hot_kernel_ns": gemm_ns,
        "hot_op": "aten::mm",
        "variance_kernel_prefix": "void at::native::vectorized_elementwise_kernel",
        "variance_impact_ns": steps * 2 * 90 * US,
        "elementwise_ns": elementwise_ns,
    }
    return sc
