"""Synchronization-stall analyzer: planted .item() and torch.cuda.synchronize(), and corpus."""

from __future__ import annotations

from pathlib import Path

from corpus_cache import corpus_db

from ingest import load_trace
from tracelens.analyzers import sync_stalls
from tracelens.core.findings import finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.testing.planted_host import sync_stalls as planted_sync_stalls


def test_planted_sync_patterns_attributed_to_their_code(scenario_db) -> None:
    sc = planted_sync_stalls()
    db = scenario_db(sc)
    assert db.window_ns == sc.expected["window_ns"]
    findings = {f.evidence["pattern"]: f for f in sync_stalls.analyze(db, Thresholds())}
    assert set(findings) == {"scalar_read", "device_synchronize"}
    for pattern in ("scalar_read", "device_synchronize"):
        exp, f = sc.expected[pattern], findings[pattern]
        assert f.id == finding_id("sync_stalls", pattern, exp["site"])
        assert f.evidence["site"] == exp["site"]
        assert f.evidence["call_count"] == exp["calls"]
        assert f.evidence["blocked_ns"] == exp["blocked_ns"]
        assert f.evidence["idle_after_ns"] == exp["idle_after_ns"]
        assert f.impact_ns == exp["recoverable_ns"]
    item = findings["scalar_read"]
    assert item.evidence["operator_chain"] == "aten::item > aten::_local_scalar_dense"
    assert item.evidence["api_calls"] == ["cudaMemcpyAsync", "cudaStreamSynchronize"]
    assert ".item()" in item.advice
    sync = findings["device_synchronize"]
    assert sync.evidence["annotation"] == "log_metrics"
    assert "torch.cuda.synchronize()" in sync.advice
    # Ranked by recoverable GPU time: 9 x 650 us beats 10 x 345 us.
    assert sync.impact_ns > item.impact_ns


def test_sync_impact_matches_idle_gpu_synchronization_total(scenario_db) -> None:
    sc = planted_sync_stalls()
    db = scenario_db(sc)
    total = db.scalar("SELECT sum(end_ns - start_ns) FROM gaps WHERE cause = 'synchronization'")
    findings = sync_stalls.analyze(db, Thresholds())
    assert sum(f.evidence["idle_after_ns"] for f in findings) == total


def test_planted_training_sync_is_recoverable_up_to_the_gap(planted_trace) -> None:
    path, exp = planted_trace
    loaded = load_trace(path)
    try:
        (f,) = sync_stalls.analyze(TraceDB(loaded.con), Thresholds())
    finally:
        loaded.close()
    # cudaStreamSynchronize outside any operator, blocking 5,335 us per step; each is
    # followed by a 1,030 us gap, all of which comes back.
    assert f.evidence["pattern"] == "stream_synchronize"
    assert f.evidence["site"] == "(no operator)"
    assert f.impact_ns == f.evidence["idle_after_ns"] == exp["gap_ns_by_cause"]["synchronization"]


def test_corpus_alexnet_sync_bounded_by_blocked_time(corpus: Path) -> None:
    db = corpus_db(corpus, "a100_alexnet_inference.json.gz")
    findings = sync_stalls.analyze(db, Thresholds())
    # The warm-up's cudaDeviceSynchronize is followed by 824 ms of idle GPU, but the host was
    # blocked only microseconds: removing the sync cannot give back more than that.
    (f,) = findings
    assert f.evidence["pattern"] == "device_synchronize"
    assert f.evidence["idle_after_ns"] == 824_158_000
    assert f.impact_ns <= f.evidence["blocked_ns"] < 100_000
    assert f.severity.label == "info"


def test_corpus_single_final_sync_is_not_reported(corpus: Path) -> None:
    # One cudaDeviceSynchronize at the end of profiling, GPU busy meanwhile: harmless.
    db = corpus_db(corpus, "v100_train_single_rank_ns.pt.trace.json.gz")
    assert sync_stalls.analyze(db, Thresholds()) == []


def test_corpus_nsys_device_synchronize_in_plain_cuda_program(corpus: Path) -> None:
    # A CUDA C vector add: cudaDeviceSynchronize outside any operator, then 121 us idle.
    db = corpus_db(corpus, "rtx3060_vecadd_nsys2025.5.sqlite", kind="nsys")
    (f,) = sync_stalls.analyze(db, Thresholds())
    sync_gaps = db.scalar("SELECT sum(end_ns - start_ns) FROM gaps WHERE cause = 'synchronization'")
    assert f.evidence["pattern"] == "device_synchronize"
    assert f.evidence["site"] == "(no operator)"
    assert f.impact_ns == f.evidence["idle_after_ns"] == sync_gaps == 121_408


def test_corpus_nsys_without_kernels_reports_blocking_only(corpus: Path) -> None:
    db = corpus_db(corpus, "rtx4060l_no_kernel_table_nsys2023.3.sqlite", kind="nsys")
    findings = sync_stalls.analyze(db, Thresholds())
    assert {f.evidence["pattern"] for f in findings} == {
        "device_synchronize",
        "event_synchronize",
    }
    for f in findings:
        assert f.impact_ns == 0 and f.severity.label == "info"
        assert "GPU idle time is unknown" in f.summary
