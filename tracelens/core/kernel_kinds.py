"""What kind of work a kernel does, judged from its name, and what usually speeds it up.

Names cover NVIDIA libraries (cuBLAS/cuBLASLt/CUTLASS, cuDNN, FlashAttention), AMD's
(``Cijk_*`` hipBLASLt/Tensile GEMMs, whose ``_S_B_`` data type is single precision;
``ck``/``ck_tile`` composable kernels; ``attn_fwd``/``kernel_unified_attention_*`` Triton
attention) and Inductor's generated Triton kernels (``triton_poi`` pointwise,
``triton_red``/``triton_per`` reductions, ``triton_tem``/``triton_mm`` matmul templates).

:func:`advice_for` words a kind's advice for the workload (:mod:`tracelens.core.workload`):
FP16 autocast, not TF32/BF16, before Ampere; no PyTorch API outside PyTorch; no
torch.compile where compiled; no optimizer advice outside training; ROCm terms on AMD.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracelens.core.gemm_alignment import GemmDims, dims_clause
from tracelens.core.gpu_terms import terms_for
from tracelens.core.kernel_libraries import TENSILE, TRITON, gemm_library
from tracelens.core.op_cost import MOE_OPERATOR

if TYPE_CHECKING:
    from tracelens.core.workload import Workload


@dataclass(frozen=True)
class KernelKind:
    key: str
    label: str
    # Share of this kind's time the usual remedy gives back; 0 where no estimate is honest.
    saving_fraction: float
    saving_basis: str
    advice: str


_FP32_GEMM = re.compile(r"(?i)(^|[^a-z])sgemm|gemm.*f32|f32.*gemm|gemmSN_|gemv2T_kernel")
# Names of tensor-core kernels: their "f32" is the accumulator, not the math.
_TENSOR_CORE = re.compile(
    r"(?i)tf32|bf16|fp16|f16|[hs]884|[hs]1688|[hs]16816|i8816|hmma|wgmma|tensorop|_mma_"
)
# ``fbgemm`` is a library name (``fbgemm_gpu::`` prefixes its embedding, quantization and
# index kernels and appears in their signatures): it says nothing about matrix multiplies.
# vLLM's and SGLang's Triton MoE kernel (``fused_moe_kernel``) is the experts' grouped GEMM.
_GEMM = re.compile(
    r"(?i)(?<!fb)gemm|cutlass|cublas|xmma|hmma|wgmma|_mma_|matmul|^Cijk_|triton_(tem|mm)|"
    r"^fused_moe_kernel"
)
# Tensile/hipBLASLt names spell the data types after the index letters: ``_S_B_`` single,
# ``_B_BS_`` bf16, ``_H_HS_``/``HHS`` half.
_AMD_FP32_GEMM = re.compile(r"^Cijk_[A-Za-z_]*?_(S_B|SB|S_S)_")
_TRITON_POINTWISE = re.compile(r"^triton_poi")
_TRITON_REDUCE = re.compile(r"^triton_(red|per)")
_ATTENTION = re.compile(r"(?i)flash|fmha|attention|attn|sdpa|softmax")
# Attention that is already one fused kernel (not an explicit matmul-softmax-matmul).
_FUSED_ATTENTION = re.compile(
    r"(?i)flash|fmha|attn_fwd|attn_bwd|unified_attention|paged_attention|efficient_attention|"
    r"mem_eff|cutlassF|ck_tile"
)
_CONV = re.compile(r"(?i)conv|scudnn|hcudnn|winograd|implicit_gemm|dgrad|wgrad|fprop")
# FP32 math named by the library's own prefix: cuBLAS ``sgemm``, cuDNN ``scudnn``.
# sgemm, and cuDNN's complex single-precision GEMM of FFT convolutions (gcgemm)
_FP32_NAMED = re.compile(r"(?i)(^|[^a-z])sgemm|gcgemm|scudnn|fp32_conv|conv.*_f32")
# Tensor-core kernels: their ``f32``/``float`` is the accumulator or the TF32 input type.
_TENSOR_CORE_MATH = re.compile(
    r"(?i)tf32|bf16|fp16|f16|[hs]884|[hs]1688|[hs]16816|i8816|hmma|wgmma|xmma|tensorop|_mma_|"
    r"mfma"
)
# Floating-point element types as C++ template arguments spell them (CUDA, c10, CUTLASS,
# HIP); the first one in a kernel's template arguments is its data type.
_ELEMENT_TYPE = re.compile(
    r"(?<![\w:])(?:c10::|cutlass::)?"
    r"(float|double|__half|half|half_t|Half|__nv_bfloat16|__hip_bfloat16|BFloat16|bfloat16_t|"
    r"tfloat32_t|__nv_fp8_e4m3|__nv_fp8_e5m2|Float8_e4m3fn|Float8_e5m2)(?!\w)"
)
# Library helpers around a GEMM or convolution whose ``float`` is that of the partial sums
# (split-K reductions, epilogues) or of offsets: they are float for half and TF32 math too.
# cuBLAS level-1 ``scal`` is no matrix math at all (``cublas`` in its signature makes it a
# GEMM kind).
# Float kernels around the math that tensor cores would not run: split-K and epilogue
# helpers, Winograd and im2col data transforms (nonfused Winograd multiplies in a separate
# sgemm), and matrix-vector products (memory-bound: tensor cores do not help them).
# 16-bit tensor-core math as kernel names spell it (cuDNN/TensorRT xmma, cuBLAS, CUTLASS).
_HALF_MATH = re.compile(r"(?i)f16f16|bf16|h1688|h16816|h884|hmma|_fp16_|half")
_MATH_HELPER = re.compile(
    r"(?i)splitK|reduce|epilogue|offsets|^void scal_kernel|winograd(Forward|Wgrad)"
    r"(Data|Filter|Output|Delta)|generateWinogradTiles|im2col|gemv|gemmk1"
)
_COMM = re.compile(r"(?i)nccl|allreduce|all_gather|reduce_scatter|sendrecv")
_ELEMENTWISE = re.compile(
    r"(?i)elementwise|vectorized|unrolled|CatArray|copy_kernel|fill_kernel|index_kernel"
)
_REDUCE = re.compile(
    r"(?i)reduce_kernel|reduction|norm_kernel|layer_norm|batch_norm|batchnorm|bn_fw|bn_bw"
)

# FBGEMM's table-batched embedding kernels (TorchRec's embedding tables): lookups, and in
# backward the fused optimizer's row updates.
_EMBEDDING_TBE = re.compile(r"split_embedding\w*_(codegen|kernel)|embedding_bag|batched_embedding")
# Their time follows the rows a rank looks up and updates, not a launch configuration: a
# sampled two-rank job's straggler runs 28.4 ms of backward row updates against its peer's
# 11.7 ms, which "look at its occupancy" would not explain.
_EMBEDDING_ADVICE = (
    "FBGEMM's table-batched embedding kernels (lookups, and in backward the fused "
    "optimizer's row updates): their time follows how many rows this rank's tables serve and "
    "how many indices hit the same rows (the backward's `cta_per_row` kernels take the rows "
    "many indices share), a gather and scatter bound by memory, not by a launch "
    "configuration. Compare it across ranks first (a job's imbalance finding does): uneven "
    "tables are the sharding plan's (TorchRec's planner: table-wise, row-wise or "
    "column-wise, with each table's pooling factor as its cost). Then the bytes: FP16 or "
    "INT8 rows where the tables are FP32."
)

KINDS = {
    "gemm_fp32": KernelKind(
        "gemm_fp32",
        "FP32 GEMM (no tensor/matrix cores)",
        0.5,
        "Tensor-core GEMMs (TF32/BF16/FP16) typically run at least 2x the FP32 SIMT rate, so "
        "about half of this time would come back.",
        "These matrix multiplies run in plain FP32 on CUDA cores. Enable tensor cores: "
        "`torch.backends.cuda.matmul.allow_tf32 = True` (Ampere and newer) or "
        "`torch.set_float32_matmul_precision('high')`, or run the model under "
        "`torch.autocast('cuda', dtype=torch.bfloat16)`; keep GEMM dimensions multiples of 8.",
    ),
    "gemm": KernelKind(
        "gemm",
        "GEMM",
        0.0,
        "",
        "Matrix multiplies dominate: check they use tensor cores (bf16/fp16/TF32, dimensions "
        "multiples of 8/16) and are large enough to fill the GPU; batch small GEMMs together.",
    ),
    "attention": KernelKind(
        "attention",
        "attention/softmax",
        0.0,
        "",
        "Use fused attention: `torch.nn.functional.scaled_dot_product_attention` "
        "(FlashAttention/memory-efficient backends) instead of explicit matmul + softmax, and "
        "a paged KV cache for serving.",
    ),
    "conv": KernelKind(
        "conv",
        "convolution",
        0.0,
        "",
        "Convolutions dominate: use `channels_last` memory format with AMP (bf16/fp16), and "
        "`torch.backends.cudnn.benchmark = True` for fixed input shapes.",
    ),
    "communication": KernelKind(
        "communication",
        "communication (NCCL)",
        0.0,
        "",
        "Collectives take GPU time: overlap them with compute (async collectives, waited on "
        "only where the result is needed), and check their bandwidth against the "
        "interconnect's.",
    ),
    "elementwise": KernelKind(
        "elementwise",
        "elementwise/copy",
        0.3,
        "Fusing chains of memory-bound elementwise kernels removes the intermediate reads and "
        "writes; a third of their time is a conservative estimate of what fusion returns.",
        "Many memory-bound elementwise kernels: fuse them with `torch.compile`, use fused "
        "optimizers (`foreach=True`/`fused=True`) and in-place ops, and avoid needless "
        "`.contiguous()`/dtype casts.",
    ),
    "reduction": KernelKind(
        "reduction",
        "reduction/normalization",
        0.0,
        "",
        "Reductions and normalizations: use fused implementations (fused LayerNorm/RMSNorm, "
        "`torch.compile`).",
    ),
    "other": KernelKind(
        "other",
        "other",
        0.0,
        "",
        "Look at this kernel's launch configuration "
        "and occupancy in Nsight Compute to see what bounds it.",
    ),
}


def classify(kernel_name: str) -> KernelKind:
    if _AMD_FP32_GEMM.search(kernel_name):
        return KINDS["gemm_fp32"]
    if kernel_name.startswith("Cijk_"):
        return KINDS["gemm"]
    if _TRITON_POINTWISE.search(kernel_name):
        return KINDS["elementwise"]
    if _TRITON_REDUCE.search(kernel_name):
        return KINDS["reduction"]
    if _COMM.search(kernel_name):
        return KINDS["communication"]
    if _ATTENTION.search(kernel_name):
        return KINDS["attention"]
    if _CONV.search(kernel_name):
        return KINDS["conv"]
    if _FP32_GEMM.search(kernel_name) and not _TENSOR_CORE.search(kernel_name):
        return KINDS["gemm_fp32"]
    if _GEMM.search(kernel_name):
        return KINDS["gemm"]
    if _REDUCE.search(kernel_name):
        return KINDS["reduction"]
    if _ELEMENTWISE.search(kernel_name):
        return KINDS["elementwise"]
    return KINDS["other"]


def _template_arguments(kernel_name: str) -> str:
    """The kernel's own template arguments: the ``<...>`` before its parameter list.

    ``void cudnn::detail::dgrad_engine<float, 512, 6>(int, float const*)`` gives
    ``float, 512, 6``; the parameters (which hold accumulator and scale types) are left out.
    """
    name = kernel_name.replace("(anonymous namespace)", "")
    depth = 0
    start = -1
    for i, ch in enumerate(name):
        if ch == "<":
            if depth == 0 and start < 0:
                start = i + 1
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif ch == "(" and depth == 0:
            return name[start:i] if start >= 0 else ""
    return name[start:] if start >= 0 else ""


def data_type(kernel_name: str) -> str | None:
    """The element type a library kernel's template arguments name first, if any.

    cuDNN and CUTLASS put the data type before the accumulator: ``<__half, float>`` is a
    half kernel with a float accumulator, ``<float, float>`` an FP32 one.
    """
    m = _ELEMENT_TYPE.search(_template_arguments(kernel_name))
    return m.group(1) if m else None


def is_fp32_math(kernel_name: str) -> bool:
    """A GEMM or convolution kernel that does its math in FP32 on CUDA cores.

    Named FP32 kernels (``sgemm``, ``scudnn``, hipBLASLt ``_S_B_``), and cuDNN/cuBLAS/CUTLASS
    kernels whose template data type is ``float`` (``dgrad_engine<float, ...>``,
    ``winograd_nonfused::...<float, float>``); never tensor-core kernels (TF32, FP16, BF16,
    whose names say so) nor split-K/epilogue helpers, which are float for any math type.
    """
    kind = classify(kernel_name).key
    if kind == "gemm_fp32" and kernel_name.startswith("Cijk_"):
        return True  # Tensile spells its data types in letters (_AMD_FP32_GEMM)
    if kind not in ("gemm", "gemm_fp32", "conv") or _TENSOR_CORE_MATH.search(kernel_name):
        return False
    if kind == "gemm_fp32":
        return True
    if _FP32_NAMED.search(kernel_name):
        return True
    return data_type(kernel_name) == "float" and not _MATH_HELPER.search(kernel_name)


def is_fused_attention(kernel_name: str, op_name: str = "") -> bool:
    """A kernel (or the operator that launched it) that already is fused attention."""
    return bool(_FUSED_ATTENTION.search(kernel_name)) or any(
        w in op_name for w in ("flash", "efficient_attention", "scaled_dot_product")
    )


def tunableop_advice(wl: Workload) -> str:
    """The clause telling a PyTorch run on ROCm to let TunableOp pick its GEMMs, worded for
    what the recorded environment says it already does. Where the GEMMs replay from
    captured graphs, a replay runs the kernel chosen when the graph was captured, past
    TunableOp's dispatch: tuning has to happen before capture."""
    op = wl.tunableop
    graphs = (
        ". These run in captured graphs, which replay the kernels chosen at capture: tune "
        "the shapes before capture, in the warm-up's eager passes or offline (the file "
        "`PYTORCH_TUNABLEOP_RECORD_UNTUNED=1` writes, tuned with "
        "`torch.cuda.tunable.tune_gemm_in_file`), then restart so the graphs are captured "
        "again (turning it on in a server that has captured its graphs changes nothing)"
        if wl.cuda_graphs
        else ""
    )
    if op is None or not op.enabled:
        return (
            "let PyTorch tune them for these shapes (`PYTORCH_TUNABLEOP_ENABLED=1`, kept in "
            f"its results file across runs){graphs}"
        )
    results = f" (`{op.results_file}`)" if op.results_file else ""
    if not op.tuning:
        return (
            "PyTorch's TunableOp is already on with tuning off (`PYTORCH_TUNABLEOP_TUNING=0` "
            f"in the recorded environment), so these shapes run what its results file{results} "
            "holds for them, or the default where it holds none: tune them once "
            "(`PYTORCH_TUNABLEOP_TUNING=1`) and keep the file, or check that it covers them"
        )
    return (
        "PyTorch's TunableOp is already on and tuning (`PYTORCH_TUNABLEOP_ENABLED=1` in the "
        "recorded environment): each new shape's first calls are its tuning runs, so judge "
        f"later steps, and keep its results file{results} for the next run"
    )


