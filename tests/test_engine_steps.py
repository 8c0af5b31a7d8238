"""Serving engines' own step labels: planted vLLM and SGLang traces with known answers.

Each planted trace goes through the real ingest (Chrome trace and Nsight export), and the
report's ``llm.engine_steps`` and the ``engine_steps`` findings are checked against the
numbers the scenario was built from.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from ingest import load_trace
from tracelens.analyzers import run_all
from tracelens.core.findings import finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.llm.engine_steps import weighted_summary
from tracelens.llm.model import LlmSection
from tracelens.report import build_report
from tracelens.report.model import Report
from tracelens.report.render.llm_section import render_llm_markdown
from tracelens.report.render.markdown import render_markdown
from tracelens.testing import Scenario, write_chrome_trace
from tracelens.testing.checks import counted_once_problems
from tracelens.testing.nsys_writer import write_nsys_sqlite
from tracelens.testing.planted_engines import sglang_overlap, vllm_eager_decode, vllm_label

US = 1_000
MS = 1_000_000
WRITERS: dict[str, Callable[[Scenario, Path], Path]] = {
    "chrome": lambda sc, d: write_chrome_trace(sc, d / "t.pt.trace.json.gz"),
    "nsys": lambda sc, d: write_nsys_sqlite(sc, d / "t.sqlite"),
}
PCT = (50, 90, 95, 99)


def fid(subject: str) -> str:
    return finding_id("engine_steps", subject)


def analyzed(sc: Scenario, path: Path) -> tuple[dict[str, Any], list[str]]:
    """The report, and the counted-once problems of its analysis."""
    loaded = load_trace(path)
    try:
        report = build_report(loaded)
        problems = counted_once_problems(
            TraceDB(loaded.con), run_all(TraceDB(loaded.con), Thresholds())
        )
    finally:
        loaded.close()
    return report, problems


def expect_summary(got: dict[str, Any], values: list[int], weights: list[int] | None = None):
    """``got`` is the summary of ``values`` (each repeated ``weights`` times), by NumPy."""
    data = np.repeat(np.array(values, dtype=float), weights or [1] * len(values))
    assert got["count"] == len(data)
    assert got["mean"] == pytest.approx(data.mean())
    assert got["max"] == data.max()
    for p in PCT:
        assert got[f"p{p}"] == pytest.approx(np.percentile(data, p)), p


@pytest.fixture(scope="module", params=sorted(WRITERS))
def vllm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    sc = vllm_eager_decode()
    path = WRITERS[request.param](sc, tmp_path_factory.mktemp(request.param))
    report, problems = analyzed(sc, path)
    return sc.expected, report, problems


def test_vllm_phases_tokens_and_step_percentiles(vllm) -> None:
    e, r, _ = vllm
    es = r["llm"]["engine_steps"]
    assert es["source"] == "vllm" and es["count"] == 19
    for phase, durations in e["durations"].items():
        st = es["by_phase"][phase]
        assert st["steps"] == len(durations)
        assert st["total_ns"] == sum(durations)
        expect_summary(st["step_ns"], durations)
    assert es["by_phase"]["decode"]["max_requests"] == 6
    assert (es["prefill_tokens"], es["decode_tokens"]) == (e["prefill_tokens"], e["decode_tokens"])
    assert es["steps_with_unknown_tokens"] == 0
    assert [s["context_tokens"] for s in es["steps"]] == e["context_tokens"]
    assert es["span_ns"] == e["span_ns"]
    assert es["decode_tokens_per_s"] == pytest.approx(e["decode_tokens"] / (e["span_ns"] / 1e9))
    assert es["prefill_tokens_per_s"] == pytest.approx(e["prefill_tokens"] / (e["span_ns"] / 1e9))
    # ITL: every decode step once per request in it, every mixed step once per decode request
    d, m = e["durations"], e["decode_requests"]
    expect_summary(es["itl_ns"], d["decode"] + d["mixed"], m["decode"] + m["mixed"])
    assert "TTFT needs request arrival times" in es["ttft_note"]
    b = es["between_steps"]
    assert (b["intervals"], b["ns"], b["gpu_idle_ns"]) == (
        e["between_intervals"],
        e["between_ns"],
        e["between_ns"],
    )
    assert b["idle_by_cause"] == {"host_compute": e["between_ns"]}
    # eager decode: the GPU runs 5 µs of every 20 µs
    busy = es["by_phase"]["decode"]["gpu_busy_pct"]
    assert 24 < busy < 26
    assert es["by_phase"]["decode"]["median_kernel_ns"] == 5 * US


def test_vllm_findings_count_each_millisecond_once(vllm) -> None:
    e, r, problems = vllm
    assert problems == []
    by_id = {f["id"]: f for f in r["findings"]}
    d = by_id[fid("decode_gpu_idle")]
    assert d["title"].startswith("Decode steps are launch-bound")
    assert d["impact_ns"] == e["decode_launch_gap_ns"]
    assert d["evidence"]["launch_bound"] is True
    assert "--enforce-eager" in d["advice"] and "cudagraph_capture_sizes" in d["advice"]
    assert "CUDA graphs" in d["advice"]
    between = by_id[fid("between_steps")]
    assert between["impact_ns"] == e["between_ns"]
    assert "scheduler.py(301): schedule" in between["title"]
    assert "--async-scheduling" in between["advice"]
    # the same launch gaps and host time are idle_gpu's and launch_overhead's: counted here
    assert not [f for f in r["findings"] if f["analyzer"] in ("idle_gpu", "launch_overhead")]
    mixed = by_id[fid("mixed_itl")]
    base = float(np.median(e["durations"]["decode"]))
    stretched = sum(
        (dur - base) * n
        for dur, n in zip(e["durations"]["mixed"], e["decode_requests"]["mixed"], strict=True)
    )
    intervals = sum(e["decode_requests"]["decode"]) + sum(e["decode_requests"]["mixed"])
    assert mixed["impact_ns"] == round(stretched / intervals)
    assert mixed["evidence"]["decode_baseline_ns"] == base
    assert mixed["evidence"]["mean_chunk_tokens"] == 512
    assert "--max-num-batched-tokens" in mixed["advice"]
    small = by_id[fid("small_decode_batch")]
    assert small["impact_ns"] == 0 and small["severity"] == "info"
    # A100 80GB: 312 TFLOP/s BF16 over 2,039 GB/s; 16-bit weights: compute-bound from ~153
    assert small["evidence"]["median_decode_tokens"] == 5
    assert small["evidence"]["compute_bound_from_tokens"] == pytest.approx(312e3 / 2039, 0.01)
    assert small["evidence"]["weight_dtype_assumed"] is True
    assert "--max-num-seqs" in small["advice"]
    # 16-bit weights: FP8 would shorten the steps; fewer GPUs only where the trace is one
    # of several ranks or does not say (the Chrome writer records rank 0 of 1)
    assert "FP8 weights" in small["advice"]
    single = r["trace"].get("world_size") == 1
    assert ("less tensor parallelism" in small["advice"]) is not single


@pytest.fixture(scope="module", params=sorted(WRITERS))
def sglang(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    sc = sglang_overlap()
    path = WRITERS[request.param](sc, tmp_path_factory.mktemp(request.param))
    report, problems = analyzed(sc, path)
    return sc.expected, report, problems


def test_sglang_overlapped_steps_take_their_gpu_time(sglang) -> None:
    e, r, problems = sglang
    assert problems == []
    es = r["llm"]["engine_steps"]
    # 33 labels: every other decode step is labelled twice, and one IDLE step runs nothing
    assert es["source"] == "sglang" and es["count"] == e["steps"] == 23
    for phase, durations in e["durations"].items():
        assert es["by_phase"][phase]["steps"] == len(durations)
        expect_summary(es["by_phase"][phase]["step_ns"], durations)
    # queued back to back, a decode step takes its GPU time (3.1 ms + 0.1 ms per step)
    decode = [s for s in es["steps"] if s["phase"] == "decode"]
    assert [s["dur_ns"] for s in decode[:3]] == [3_100 * US, 3_200 * US, 3_300 * US]
    assert all(s["range_ns"] <= 1 * MS for s in es["steps"])
    durs, weights = zip(*e["itl"], strict=True)
    expect_summary(es["itl_ns"], list(durs), list(weights))
    assert es["steps_with_unknown_tokens"] == 1  # step[MIXED bs=5] says no token counts
    assert es["mixed"]["unknown_decode_requests"] == 1
    assert (es["prefill_tokens"], es["decode_tokens"]) == (e["prefill_tokens"], e["decode_tokens"])
    # the execute_… label of a double-labelled step gives its context tokens
    assert decode[0]["context_tokens"] == (6_100 // 4) * 4 and decode[1]["context_tokens"] is None
    assert es["between_steps"]["ns"] == e["between_ns"] == es["between_steps"]["gpu_idle_ns"]
    notes = " ".join(r["notes"])
    assert "1 engine step scheduled no request" in notes
    assert "23 of 23 engine steps launch GPU work that is still running" in notes


def test_sglang_findings(sglang) -> None:
    e, r, _ = sglang
    by_id = {f["id"]: f for f in r["findings"]}
    assert fid("decode_gpu_idle") not in by_id  # the GPU runs step after step
    between = by_id[fid("between_steps")]
    assert between["impact_ns"] == e["between_ns"]
    assert "process_batch_result" in between["title"]
    assert "--disable-overlap-schedule" in between["advice"]
    mixed = by_id[fid("mixed_itl")]
    assert "--chunked-prefill-size" in mixed["advice"]
    assert mixed["evidence"]["mixed_steps"] == 2
    assert "--cuda-graph-max-bs" not in mixed["advice"]
    small = by_id[fid("small_decode_batch")]
    assert small["evidence"]["gpu"] == "H100 SXM" and "--max-running-requests" in small["advice"]


def labelled(*names: str) -> Scenario:
    sc = Scenario("engine_grammar", devices=[])
    for i, name in enumerate(names):
        sc.range(name, i * MS, 500 * US)
    return sc


def section_of(scenario_db, sc: Scenario) -> dict[str, Any] | None:
    from tracelens.llm.section import llm_section

    return llm_section(scenario_db(sc), Thresholds())


def test_grammars_and_what_is_left_out(scenario_db) -> None:
    """Both vLLM forms and SGLang's, with and without counts; the rest is said, not read."""
    llm = section_of(
        scenario_db,
        labelled(
            vllm_label([(300, 800)], [(1, 40), (1, 60)]),
            "execute_context_1(128)_generation_3(3)",
            "step[EXTEND bs=2 toks=1000]",
            "step[DECODE bs=8]",
            "step[MIXED bs=3 c=1 g=2 c_sq=64 c_sk=96 g_sq=2 g_sk=50]",
            "step[TARGET_VERIFY bs=4]",
            "step[IDLE bs=0]",
            "execute_0_context_0(sq0sk0sqsq0sqsk0)_generation_0(sq0sk0sqsq0sqsk0)",
            "execute_new_2_cached_3",
            "execute_model",  # somebody's own range: not an engine label
        ),
    )
    assert llm is not None
    steps = llm["engine_steps"]["steps"]
    assert [
        (
            s["phase"],
            s["requests"],
            s["decode_requests"],
            s["prefill_tokens"],
            s["decode_tokens"],
            s["context_tokens"],
        )
        for s in steps
    ] == [
        ("mixed", 3, 2, 300, 2, 900),
        ("mixed", 4, 3, 128, 3, None),
        ("prefill", 2, 0, 1000, 0, None),
        ("decode", 8, 8, 0, 8, None),
        ("mixed", 3, 2, 64, 2, 146),
    ]
    assert llm["engine_steps"]["source"] == "sglang"
    # no GPU in this trace: no GPU judgement
    assert all(s["gpu_busy_ns"] is None for s in steps)
    text = " ".join(llm["warnings"])
    assert "TARGET_VERIFY (1)" in text
    assert "2 engine steps scheduled no request" in text
    assert "1 ranges look like vLLM or SGLang step labels" in text and "execute_new_2" in text
    assert "execute_model" not in text


