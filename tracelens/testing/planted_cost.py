"""Planted cost-model cases: explicit attention, GEMMs near and far from peak, advice fit.

The right answers follow from the shapes by arithmetic (see ``expected`` in each):
FLOPs of a matmul [M,K]x[K,N] are 2·M·K·N; the ideal time is the FLOPs at the default
efficiency (70% for GEMMs, 50% for fused attention) of the GPU's peak for the dtype.
"""

from __future__ import annotations

from tracelens.testing.scenario import DeviceSpec, Scenario

US = 1_000
MS = 1_000_000
A100 = DeviceSpec(name="NVIDIA A100-SXM4-80GB", sm_count=108, compute_major=8, compute_minor=0)
V100 = DeviceSpec(
    name="Tesla V100-SXM2-32GB",
    sm_count=80,
    total_memory_bytes=34_359_738_368,
    compute_major=7,
    compute_minor=0,
)
BF16_GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn"
SOFTMAX = (
    "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 11, "
    "false, false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)"
)
DIV = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<c10::BFloat16, "
    "c10::BFloat16, c10::BFloat16, at::native::binary_internal::DivFunctor<c10::BFloat16> >, "
    "std::array<char*, 2ul> >(int, at::native::BUnaryFunctor<c10::BFloat16>, "
    "std::array<char*, 2ul>)"
)
ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
)
BF = "c10::BFloat16"


def explicit_attention(steps: int = 4) -> Scenario:
    """A100, bf16: per 20 ms step one ``SelfAttention`` module computes attention explicitly
    over 512 batch x heads, L = 2048, d = 64: ``bmm`` QKᵀ (2 ms), scale ``div`` (3 ms),
    ``softmax`` (6 ms), ``bmm`` PV (2 ms) = 13 ms of kernels; then an elementwise
    ``aten::add`` over 2 x 512 MiB float tensors takes 4.7 ms.

    Fused attention: 2 x 2 x 512 x 2048² x 64 = 549.8 GFLOP at 50% of 312 TFLOP/s =
    3.524 ms (its 537 MB of Q, K, V and output at 70% of 2039 GB/s take 0.376 ms), so the
    saving is 13 - 3.524 = 9.476 ms per step.
    """
    sc = Scenario(name="planted_explicit_attention", devices=[A100])
    bh, L, d = 512, 2048, 64
    plan = [
        ("aten::bmm", [[bh, L, d], [bh, d, L]], [BF, BF], BF16_GEMM, 2 * MS),
        ("aten::div", [[bh, L, L], []], [BF, "Scalar"], DIV, 3 * MS),
        ("aten::softmax", [[bh, L, L], [], []], [BF, "Scalar", ""], SOFTMAX, 6 * MS),
        ("aten::bmm", [[bh, L, L], [bh, L, d]], [BF, BF], BF16_GEMM, 2 * MS),
    ]
    n = 128 * 1024 * 1024
    for k in range(steps):
        s = k * 20 * MS
        sc.range(f"ProfilerStep#{k}", s, 20 * MS)
        sc.op("nn.Module: SelfAttention", s + 10 * US, 200 * US, category="python_function")
        gpu = s + 300 * US
        for i, (name, shapes, types, kernel, dur) in enumerate(plan):
            t0 = s + 20 * US + i * 40 * US
            op = sc.op(name, t0, 30 * US, shapes, types=types)
            if name == "aten::softmax":
                op = sc.op("aten::_softmax", t0 + 2 * US, 25 * US, shapes, types=types)
            sc.launch(op, kernel, t0 + 5 * US, gpu, dur)
            gpu += dur
        add = sc.op("aten::add", s + 300 * US, 30 * US, [[n], [n]], types=["float", "float"])
        sc.launch(add, ADD, s + 305 * US, gpu, 4_700 * US)
    flops = 2 * 2 * bh * L * L * d
    # a fused kernel at 50 % of the A100's bf16 peak for long sequences, times the share of
    # that rate FlashAttention reaches at 2,048 keys without a mask and heads of 64
    share = L / (L + 100) * 0.85
    fused_ns = flops / (0.5 * share * 312e12) * 1e9
    sc.expected = {
        "attention_ns": steps * 13 * MS,
        "fused_ns": steps * fused_ns,
        "impact_ns": steps * (13 * MS - fused_ns),
        "sites": 1,
        "calls": steps,
    }
    return sc


def bf16_gemm_near_peak(steps: int = 4) -> Scenario:
    """A100: ``aten::mm`` of two 8192² bf16 matrices (1.0995 TFLOP) in 4 ms per step:
    275 TFLOP/s, 88% of the 312 TFLOP/s peak, faster than the 70% the model expects, so
    no impact."""
    sc = Scenario(name="planted_bf16_gemm_near_peak", devices=[A100])
    for k in range(steps):
        s = k * 5 * MS
        sc.range(f"ProfilerStep#{k}", s, 5 * MS)
        mm = sc.op("aten::mm", s + 10 * US, 20 * US, [[8192, 8192], [8192, 8192]], types=[BF, BF])
        sc.launch(mm, BF16_GEMM, s + 15 * US, s + 100 * US, 4 * MS)
    sc.expected = {"tflops": 2 * 8192**3 / 4e-3 / 1e12}
    return sc


