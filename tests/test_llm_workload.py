"""A short real recording of the serving workload, checked against its own timestamps.

The program stamps each request's arrival (just before its ``llm.request`` range opens),
each token (just after the step range that emits it closes) and its completion with
``time.time_ns()``. The trace's durations must agree with the program's: TTFT, end-to-end
latency and every inter-token gap within a millisecond (the stamps sit microseconds outside
the ranges; the rest is scheduling noise on a busy host).
"""

from __future__ import annotations

import pytest

TOLERANCE_NS = 1_000_000


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
    for rid, p in program.items():
        t = traced[rid]
        assert t["output_tokens"] == len(p["token_ns"]) == p["output_len"]
        assert abs(t["ttft_ns"] - (p["token_ns"][0] - p["received_ns"])) < TOLERANCE_NS
        assert abs(t["e2e_ns"] - (p["done_ns"] - p["received_ns"])) < TOLERANCE_NS
        if len(p["token_ns"]) > 1:
            tpot = (p["token_ns"][-1] - p["token_ns"][0]) / (len(p["token_ns"]) - 1)
            assert abs(t["tpot_ns"] - tpot) < TOLERANCE_NS
        else:
            assert t["tpot_ns"] is None
    assert llm["output_tokens"] == sum(len(p["token_ns"]) for p in program.values())


def test_recording_is_labelled_with_its_device(recording: tuple[dict, dict]) -> None:
    _, stamps = recording
    assert stamps["device"].startswith(("CPU", "CUDA"))
    assert "torch" in stamps["annotate_backends"]
    assert stamps["clock"] == "time.time_ns"