def test_one_step_labelled_twice_is_one_step(scenario_db) -> None:
    sc = Scenario("engine_double", devices=[])
    sc.range(vllm_label([], [(1, 100)] * 4), 0, 2 * MS)
    sc.range("step[DECODE bs=4]", 100 * US, 1 * MS)
    sc.range(vllm_label([(64, 64)], []), 3 * MS, 1 * MS)
    sc.range("step[DECODE bs=2]", 3 * MS + 100 * US, 500 * US)  # says decode: disagrees
    llm = section_of(scenario_db, sc)
    assert llm is not None
    es = llm["engine_steps"]
    assert es["count"] == 2 and es["source"] == "sglang"
    assert [(s["phase"], s["dur_ns"], s["context_tokens"]) for s in es["steps"]] == [
        ("decode", 2 * MS, 400),
        ("prefill", 1 * MS, 64),
    ]
    assert any("disagree on the phase" in w for w in llm["warnings"])


def test_labels_that_do_not_parse_are_notes_without_a_section(scenario_db) -> None:
    llm = section_of(scenario_db, labelled("execute_new_1_cached_0", "execute_new_0_cached_1"))
    assert llm is not None and "engine_steps" not in llm
    assert any("follow neither grammar" in w for w in llm["warnings"])
    # nothing to show but the notes
    assert render_llm_markdown(msgspec.convert(llm, LlmSection)) == []


