"""GEMM advice on dimensions follows the recorded shapes.

"Keep GEMM dimensions multiples of 8" is the standard advice for tensor cores, but it is
boilerplate where every call's K and N already are multiples (an expert reading the MI300X
Qwen report flagged it), and vague where one is not: then the report names the dimension
to pad (a GPT-2 vocabulary of 50,257 is the classic case, padded to 50,304). Where no
shapes were recorded the general rule stays.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tracelens
from tracelens.analyzers import hot_ops
from tracelens.core.gemm_alignment import (
    GemmDims,
    combined,
    dims_clause,
    off_multiple,
    required_multiple,
)
from tracelens.core.op_cost import op_cost
from tracelens.core.thresholds import Thresholds
from tracelens.testing.planted_cost import (
    A100,
    BF16_GEMM,
    MS,
    US,
    bf16_gemm_near_peak,
    fp32_gemm_training,
)
from tracelens.testing.scenario import Scenario

BF = "c10::BFloat16"


def _report(path: Path) -> dict:
    with tracelens.load(path) as trace:
        return trace.report()


def test_the_shapes_give_k_and_n() -> None:
    # x [16, 559, 1024] @ w[50257 out, 1024 in]ᵀ: K = 1024, N = 50257
    c = op_cost("aten::linear", [[16, 559, 1024], [50257, 1024]], [BF, BF])
    assert c is not None and c.kn == (1024, 50257)
    c = op_cost("aten::addmm", [[64], [128, 256], [256, 64], [], []], [BF, BF, BF, "Scalar", ""])
    assert c is not None and c.kn == (256, 64)
    c = op_cost("aten::bmm", [[8, 77, 64], [8, 64, 77]], [BF, BF])
    assert c is not None and c.kn == (64, 77)
    # not a matrix multiply: nothing to align
    c = op_cost("aten::add", [[1024], [1024]], ["float", "float"])
    assert c is not None and c.kn is None


def test_the_multiple_follows_the_type_and_the_vendor() -> None:
    assert required_multiple("bf16", amd=False) == 8
    assert required_multiple("fp32", amd=False) == 8  # judged as the 16-bit type advised
    assert required_multiple("fp8", amd=False) == 16
    assert required_multiple("bf16", amd=True) == 16
    assert off_multiple((1024, 50257), 8) == "N = 50257"
    assert off_multiple((1001, 4096), 8) == "K = 1001"
    assert off_multiple((1024, 4096), 16) is None


def test_the_clause_follows_what_the_shapes_say() -> None:
    assert dims_clause(None, "8/16") == "keep GEMM dimensions multiples of 8/16"
    assert dims_clause(GemmDims(0, 0, 8, None), "8") == "keep GEMM dimensions multiples of 8"
    assert dims_clause(GemmDims(1000, 0, 8, None), "8") is None
    # a sliver of the time off the multiple is not a lever
    assert dims_clause(GemmDims(1000, 50, 8, "N = 3"), "8") is None
    clause = dims_clause(GemmDims(1000, 400, 8, "N = 50257"), "8")
    assert clause is not None and clause.startswith(
        "pad GEMM dimensions to multiples of 8 (N = 50257 is not): calls off that multiple "
        "hold 40% of the GEMM time"
    )
    # a weight gradient's K is the batch's tokens: then the batch is what to pad
    assert "or the batch's tokens where they are the dimension" in clause
    # several operators' dimensions, as one advice covering them
    both = combined([GemmDims(600, 0, 8, None), None, GemmDims(400, 400, 16, "K = 77")])
    assert both == GemmDims(1000, 400, 16, "K = 77")
    assert combined([None, GemmDims(0, 0, 8, None)]) is None


@pytest.mark.parametrize(
    ("n", "expected", "absent"),
    [
        (4096, None, "multiples of"),
        (50257, "pad GEMM dimensions to multiples of 8 (N = 50257 is not)", "keep GEMM"),
    ],
)
def test_an_fp32_gemm_is_told_about_its_dimensions_only_where_they_are_off(
    scenario_db, n: int, expected: str | None, absent: str
) -> None:
    db = scenario_db(fp32_gemm_training(A100, "ampere_sgemm_128x64_nn", n=n))
    (mm,) = [f for f in hot_ops.analyze(db, Thresholds()) if f.evidence["operator"] == "aten::mm"]
    assert "set_float32_matmul_precision" in mm.advice  # the lever itself stays
    assert absent not in mm.advice
    if expected is not None:
        assert expected in mm.advice and "100% of the GEMM time" in mm.advice


def _small_bf16_gemms(steps: int = 4) -> Scenario:
    """A100, bf16 `aten::mm` of [2048, 1024] x [1024, 1024] (compute-bound by its FLOPs per
    byte), 20 per step, each kernel 40 µs on a grid of 8 blocks: far too few for 108 SMs."""
    sc = Scenario(name="planted_small_bf16_gemms", devices=[A100])
    for k in range(steps):
        s = k * 2 * MS
        sc.range(f"ProfilerStep#{k}", s, 2 * MS)
        for i in range(20):
            t0 = s + i * 50 * US
            mm = sc.op("aten::mm", t0, 10 * US, [[2048, 1024], [1024, 1024]], types=[BF, BF])
            sc.launch(mm, BF16_GEMM, t0 + 2 * US, t0 + 20 * US, 40 * US, grid=(8, 1, 1))
    return sc


def test_batching_small_gemms_is_advised_only_where_some_are_small(scenario_db) -> None:
    """'Batch small GEMMs together' is for grids that leave the GPU idle; an 8192² GEMM at
    275 TFLOP/s has nothing to batch."""
    (big,) = [f for f in hot_ops.analyze(scenario_db(bf16_gemm_near_peak()), Thresholds())]
    assert "batch small GEMMs" not in big.advice and "multiples of" not in big.advice
    small = [
        f
        for f in hot_ops.analyze(scenario_db(_small_bf16_gemms()), Thresholds())
        if f.evidence.get("operator") == "aten::mm"
    ]
    assert small and "batch small GEMMs" in small[0].advice


@pytest.mark.corpus
def test_qwen_on_mi300x_is_not_told_to_align_dimensions_that_are(corpus: Path) -> None:
    """Qwen1.5-0.5B prefill (16 x 559 = 8,944 tokens): its projections are K = 1024 or
    2816 by N = 1024 or 2816, all multiples of 16, so "keep dimensions multiples of 16"
    was boilerplate on both GEMM findings (`aten::mm`, `aten::addmm`). AlexNet on the
    A100 recorded no shapes: its FP32 GEMM finding keeps the general rule."""
    qwen = _report(corpus / "engines/mi300_qwen_inference.json.gz")
    gemm = [f for f in qwen["findings"] if f["analyzer"] == "hot_ops" and "GEMM" in f["title"]]
    assert len(gemm) >= 2
    for f in gemm:
        assert "TunableOp" in f["advice"] and "multiples of" not in f["advice"], f["advice"]
        # 8,944-row GEMMs at 457-481 TFLOP/s: nothing to batch
        assert "batch small GEMMs" not in f["advice"]
    # V100 ResNet-50: the FP32 finding's GEMMs are the classifier's ([32, 2048] x [2048,
    # 1000] and its gradients, K and N in {32, 1000, 2048}): aligned, so no clause there
    resnet = _report(corpus / "torch/v100_resnet50_legacy2021.pt.trace.json.gz")
    (fp32,) = [f for f in resnet["findings"] if f["title"].endswith("(compute capability 7.0)")]
    assert "float16" in fp32["advice"] and "multiples of" not in fp32["advice"]
    alexnet = _report(corpus / "torch/a100_alexnet_inference.json.gz")
    (addmm,) = [f for f in alexnet["findings"] if f["evidence"].get("operator") == "aten::addmm"]
    assert "keep GEMM dimensions multiples of 8" in addmm["advice"]