def fp32_gemm_training(device: DeviceSpec, kernel: str, steps: int = 4, n: int = 4096) -> Scenario:
    """A training loop whose 10 ms FP32 ``aten::mm`` (4096², 137.4 GFLOP) dominates, with a
    backward operator and an optimizer step; ``device`` picks the GPU (V100 or A100), ``n``
    the GEMM's output columns (50257 for a GPT-2 vocabulary: off the multiple of 8 tensor
    cores want)."""
    sc = Scenario(name="planted_fp32_gemm_training", devices=[device])
    shapes = [[4096, 4096], [4096, n]]
    for k in range(steps):
        s = k * 12 * MS
        sc.range(f"ProfilerStep#{k}", s, 12 * MS)
        mm = sc.op("aten::mm", s + 10 * US, 20 * US, shapes)
        sc.launch(mm, kernel, s + 15 * US, s + 100 * US, 10 * MS)
        sc.op("MmBackward0", s + 40 * US, 10 * US)
        step = sc.op("Optimizer.step#SGD.step", s + 60 * US, 20 * US)
        sc.launch(step, ADD, s + 65 * US, s + 10_200 * US, 100 * US)
    sc.expected = {"gemm_ns": steps * 10 * MS, "flops": 2 * 4096 * 4096 * n}
    return sc


def compiled_pointwise(steps: int = 4) -> Scenario:
    """A torch.compile'd model on an A100: Inductor's fused pointwise kernels dominate."""
    sc = Scenario(name="planted_compiled", devices=[A100])
    for k in range(steps):
        s = k * 5 * MS
        sc.range(f"ProfilerStep#{k}", s, 5 * MS)
        region = sc.op("Torch-Compiled Region: 0/0", s + 10 * US, 500 * US)
        for i in range(4):
            sc.launch(
                region,
                f"triton_poi_fused_add_mul_{i}",
                s + 20 * US + i * 10 * US,
                s + 100 * US + i * 1_000 * US,
                900 * US,
            )
    return sc


def cuda_c_program(steps: int = 4) -> Scenario:
    """A CUDA C program on an A100 without any framework: an FP32 cuBLAS GEMM, a naive
    elementwise kernel and a small-grid reduction, launched straight from the host."""
    sc = Scenario(name="planted_cuda_c", devices=[A100])
    for k in range(steps):
        s = k * 10 * MS
        sc.launch(None, "ampere_sgemm_128x64_nn", s, s + 50 * US, 6 * MS)
        sc.launch(
            None,
            "vector_add_kernel(float*, float const*, int)",
            s + 10 * US,
            s + 6_100 * US,
            2 * MS,
        )
        sc.launch(
            None,
            "block_reduce_kernel(float*, int)",
            s + 20 * US,
            s + 8_200 * US,
            1 * MS,
            grid=(8, 1, 1),
        )
        sc.api("cudaDeviceSynchronize", s + 30 * US, 9_200 * US)
    return sc


FP32_CONV = (
    "void implicit_convolve_sgemm<float, float, 128, 6, 7, 3, 3, 5, 1, false, true, true>(int, "
    "int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, "
    "int, float, float, int, float const*, float const*, bool, int, int)"
)
_CONV_TYPES = ["float", "float", "", "GenericList", "GenericList", "GenericList", "Bool", "", "Int"]


def strided_convolution(steps: int = 4) -> Scenario:
    """V100: ResNet-50's stride-2 3x3 convolution x [32, 128, 56, 56], w [128, 128, 3, 3]
    -> [32, 128, 28, 28] (as many output as input channels), nested as PyTorch records it:
    ``aten::convolution`` > ``aten::_convolution`` > ``aten::cudnn_convolution`` (which
    launches the kernel and reads its input with ``aten::contiguous``), then
    ``aten::batch_norm`` of the output. The children read the input, [32, 128, 56, 56]:
    the batch and channel counts of the output at 4x its area. FLOPs
    2·32·128·28·28·128·9 = 7.4 GFLOP a call; a 1 ms kernel runs 7.4 TFLOP/s."""
    sc = Scenario(name="planted_strided_convolution", devices=[V100])
    x, w, out = [32, 128, 56, 56], [128, 128, 3, 3], [32, 128, 28, 28]
    conv_shapes = [x, w, [], [], [], [], [], [], []]
    for k in range(steps):
        s = k * 3 * MS
        sc.range(f"ProfilerStep#{k}", s, 3 * MS)
        sc.op("aten::convolution", s + 10 * US, 100 * US, conv_shapes, types=_CONV_TYPES)
        sc.op("aten::_convolution", s + 12 * US, 96 * US, conv_shapes + [[]] * 4)
        cudnn = sc.op(
            "aten::cudnn_convolution", s + 14 * US, 92 * US, [x, w, [], [], [], [], [], [], []]
        )
        sc.op("aten::contiguous", s + 16 * US, 5 * US, [x, []], types=["float", ""])
        sc.launch(cudnn, FP32_CONV, s + 30 * US, s + 200 * US, 1 * MS)
        sc.op("aten::batch_norm", s + 120 * US, 50 * US, [out, [128], [128], [128], [128]])
    sc.expected = {"flops": steps * 2 * 32 * 128 * 28 * 28 * 128 * 9, "conv_ns": steps * MS}
    return sc


def overcounted_gemm(steps: int = 4) -> Scenario:
    """V100: an FP32 ``aten::mm`` whose shapes say 8192² x 8192² (1.1 TFLOP) while its kernel
    takes 4 ms: 275 TFLOP/s, beyond the V100's 15.7 TFLOP/s FP32 peak. No kernel does
    that, so the FLOPs (not the kernel) are wrong."""
    sc = Scenario(name="planted_overcounted_gemm", devices=[V100])
    for k in range(steps):
        s = k * 5 * MS
        sc.range(f"ProfilerStep#{k}", s, 5 * MS)
        mm = sc.op("aten::mm", s + 10 * US, 20 * US, [[8192, 8192], [8192, 8192]])
        sc.launch(mm, "volta_sgemm_128x64_nn", s + 15 * US, s + 100 * US, 4 * MS)
    return sc
