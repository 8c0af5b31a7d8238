"""Launch-overhead analyzer: planted tiny-kernel loop with exact expectations, and corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
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


@pytest.mark.parametrize(
    ("name", "tiny", "gap_ns"),
    [
        # 2021 ResNet-50 training: most kernels are BN/ReLU/elementwise of a few us.
        ("v100_resnet50_legacy2021.pt.trace.json.gz", 5035, 6_935_000),
        # DDP training at 98 % busy: a queue several ms deep hides launch cost; many small
        # gaps add up to just above the 1 % bar.
        ("v100_train_single_rank_ns.pt.trace.json.gz", 1564, 6_440_250),
    ],
)
def test_corpus_launch_overhead(corpus: Path, name: str, tiny: int, gap_ns: int) -> None:
    db = corpus_db(corpus, name)
    (f,) = launch_overhead.analyze(db, Thresholds())
    assert f.evidence["short_kernel_count"] == tiny
    assert f.impact_ns == gap_ns
    # Launch latency on an idle GPU is microseconds, never the queueing delay.
    assert 1_000 <= f.evidence["launch_latency_p50_ns"] <= 50_000
    assert f.impact_pct < 3.0


def test_corpus_idle_inference_trace_is_not_launch_bound(corpus: Path) -> None:
    db = corpus_db(corpus, "a100_alexnet_inference.json.gz")
    assert launch_overhead.analyze(db, Thresholds()) == []
