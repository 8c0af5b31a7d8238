"""Which library a GEMM kernel comes from, judged from its name.

Library-specific advice applies only to that library's kernels: PyTorch's TunableOp tunes
the GEMMs it sends to hipBLASLt/rocBLAS (``Cijk_*`` Tensile kernels and their kin), not a
Triton kernel a model or engine launches itself (vLLM's MoE layers run Triton's
``_matmul_ogs_*``; Inductor's templates are ``triton_tem_*``/``triton_mm*``), and cuBLAS
settings do not reach CUTLASS kernels a library instantiates itself.
"""

from __future__ import annotations

import re

TENSILE = "hipblaslt"  # hipBLASLt/rocBLAS through Tensile
CUBLAS = "cublas"
COMPOSABLE_KERNEL = "ck"
CUTLASS = "cutlass"
TRITON = "triton"

_PATTERNS = (
    (TENSILE, re.compile(r"(?i)^Cijk_|hipblaslt|rocblas|tensile")),
    (COMPOSABLE_KERNEL, re.compile(r"^(_ZN2ck|_ZN7ck_tile|ck::|ck_tile::)|kernel_gemm_xdl")),
    # Inductor's kernels, Triton's own kernel library (matmul_ogs: MoE layers) and the
    # Triton GEMM kernels engines ship (fused_moe_kernel, matmul_kernel)
    (TRITON, re.compile(r"(?i)^triton_|triton|^_?matmul_ogs|^fused_moe_kernel|^matmul_kernel")),
    # cuBLAS's own names: architecture-prefixed SIMT/tensor kernels, its CUTLASS builds
    # (``cutlass_80_tensorop_…``, ``cutlass3x_sm90_…``: no namespace), gemv/gemmSN helpers
    (
        CUBLAS,
        re.compile(
            r"(?i)cublas|^(maxwell|volta|turing|ampere|hopper)_\w*gemm|^sm\d+_xmma_gemm|"
            r"(^|<)cutlass(_\d+|3x)_|gemmSN_|gemv2[NT]_|splitKreduce"
        ),
    ),
    (CUTLASS, re.compile(r"cutlass::")),
)


def gemm_library(kernel_name: str) -> str | None:
    """The library of a GEMM kernel (the constants above), or None where the name does not
    say."""
    for lib, pattern in _PATTERNS:
        if pattern.search(kernel_name):
            return lib
    return None
