"""Kernel kinds and FP32 math from kernel names, with names as the corpus traces record them."""

from __future__ import annotations

import pytest

from tracelens.core.kernel_kinds import classify, data_type, is_fp32_math
from tracelens.testing.workloads import pytorch_workload

# cuDNN's own FP32 engines: the data type is the first template argument.
FP32_CUDNN = [
    "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, "
    "float const*, int, float const*, int, float*, kernel_grad_params, unsigned long long, "
    "int, unsigned long long, int, float, int, int, int)",
    "void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, "
    "int, float const*, int, float*, float const*, kernel_grad_params, unsigned long long, "
    "int, float, int, int, int, int)",
    "void wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>(int, int, int, float "
    "const*, int, float*, float const*, kernel_grad_params, unsigned long long, int, float, "
    "int, int, int, int)",
    "void explicit_convolve_sgemm<float, int, 1024, 5, 5, 3, 3, 3, 0, false>(int, int, int, "
    "float const*, int, float const*, int, float*, kernel_conv_params, unsigned long long, "
    "int, unsigned long long, int, float, float, int, float const*, float const*)",
    "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>("
    "int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned "
    "long long, int, float, float, int, float const*, float const*, bool, int, int)",
    "cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1",
    "volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1",
]
FP32_CUBLAS = [
    "volta_sgemm_64x64_nt",
    "ampere_sgemm_32x32_sliced1x4_tn",
    "void sgemm_largek_lds64<true, true, 6, 3, 4, 5, 2, 66>(float*, float const*, float "
    "const*, int, int, int, int, int, int, float const*, float const*, float, float, int, "
    "int, int*, int*)",
    # the complex single-precision GEMM of cuDNN's FFT convolutions
    "ampere_gcgemm_64x64_nt",
]
# Tensor-core or 16-bit kernels whose names still say ``float``/``f32``: the accumulator,
# the TF32 input type, or the other operand of a conversion.
NOT_FP32 = [
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128"
    "x16_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_tn_align1>("
    "cutlass_80_tensorop_s1688gemm_256x128_32x3_tn_align1::Params)",
    "sm80_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize128x128x32_stage4"
    "_warpsize2x2x1_g1_tensor16x8x16_t1r3s3_aACCESS_execute_kernel_trt",
    "trt_ampere_h16816gemm_64x64_ldg8_relu_stages_64x5_tn_v1",
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x32x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1",
    # half data with a float accumulator (cuDNN spells it <__half, float>)
    "void cudnn::winograd_nonfused::winogradForwardOutput4x4<__half, float>("
    "cudnn::winograd_nonfused::WinogradOutputParams<__half, float>)",
    "void cudnn::detail::dgrad_engine<__half, 512, 6, 5, 3, 3, 3, false>(int, int, int, "
    "__half const*, int, __half const*, int, __half*, kernel_grad_params, unsigned long long, "
    "int, unsigned long long, int, float, int, int, int)",
    # fbgemm embedding kernels: c10::Half weights, float accumulator; no matrix multiply
    "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1<"
    "c10::Half, float, c10::Half, 2ul, 32>(at::GenericPackedTensorAccessor<float, 2ul, "
    "at::RestrictPtrTraits, long>, fbgemm_gpu::FixedDivisor, float, float)",
    # float data transforms around nonfused Winograd (its multiply is a separate sgemm) and
    # im2col, and matrix-vector products: tensor cores would not run any of them
    "void cudnn::winograd_nonfused::winogradForwardOutput4x4<float, float>("
    "cudnn::winograd_nonfused::WinogradOutputParams<float, float>)",
    "void cudnn::winograd_nonfused::winogradWgradDelta4x4<float, float>("
    "cudnn::winograd_nonfused::WinogradDeltaParams<float, float>)",
    "void cudnn::winograd::generateWinogradTilesKernel<0, float, float>("
    "cudnn::winograd::GenerateWinogradTilesParams<float, float>)",
    "void im2col4d_kernel<float, int>(im2col4d_params, cudnnConvolutionStruct, "
    "cudnnTensor4dStruct, float const*, float*)",
    "void gemmk1_kernel<float, 256, 5, false, false, false, false, "
    "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float "
    "const>, cublasGemvTensorStridedBatched<float>, float, true, true>(cublasGemmk1Params<"
    "float, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<"
    "float const>, cublasGemvTensorStridedBatched<float>, float, biasType<float, float>"
    "::type>)",
    "void gemvNSP_kernel<float, float, float, float, 1, 16, 4, 1024>("
    "cublasGemvParamsEx<int, float const, float const, float, float const>)",
    # split-K reductions and epilogues are float for half and TF32 GEMMs too
    "void splitKreduce_kernel<float, float, float, float, true, false, false>("
    "cublasSplitKParams<float>, float const*, float const*, float*, float const*, float "
    "const*, float const*, float const*, float*, void*, long, float*, int*)",
    "void epilogue::impl::globalKernel<float, float, float, true, true>(int, int, long, "
    "float*, cublasLtEpilogue_t, int, float*, long, void*, long, long, long, float*, long, "
    "int*)",
    "void cudnn::cnn::reduce_wgrad_nchw_helper<float, float>(void*, void const*, float, int, int)",
    # FP32 but not a GEMM or convolution: batch norm, elementwise
    "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float, "
    "float, float, cudnnTensorStruct, float const*, cudnnTensorStruct, float const*, "
    "cudnnTensorStruct, float*, float const*, float*, float*, float const*, float const*, "
    "float)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, at::detail::Array<"
    "char*, 3>)",
]


