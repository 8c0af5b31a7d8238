"""Cost model: FLOP/byte formulas, planted roofline cases, advice that fits the workload."""

from __future__ import annotations

import re

import pytest

from tracelens.analyzers import hot_ops, occupancy, run_all
from tracelens.analyzers.cost_model import _conv_out, cost_tables
from tracelens.core.findings import finding_id
from tracelens.core.kernel_kinds import classify
from tracelens.core.op_cost import ATTENTION, CONV, MATMUL, MEMORY, op_cost
from tracelens.core.thresholds import Thresholds
from tracelens.testing.planted_cost import (
    A100,
    V100,
    bf16_gemm_near_peak,
    compiled_pointwise,
    cuda_c_program,
    explicit_attention,
    fp32_gemm_training,
    overcounted_gemm,
    strided_convolution,
)

BF = "c10::BFloat16"


# -- formulas, against hand-computed numbers ------------------------------------------------


def test_mm_flops_and_bytes() -> None:
    c = op_cost("aten::mm", [[128, 256], [256, 64]], ["float", "float"])
    assert c is not None and c.kind == MATMUL and c.dtype == "fp32"
    assert c.flops == 2 * 128 * 256 * 64  # 4,194,304
    assert c.bytes == 4 * (128 * 256 + 256 * 64 + 128 * 64)  # 229,376


def test_addmm_adds_the_bias() -> None:
    c = op_cost("aten::addmm", [[64], [128, 256], [256, 64], [], []], [BF, BF, BF, "Scalar", ""])
    assert c is not None and c.dtype == "bf16"
    assert c.flops == 2 * 128 * 256 * 64 + 128 * 64
    assert c.bytes == 2 * (64 + 128 * 256 + 256 * 64 + 128 * 64)


def test_bmm_and_baddbmm() -> None:
    c = op_cost("aten::bmm", [[8, 32, 16], [8, 16, 48]], ["float", "float"])
    assert c is not None and c.flops == 2 * 8 * 32 * 16 * 48 == 393_216
    assert c.bytes == 4 * 8 * (32 * 16 + 16 * 48 + 32 * 48)
    assert op_cost("aten::bmm", [[8, 32, 16], [4, 16, 48]], ["float", "float"]) is None


def test_linear_with_batch_dims() -> None:
    # x [16, 559, 1024] @ w[1024 out, 1024 in]ᵀ + b: 16·559 rows
    c = op_cost("aten::linear", [[16, 559, 1024], [2048, 1024], [2048]], [BF, BF, BF])
    rows = 16 * 559
    assert c is not None
    assert c.flops == 2 * rows * 1024 * 2048 + rows * 2048
    assert c.bytes == 2 * (rows * 1024 + 1024 * 2048 + rows * 2048 + 2048)
    # mismatched inner dimension: no estimate
    assert op_cost("aten::linear", [[4, 10], [8, 12]], ["float", "float"]) is None


def test_matmul_broadcasts_batch_dims() -> None:
    c = op_cost("aten::matmul", [[2, 8, 64, 32], [32, 16]], ["float", "float"])
    assert c is not None and c.flops == 2 * (2 * 8) * 64 * 32 * 16


def test_conv2d_needs_the_output_size() -> None:
    # ResNet stem: x [32, 3, 224, 224], w [64, 3, 7, 7], stride 2 pad 3 -> out 112x112
    shapes = [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []]
    types = ["float", "float", "", "GenericList", "GenericList", "GenericList", "Bool", "", "Int"]
    assert op_cost("aten::convolution", shapes, types) is None  # stride/padding unknown
    c = op_cost("aten::convolution", shapes, types, conv_out_spatial=[112, 112])
    assert c is not None and c.kind == CONV
    assert c.flops == 2 * 32 * 64 * 112 * 112 * 3 * 7 * 7 == 7_552_892_928
    assert c.bytes == 4 * (32 * 3 * 224 * 224 + 64 * 3 * 7 * 7 + 32 * 64 * 112 * 112)


