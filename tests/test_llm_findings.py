"""The llm_latency analyzer on planted scenarios whose answers were computed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest import load_trace
from tracelens.analyzers import llm_latency
from tracelens.core.findings import finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.llm.analysis import analyze_llm
from tracelens.report import build_report
from tracelens.testing import Scenario, write_chrome_trace
from tracelens.testing.nsys_writer import write_nsys_sqlite
from tracelens.testing.planted_llm import (
    kv_growth_decode,
    prefill_gpu_idle,
    prefill_stall,
    static_launch_bound,
)

US = 1_000
MS = 1_000_000


def run(sc: Scenario, path: Path) -> tuple[dict[str, dict], object]:
    writer = write_nsys_sqlite if path.suffix == ".sqlite" else write_chrome_trace
    loaded = load_trace(writer(sc, path))
    try:
        db = TraceDB(loaded.con)
        findings = {f.id: f.to_dict() for f in llm_latency.analyze(db, Thresholds())}
        analysis = analyze_llm(db, Thresholds())
    finally:
        loaded.close()
    return findings, analysis


@pytest.mark.parametrize("name", ["t.pt.trace.json.gz", "t.sqlite"])
def test_static_batching_queueing_and_launch_bound_decode(tmp_path: Path, name: str) -> None:
    sc = static_launch_bound()
    e = sc.expected
    findings, a = run(sc, tmp_path / name)
    q = findings[finding_id("llm_latency", "queueing")]
    assert q["impact_ns"] == e["queue_mean_ns"]
    assert q["evidence"]["queue_ns"] == e["queue_ns_total"]
    assert q["evidence"]["ttft_ns"] == e["ttft_ns_total"]
    assert q["evidence"]["requests_passed_over"] == e["requests_passed_over"]
    assert "static batching" in q["summary"]
    assert "continuous" in q["advice"]
    d = findings[finding_id("llm_latency", "decode_gpu_idle")]
    assert d["title"].startswith("Decode is launch-bound")
    assert d["impact_ns"] == e["decode_idle_ns"]
    assert d["evidence"]["gpu_busy_ns"] == e["decode_busy_ns"]
    assert d["evidence"]["kernels_per_step"] == e["decode_kernels_per_step"]
    assert d["evidence"]["median_kernel_ns"] == e["decode_median_kernel_ns"]
    assert "CUDA graph" in d["advice"]
    assert a.steps.prefill.gpu_busy_ns == e["prefill_busy_ns"]
    # Prefill keeps the GPU 90 % busy: no idle finding for it.
    assert finding_id("llm_latency", "prefill_gpu_idle") not in findings
    assert a.summary.requests == e["requests"]
    assert a.summary.output_tokens == e["output_tokens"]
    # Nothing planted, nothing reported: no prefill runs while anyone decodes.
    assert finding_id("llm_latency", "prefill_stalls") not in findings
    assert finding_id("llm_latency", "kv_growth") not in findings


def test_kv_growth_slope_and_cost(tmp_path: Path) -> None:
    sc = kv_growth_decode()
    e = sc.expected
    findings, a = run(sc, tmp_path / "kv.pt.trace.json.gz")
    k = findings[finding_id("llm_latency", "kv_growth")]
    assert k["evidence"]["ns_per_cached_token"] == pytest.approx(e["ns_per_cached_token"])
    assert k["impact_ns"] == e["growth_ns"]
    assert k["evidence"]["decode_ns"] == e["decode_ns"]
    assert k["evidence"]["r2"] == pytest.approx(1.0)
    assert a.kv_growth is not None and a.kv_growth.decode_steps == e["decode_steps"]
    # No GPU in this trace: no GPU-busy judgement is made.
    assert finding_id("llm_latency", "decode_gpu_idle") not in findings
    assert a.steps.decode.gpu_busy_pct is None


def test_flat_decode_steps_report_no_growth(tmp_path: Path) -> None:
    sc = Scenario("llm_flat")
    sc.range("llm.request[f]", 0, 50 * MS)
    sc.range("llm.prefill[f]", 0, 1 * MS)
    for k in range(20):
        # Alternating 1.0 / 1.1 ms: noise without a trend.
        sc.range("llm.decode[f]", 1 * MS + k * 2 * MS, 1 * MS + (k % 2) * 100 * US)
    findings, a = run(sc, tmp_path / "flat.pt.trace.json.gz")
    assert finding_id("llm_latency", "kv_growth") not in findings
    assert a.kv_growth is not None


def test_kv_min_steps_override_decides_the_fit(tmp_path: Path) -> None:
    """Six decode steps, each 100 us slower than the last: too few for the default 8 steps,
    enough under ``llm_kv_min_steps=4``, in the findings and in the report's section."""
    sc = Scenario("llm_kv_short")
    sc.range("llm.request[s0]", 0, 50 * MS)
    sc.range("llm.request[s1]", 0, 50 * MS)
    sc.range("llm.prefill[s0,s1]", 0, 2 * MS)
    t = 2 * MS
    for k in range(1, 7):
        sc.range("llm.decode[s0,s1]", t, 1 * MS + 100 * US * k)
        t += 1 * MS + 100 * US * k
    kv_id = finding_id("llm_latency", "kv_growth")
    loaded = load_trace(write_chrome_trace(sc, tmp_path / "kv6.pt.trace.json.gz"))
    try:
        default = build_report(loaded)
        lowered = build_report(loaded, Thresholds.with_overrides({"llm_kv_min_steps": "4"}))
        again = build_report(loaded)
    finally:
        loaded.close()
    assert kv_id not in {f["id"] for f in default["findings"]}
    assert default["llm"]["kv_growth"] is None
    (kv,) = [f for f in lowered["findings"] if f["id"] == kv_id]
    # two requests, 2k cached tokens in step k: 50 us per cached token
    assert kv["evidence"]["decode_steps"] == 6
    assert kv["evidence"]["ns_per_cached_token"] == pytest.approx(50 * US)
    assert lowered["llm"]["kv_growth"]["decode_steps"] == 6
    # the same trace analysed again under the default is not left with the override's fit
    assert again["llm"]["kv_growth"] is None and again["findings"] == default["findings"]


