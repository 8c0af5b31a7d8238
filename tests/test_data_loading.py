"""Data-loading analyzer: planted single-process loader and the 2021 num_workers=0 trace."""

from __future__ import annotations

from pathlib import Path

from corpus_cache import corpus_db

from ingest import load_trace
from tracelens.analyzers import data_loading
from tracelens.core.findings import finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.testing.planted_host import launch_bound


def test_planted_training_data_wait(planted_trace) -> None:
    path, exp = planted_trace
    loaded = load_trace(path)
    try:
        (f,) = data_loading.analyze(TraceDB(loaded.con), Thresholds())
    finally:
        loaded.close()
    assert f.id == finding_id("data_loading", 0)
    assert f.impact_ns == exp["gap_ns_by_cause"]["data_loading"]
    assert f.evidence["idle_gap_count"] == 9
    assert f.evidence["num_workers"] == "0 (single process)"
    assert f.evidence["loaders"][0]["calls"] == 10
    assert f.evidence["loader_host_ns"] == 10 * 2_000_000
    assert f.evidence["pageable_h2d_copies"] == 10
    # the first batch loads before the GPU's first work: said apart from the window's runs
    assert f.summary.startswith("The loader ran 9 times in the analysed window for 18 ms")
    assert "(1 more, 2 ms, outside it)" in f.summary
    assert f.supersedes == [finding_id("idle_gpu", 0, "data_loading")]
    assert "num_workers" in f.advice and "pin_memory=True" in f.advice


def test_no_loader_no_finding(scenario_db) -> None:
    assert data_loading.analyze(scenario_db(launch_bound(kernels=20)), Thresholds()) == []


def test_corpus_resnet_num_workers_0(corpus: Path) -> None:
    # The kineto sample was recorded as "resnet50_num_workers_0": the analyzer must say so.
    db = corpus_db(corpus, "v100_resnet50_legacy2021.pt.trace.json.gz")
    (f,) = data_loading.analyze(db, Thresholds())
    assert f.evidence["num_workers"] == "0 (single process)"
    # Five ~50-60 ms waits, one per step, while the loader runs with nothing queued. The
    # 2,642 one-microsecond gaps between queued kernels that the loader also overlaps
    # (3.17 ms, the previous step's kernels still draining) are the GPU's own, not data waits.
    assert f.impact_ns == 285_214_000
    assert 25.0 < f.impact_pct < 35.0
    assert f.severity.label == "critical"
    # a sixth review: six runs for 416 ms in all, but the first (68.7 ms) ends before the
    # GPU's first work; the window holds five, 347 ms
    assert f.summary.startswith(
        "The loader ran 5 times in the analysed window for 347 ms on the host (1 more, "
        "68.7 ms, outside it)"
    )