def test_conv_backward_counts_both_gradients() -> None:
    shapes = [[32, 64, 112, 112], [32, 3, 224, 224], [64, 3, 7, 7]]
    c = op_cost("aten::convolution_backward", shapes, ["float"] * 3)
    assert c is not None and c.flops == 2 * 7_552_892_928
    # cudnn's own layout puts the input first: [x, grad_out, w]
    cudnn = [shapes[1], shapes[0], shapes[2]]
    c2 = op_cost("aten::cudnn_convolution_backward", cudnn, ["float"] * 3)
    assert c2 is not None and c2.flops == c.flops
    # input gradient alone, [x_size, grad_out, w]: 1x1 conv 512 -> 2048 channels at 7x7
    di = op_cost(
        "aten::cudnn_convolution_backward_input",
        [[], [32, 2048, 7, 7], [2048, 512, 1, 1]],
        ["GenericList", "float", "float"],
    )
    assert di is not None and di.flops == 2 * 32 * 2048 * 7 * 7 * 512 == 3_288_334_336
    # the weight gradient records no kernel size: no estimate from its own shapes ...
    dw_shapes = [[], [32, 2048, 7, 7], [32, 512, 7, 7]]
    dw_types = ["GenericList", "float", "float"]
    assert op_cost("aten::cudnn_convolution_backward_weight", dw_shapes, dw_types) is None
    # ... but with the weight's shape (from the backward operator around it) the forward's
    # FLOPs; it reads grad_out and x and writes grad_w
    dw = op_cost(
        "aten::cudnn_convolution_backward_weight", dw_shapes, dw_types, None, [2048, 512, 1, 1]
    )
    assert dw is not None and dw.flops == di.flops
    assert dw.bytes == 4 * (32 * 2048 * 49 + 32 * 512 * 49 + 2048 * 512)
    # a weight that does not fit the gradients gives none
    wrong = [1024, 512, 1, 1]
    name = "aten::cudnn_convolution_backward_weight"
    assert op_cost(name, dw_shapes, dw_types, None, wrong) is None


def test_sdpa_layouts() -> None:
    q = [1, 8, 141, 64]  # [B, H, L, d]
    c = op_cost("aten::_scaled_dot_product_flash_attention", [q, q, q, []], [BF, BF, BF, ""])
    assert c is not None and c.kind == ATTENTION
    assert c.flops == 4 * 1 * 8 * 141 * 141 * 64 == 40_716_288
    assert c.bytes == 2 * 4 * 8 * 141 * 64
    blhd = [1, 141, 8, 64]  # the flash kernel's [B, L, H, d]
    c2 = op_cost("aten::_flash_attention_forward", [blhd, blhd, blhd], [BF, BF, BF])
    assert c2 is not None and c2.flops == c.flops and c2.bytes == c.bytes