def test_prefill_stall_finding(tmp_path: Path) -> None:
    sc = prefill_stall()
    findings, _ = run(sc, tmp_path / "stall.pt.trace.json.gz")
    f = findings[finding_id("llm_latency", "prefill_stalls")]
    ev = f["evidence"]
    # a: 9 tokens (8 decode gaps), b: 5 tokens (4 decode gaps)
    assert (ev["stalled_gaps"], ev["decode_gaps"]) == (1, 12)
    assert ev["baseline_itl_ns"] == 500 * US
    assert ev["excess_ns"] == 4 * MS
    assert f["impact_ns"] == 2 * MS  # 4 ms excess over 2 requests
    assert ev["worst_gaps"][0]["rid"] == "a" and ev["worst_gaps"][0]["itl_ns"] == 4500 * US
    assert "chunked prefill" in f["advice"]


def test_prefill_gpu_idle_finding(tmp_path: Path) -> None:
    """Prefill steps of 2 ms that run one 200 us kernel each: 90 % of prefill time idle."""
    sc = prefill_gpu_idle()
    findings, a = run(sc, tmp_path / "pi.pt.trace.json.gz")
    f = findings[finding_id("llm_latency", "prefill_gpu_idle")]
    assert f["impact_ns"] == 3 * 1800 * US
    assert f["evidence"]["gpu_busy_pct"] == pytest.approx(10.0)
    assert f["title"].startswith("GPU idle 90% of prefill time")
    assert a.steps.decode.gpu_busy_pct == pytest.approx(80.0)
    assert finding_id("llm_latency", "decode_gpu_idle") not in findings


def test_steps_that_end_before_their_gpu_work_are_flagged(tmp_path: Path) -> None:
    """Decode ranges closed right after launching: the kernels run on after each range."""
    sc = Scenario("llm_async_steps")
    sc.range("llm.request[z]", 0, 10 * MS)
    sc.range("llm.prefill[z]", 0, 1 * MS)
    sc.launch(None, "ampere_sgemm_128x64_tn", 100 * US, 200 * US, 700 * US)
    for i in range(4):
        s = 1 * MS + i * 100 * US
        sc.range("llm.decode[z]", s, 100 * US)
        sc.launch(None, "decode_kernel", s + 50 * US, 2 * MS + i * 1 * MS, 900 * US)
    _, a = run(sc, tmp_path / "async.pt.trace.json.gz")
    (w,) = a.warnings
    assert w.startswith("4 of 4 decode steps end before the GPU work")