def _memory_bound_gemm_advice(wl: Workload, kernel_name: str) -> str:
    """GEMMs that read their weights for few rows: bandwidth, not FLOPs, is the lever."""
    lib = gemm_library(kernel_name)
    if lib == TRITON:
        tune = "check that the Triton configs (the engine's, for this GPU) cover this batch size"
    elif wl.amd and lib == TENSILE:
        tune = (
            f"{tunableop_advice(wl)}; or use GEMMs tuned for small M (hipBLASLt offline "
            "tuning, aiter's tuned GEMMs)"
        )
    else:
        tune = (
            "tune them for these shapes (cuBLASLt heuristics, `torch.compile(mode='max-autotune')`)"
        )
    return (
        "These GEMMs are memory-bound: each call reads its whole weight matrix for few rows "
        "(the tokens in the batch), so their time should be the weights' bytes over the "
        "memory bandwidth, and the gap to it is the kernels'. For a kernel that streams the "
        f"weights faster, {tune}. More tokens per call (larger batches) share each weight "
        "read, and narrower weights (FP8) halve the bytes."
    )


# Expert weights already packed below 8 bits (MXFP4, INT4): no narrower format to advise.
_PACKED_WEIGHTS = re.compile(r"(?i)mxfp4|nvfp4|fp4|int4|w4a")


