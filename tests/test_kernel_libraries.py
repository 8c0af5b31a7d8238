"""GEMM kernels' libraries from their names, and the library advice that follows."""

from __future__ import annotations

import pytest

from tracelens.core.kernel_libraries import (
    COMPOSABLE_KERNEL,
    CUBLAS,
    CUTLASS,
    TENSILE,
    TRITON,
    gemm_library,
)


@pytest.mark.parametrize(
    ("name", "library"),
    [
        ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT32x32x256_MI16x16x1_SN", TENSILE),
        ("rocblas_gemm_kernel", TENSILE),
        ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu", TRITON),
        ("fused_moe_kernel", TRITON),
        ("triton_tem_fused_mm_0", TRITON),
        ("ampere_sgemm_32x32_sliced1x4_tn", CUBLAS),
        ("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32", CUBLAS),
        ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>", CUBLAS),
        ("void cutlass::Kernel<cutlass::gemm::kernel::GemmUniversal<...>>", CUTLASS),
        ("_ZN7ck_tile6kentryILi1ENS_10GemmKernel", COMPOSABLE_KERNEL),
        ("my_custom_gemm", None),
    ],
)
def test_gemm_library(name: str, library: str | None) -> None:
    assert gemm_library(name) == library
