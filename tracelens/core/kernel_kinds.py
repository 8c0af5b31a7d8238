"""What kind of work a kernel does, judged from its name, and what usually speeds it up."""

from __future__ import annotations

import re
from dataclasses import dataclass


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
_GEMM = re.compile(r"(?i)gemm|cutlass|cublas|xmma|hmma|wgmma|_mma_|matmul")
_ATTENTION = re.compile(r"(?i)flash|fmha|attention|attn|sdpa|softmax")
_CONV = re.compile(r"(?i)conv|scudnn|hcudnn|winograd|implicit_gemm|dgrad|wgrad|fprop")
_COMM = re.compile(r"(?i)nccl|allreduce|all_gather|reduce_scatter|sendrecv")
_ELEMENTWISE = re.compile(
    r"(?i)elementwise|vectorized|unrolled|CatArray|copy_kernel|fill_kernel|index_kernel"
)
_REDUCE = re.compile(
    r"(?i)reduce_kernel|reduction|norm_kernel|layer_norm|batch_norm|batchnorm|bn_fw|bn_bw"
)

KINDS = {
    "gemm_fp32": KernelKind(
        "gemm_fp32",
        "FP32 GEMM (no tensor cores)",
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
        "Collectives take GPU time: overlap them with compute (DDP bucketing, FSDP prefetch), "
        "and check their bandwidth against the interconnect's.",
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