# triton_kernels' matmul_ogs names its tile: block_m x block_n x block_k x split_k.
_OGS_TILE = re.compile(r"matmul_ogs\w*?_(\d+)x(\d+)x(\d+)x(\d+)(?:_|$)")


def _moe_expert_advice(kernel_name: str) -> str:
    """A MoE layer in decode: the chosen experts' weights are the bytes; the expert GEMM
    kernel, not a BLAS library, streams them, and its own tiling is the lever."""
    packed = bool(_PACKED_WEIGHTS.search(kernel_name))
    tile = _OGS_TILE.search(kernel_name)
    # a block_m of 16 is already the smallest row tile these kernels take: only a smaller
    # block_n (more column tiles, so more workgroups) is left to try
    smaller = (
        "a smaller block_n (block_m is 16 already)"
        if tile and int(tile.group(1)) <= 16
        else "a smaller block_n or block_m"
    )
    if "matmul_ogs" in kernel_name:
        # vLLM's gpt-oss path: tiles from triton_kernels' opt flags, not the engine's
        # tuned fused_moe configs (those feed fused_moe_kernel only)
        lever = (
            "Its expert GEMMs are triton_kernels' `matmul_ogs`, tiled by its opt flags"
            + (
                f" (the name's `{tile.group(0).split('_')[-1]}`: block_m x block_n x "
                f"block_k x split_k = {tile.group(1)} x {tile.group(2)} x {tile.group(3)} x "
                f"{tile.group(4)})"
                if tile
                else ""
            )
            + (
                # stock matmul_ogs refuses split_k > 1 for MX-scaled weights
                # (`can_use_split_k = ... not w_has_mx`): asking for it raises
                # InapplicableConstraint, so only the tile sizes are a lever there
                f": for the slower projection (the basis names it) try {smaller}, set "
                "with `triton_kernels.matmul_ogs_details.opt_flags."
                "update_opt_flags_constraints` (global: time the other projection again); "
                "not split_k, which stock triton_kernels refuses for MX-scaled weights "
                "(a split_k constraint raises InapplicableConstraint); or a newer release "
                "of the engine and triton_kernels."
                if packed
                else ": for the slower projection (the basis names it) try a split_k of 2-4 "
                "or a smaller block_n, set with `triton_kernels.matmul_ogs_details."
                "opt_flags.update_opt_flags_constraints` (global: time the other projection "
                "again), or a newer release of the engine and triton_kernels."
            )
        )
    elif kernel_name.startswith("fused_moe_kernel"):
        lever = (
            "Its expert GEMMs are the engine's Triton `fused_moe_kernel`, whose block "
            "configs come from tuned files per device and expert shape: tune them for this "
            "GPU and batch size (vLLM's `benchmark_moe.py --tune`, SGLang's fused-MoE tuning "
            "script), and check the engine found a file for this device."
        )
    else:
        lever = (
            "Tune the expert GEMM kernel for this GPU and batch size, or compare the "
            "engine's MoE backends for this weight format."
        )
    return (
        "The MoE layer is memory-bound: each step reads the weights of every expert any of "
        "its tokens chose (the basis says about how many) for a few tokens each, so the "
        "layer's time should be those bytes over the memory bandwidth; the gap to it is "
        f"the expert GEMM kernels'. {lever} Library GEMM tuning (TunableOp, "
        "hipBLASLt/cuBLASLt) never sees these kernels. A larger batch reads the same "
        "experts for more tokens"
        + (
            " (the weights are already packed below 8 bits)."
            if packed
            else "; narrower expert weights (FP8, or 4-bit formats) cut the bytes."
        )
    )


