"""The committed sample recordings: tracelens finds what each workload planted, and the
latencies it derives agree with the timestamps the program wrote beside each trace."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from tracelens.core.findings import finding_id
from tracelens.testing.reports import report_of_file

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def assert_clocks_agree(diffs_ns: list[float]) -> None:
    """Trace-derived minus program-measured durations: agreement, robust to preemption.

    A stamp is taken microseconds after (or before) the range it mirrors, but on a shared
    host the process can be descheduled in between, so a few comparisons may be off by
    milliseconds (tens of them on a saturated CI runner). A real disagreement (a wrong
    step, start instead of end) shifts them all.
    """
    diffs = sorted(abs(d) for d in diffs_ns)
    assert diffs, "nothing to compare"
    assert diffs[len(diffs) // 2] < 300_000, diffs
    assert sum(d < 1_000_000 for d in diffs) >= 0.75 * len(diffs), diffs


def report_of(name: str) -> dict:
    path = SAMPLES / name
    if not path.exists():
        pytest.skip(f"{name} is not in sample_traces/")
    return _report(path)


@functools.cache
def _report(path: Path) -> dict:
    # Each sample is ingested once per test run; several tests read its report.
    return report_of_file(path)


def findings_of(report: dict) -> dict[str, dict]:
    return {f["id"]: f for f in report["findings"] if f["analyzer"] == "llm_latency"}


@pytest.mark.parametrize(
    "name",
    [
        "serve_continuous_tuned_cpu.pt.trace.json.gz",
        "serve_static_tuned_cpu.pt.trace.json.gz",
        "serve_continuous_naive_cpu.pt.trace.json.gz",
    ],
)
def test_sample_agrees_with_its_timestamps(name: str) -> None:
    report = report_of(name)
    stamps = json.loads((SAMPLES / f"{name}.timestamps.json").read_text())
    assert stamps["device"] == "CPU (no CUDA)"
    traced = {r["rid"]: r for r in report["llm"]["per_request"]}
    diffs: list[float] = []
    for p in stamps["requests"]:
        t = traced[p["rid"]]
        assert t["output_tokens"] == len(p["token_ns"])
        diffs.append(t["ttft_ns"] - (p["token_ns"][0] - p["received_ns"]))
        diffs.append(t["e2e_ns"] - (p["done_ns"] - p["received_ns"]))
    assert_clocks_agree(diffs)


def test_continuous_batching_sample_shows_prefill_stalls() -> None:
    report = report_of("serve_continuous_tuned_cpu.pt.trace.json.gz")
    f = findings_of(report)[finding_id("llm_latency", "prefill_stalls")]
    assert f["evidence"]["stalled_gaps"] > 0
    assert report["llm"]["steps"]["decode"]["max_batch"] > 1


def test_static_batching_sample_shows_static_queueing() -> None:
    report = report_of("serve_static_tuned_cpu.pt.trace.json.gz")
    f = findings_of(report)[finding_id("llm_latency", "queueing")]
    assert f["evidence"]["requests_passed_over"] > 0
    assert "static batching" in f["summary"]
    assert finding_id("llm_latency", "prefill_stalls") not in findings_of(report)


def test_naive_sample_serves_one_request_at_a_time() -> None:
    report = report_of("serve_continuous_naive_cpu.pt.trace.json.gz")
    llm = report["llm"]
    assert llm["steps"]["decode"]["max_batch"] == 1
    f = findings_of(report)[finding_id("llm_latency", "queueing")]
    assert f["evidence"]["requests_passed_over"] == 0  # every step was full: at capacity
    assert "capacity" in f["summary"]