@pytest.mark.parametrize("name", FP32_CUDNN + FP32_CUBLAS)
def test_fp32_gemms_and_convolutions_are_fp32_math(name: str) -> None:
    assert is_fp32_math(name), name


@pytest.mark.parametrize("name", NOT_FP32)
def test_tensor_core_half_and_helper_kernels_are_not_fp32_math(name: str) -> None:
    assert not is_fp32_math(name), name


def test_the_data_type_is_the_first_template_element_type() -> None:
    assert data_type(FP32_CUDNN[0]) == "float"
    assert data_type(NOT_FP32[5]) == "__half"  # <__half, float>: float is the accumulator
    assert data_type(NOT_FP32[7]) == "Half"  # c10::Half weights
    # the parameters' types (float scale, accumulators) are not the data type
    assert data_type("void k<__nv_bfloat16, 4>(float, float const*)") == "__nv_bfloat16"
    assert data_type("volta_sgemm_64x64_nt") is None
    assert data_type("void (anonymous namespace)::k<float>(int)") == "float"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        # fbgemm_gpu kernels are embeddings, quantization and index permutes
        (NOT_FP32[7], "other"),
        (
            "void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int, "
            "int, int, int const*, decltype(nullptr) const*, int const*, int const*, int "
            "const*, int*, decltype(nullptr)*)",
            "other",
        ),
        (
            "void fbgemm_gpu::(anonymous namespace)::_compute_FP8_quantize_cuda_kernel<float>("
            "float const*, float const*, int, int, unsigned char*, bool)",
            "other",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::_float_to_hfp8_gpu("
            "at::Tensor const&, long, long, double)::{lambda(float)#1}, at::detail::Array<"
            "char*, 2> >(int, fbgemm_gpu::_float_to_hfp8_gpu(at::Tensor const&, long, long, "
            "double)::{lambda(float)#1}, at::detail::Array<char*, 2>)",
            "elementwise",
        ),
        # real GEMMs stay GEMMs, also when a library name is around them
        (NOT_FP32[1], "gemm"),
        ("ampere_gcgemm_64x64_nt", "gemm"),
        ("void fbgemm_gpu::cutlass_f8f8bf16_rowwise<128, 128>(int)", "gemm"),
        ("volta_sgemm_64x64_nt", "gemm_fp32"),
        ("trt_ampere_h16816gemm_64x64_ldg8_relu_stages_64x5_tn_v1", "gemm"),
    ],
)
def test_fbgemm_alone_is_no_gemm(name: str, kind: str) -> None:
    assert classify(name).key == kind


@pytest.mark.parametrize(
    ("kernel", "expected", "absent"),
    [
        # vLLM's gpt-oss down projection: block_m is 16 already, only block_n is left
        (
            "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1",
            "try a smaller block_n (block_m is 16 already)",
            "or block_m",
        ),
        ("_matmul_ogs_NNT_bf16xbf16xmxfp4_64x128x256x1", "a smaller block_n or block_m", None),
    ],
)
def test_moe_tile_advice_follows_the_kernels_tile(
    kernel: str, expected: str, absent: str | None
) -> None:
    from tracelens.core.kernel_kinds import advice_for

    wl = pytorch_workload("inference", "amd", cuda_graphs=True)
    text = advice_for(classify(kernel), wl, kernel, "vllm::moe_forward", memory_bound=True)
    assert expected in text
    assert absent is None or absent not in text


@pytest.mark.parametrize("graphs", [True, False])
def test_tunableop_advice_tunes_graph_captured_gemms_before_capture(graphs: bool) -> None:
    """A replay runs the kernel chosen when its graph was captured, past TunableOp's
    dispatch: where the GEMMs run in graphs, tuning has to come before capture."""
    from tracelens.core.kernel_kinds import tunableop_advice

    text = tunableop_advice(pytorch_workload("inference", "amd", cuda_graphs=graphs))
    assert "PYTORCH_TUNABLEOP_ENABLED=1" in text
    assert ("tune the shapes before capture" in text) is graphs
    assert ("restart so the graphs are captured again" in text) is graphs


@pytest.mark.parametrize(
    "kernel",
    [
        "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1"
        "<c10::Half, float, c10::Half, 2ul, 32>(int)",
        "void split_embedding_codegen_forward_unweighted_kernel<c10::Half, float>(int)",
    ],
)
def test_fbgemm_embedding_kernels_get_embedding_advice(kernel: str) -> None:
    """FBGEMM's table-batched embedding kernels are gathers and scatters whose time follows
    the rows a rank serves: the advice is the tables' balance and bytes, not "look at its
    occupancy"."""
    from tracelens.core.kernel_kinds import advice_for

    text = advice_for(
        classify(kernel), pytorch_workload(), kernel, "fbgemm::split_embedding_codegen_lookup"
    )
    assert text.startswith("FBGEMM's table-batched embedding kernels")
    assert "sharding plan" in text and "occupancy" not in text