def communication_advice(ddp: bool = False, fsdp: bool = False, shampoo: bool = False) -> str:
    """A hot communication operator's advice, from what the trace shows runs: DDP's
    bucketing or FSDP's prefetch only where their operators or ranges are recorded (FSDP
    advice for a job without FSDP sends the reader to settings it does not have), and for
    an all-gather inside distributed Shampoo's optimizer step, its config, which sets the
    group it gathers over and the bytes."""
    if shampoo:
        return (
            "These collectives are distributed Shampoo's all-gather, launched inside its "
            "optimizer step: its `num_trainers_per_group` (how many ranks it gathers over) "
            "and `communication_dtype` set their cost, and the communication finding says "
            "what they are here. Check their bandwidth against the interconnect's."
        )
    # each overlaps its own collectives only: DDP's buckets its gradient all-reduces, not
    # an embedding all-to-all the same operator may launch
    ways = [
        w
        for w, on in (
            ("DDP's gradient bucketing, for its all-reduces", ddp),
            ("FSDP prefetch, for its all-gathers", fsdp),
        )
        if on
    ]
    how = (
        " and ".join(ways)
        if ways
        else "async collectives, waited on only where the result is needed"
    )
    return (
        f"Collectives take GPU time: overlap them with compute ({how}), and check their "
        "bandwidth against the interconnect's; the communication finding says how much of "
        "it no compute hides."
    )


