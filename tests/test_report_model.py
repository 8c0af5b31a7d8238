"""The report is the shape tracelens/report/model.py declares, for every trace we have.

``build_report`` validates each report it builds; these tests add that the typed view reads
back as the very same JSON (no field dropped, reordered or retyped), that every section is
declared, and that the checks catch a report that strays.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest

from ingest import load_trace
from tracelens.core.findings import Severity
from tracelens.llm.bench_results import load_bench_results
from tracelens.llm.model import LlmLatency, LlmSection
from tracelens.llm.slo import parse_slo
from tracelens.report import ReportInputs, build_report
from tracelens.report import build as report_module
from tracelens.report.build import CORE_KEYS
from tracelens.report.model import Report, SeverityLabel
from tracelens.testing import Scenario, training_steps, write_chrome_trace
from tracelens.testing.checks import report_model_problems
from tracelens.testing.nsys_writer import write_nsys_sqlite
from tracelens.testing.planted_cost import explicit_attention
from tracelens.testing.planted_device import exposed_allreduce, memory_pressure
from tracelens.testing.planted_engines import sglang_overlap, vllm_eager_decode
from tracelens.testing.planted_llm import kv_growth_decode, static_launch_bound
from tracelens.testing.planted_warmup import autotuning_capture

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def _no_gpu() -> Scenario:
    sc = Scenario("host_only", devices=[])
    sc.range("llm.request[r0]", 0, 5_000_000)
    return sc


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "training": training_steps,
    "memory": memory_pressure,
    "allreduce": exposed_allreduce,
    "attention": explicit_attention,
    "warmup": autotuning_capture,
    "vllm": vllm_eager_decode,
    "sglang": sglang_overlap,
    "llm_static": static_launch_bound,
    "llm_kv": kv_growth_decode,
    "no_gpu": _no_gpu,
}


def _report(path: Path, inputs: ReportInputs | None = None) -> dict[str, Any]:
    loaded = load_trace(path)
    try:
        return build_report(loaded, inputs=inputs)
    finally:
        loaded.close()


def _bench_results(path: Path) -> Path:
    """A benchmark client's per-request results (vLLM's --save-detailed shape), one failed."""
    n, tokens = 4, 8
    result = {
        "backend": "vllm",
        "max_concurrency": 2,
        "request_rate": "inf",
        "duration": 2.5,
        "completed": n - 1,
        "input_lens": [32] * n,
        "output_lens": [tokens] * (n - 1) + [0],
        "ttfts": [0.05, 0.06, 0.4, 0.0],
        "itls": [[0.01] * (tokens - 1)] * (n - 1) + [[]],
        "generated_texts": ["x"] * (n - 1) + [""],
        "errors": [""] * (n - 1) + ["timeout"],
    }
    path.write_text(json.dumps(result), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    d = tmp_path_factory.mktemp("model")
    reports = {}
    for name, make in SCENARIOS.items():
        reports[name] = _report(write_chrome_trace(make(), d / f"{name}.pt.trace.json.gz"))
    for name in ("vllm", "training"):
        reports[f"{name}_nsys"] = _report(
            write_nsys_sqlite(SCENARIOS[name](), d / f"{name}.sqlite")
        )
    slo = parse_slo("ttft=200ms,tpot=50ms,itl=80ms")
    llm_trace = write_chrome_trace(static_launch_bound(), d / "slo.pt.trace.json.gz")
    reports["slo_trace"] = _report(llm_trace, ReportInputs(slo=slo))
    bench = load_bench_results(_bench_results(d / "bench.json"))
    plain = write_chrome_trace(training_steps(2), d / "plain.pt.trace.json.gz")
    reports["slo_client"] = _report(plain, ReportInputs(slo=slo, bench=bench))
    reports["client_only"] = _report(plain, ReportInputs(bench=bench))
    return reports


PLANTED = [*SCENARIOS, "vllm_nsys", "training_nsys", "slo_trace", "slo_client", "client_only"]


@pytest.mark.parametrize("name", PLANTED)
def test_planted_reports_are_their_model(planted: dict[str, dict[str, Any]], name: str) -> None:
    assert report_model_problems(planted[name]) == []


def test_the_sample_traces_reports_are_their_model() -> None:
    traces = sorted(SAMPLES.glob("*.json.gz"))
    if not traces:
        pytest.skip("sample_traces/ holds no trace")
    for trace in traces:
        assert report_model_problems(_report(trace)) == [], trace.name


@pytest.mark.corpus
def test_every_corpus_report_is_its_model(corpus: Path) -> None:
    """Real traces, each in a fresh process (loading them all would grow this one)."""
    traces = sorted(
        str(p)
        for p in corpus.rglob("*")
        if p.name.endswith((".json.gz", ".sqlite")) and p.is_file()
    )
    proc = subprocess.run(
        [sys.executable, "-m", "tracelens.testing.checks", "--report-model", *traces],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(results) == len(traces)
    assert {r["trace"]: r["problems"] for r in results if r["problems"]} == {}


def test_a_report_that_strays_is_caught(planted: dict[str, dict[str, Any]]) -> None:
    good = planted["training"]
    grown = copy.deepcopy(good)
    grown["metrics"]["new_count"] = 1  # a field added without its declaration
    assert any("new_count" in p for p in report_model_problems(grown))
    retyped = copy.deepcopy(good)
    retyped["devices"][0]["busy_pct"] = 67  # an int where the model says float
    assert report_model_problems(retyped) == ["its typed view reads back as different JSON"]
    missing = copy.deepcopy(good)
    del missing["findings"][0]["supersedes"]
    assert any("supersedes" in p for p in report_model_problems(missing))
    with pytest.raises(msgspec.ValidationError):
        Report.of(missing)


def test_objectives_and_a_client_s_results_make_their_parts(
    planted: dict[str, dict[str, Any]],
) -> None:
    by_trace = Report.of(planted["slo_trace"]).llm
    assert isinstance(by_trace, LlmSection) and by_trace.latency is not None
    assert by_trace.slo is not msgspec.UNSET and by_trace.slo.applies_to == "trace"
    by_client = Report.of(planted["slo_client"]).llm
    assert isinstance(by_client, LlmSection) and by_client.latency is None
    assert by_client.warnings is msgspec.UNSET  # no annotations were read: only the inputs
    assert by_client.client is not msgspec.UNSET and by_client.client.failed == 1
    assert by_client.slo is not msgspec.UNSET and by_client.slo.applies_to == "client"


def test_a_registered_section_must_be_declared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """build_report accepts a section the model does not declare yet (the HTML report shows
    it generically), but the model check, which every real report passes, does not."""
    monkeypatch.setitem(report_module.SECTIONS, "extra", lambda db, t: {"n": 1})
    report = _report(write_chrome_trace(training_steps(2), tmp_path / "t.pt.trace.json.gz"))
    assert list(report)[len(CORE_KEYS) :] == ["extra"]
    assert report_model_problems(report) == ["section 'extra' is not declared in Report"]


def test_the_llm_section_declares_the_latency_fields_in_their_order() -> None:
    latency = LlmLatency.__struct_fields__
    assert LlmSection.__struct_fields__[: len(latency)] == latency


def test_severity_labels_are_the_findings_severities() -> None:
    assert set(get_args(SeverityLabel)) == {s.label for s in Severity}


def test_the_typed_llm_section_gives_its_latency_part(planted: dict[str, dict[str, Any]]) -> None:
    static = Report.of(planted["llm_static"]).llm
    assert isinstance(static, LlmSection) and static.latency is not None
    assert static.latency.requests == planted["llm_static"]["llm"]["requests"]
    engines = Report.of(planted["vllm"]).llm
    assert isinstance(engines, LlmSection) and engines.latency is None
    assert engines.engine_steps is not msgspec.UNSET


def test_uncosted_findings_lead_only_where_their_time_dwarfs_the_costed_impacts() -> None:
    from tracelens.report.render.minor import uncosted_leads

    assert uncosted_leads([7_170_000], [532_000])  # vLLM's MoE against its one GEMM finding
    assert uncosted_leads([1_000], [])  # nothing costed to give back
    assert not uncosted_leads([600_000], [400_000])  # comparable: ranked findings first
    assert not uncosted_leads([], [400_000])


def test_reading_order_is_the_renderers_order_as_positions() -> None:
    """``reading_order`` lists every finding once, as positions in ``findings`` (a job
    repeats ids across ranks), in the order the reports read them."""
    from tracelens.core.finding_sections import reading_order

    def f(i: str, sev: str, impact: int, subject: int, costed: bool = True) -> dict:
        return {"id": i, "severity": sev, "impact_ns": impact, "subject_ns": subject,
                "costed": costed}  # fmt: skip

    hint = f("a", "low", 39_000, 39_000)
    idle = f("b", "info", 0, 391_000_000, costed=False)
    minor = f("c", "info", 5_000, 5_000)
    comm = f("d", "info", 0, 337_000_000, costed=False)
    ranked = [hint, idle, minor, comm]  # by impact, as the report ranks them
    # un-costed time dwarfs the one costed impact: they lead, biggest first
    assert reading_order(ranked) == [1, 3, 0, 2]
    # comparable: the costed first, then the un-costed, the minor last
    gemm = f("e", "high", 300_000_000, 300_000_000)
    assert reading_order([gemm, hint, idle, minor]) == [0, 1, 2, 3]
    # the same id on two ranks stays two positions
    assert reading_order([hint, dict(hint)]) == [0, 1]
    assert reading_order([]) == []


def test_reports_say_their_reading_order(planted: dict[str, dict[str, Any]]) -> None:
    for name, report in planted.items():
        order = report["reading_order"]
        assert sorted(order) == list(range(len(report["findings"]))), name
