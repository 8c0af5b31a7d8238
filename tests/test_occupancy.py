"""Occupancy/tensor-core analyzer: planted small grid, low occupancy, FP32 GEMMs; corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus_cache import corpus_db

from tracelens.analyzers import occupancy
from tracelens.core.findings import finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.testing.planted_device import (
    LOW_OCC_KERNEL,
    SMALL_GRID_KERNEL,
    occupancy_problems,
)
from tracelens.testing.planted_host import uneven_steps


def test_planted_occupancy_problems(scenario_db) -> None:
    sc = occupancy_problems()
    exp = sc.expected
    found = {f.id: f for f in occupancy.analyze(scenario_db(sc), Thresholds())}
    grid = found[finding_id("occupancy", "underfilled_grid", 0, SMALL_GRID_KERNEL)]
    low = found[finding_id("occupancy", "low_occupancy", 0, LOW_OCC_KERNEL)]
    fp32 = found[finding_id("occupancy", "fp32_on_tensor_cores", 0)]
    assert len(found) == 3
    assert grid.evidence["median_blocks"] == 16 and grid.evidence["sm_count"] == exp["sm_count"]
    assert grid.impact_ns == exp["small_grid_idle_ns"]
    assert low.evidence["est_occupancy_pct"] == exp["low_occupancy_pct"]
    assert low.impact_ns == 0 and low.severity.label == "info"
    assert fp32.evidence["fp32_ns"] == exp["fp32_ns"]
    assert fp32.evidence["claimed_by_hot_ops"] == exp["claimed_by_hot_ops"]
    assert fp32.impact_ns == exp["fp32_impact_ns"]
    assert "set_float32_matmul_precision" in fp32.advice


def test_bf16_only_trace_has_no_occupancy_findings(scenario_db) -> None:
    assert occupancy.analyze(scenario_db(uneven_steps()), Thresholds()) == []


def test_corpus_v100_fp32_training_needs_amp(corpus: Path) -> None:
    """The V100 training trace's FP32 math is `volta_sgemm_*` and `*scudnn*` (230.5 ms) and
    cuDNN's engines whose template data type is float: `dgrad_engine<float, …>` 23.6 ms,
    `wgrad_alg0_engine<float, …>` 19.1 ms: 273 ms of 469 ms, 58.3 %. (The pin was 45-55 %
    while those engines were missed.) `winograd_nonfused::…<float, float>` (20.2 ms) are
    the nonfused Winograd's data transforms, not its multiply (a separate sgemm): tensor
    cores would not run them, so they are not FP32 math to move."""
    db = corpus_db(corpus, "v100_train_single_rank_ns.pt.trace.json.gz")
    findings = occupancy.analyze(db, Thresholds())
    (f,) = findings  # library GEMMs' low occupancy is by design and not reported
    assert f.evidence["compute_capability"] == "7.0"
    assert 58 < f.evidence["share_pct"] < 59
    assert f.evidence["fp32_ns"] == pytest.approx(273.2e6, rel=0.005)
    assert not any("winogradForward" in k["kernel"] for k in f.evidence["kernels"])
    names = [k["kernel"] for k in f.evidence["kernels"]]
    assert any(n.startswith("void cudnn::detail::dgrad_engine<float,") for n in names)
    assert "float16" in f.advice


def test_corpus_resnet50_fp32_share_counts_cudnn_float_engines(corpus: Path) -> None:
    """ResNet-50 on a V100: `dgrad_engine<float>` (80.8 ms) and `wgrad_alg0_engine<float>`
    (77.6 ms) are its two largest FP32 convolution kernels, with `explicit_convolve_sgemm<float>`
    (4.8 ms): 370 ms of 592 ms of kernel time, 62.5 % (35 % when only `sgemm`/`scudnn`
    names counted). Split-K, batch-norm kernels with float arguments, and the nonfused
    Winograd and im2col data transforms (24 ms) are no FP32 convolution math."""
    db = corpus_db(corpus, "v100_resnet50_legacy2021.pt.trace.json.gz")
    (f,) = [f for f in occupancy.analyze(db, Thresholds()) if "fp32_ns" in f.evidence]
    assert 62 < f.evidence["share_pct"] < 63
    names = [k["kernel"] for k in f.evidence["kernels"]]
    assert names[0].startswith("void cudnn::detail::dgrad_engine<float,")
    assert names[1].startswith("void cudnn::cnn::wgrad_alg0_engine<float,")
    assert not any("bn_" in n or "splitKreduce" in n for n in names)


def test_corpus_tf32_kernels_are_not_fp32(corpus: Path) -> None:
    db = corpus_db(corpus, "a100_alexnet_inference.json.gz")
    findings = occupancy.analyze(db, Thresholds())
    (f,) = [f for f in findings if f.evidence.get("fp32_ns") is not None]
    names = [k["kernel"] for k in f.evidence["kernels"]]
    assert not any("tf32" in n for n in names)
    assert "ampere_sgemm_32x32_sliced1x4_tn" in names
    # the FFT convolution's complex single-precision GEMM is FP32 math too
    assert "ampere_gcgemm_64x64_nt" in names