def advice_for(
    kind: KernelKind,
    wl: Workload | None,
    kernel_name: str = "",
    op_name: str = "",
    autotuning_seen: bool = False,
    grid_bound: bool = False,
    below_roofline: bool = False,
    memory_bound: bool = False,
    gemm_dims: GemmDims | None = None,
    small_gemms: bool = True,
) -> str:
    """The advice for ``kind``, worded for the workload (framework, GPU, what is done).

    ``autotuning_seen``: the capture shows cuDNN choosing convolution algorithms, so
    turning its autotuner on is no advice. ``grid_bound``: most of the time is in grids
    too small for the GPU (bound by latency, not by FLOPs or bytes). ``below_roofline``:
    the cost model finds the kernels well below what their FLOPs and bytes need.
    ``memory_bound``: the cost model finds them bound by memory (a GEMM of few rows, as in
    decoding, reads its whole weight matrix for them). ``gemm_dims``: what the recorded
    shapes say of its GEMMs' K and N (:mod:`tracelens.core.gemm_alignment`): the advice
    on dimensions follows it. ``small_gemms``: some of its GEMMs may be too small to fill
    the GPU (False where the shapes are known and no call's grid leaves it idle: then
    "batch small GEMMs together" cannot apply).
    """
    if wl is None:
        return kind.advice
    torch = wl.is_pytorch
    amd = wl.amd
    gpu = wl.gpu
    compiled = wl.compiled
    if kind.key == "gemm_fp32":
        return fp32_math_advice(
            wl,
            what="These matrix multiplies run in plain FP32",
            gemms=True,
            convs=False,
            gemm_dims=gemm_dims,
        )
    if kind.key == "gemm" and memory_bound and MOE_OPERATOR.search(op_name):
        return _moe_expert_advice(kernel_name)
    if kind.key == "gemm" and memory_bound and torch:
        return _memory_bound_gemm_advice(wl, kernel_name)
    if kind.key == "gemm":
        if not torch:
            return (
                "Matrix multiplies dominate: check the library runs them on tensor/matrix "
                "cores in a 16-bit or TF32 type "
                + (
                    "(hipBLASLt `HIPBLASLT_TUNING_FILE`, composable-kernel GEMMs)"
                    if amd
                    else "(cuBLASLt compute types, CUTLASS)"
                )
                + _then(dims_clause(gemm_dims, "8/16"))
                + (", and batch small GEMMs together." if small_gemms else ".")
            )
        lib = gemm_library(kernel_name)
        if lib == TRITON:
            # TunableOp and the BLAS libraries' tuning never see a Triton kernel
            return (
                "Matrix multiplies dominate and run as Triton kernels: their speed comes "
                "from the Triton config chosen for these shapes (block sizes, `num_warps`, "
                "`num_stages`)"
                + (
                    ", so compile with `mode='max-autotune'` to search more of them"
                    if kernel_name.startswith("triton_")
                    else ": check that the kernel's autotune or tuned configs (the engine's, "
                    "for this GPU) cover this batch size"
                )
                + "."
            )
        if amd and lib == TENSILE:
            return (
                f"Matrix multiplies dominate (hipBLASLt/Tensile kernels): {tunableop_advice(wl)}"
                + _then(dims_clause(gemm_dims, "16"))
                + (
                    ", and batch small GEMMs into one (`torch.bmm`, grouped GEMM)."
                    if small_gemms
                    else "."
                )
            )
        return (
            "Matrix multiplies dominate: keep them in bf16/fp16"
            + (
                " (FP16 here: this GPU has no BF16 tensor cores)"
                if gpu.tensor_dtypes and not gpu.has_tensor("bf16")
                else ""
            )
            + ", large enough to fill the GPU"
            + _then(dims_clause(gemm_dims, "16" if amd else "8/16"))
            + ("; batch small GEMMs together (`torch.bmm`, grouped GEMM)." if small_gemms else ".")
        )
    if kind.key == "attention":
        if is_fused_attention(kernel_name, op_name) or (
            wl.attention in ("flash", "efficient", "fused") and "softmax" not in kernel_name
        ):
            if grid_bound:
                # a grid that leaves most of the GPU idle runs as long as its sequential
                # loop takes: fewer FLOPs or a faster kernel change little, more work per
                # launch comes almost free
                return (
                    "Attention already runs as a fused kernel, but its grids leave most of "
                    f"the GPU's {terms_for(gpu.vendor).units} idle: each call is bound by "
                    "latency, not by its FLOPs or bytes, so neither less work per call nor a "
                    "faster kernel gains much. Run more sequences per call (larger batches): "
                    "each call takes about as long and does more."
                )
            if wl.serving_engine or wl.paged_attention:
                # the engine's paged KV cache and grouped-query heads are already there, and
                # it packs sequences: what is left is the bytes of the cache each step reads,
                # and how fast the kernel reads them where the cost model priced that
                # the engine's own switch, by the operator that names it: an SGLang user
                # has no use for vLLM's environment variable
                engine = op_name.lower()
                switch = (
                    "SGLang's `--attention-backend`"
                    if "sglang" in engine
                    else "vLLM's `VLLM_ATTENTION_BACKEND`"
                    if engine.startswith("vllm")
                    else "SGLang's `--attention-backend`, vLLM's `VLLM_ATTENTION_BACKEND`"
                )
                lead = (
                    "Attention already runs as fused kernels over a paged KV cache, but they "
                    "read it well below the GPU's memory bandwidth: the kernel is the lever. "
                    "Compare the engine's attention backends, and a newer release of the "
                    f"engine and its kernel library, on this batch and context ({switch}). Each "
                    if below_roofline
                    else "Attention already runs as fused kernels over a paged KV cache: each "
                )
                return (
                    lead + "decode step reads every running request's cached keys and values, so "
                    "its time follows the batch's total context length"
                    + (
                        "; an FP8 KV cache (`--kv-cache-dtype fp8_e4m3`) halves those bytes"
                        if gpu.has_tensor("fp8")
                        else ""
                    )
                    + "."
                )
            faster = ""
            flash = wl.installed.get("flash_attn")
            if below_roofline:
                faster = (
                    # the recorded pip list has it: the switch is one argument away
                    f" (on ROCm the composable-kernel FlashAttention often runs faster than "
                    f"AOTriton's `attn_fwd`, and `flash_attn` {flash} is installed here"
                    + (
                        ': `attn_implementation="flash_attention_2"` when loading the '
                        "transformers model uses it)"
                        if "transformers" in wl.installed
                        else ")"
                    )
                    if amd and flash
                    else " (on ROCm the composable-kernel FlashAttention, e.g. the `flash_attn` "
                    "ROCm build or aiter, often runs faster than AOTriton's `attn_fwd`)"
                    if amd
                    else " (FlashAttention-3 or cuDNN's fused attention on Hopper)"
                    if gpu.arch == "Hopper"
                    else " (FlashAttention-2)"
                )
            # a KV cache and grouped-query heads are for generation; an encoder (BERT)
            # or a training step has neither to gain
            generating = wl.kind == "serving"
            if below_roofline:
                return (
                    "Attention already runs as a fused kernel, but well below what its FLOPs "
                    "and bytes need on this GPU: a faster attention kernel is the lever"
                    + faster
                    + "; less work helps too: shorter or packed sequences (no padding)"
                    + (", a KV cache for decoding, grouped-query attention" if generating else "")
                    + (", FP8 attention" if gpu.has_tensor("fp8") else "")
                    + "."
                )
            return (
                "Attention already runs as a fused kernel, so the lever is less work, not a "
                "faster kernel: shorter or packed sequences (no padding)"
                + (", a KV cache for decoding, grouped-query attention" if generating else "")
                + (", FP8 attention" if gpu.has_tensor("fp8") else "")
                + "."
            )
        if not torch:
            return (
                "Attention written as separate matmul, softmax and matmul kernels: use a "
                "fused attention kernel (FlashAttention-style) so the score matrix never "
                "goes to memory."
            )
        return (
            "Use fused attention: `torch.nn.functional.scaled_dot_product_attention` instead "
            "of explicit matmul + softmax + matmul"
            + (
                " (on ROCm its FlashAttention backends are the composable-kernel and Triton "
                "ones; AOTriton is the default)"
                if amd
                else " (FlashAttention/memory-efficient backends)"
            )
            + "; it never writes the L x L scores to memory."
        )
    if kind.key == "conv":
        if _HALF_MATH.search(kernel_name) and "nhwc" in kernel_name.lower():
            # already what the usual advice asks for: say what is left, not that again
            return (
                "These convolutions already run in a 16-bit type on "
                f"{terms_for(gpu.vendor).matrix_cores} with NHWC layout: what is left is "
                "the work itself. "
                + (
                    "INT8 with calibration runs at up to twice the 16-bit tensor rate; "
                    "smaller inputs or a lighter model reduce it."
                    if not torch
                    else "`torch.compile` can fuse what surrounds them; smaller inputs or a "
                    "lighter model reduce it."
                )
            )
        if not torch:
            return (
                "Convolutions dominate: run them in a 16-bit type on "
                f"{terms_for(gpu.vendor).matrix_cores} with NHWC "
                "layout, and let the library benchmark its algorithms for your shapes."
            )
        amp = (
            "`torch.autocast('cuda', dtype=torch.bfloat16)`"
            if gpu.has_tensor("bf16")
            else "`torch.autocast('cuda', dtype=torch.float16)`"
            + (" with `torch.cuda.amp.GradScaler`" if wl.is_training else "")
        )
        return (
            f"Convolutions dominate: use `channels_last` memory format with AMP ({amp})"
            + (
                "; MIOpen picks algorithms from its find database (`MIOPEN_FIND_MODE`)"
                if amd
                else ""
                if autotuning_seen
                else ", and `torch.backends.cudnn.benchmark = True` for fixed input shapes"
            )
            + "."
        )
    if kind.key == "elementwise":
        if not torch:
            return (
                "Many memory-bound elementwise kernels: fuse them into fewer kernels so "
                "intermediates stay in registers, and avoid needless copies and conversions."
            )
        parts = []
        if not compiled:
            parts.append("fuse them with `torch.compile`")
        else:
            parts.append("check why Inductor left them unfused (graph breaks)")
        if wl.is_training and not wl.fused_optimizer:
            parts.append("use fused optimizers (`foreach=True`/`fused=True`)")
        # an in-place operator (trailing underscore: `aten::add_`) already is one
        if op_name.rstrip().endswith("_") and not op_name.endswith("__"):
            parts.append("avoid needless `.contiguous()`/dtype casts")
        else:
            parts.append("use in-place ops and avoid needless `.contiguous()`/dtype casts")
        return "Many memory-bound elementwise kernels: " + ", ".join(parts) + "."
    if kind.key == "other" and _EMBEDDING_TBE.search(kernel_name):
        return _EMBEDDING_ADVICE
    if kind.key == "other":
        return (
            "Look at this kernel's launch configuration and occupancy in "
            f"{terms_for(gpu.vendor).kernel_profiler} to see what bounds it."
        )
    if kind.key == "reduction":
        if not torch:
            return "Reductions and normalizations: use fused implementations."
        return (
            "Reductions and normalizations: use fused implementations (fused LayerNorm/RMSNorm"
            + (")." if compiled else ", `torch.compile`).")
        )
    return kind.advice


