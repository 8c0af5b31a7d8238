"""Steps analyzer: planted slow step with exact expectations, even steps, corpus."""

from __future__ import annotations

from pathlib import Path

from corpus_cache import corpus_db

from ingest import load_trace
from tracelens.analyzers import steps
from tracelens.core.findings import finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.testing.planted_host import uneven_steps


def test_planted_slow_step_and_what_differed(scenario_db) -> None:
    sc = uneven_steps()
    exp = sc.expected
    (f,) = steps.analyze(scenario_db(sc), Thresholds())
    ev = f.evidence
    assert f.id == finding_id("steps", "ProfilerStep")
    assert ev["step_count"] == exp["step_count"]
    assert ev["median_step_ns"] == exp["median_step_ns"]
    assert ev["slowest_step"] == exp["slowest_step"]
    assert ev["max_step_ns"] == exp["max_step_ns"]
    assert f.impact_ns == ev["excess_over_median_ns"] == exp["excess_ns"]
    top = ev["slowest_kernels_vs_typical"][0]
    assert top["kernel"] == exp["kernel"]
    assert top["delta_ns"] == exp["kernel_delta_ns"]
    kernel_ns = next(d for d in ev["slowest_vs_median"] if d["measure"] == "kernel_ns")
    assert kernel_ns["delta"] == exp["kernel_delta_ns"]
    assert "GPU kernel time +3 ms" in f.title
    assert f.severity.label != "info"


def test_even_steps_are_informational(planted_trace) -> None:
    path, _ = planted_trace
    loaded = load_trace(path)
    try:
        (f,) = steps.analyze(TraceDB(loaded.con), Thresholds())
    finally:
        loaded.close()
    assert f.evidence["step_count"] == 10
    assert f.evidence["median_step_ns"] == 9_000_000
    assert f.impact_ns == 0 and f.severity.label == "info"
    # Each planted step has one 2,050 us data wait (not the first) and a 1,030 us gap of
    # optimizer host code after a sync that blocked only 5 us of it.
    per_step = f.evidence["steps"]
    assert [s["idle_host_compute_ns"] for s in per_step] == [1_030_000] * 10
    assert [s["idle_synchronization_ns"] for s in per_step] == [0] * 10
    assert per_step[1]["idle_data_loading_ns"] == 2_050_000


def test_too_few_steps_no_finding(scenario_db) -> None:
    sc = uneven_steps(steps=2, slow=1)
    assert steps.analyze(scenario_db(sc), Thresholds()) == []


def test_step_timing_is_read_from_a_reports_findings(scenario_db) -> None:
    """What `tracelens diff` compares: the median step and the count, from the JSON dicts."""
    exp = uneven_steps().expected
    findings = [f.to_dict() for f in steps.analyze(scenario_db(uneven_steps()), Thresholds())]
    others = [{"analyzer": "idle_gpu", "evidence": {"median_step_ns": 1}}]
    assert steps.step_timing(others + findings) == steps.StepTiming(
        median_step_ns=exp["median_step_ns"], step_count=exp["step_count"]
    )
    assert steps.step_timing(others) is None


def test_corpus_step_tables(corpus: Path) -> None:
    # 2021 trace: ProfilerStep#5..10 are operators, not ranges; the six steps are even.
    db = corpus_db(corpus, "v100_resnet50_legacy2021.pt.trace.json.gz")
    (f,) = steps.analyze(db, Thresholds())
    assert f.evidence["step_count"] == 6
    assert f.evidence["slowest_step"] == "ProfilerStep#8"
    assert f.severity.label == "info"
    assert all(s["kernel_count"] == 1462 for s in f.evidence["steps"])


def test_long_runs_list_a_capped_number_of_steps(scenario_db) -> None:
    sc = uneven_steps(steps=120, slow=110)
    (f,) = steps.analyze(scenario_db(sc), Thresholds())
    listed = f.evidence["steps"]
    assert f.evidence["step_count"] == 120 and not f.evidence["steps_listed_all"]
    assert len(listed) == 100 and listed[-1]["step"] == "ProfilerStep#110"
    assert f.evidence["slowest_step"] == "ProfilerStep#110"