def test_weighted_summary_is_the_summary_of_the_repeated_values() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        values = rng.integers(1, 1_000, size=rng.integers(1, 20))
        weights = rng.integers(0, 6, size=len(values))
        got = weighted_summary(values.astype(float), weights)
        data = np.repeat(values, weights).astype(float)
        if not len(data):
            assert got.count == 0 and got.p50 is None
            continue
        assert got.count == len(data) and got.max == data.max()
        for p in PCT:
            assert getattr(got, f"p{p}") == pytest.approx(np.percentile(data, p))


def test_text_markdown_html_show_the_engine_steps(vllm) -> None:
    from rich.console import Console

    from tracelens.core.units import fmt_ns
    from tracelens.report.render.html import render_html
    from tracelens.report.render.text import render_text

    _, r, _ = vllm
    es = r["llm"]["engine_steps"]
    p50 = fmt_ns(es["by_phase"]["decode"]["step_ns"]["p50"])
    itl_p99 = fmt_ns(es["itl_ns"]["p99"])
    md = render_markdown(Report.of(r))
    assert "### Engine steps" in md and "| decode | 16 | " in md and itl_p99 in md
    assert "TTFT needs request arrival times" in md
    html = render_html(r)
    assert "<h3>Engine steps" in html and p50 in html
    console = Console(record=True, width=120)
    render_text(Report.of(r), console)
    out = console.export_text()
    assert "Engine steps" in out and p50 in out and "ITL (engine)" in out
    # a terminal's default 80 columns keep the row labels whole (a boxed table once
    # squeezed them to "…") and every percentile on the label's line
    narrow = Console(record=True, width=80)
    render_text(Report.of(r), narrow)
    lines = narrow.export_text().splitlines()
    for label in ("decode", "ITL (engine)"):
        row = next(line for line in lines if line.strip().startswith(label + " "))
        assert row.count(" ms") + row.count(" µs") >= 6, row