def fp32_math_advice(
    wl: Workload,
    what: str,
    gemms: bool = True,
    convs: bool = True,
    fft: str | None = None,
    gemm_dims: GemmDims | None = None,
) -> str:
    """How to move FP32 matrix math to tensor cores on this GPU and framework.

    ``gemms``/``convs``: which of the two the FP32 time is in; each switch is named only
    for the math it governs, and not where TF32 kernels of that math already run (the
    switch is on: the library keeps FP32 for these shapes, e.g. a 3-channel first
    convolution). ``fft``: a kernel of an FFT convolution among them (cuDNN's choice of
    algorithm, which runs complex FP32 GEMMs whatever the switch says). ``gemm_dims``: as
    for :func:`advice_for`.
    """
    gpu = wl.gpu
    dims = dims_clause(gemm_dims, "8") if gemms else None
    mc = terms_for(gpu.vendor).matrix_cores
    if gpu.tensor_dtypes and not gpu.has_tensor("fp16"):
        return f"{what}; this GPU has no {mc}, so only less work makes them faster."
    if not gpu.tensor_dtypes and wl.is_pytorch:
        return (
            f"{what}. The trace does not name the GPU: from Ampere on, allow TF32 "
            "(`torch.set_float32_matmul_precision('high')`) or run under "
            "`torch.autocast('cuda', dtype=torch.bfloat16)`; on Volta/Turing use "
            "`torch.autocast('cuda', dtype=torch.float16)`"
            + (" with `torch.cuda.amp.GradScaler`" if wl.is_training else "")
            + "."
        )
    if not wl.is_pytorch:
        if wl.framework == "tensorrt":
            return (
                f"{what}: build the engine with reduced precision (`--fp16`"
                + ("/`--bf16`, TF32 is on by default" if gpu.has_tensor("bf16") else "")
                + " in trtexec, or the builder's FP16 flag)."
            )
        lib = "hipBLASLt/rocBLAS" if wl.amd else "cuBLAS/cuBLASLt"
        if gpu.has_tensor("tf32"):
            return (
                f"{what}: request {mc} math from {lib} (TF32 compute type for FP32 "
                f"data, or BF16/FP16 inputs){_then(dims)}."
            )
        return (
            f"{what}: this GPU's {mc} take FP16 inputs: convert operands to FP16 "
            f"(FP32 accumulate) in {lib} calls{_then(dims)}."
        )
    if gpu.has_tensor("tf32") or gpu.has_tensor("bf16"):
        switches = []
        already = []
        if gpu.has_tensor("tf32") and not wl.amd:
            if gemms and not wl.tf32_gemms:
                switches.append(
                    "`torch.backends.cuda.matmul.allow_tf32 = True` / "
                    "`torch.set_float32_matmul_precision('high')` (TF32 for FP32 matmuls)"
                )
            elif gemms:
                already.append("matmuls")
            if convs and not wl.tf32_convs:
                switches.append("`torch.backends.cudnn.allow_tf32 = True` for convolutions")
            elif convs:
                already.append("convolutions")
        tf32 = "".join(f"{sw}, " for sw in switches) + ("or " if switches else "")
        note = (
            f" TF32 kernels already run for the other {' and '.join(already)}, so TF32 is "
            "allowed: the library keeps FP32 for these shapes"
            + (
                " (as cuDNN does for a first convolution of 3 input channels)."
                if "convolutions" in already
                else "."
            )
            if already
            else ""
        )
        if fft and convs and wl.is_pytorch:
            note += (
                f" Some are FFT convolutions (`{fft}`: complex FP32 GEMMs between FFT "
                "kernels), the algorithm cuDNN picked for those shapes, which does not use "
                f"{mc}: `torch.backends.cudnn.benchmark = True` times every algorithm, "
                f"those on {mc} included, for each input shape."
            )
        return (
            f"{what}.{note} Let them use {mc}: {tf32}run under "
            "`torch.autocast('cuda', dtype=torch.bfloat16)`" + f"{_then(dims)}."
        )
    return (
        f"{what}. This GPU's {mc} take FP16 inputs only: run "
        "under `torch.autocast('cuda', dtype=torch.float16)`"
        + (" with `torch.cuda.amp.GradScaler`" if wl.is_training or wl.kind == "unknown" else "")
        + _fp16_layout(dims, convs)
    )


def _then(clause: str | None) -> str:
    """``; clause`` to follow a sentence's main advice, or nothing."""
    return f"; {clause}" if clause else ""


def _fp16_layout(dims: str | None, convs: bool) -> str:
    """What else FP16 tensor cores want, for the math the advice is about (``dims``: the
    clause on GEMM dimensions, if any)."""
    parts = (["use `channels_last` for convolutions"] if convs else []) + ([dims] if dims else [])
    if len(parts) == 2:
        return f", {parts[0]}, and {parts[1]}."
    return f", and {parts[0]}." if parts else "."
