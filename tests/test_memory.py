"""Memory analyzer: planted near-capacity peak, fragmentation and allocator churn; corpus."""

from __future__ import annotations

from pathlib import Path

from corpus_cache import corpus_db

from tracelens.analyzers import memory
from tracelens.core.findings import finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.testing.planted_device import memory_pressure


def test_planted_memory_pressure(scenario_db) -> None:
    sc = memory_pressure()
    exp = sc.expected
    found = {f.id: f for f in memory.analyze(scenario_db(sc), Thresholds())}
    near = found[finding_id("memory", 0, "near_capacity")]
    frag = found[finding_id("memory", 0, "fragmentation")]
    churn = found[finding_id("memory", "allocator_churn")]
    assert len(found) == 3
    assert near.evidence["peak_reserved_bytes"] == exp["peak_reserved_bytes"]
    assert near.evidence["peak_allocated_bytes"] == exp["peak_allocated_bytes"]
    assert near.evidence["device_memory_bytes"] == exp["device_memory_bytes"]
    assert near.impact_ns == 0 and near.severity.label == "medium"
    assert (
        frag.evidence["allocated_at_reserved_peak_bytes"] == exp["allocated_at_reserved_peak_bytes"]
    )
    assert "expandable_segments:True" in frag.advice
    assert churn.evidence["calls"] == exp["churn_calls"]
    assert churn.impact_ns == exp["churn_ns"]
    assert "empty_cache" in churn.advice


def test_thresholds_silence_memory_findings(scenario_db) -> None:
    t = Thresholds(
        memory_near_capacity_pct=99.0,
        memory_reserved_over_allocated=2.0,
        memory_min_churn_calls=100,
    )
    assert memory.analyze(scenario_db(memory_pressure()), t) == []


def test_corpus_legacy_memory_events_without_totals_judge_nothing(corpus: Path) -> None:
    # The 2021 trace records allocation sizes but no allocator totals: no peak is claimed.
    db = corpus_db(corpus, "v100_resnet50_legacy2021.pt.trace.json.gz")
    assert memory.analyze(db, Thresholds()) == []


def test_corpus_alexnet_allocations_outside_steps_are_not_churn(corpus: Path) -> None:
    # cudaMalloc/cudaFree happen during set-up and cache clearing, not inside steps.
    db = corpus_db(corpus, "a100_alexnet_inference.json.gz")
    assert memory.analyze(db, Thresholds()) == []
