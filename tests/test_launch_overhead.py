"""Launch-overhead analyzer: planted tiny-kernel loop with exact expectations, and corpus."""

from __future__ import annotations

from pathlib import Path

from corpus_cache import corpus_db

from ingest import load_trace
from tracelens.analyzers import launch_overhead
from tracelens.core.findings import finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.testing.planted_host import launch_bound


def test_planted_launch_bound_loop(scenario_db) -> None:
    sc = launch_bound()
    db = scenario_db(sc)
    exp = sc.expected
    (f,) = launch_overhead.analyze(db, Thresholds())
    ev = f.evidence
    assert f.id == finding_id("launch_overhead", 0)
    assert db.window_ns == exp["window_ns"]
    assert ev["kernel_count"] == exp["kernel_count"]
    assert ev["short_kernel_count"] == exp["short_kernel_count"]
    assert ev["launch_gap_count"] == exp["launch_gap_count"]
    assert f.impact_ns == ev["launch_gap_ns"] == exp["launch_gap_ns"]
    assert ev["launch_latency_p50_ns"] == exp["launch_latency_p50_ns"]
    assert ev["launch_call_p50_ns"] == exp["launch_call_p50_ns"]
    assert ev["top_tiny_kernel_operators"][0]["operator"] == exp["top_operator"]
    assert f.supersedes == [finding_id("idle_gpu", 0, "launch_overhead")]
    assert f.severity.label == "critical"  # 5 of every 8 us idle
    assert "CUDA graph" in f.advice and "`aten::add`" in f.advice


def test_no_finding_when_kernels_are_long(scenario_db) -> None:
    sc = launch_bound(kernels=50)
    db = scenario_db(sc)
    # Raising the gap share and tiny-kernel count bars above what the trace has silences it.
    t = Thresholds(launch_min_gap_pct=90.0, launch_min_short_kernels=51)
    assert launch_overhead.analyze(db, t) == []


def test_planted_training_has_no_launch_finding(planted_trace) -> None:
    path, _ = planted_trace
    loaded = load_trace(path)
    try:
        assert launch_overhead.analyze(TraceDB(loaded.con), Thresholds()) == []
    finally:
        loaded.close()


def test_corpus_resnet_tiny_kernels_but_few_launch_gaps(corpus: Path) -> None:
    """2021 ResNet-50 training on a V100: most kernels are BN/ReLU/elementwise of a few us,
    so the finding stands on the tiny-kernel count; but only 36 gaps have the GPU run dry
    while the host was still launching (414 us; in 28 the launch call was already running
    when the GPU finished). In 7,405 short gaps the next kernel was already queued (GPU-side
    latency between queued kernels, ``gpu_dependency``), which the old 10 us rule called
    launch overhead (6.9 ms)."""
    db = corpus_db(corpus, "v100_resnet50_legacy2021.pt.trace.json.gz")
    (f,) = launch_overhead.analyze(db, Thresholds())
    assert f.evidence["short_kernel_count"] == 5035
    assert f.evidence["launch_gap_count"] == 36
    assert f.impact_ns == 414_000
    assert f.evidence["launch_in_progress_at_gap_start"] == 28
    assert f.evidence["launch_issued_after_gap_start"] == 8
    assert 1_000 <= f.evidence["launch_latency_p50_ns"] <= 50_000
    assert f.impact_pct < 1.0
    queued = db.scalar(
        "SELECT count(*) FROM gaps WHERE cause = 'gpu_dependency' AND end_ns - start_ns <= 10000"
    )
    assert queued > 7_000


def test_corpus_deep_queue_is_not_launch_bound(corpus: Path) -> None:
    """DDP training on a V100 at 98 % busy: a queue several ms deep hides launch cost. Of its
    ~6,000 short gaps, 5,932 have the next kernel queued long before (GPU-side); the few
    where the GPU ran dry during a launch add up to 0.3 % of the window, and tiny kernels
    are a minority, so there is no launch finding (the old rule reported 6.4 ms)."""
    db = corpus_db(corpus, "v100_train_single_rank_ns.pt.trace.json.gz")
    assert launch_overhead.analyze(db, Thresholds()) == []
    n, ns = db.rows(
        "SELECT count(*), sum(end_ns - start_ns) FROM gaps WHERE cause = 'gpu_dependency'"
    )[0]
    assert n > 5_000 and ns > 5_000_000


def test_corpus_idle_inference_trace_is_not_launch_bound(corpus: Path) -> None:
    db = corpus_db(corpus, "a100_alexnet_inference.json.gz")
    assert launch_overhead.analyze(db, Thresholds()) == []
