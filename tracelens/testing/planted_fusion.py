"""Planted unfused kernels: an eager RMSNorm between two GEMMs, whose answers follow from
the durations (see ``expected``)."""

from __future__ import annotations

from tracelens.testing.planted_cost import A100, BF16_GEMM
from tracelens.testing.scenario import Scenario

US = 1_000
MS = 1_000_000

_EW = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::{}<float>, "
    "std::array<char*, 3ul> >(int)"
)
_REDUCE = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
    "at::native::MeanOps<float, float, float, float> > >()"
)
_COPY = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>()"
# An eager RMSNorm as Hugging Face models write it: upcast, pow, mean, add eps, rsqrt,
# scale, weight, each one operator call and one kernel (name, kernel, duration in us).
RMSNORM = (
    ("aten::copy_", _COPY, 100),
    ("aten::pow", _EW.format("pow_tensor_scalar_kernel"), 60),
    ("aten::mean", _REDUCE, 40),
    ("aten::add", _EW.format("CUDAFunctor_add"), 20),
    ("aten::rsqrt", _EW.format("rsqrt_kernel_cuda"), 20),
    ("aten::mul", _EW.format("MulFunctor"), 60),
    ("aten::mul", _EW.format("MulFunctor"), 50),
)


def eager_rmsnorm(steps: int = 4) -> Scenario:
    """A100, eager PyTorch inference: per 3 ms step a 1 ms GEMM, the seven-kernel RMSNorm
    above (350 us, the longest kernel 100 us), another 1 ms GEMM, then one `aten::add`
    alone after it (one operator call: not a run).

    Fused, each RMSNorm is about its longest kernel: 250 us less per step.
    """
    sc = Scenario(name="planted_eager_rmsnorm", devices=[A100])
    for k in range(steps):
        s = k * 3 * MS
        sc.range(f"ProfilerStep#{k}", s, 3 * MS)
        gpu = s + 100 * US
        mm = sc.op("aten::mm", s + 10 * US, 20 * US)
        sc.launch(mm, BF16_GEMM, s + 15 * US, gpu, 1 * MS)
        gpu += 1 * MS
        host = s + 40 * US
        for name, kernel, dur in RMSNORM:
            op = sc.op(name, host, 15 * US)
            sc.launch(op, kernel, host + 5 * US, gpu, dur * US)
            gpu += dur * US
            host += 20 * US
        mm2 = sc.op("aten::mm", host, 20 * US)
        sc.launch(mm2, BF16_GEMM, host + 5 * US, gpu, 1 * MS)
        gpu += 1 * MS
        add = sc.op("aten::add", host + 30 * US, 15 * US)
        sc.launch(add, _EW.format("CUDAFunctor_add"), host + 35 * US, gpu, 40 * US)
    run = sum(d for _, _, d in RMSNORM) * US
    longest = max(d for _, _, d in RMSNORM) * US
    sc.expected = {
        "runs": steps,
        "run_kernels": steps * len(RMSNORM),
        "run_ns": steps * run,
        "saving_ns": steps * (run - longest),
    }
    return sc