def test_causal_attention_counts_the_pairs_its_mask_keeps() -> None:
    """The profiler records an attention call's scalars ("Concrete Inputs"): with
    is_causal, the kernel computes only the pairs on and below the diagonal, about half
    of a square score matrix (a Qwen prefill on MI300X: [16, 559, 16, 64], is_causal True)."""
    blhd = [16, 559, 16, 64]
    shapes, types = [blhd, blhd, blhd], [BF, BF, BF]
    flash = "aten::_flash_attention_forward"
    scalars = ["", "", "", "", "", "559", "559", "0.", "True", "False", "0.125"]
    causal = op_cost(flash, shapes, types, scalars=scalars)
    full = op_cost(flash, shapes, types)
    assert causal is not None and full is not None
    assert full.flops == 2 * 16 * 16 * 559 * 559 * 128
    assert causal.flops == 2 * 16 * 16 * (559 * 560 // 2) * 128
    assert causal.bytes == full.bytes  # every input is still read once
    # is_causal False, or a value that is no boolean where the schema puts it: no mask
    off = op_cost(flash, shapes, types, scalars=[*scalars[:8], "False", *scalars[9:]])
    odd = op_cost(flash, shapes, types, scalars=[*scalars[:8], "", *scalars[9:]])
    assert off is not None and odd is not None and off.flops == odd.flops == full.flops
    # SDPA's own position (sixth argument), [B, H, L, d]
    bhld = [2, 8, 100, 64]
    sdpa = op_cost(
        "aten::scaled_dot_product_attention",
        [bhld, bhld, bhld, [], [], [], [], []],
        [BF, BF, BF, "", "Scalar", "Scalar", "Scalar", "Scalar"],
        scalars=["", "", "", "", "0.", "True", "0.125", "False"],
    )
    assert sdpa is not None and sdpa.flops == 2 * 2 * 8 * 5050 * 128


def test_causal_masks_aligned_at_either_corner() -> None:
    """PyTorch's is_causal keeps query i to keys 0..i (top left); the memory-efficient
    kernel's mask type 2 aligns the diagonal at the bottom right, as in decode with a
    cache: each of 4 queries over 10 keys then sees 7, 8, 9 and 10 keys."""
    q, kv = [1, 4, 1, 64], [1, 10, 1, 64]
    name = "aten::_efficient_attention_forward"
    base = ["", "", "", "", "", "", "4", "10", "0.", "2", "False", "0.125"]
    bottom = op_cost(name, [q, kv, kv], [BF, BF, BF], scalars=base)
    top = op_cost(name, [q, kv, kv], [BF, BF, BF], scalars=[*base[:9], "1", *base[10:]])
    none = op_cost(name, [q, kv, kv], [BF, BF, BF], scalars=[*base[:9], "0", *base[10:]])
    assert bottom is not None and top is not None and none is not None
    assert bottom.flops == 2 * (7 + 8 + 9 + 10) * 128
    assert top.flops == 2 * (1 + 2 + 3 + 4) * 128
    assert none.flops == 2 * 4 * 10 * 128


def test_memory_bound_ops() -> None:
    add = op_cost("aten::add", [[1024, 1024], [1024], []], ["float", "float", "Scalar"])
    assert add is not None and add.kind == MEMORY
    assert add.bytes == 4 * (1024 * 1024 + 1024 + 1024 * 1024)  # both inputs + output
    inplace = op_cost("aten::add_", [[256, 256], [256, 256], []], [BF, BF, "Scalar"])
    assert inplace is not None and inplace.bytes == 2 * 3 * 256 * 256
    sm = op_cost("aten::_softmax", [[4, 128, 128], [], []], [BF, "Scalar", "Bool"])
    assert sm is not None and sm.bytes == 2 * 2 * 4 * 128 * 128
    ln = op_cost("aten::layer_norm", [[8, 512], [], [512], [512]], [BF, "", BF, BF])
    assert ln is not None and ln.bytes == 2 * 2 * 8 * 512 + 2 * 2 * 512


def test_unknown_shapes_give_nothing() -> None:
    assert op_cost("aten::mm", [], []) is None
    assert op_cost("aten::mm", [[2, 3], [3, 4]], ["", ""]) is None
    assert op_cost("aten::embedding", [[10, 4], [3]], ["float", "long int"]) is None


def test_amd_and_compiled_kernel_kinds() -> None:
    bf16 = "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1"
    fp32 = "Cijk_Ailk_Bljk_S_B_Bias_HA_S_SAV_UserArgs_MT16x16x128_MI16x16x1_SN_LDSB1"
    assert classify(bf16).key == "gemm"
    assert classify(fp32).key == "gemm_fp32"
    assert classify("attn_fwd").key == "attention"
    assert classify("kernel_unified_attention_2d").key == "attention"
    assert classify("triton_poi_fused_add_mul_0").key == "elementwise"
    assert classify("triton_red_fused_sum_1").key == "reduction"
    assert classify("ck_tile::FmhaFwdKernel<...>").key == "attention"


# -- planted cases ---------------------------------------------------------------------------


def test_explicit_attention_ranked_by_fused_saving(scenario_db) -> None:
    sc = explicit_attention()
    exp = sc.expected
    db = scenario_db(sc)
    findings = run_all(db, Thresholds())
    top = findings[0]
    assert top.id == finding_id("hot_ops", "explicit_attention")
    assert top.evidence["gpu_ns"] == exp["attention_ns"]
    assert top.evidence["fused_estimate_ns"] == pytest.approx(exp["fused_ns"], abs=4)
    assert top.impact_ns == pytest.approx(exp["impact_ns"], abs=4)
    (site,) = top.evidence["sites"]
    assert (site["batch_x_heads"], site["query_len"], site["head_dim"]) == (512, 2048, 64)
    assert site["calls"] == exp["calls"] and site["parent"] == "nn.Module: SelfAttention"
    assert "scaled_dot_product_attention" in top.advice
    # The attention's own operators are not counted again.
    ops = {f.evidence.get("operator"): f for f in findings if f.analyzer == "hot_ops"}
    for name in ("aten::bmm", "aten::_softmax", "aten::div"):
        if name in ops:
            assert ops[name].impact_ns == 0
    # The 4.7 ms elementwise add ranks below the 13 ms attention.
    assert ops["aten::add"].impact_ns < top.impact_ns
    titles = [f.title for f in findings]
    assert len(titles) == len(set(titles))


def test_bf16_gemm_near_peak_has_no_impact(scenario_db) -> None:
    sc = bf16_gemm_near_peak()
    db = scenario_db(sc)
    (f,) = [f for f in hot_ops.analyze(db, Thresholds()) if f.evidence["operator"] == "aten::mm"]
    assert f.impact_ns == 0
    cost = f.evidence["cost"]
    assert cost["achieved_tflops"] == pytest.approx(sc.expected["tflops"], rel=1e-3)
    assert cost["bound"] == "compute" and cost["peak_used"] == "bf16 tensor"


def _all_advice(findings) -> str:
    return "\n".join(f.advice for f in findings)


def test_fp32_gemm_on_volta_is_told_fp16_autocast(scenario_db) -> None:
    sc = fp32_gemm_training(V100, "volta_sgemm_128x64_nn")
    db = scenario_db(sc)
    findings = run_all(db, Thresholds())
    (mm,) = [f for f in findings if f.evidence.get("operator") == "aten::mm"]
    assert "float16" in mm.advice and "GradScaler" in mm.advice
    text = _all_advice(findings)
    assert not re.search(r"(?i)tf32|bfloat16|bf16", text)
    # FP16 tensor cores at 70% of 125 TFLOP/s: 137.4 GFLOP takes 1.571 ms of each 10 ms.
    ideal = sc.expected["flops"] / (0.7 * 125e12) * 1e9
    assert mm.impact_ns == pytest.approx(sc.expected["gemm_ns"] - 4 * ideal, abs=4)
    # occupancy's FP32 finding leaves the operator hot_ops counts alone
    fp32 = [f for f in findings if f.id == finding_id("occupancy", "fp32_on_tensor_cores", 0)]
    assert all(f.impact_ns == 0 for f in fp32)


def test_fp32_gemm_on_ampere_may_use_tf32(scenario_db) -> None:
    db = scenario_db(fp32_gemm_training(A100, "ampere_sgemm_128x64_nn"))
    (mm,) = [f for f in hot_ops.analyze(db, Thresholds()) if f.evidence["operator"] == "aten::mm"]
    assert "set_float32_matmul_precision" in mm.advice and "bfloat16" in mm.advice
    assert mm.evidence["cost"]["peak_used"].startswith("tf32")


def test_compiled_code_is_not_told_to_compile(scenario_db) -> None:
    db = scenario_db(compiled_pointwise())
    findings = [f for f in run_all(db, Thresholds()) if f.analyzer in ("hot_ops", "occupancy")]
    assert findings
    assert "torch.compile" not in _all_advice(findings)


def test_cuda_c_program_gets_no_pytorch_api(scenario_db) -> None:
    db = scenario_db(cuda_c_program())
    findings = run_all(db, Thresholds())
    assert {f.analyzer for f in findings} >= {"occupancy"}
    mine = [f for f in findings if f.analyzer in ("hot_ops", "occupancy")]
    assert mine
    assert not re.search(r"torch|autocast|GradScaler|channels_last", _all_advice(mine))


def test_inference_gets_no_optimizer_advice(scenario_db) -> None:
    db = scenario_db(explicit_attention())
    assert not re.search(r"fused=True|foreach", _all_advice(run_all(db, Thresholds())))


def test_unknown_gpu_gives_no_estimate(scenario_db) -> None:
    from tracelens.testing.scenario import DeviceSpec

    sc = bf16_gemm_near_peak()
    sc.devices = [DeviceSpec(name="Mystery GPU", compute_major=0, compute_minor=0)]
    sc.name = "planted_unknown_gpu"
    db = scenario_db(sc)
    assert cost_tables(db, Thresholds()).spec is None
    (f,) = [f for f in hot_ops.analyze(db, Thresholds()) if f.evidence["operator"] == "aten::mm"]
    assert f.impact_ns == 0 and "known peaks" in f.impact_basis


def test_occupancy_skips_time_explicit_attention_counts(scenario_db) -> None:
    sc = explicit_attention()
    db = scenario_db(sc)
    for f in occupancy.analyze(db, Thresholds()):
        assert f.id != finding_id("occupancy", "fp32_on_tensor_cores", 0)


def test_peaks_by_dtype_and_gpu() -> None:
    from tracelens.analyzers.cost_model import math_peak
    from tracelens.core.gpu_specs import lookup

    a100 = lookup("NVIDIA A100-SXM4-80GB", "8.0")
    v100 = lookup("Tesla V100-SXM2-32GB", "7.0")
    mi300 = lookup("AMD Instinct MI300X", "9.4", 304)
    assert a100 and v100 and mi300
    assert math_peak(a100, MATMUL, "bf16") == ("bf16 tensor", 312)
    assert math_peak(a100, MATMUL, "fp32")[1] == 156  # TF32, what the advice switches to
    assert math_peak(v100, MATMUL, "fp32")[1] == 125  # FP16 autocast on Volta
    assert math_peak(v100, MATMUL, "fp64") is None
    # MI300X: the sheet's 1307 TFLOP/s at the clock it sustains under matrix load
    assert math_peak(mi300, MATMUL, "bf16")[1] == pytest.approx(0.7 * 1307)


def test_a_strided_convolution_is_costed_at_its_output_not_its_input(scenario_db) -> None:
    """The convolution's own children read its input [32, 128, 56, 56], which has the
    output's batch and channel counts at a stride-2 3x3 convolution with 128 channels in and
    out; the output is what the batch norm after it reads, [32, 128, 28, 28]."""
    sc = strided_convolution()
    db = scenario_db(sc)
    est = cost_tables(db, Thresholds()).ops["aten::cudnn_convolution"]
    assert est.costed_ns == sc.expected["conv_ns"]
    assert est.flops == sc.expected["flops"]  # 4x this when the input was taken
    assert est.achieved_tflops == pytest.approx(7.4, abs=0.05)
    assert not est.flops_uncertain


def test_conv_output_needs_a_consumer_after_the_convolution_and_a_plausible_size() -> None:
    x = "[[32,128,56,56],[128,128,3,3],[],[],[],[],[],[],[]]"
    child, consumer = "[[32,128,56,56],[]]", "[[32,128,28,28],[128],[128]]"
    # [start_ns, depth] of each following operator; the convolution ends at 100, depth 4
    assert _conv_out(x, [child, consumer], [[50, 5], [120, 1]], 100, 4) == [28, 28]
    # a zero-length child at the very end is still inside it
    assert _conv_out(x, [child, consumer], [[100, 5], [120, 1]], 100, 4) == [28, 28]
    # only the input after it: an output size the shapes cannot give is no output
    assert _conv_out(x, [child], [[50, 5]], 100, 4) is None
    # a tensor after it with the right counts but a size no stride/padding gives
    assert _conv_out(x, ["[[32,128,60,60]]"], [[120, 1]], 100, 4) is None
    # stride 1, same padding: the output has the input's size, and that is plausible
    assert _conv_out(x, ["[[32,128,56,56]]"], [[120, 1]], 100, 4) == [56, 56]
    # ResNet stem 7x7 stride 2 pad 3; AlexNet 11x11 stride 4 pad 2
    stem = "[[32,3,224,224],[64,3,7,7]]"
    assert _conv_out(stem, ["[[32,64,112,112]]"], [[120, 1]], 100, 4) == [112, 112]
    alex = "[[8,3,224,224],[64,3,11,11]]"
    assert _conv_out(alex, ["[[8,64,55,55]]"], [[120, 1]], 100, 4) == [55, 55]


def test_flops_above_the_gpus_peak_are_flagged_not_reported(scenario_db) -> None:
    """A rate above the V100's peak is an overcount: no achieved rate in the title or the
    report's top operators, no bound, no impact, and the basis says the FLOPs are uncertain."""
    from tracelens.report.metrics import top_ops

    db = scenario_db(overcounted_gemm())
    est = cost_tables(db, Thresholds()).ops["aten::mm"]
    assert est.estimated_tflops == pytest.approx(275, abs=1)
    assert est.flops_uncertain and est.achieved_tflops is None and est.bound is None
    (mm,) = [f for f in hot_ops.analyze(db, Thresholds()) if f.evidence["operator"] == "aten::mm"]
    assert "TFLOP/s" not in mm.title and mm.impact_ns == 0
    assert "uncertain" in mm.impact_basis and "15.7 TFLOP/s" in mm.impact_basis
    assert mm.evidence["cost"]["flops_uncertain"] is True
    (row,) = [r for r in top_ops(db, 5) if r["name"] == "aten::mm"]
    assert row["achieved_tflops"] is None and row["bound"] is None


def test_attention_lengths_read_both_layouts() -> None:
    """SDPA takes [B, H, L, d]; the flash and efficient forwards take [B, L, H, d]: a
    decoding step attends 1 query to the whole history, an encoder pass L to L."""
    from tracelens.core.op_cost import attention_lengths

    sdpa = [[16, 16, 1, 64], [16, 16, 2048, 64], [16, 16, 2048, 64]]
    assert attention_lengths("aten::scaled_dot_product_attention", sdpa) == (1, 2048)
    flash = [[1, 141, 8, 64], [1, 141, 8, 64], [1, 141, 8, 64]]
    assert attention_lengths("aten::_flash_attention_forward", flash) == (141, 141)
    assert attention_lengths("aten::mm", [[4, 4], [4, 4]]) is None
    assert attention_lengths("aten::scaled_dot_product_attention", [[1, 2], [3]]) is None


def test_shapes_with_undefined_work_are_not_costed(scenario_db) -> None:
    """Recorded shapes no tensor can have (1e308 x 0: infinite times zero) give NaN FLOPs;
    the operator is left uncosted and the report is still built, not failed."""
    from tracelens.report import build_report_from_db
    from tracelens.testing.planted_cost import MS, US, V100, Scenario

    sc = Scenario(name="planted_undefined_work", devices=[V100])
    for k in range(3):
        s = k * 5 * MS
        sc.range(f"ProfilerStep#{k}", s, 5 * MS)
        mm = sc.op("aten::mm", s + 10 * US, 20 * US, [[1e308, 0], [0, 0]])
        sc.launch(mm, "volta_sgemm_128x64_nn", s + 15 * US, s + 100 * US, 2 * MS)
    db = scenario_db(sc)
    est = cost_tables(db, Thresholds()).ops["aten::mm"]
    assert est.costed_ns == 0 and est.flops == 0.0 and est.impact_ns == 0
    source = {"path": "t", "format": "torch_chrome", "sha256": "", "size_bytes": 0}
    report = build_report_from_db(db, source)
    assert report["findings"]


def test_fused_attention_rate_falls_for_short_causal_sequences_and_small_heads() -> None:
    """FlashAttention-2's forward benchmarks: with a causal mask about half its long-
    sequence rate at 512 keys and 85 % at 2k; without, 80 % at 512 and flat from 1k; heads
    of 64 about 0.85 of heads of 128. Long sequences of large heads reach the plateau."""
    from tracelens.core.op_cost import AttentionShape, attention_rate_share

    assert attention_rate_share(AttentionShape(512, True, 128)) == pytest.approx(0.56, abs=0.01)
    assert attention_rate_share(AttentionShape(2048, True, 128)) == pytest.approx(0.84, abs=0.01)
    assert attention_rate_share(AttentionShape(512, False, 128)) == pytest.approx(0.84, abs=0.01)
    assert attention_rate_share(AttentionShape(512, False, 64)) == pytest.approx(0.71, abs=0.01)
    assert attention_rate_share(AttentionShape(65536, False, 128)) > 0.99
    assert attention_rate_share(AttentionShape(0, True, 128)) == 1.0  # no keys recorded
