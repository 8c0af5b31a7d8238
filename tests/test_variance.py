"""Variance analyzer: a spread is erratic only once different work, trends over the run,
warm-up and waiting for peer ranks are taken out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_cache import corpus_db

from tracelens.analyzers import communication, variance
from tracelens.core.findings import finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.testing.planted_variance import (
    BN_KERNEL,
    NOISY_KERNEL,
    erratic_same_shapes,
    nccl_peer_waiting,
    shared_kernel_layers,
    shrinking_elimination,
)


def _kernel_findings(db) -> list:
    return [f for f in variance.analyze(db, Thresholds()) if f.evidence["kind"] == "kernel"]


def test_one_kernel_serving_different_layer_sizes_is_not_erratic(scenario_db) -> None:
    """Same name and grid, but 14x14 and 56x56 activations: durations follow the work."""
    assert _kernel_findings(scenario_db(shared_kernel_layers())) == []


def test_durations_trending_with_launch_order_are_not_erratic(scenario_db) -> None:
    """An elimination whose trailing submatrix shrinks: 500 us down to 1 us, in order."""
    found = variance.analyze(scenario_db(shrinking_elimination()), Thresholds())
    assert not [f for f in found if "Erratic" in f.title]
    # with the trend rule switched off the same group is what the old rule called erratic
    loose = variance.analyze(
        scenario_db(shrinking_elimination()), Thresholds(variance_trend_min_corr=1.01)
    )
    assert loose and loose[0].evidence["duration_vs_launch_order_r"] < -0.9


def test_erratic_kernel_on_identical_shapes_is_still_found(scenario_db) -> None:
    (f,) = _kernel_findings(scenario_db(erratic_same_shapes()))
    assert f.title.startswith("Erratic kernel") and NOISY_KERNEL[:40] in f.title
    assert f.evidence["count"] == 200 and f.evidence["p50_ns"] == 10_000
    assert f.impact_ns == 29 * 70_000  # 29 launches 70 us above the 10 us median
    assert f.evidence["input_shapes"] is not None
    assert abs(f.evidence["duration_vs_launch_order_r"]) < 0.3


def test_nccl_spread_from_peer_waiting_is_communication_not_variance(scenario_db) -> None:
    sc = nccl_peer_waiting()
    db = scenario_db(sc)
    assert _kernel_findings(db) == []
    found = {f.id: f for f in communication.analyze(db, Thresholds())}
    wait = found[finding_id("communication", 0, "peer_waiting")]
    exposed = found[finding_id("communication", 0)]
    assert wait.evidence["waiting_ns"] == sc.expected["waiting_ns"]
    assert wait.impact_ns == sc.expected["waiting_ns"]  # nothing ran beside it
    assert sorted(s["step"] for s in wait.evidence["by_step"] if s["waiting_ns"]) == sorted(
        sc.expected["late_steps"]
    )
    # the NCCL time is split, not counted twice
    assert exposed.evidence["exposed_ns"] == sc.expected["comm_ns"]
    assert wait.impact_ns + exposed.impact_ns == sc.expected["comm_ns"]
    assert "straggler" in wait.advice


@pytest.mark.corpus
def test_corpus_resnet50_batchnorm_backward_is_not_erratic(corpus: Path) -> None:
    """The 2021 ResNet-50 trace has `cudnn::bn_bw_1C11_kernel_new` "erratic" by name and
    grid (256 blocks: median 47 us, p95 677 us, CV 1.27). By the launching operator's input
    shapes it is two layers: [32,256,14,14] at 45-48 us (CV 0.01) and [32,256,56,56] at
    663-683 us (16x the elements). An expert sees layer sizes, not noise."""
    db = corpus_db(corpus, "v100_resnet50_legacy2021.pt.trace.json.gz")
    found = variance.analyze(db, Thresholds())
    assert not [f for f in found if "bn_bw" in f.title]
    assert not [f for f in found if f.evidence["kind"] == "kernel"]


def test_corpus_resnet50_empty_is_not_erratic(corpus: Path) -> None:
    """`aten::empty` on the host: median 15 us, p95 26 us over 4,366 calls, once reported as
    erratic with "same input shapes" and blamed on `cudaMalloc` after cache misses. But its
    recorded shapes hold no dimension (`[[], [], ...]`: its sizes are arguments, not
    tensors), so one group mixed every size, and the trace has no allocation call at all;
    the spread is two populations besides (the main thread's calls, recorded with Python
    stacks, median 21 us; the autograd thread's 8 us). An expert sees profiler overhead and
    mixed calls, not noise to chase: no finding, and its 6.39 ms no longer comes out of the
    host-compute idle finding."""
    db = corpus_db(corpus, "v100_resnet50_legacy2021.pt.trace.json.gz")
    assert not db.scalar("SELECT count(*) FROM api_calls WHERE name = 'cudaMalloc'")
    assert not [f for f in variance.analyze(db, Thresholds()) if "aten::empty" in f.title]


def test_operator_advice_blames_the_allocator_only_where_it_went_to_the_driver() -> None:
    from tracelens.core.gpu_terms import NVIDIA

    assert "cudaMalloc after cache misses" in variance._advice("operator", NVIDIA, allocates=True)
    none = variance._advice("operator", NVIDIA, allocates=False)
    assert "No allocation call reached the driver" in none and "cudaMalloc" not in none


@pytest.mark.corpus
@pytest.mark.parametrize("rank", [0, 1])
def test_corpus_sampled_ranks_nccl_spread_is_peer_waiting(corpus: Path, rank: int) -> None:
    """Two of 128 ranks: a 3 KiB all_to_all whose SendRecv kernel runs 30-40 ms can only be
    waiting for other ranks. The spread of the NCCL kernels is load imbalance, reported by
    communication with the steps, and never as an erratic kernel."""
    db = corpus_db(corpus, f"sampled_2rank/rank-{rank}.json.gz")
    assert not [f for f in variance.analyze(db, Thresholds()) if "nccl" in f.title.lower()]
    found = {f.id: f for f in communication.analyze(db, Thresholds())}
    wait = found[finding_id("communication", rank, "peer_waiting")]
    exposed = found[finding_id("communication", rank)]
    assert {s["step"] for s in wait.evidence["by_step"]} == {
        "ProfilerStep#551",
        "ProfilerStep#552",
    }
    tiny = [w for w in wait.evidence["longest_waits"] if w["bytes"] == 3072]
    assert tiny and tiny[0]["waiting_ns"] > 0.99 * tiny[0]["duration_ns"]
    # the waiting and the rest of the exposed time split it (neither costed: the trace
    # kept a sample of its launches, so what ran beside them is not known)
    assert (
        wait.subject_ns + exposed.evidence["exposed_transfer_ns"]
        == (exposed.evidence["exposed_ns"])
    )
    assert wait.impact_ns == exposed.impact_ns == 0
    assert exposed.evidence["exposed_ns"] <= exposed.evidence["comm_ns"]


def test_bn_kernel_name_is_the_corpus_kernel() -> None:
    assert BN_KERNEL.startswith("void cudnn::bn_bw_1C11_kernel_new")


def test_variance_findings_are_deterministic(scenario_db) -> None:
    runs = {
        json.dumps([f.to_dict() for f in variance.analyze(scenario_db(sc), Thresholds())])
        for sc in [erratic_same_shapes(), erratic_same_shapes(), erratic_same_shapes()]
    }
    assert len(runs) == 1
