"""Planted captures that are mostly warm-up: cuDNN autotuning and JIT compilation.

Both run a short steady state after a long first iteration, so the right diagnosis is
"record a steady state", with the warm-up's share of the window as its impact.
"""

from __future__ import annotations

from tracelens.testing.scenario import Scenario

US = 1_000
MS = 1_000_000
CANDIDATES = (
    "void fft2d_r2c_32x32<float, false, 5u, true>(float2*, float const*, int)",
    "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(float*)",
    "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16",
)
CHOSEN = CANDIDATES[2]
# Two layers of different shapes: cuDNN chooses an algorithm once per shape.
SHAPES = ([[32, 64, 56, 56], [64, 64, 3, 3]], [[32, 128, 28, 28], [128, 128, 3, 3]])
RELU = "void at::native::vectorized_elementwise_kernel<4, at::native::relu_kernel<float>>(int)"


def autotuning_capture(iterations: int = 10) -> Scenario:
    """An inference loop whose first iteration tries three algorithms per convolution.

    Iteration 0 (400 ms): a 60 ms ``cudaMalloc``, then two convolutions (of different
    shapes) whose first calls
    each run the three candidate kernels (fft, winograd, implicit GEMM) with event syncs
    around them and 150 ms of host time. Iterations 1.. (2 ms each, every 3 ms): each conv
    runs only the implicit-GEMM kernel (0.5 ms) and a ReLU. The analysed window starts at
    the first kernel (61 ms, after the cudaMalloc); the warm-up span runs to the end of the
    second convolution's first call (380 ms).
    """
    sc = Scenario(name="planted_autotuning")
    sc.api("cudaMalloc", 0, 60 * MS)
    t = 60 * MS
    for layer in range(2):
        op = sc.op("aten::cudnn_convolution", t, 150 * MS, SHAPES[layer])
        k = t + 1 * MS
        for name in CANDIDATES:
            sc.api("cudaEventRecord", k, 5 * US)
            sc.launch(op, name, k + 10 * US, k + 30 * US, 2 * MS)
            sc.api("cudaEventSynchronize", k + 40 * US, 2 * MS)
            k += 40 * MS
        t += 170 * MS
    start = 400 * MS
    for i in range(1, iterations):
        s = start + (i - 1) * 3 * MS
        for layer in range(2):
            o = s + layer * 1 * MS
            op = sc.op("aten::cudnn_convolution", o, 200 * US, SHAPES[layer])
            sc.launch(op, CHOSEN, o + 10 * US, o + 30 * US, 500 * US)
            relu = sc.op("aten::relu", o + 300 * US, 50 * US, [[32, 64, 56, 56]])
            sc.launch(relu, RELU, o + 310 * US, o + 600 * US, 100 * US)
    sc.expected = {"warmup_end_ns": 380 * MS, "window_start_ns": 61 * MS + 30 * US}
    return sc


def jit_capture(steps: int = 8) -> Scenario:
    """A compiled model whose first step spends 300 ms in Inductor compiling its kernels.

    The inputs are copied to the GPU first (1 ms from 10 us), then
    ``torch/_inductor/compile_fx.py(…): compile_fx`` runs for 299 ms, then the compiled
    steps: 1 ms of fused Triton kernels every 2 ms. The warm-up span is the compilation.
    """
    sc = Scenario(name="planted_jit")
    sc.copy(None, "HtoD", "pinned", "device", 64 << 20, 0, 10 * US, 1 * MS)
    compile_fx = "torch/_inductor/compile_fx.py(1013): compile_fx"
    sc.op(compile_fx, 1 * MS, 299 * MS, category="python_function")
    sc.api("cuModuleLoadData", 290 * MS, 8 * MS)
    for i in range(steps):
        s = 300 * MS + i * 2 * MS
        op = sc.op("CompiledFunction", s, 100 * US)
        sc.launch(op, "triton_poi_fused_add_relu_0", s + 10 * US, s + 50 * US, 1 * MS)
    sc.expected = {"warmup_end_ns": 300 * MS}
    return sc
