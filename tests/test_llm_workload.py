"""A short real recording of the serving workload, checked against its own timestamps.

The program stamps each request's arrival (just before its ``llm.request`` range opens),
each token (just after the step range that emits it closes) and its completion with
``time.time_ns()``. The trace's durations must agree with the program's: TTFT, end-to-end
latency and TPOT (see ``assert_clocks_agree`` for how closely).
"""

from __future__ import annotations

import pytest


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


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    pytest.importorskip("torch", reason="the workloads need the 'workloads' extra (torch)")
    from ingest import load_trace
    from tracelens.report import build_report
    from tracelens.workloads.serve import ServeConfig, serve
    from tracelens.workloads.tiny_llm import ModelConfig

    cfg = ServeConfig(
        scheduler="continuous",
        variant="tuned",
        requests=5,
        batch=2,
        interarrival_ms=2.0,
        prompt_min=8,
        prompt_max=24,
        output_min=1,
        output_max=6,
        model=ModelConfig(vocab=128, d_model=32, n_layers=1, n_heads=2, max_len=64),
    )
    out = tmp_path_factory.mktemp("serve") / "serve.pt.trace.json.gz"
    stamps = serve(cfg, out, warmup=False)
    loaded = load_trace(out)
    try:
        report = build_report(loaded)
    finally:
        loaded.close()
    return report, stamps


def test_trace_latencies_match_the_program_clock(recording: tuple[dict, dict]) -> None:
    report, stamps = recording
    llm = report["llm"]
    assert llm["warnings"] == []
    traced = {r["rid"]: r for r in llm["per_request"]}
    program = {r["rid"]: r for r in stamps["requests"]}
    assert set(traced) == set(program)
    diffs: list[float] = []
    for rid, p in program.items():
        t = traced[rid]
        assert t["output_tokens"] == len(p["token_ns"]) == p["output_len"]
        diffs.append(t["ttft_ns"] - (p["token_ns"][0] - p["received_ns"]))
        diffs.append(t["e2e_ns"] - (p["done_ns"] - p["received_ns"]))
        if len(p["token_ns"]) > 1:
            tpot = (p["token_ns"][-1] - p["token_ns"][0]) / (len(p["token_ns"]) - 1)
            diffs.append(t["tpot_ns"] - tpot)
        else:
            assert t["tpot_ns"] is None
    assert_clocks_agree(diffs)
    assert llm["output_tokens"] == sum(len(p["token_ns"]) for p in program.values())


def test_recording_is_labelled_with_its_device(recording: tuple[dict, dict]) -> None:
    _, stamps = recording
    assert stamps["device"].startswith(("CPU", "CUDA"))
    assert "torch" in stamps["annotate_backends"]
    assert stamps["clock"] == "time.time_ns"
