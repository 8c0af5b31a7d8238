"""The public annotation helper: names, id validation, and ranges a real profiler records."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracelens import annotate


@pytest.mark.parametrize("rid", ["", " a", "a,b", "x[1]", "y]", "[z"])
def test_bad_request_ids_are_rejected(rid: str) -> None:
    with pytest.raises(ValueError):
        annotate.request(rid)
    with pytest.raises(ValueError):
        annotate.decode(["ok", rid])


def test_names_follow_the_convention() -> None:
    assert annotate.request_name(17) == "llm.request[17]"
    assert annotate.step_name("prefill", ["a", "b-2"]) == "llm.prefill[a,b-2]"
    assert annotate.decode(iter(["x"])).name == "llm.decode[x]"
    with pytest.raises(ValueError):
        annotate.prefill([])
    with pytest.raises(ValueError):
        annotate.step_name("verify", ["a"])


def test_spans_without_any_backend_are_no_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(annotate, "_backends", (None, None))
    assert annotate.backends() == []
    span = annotate.request("r").start()
    with annotate.prefill(["r"]):
        pass
    span.end()
    with pytest.raises(RuntimeError):
        span.end()


def test_overlapping_request_spans_land_in_the_trace(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    from ingest import load_trace
    from tracelens.core.thresholds import Thresholds
    from tracelens.core.tracedb import TraceDB
    from tracelens.llm.section import llm_section

    assert "torch" in annotate.backends()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        a = annotate.request("a").start()
        b = annotate.request("b").start()
        with annotate.prefill(["a", "b"]):
            torch.ones(8).sum()
        with annotate.decode(["a", "b"]):
            torch.ones(8).sum()
        a.end()  # ends before b although it started first: no nesting required
        with annotate.decode(["b"]):
            torch.ones(8).sum()
        b.end()
    path = tmp_path / "spans.pt.trace.json"
    prof.export_chrome_trace(str(path))
    loaded = load_trace(path)
    try:
        s = llm_section(TraceDB(loaded.con), Thresholds())
    finally:
        loaded.close()
    assert s is not None and s["warnings"] == []
    tokens = {r["rid"]: r["output_tokens"] for r in s["per_request"]}
    assert tokens == {"a": 2, "b": 3}
    for r in s["per_request"]:
        assert 0 < r["ttft_ns"] <= r["e2e_ns"]