def test_web_run_page_shows_the_engine_steps(tmp_path: Path) -> None:
    from web_helpers import client_for, make_settings, upload, wait_done

    from tracelens.core.units import fmt_ns

    trace = write_chrome_trace(vllm_eager_decode(), tmp_path / "vllm.pt.trace.json.gz")
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, trace).json()["id"])
        assert run["status"] == "ready", run["error"]
        es = client.get(f"/api/runs/{run['id']}/report").json()["llm"]["engine_steps"]
        page = client.get(f"/runs/{run['id']}", headers={"accept": "text/html"}).text
    panel = page.split('data-subsection="engine_steps"', 1)[1].split("</section>", 1)[0]
    assert "vLLM" in panel and "Engine steps" in panel
    assert fmt_ns(es["by_phase"]["decode"]["step_ns"]["p95"]) in panel
    assert fmt_ns(es["itl_ns"]["p99"]) in panel
    assert f"{es['decode_tokens_per_s']:.1f}" in panel
    assert "TTFT needs request arrival times" in panel


def test_one_decode_step_says_its_itl_is_no_distribution(scenario_db) -> None:
    """One decode step of 8 requests gives 8 equal ITL values: the table says they come
    from one step and a note says the percentiles are that step's time, a lower bound on
    ITL without the host's time between steps (vLLM and SGLang corpus traces: 32
    requests, one step each)."""
    from tracelens.report.render.engine_steps import notes

    llm = section_of(scenario_db, labelled("step[DECODE bs=8]"))
    assert llm is not None
    es = msgspec.convert(llm, LlmSection).engine_steps
    assert es is not None and es.itl_ns.count == 8
    md = "\n".join(render_llm_markdown(msgspec.convert(llm, LlmSection)))
    assert "| ITL (engine) | 8 in 1 step |" in md
    assert any("percentiles are no distribution" in n and "lower bound" in n for n in notes(es))
    # two steps: a distribution of two values, no such note
    two = section_of(scenario_db, labelled("step[DECODE bs=8]", "step[DECODE bs=8]"))
    es2 = msgspec.convert(two, LlmSection).engine_steps
    assert es2 is not None and not any("no distribution" in n for n in notes(es2))
