"""Host-side findings of a capture recorded with Python stacks or allocator events say that
part of the host time is the profiler's own, and never tell it to turn on what it has on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_cache import corpus_db

from ingest import load_trace
from tracelens.analyzers import idle_gpu
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import workload_of


def test_the_profilers_options_are_trace_facts(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
    ]  # fmt: skip
    path = tmp_path / "t.json"
    doc = {"traceEvents": events, "with_stack": 1, "profile_memory": 1, "record_shapes": 0}
    path.write_text(json.dumps(doc))
    db = TraceDB(load_trace(path, find_captures=False).con)
    assert db.info["profiler_options"] == "with_stack,profile_memory"
    w = workload_of(db)
    assert w.profiler_host_overhead == ("with_stack", "profile_memory")


def test_options_a_trace_does_not_list_are_read_off_its_events(tmp_path: Path) -> None:
    """The 2021 profiler wrote no options: operators' input shapes, their Python "Call
    stack" and allocator ("[memory]") events say which were on. Without any of them,
    nothing is inferred."""
    op = {
        "ph": "X",
        "cat": "Operator",
        "name": "aten::add",
        "pid": 0,
        "tid": 1,
        "ts": 5,
        "dur": 4,
        "args": {"Input Dims": [[4], [4]], "Call stack": "train.py(10): step"},
    }
    events = [
        op,
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 0, "tid": 1,
         "ts": 6, "s": "t", "args": {"Bytes": 512, "Total Allocated": 512, "Device Id": 0,
                                     "Device Type": 1, "Addr": 1}},
        {"ph": "X", "cat": "Kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
    ]  # fmt: skip
    path = tmp_path / "t2021.json"
    path.write_text(json.dumps({"traceEvents": events}))
    db = TraceDB(load_trace(path, find_captures=False).con)
    assert db.info["profiler_options"] == "record_shapes,with_stack,profile_memory"
    assert workload_of(db).profiler_host_overhead == ("with_stack", "profile_memory")
    bare = {**op, "args": {}}
    path.write_text(json.dumps({"traceEvents": [bare, events[2]]}))
    db = TraceDB(load_trace(path, find_captures=False).con)
    assert "profiler_options" not in db.info


@pytest.mark.corpus
def test_resnet50_2021_host_pacing_is_partly_the_profilers(corpus: Path) -> None:
    """ResNet-50 on a V100, recorded by the 2021 profiler with shapes, Python stacks and
    allocator events on (23,622 of 23,646 operators with shapes, "Call stack" on 14,994,
    12,838 [memory] events) though it lists no options: a sixth review found its host
    costs inflated (`aten::empty` median 15 µs against 4.4 µs in the V100 trace recorded
    without them, `cudaLaunchKernel` 9.0 against 5.2 µs) and no finding saying so. The
    host-busy finding says part of its host time is the profiler's; the FP16 convolutions,
    capped by a replay because the host paces the GPU, say more comes back without it
    (none where the replay gives nothing back: the loader paces those), and fusion, whose
    figure adds removed launches at this capture's inflated median, says it moves both
    ways."""
    from tracelens.report import build_report

    db = corpus_db(corpus, "v100_resnet50_legacy2021.pt.trace.json.gz")
    assert workload_of(db).profiler_host_overhead == ("with_stack", "profile_memory")
    (busy,) = _host_busy(db)
    assert "part of this host time is the profiler's" in busy.advice
    loaded = load_trace(corpus / "torch/v100_resnet50_legacy2021.pt.trace.json.gz")
    try:
        report = build_report(loaded)
    finally:
        loaded.close()
    capped = [f for f in report["findings"] if "Replayed with the host's launches" in (
        f["impact_basis"])]  # fmt: skip
    assert {f["analyzer"] for f in capped} >= {"fusion", "hot_ops"}
    for f in capped:
        basis = f["impact_basis"]
        if f["analyzer"] == "fusion":
            # removed launches are counted at this capture's inflated median: both ways
            assert "and each removed launch costs less, so that part shrinks" in basis
        elif "end the run only 0 ns sooner" in basis:
            assert "profiler's own" not in basis  # the loader paces it, not the profiler
        else:
            assert "without it somewhat more of this comes back in this run" in basis
    # the 2021 profiler's stacks are operators' "Call stack" fields, not python_function
    # events (a seventh review: the advice sent the reader to events the trace lacks)
    assert "its operators' `Call stack` fields" in busy.advice


def _host_busy(db: TraceDB) -> list:
    found = idle_gpu.analyze(db, Thresholds())
    return [f for f in found if f.evidence.get("cause") == "host_compute"]


@pytest.mark.corpus
def test_bert_on_mi300_is_host_bound_and_the_profiler_shares_the_blame(corpus: Path) -> None:
    """BERT-small on an MI300X: 60 kernels in a 3.5 ms window, the host issuing them
    late. It was recorded with with_stack, profile_memory, record_shapes, with_flops and
    with_modules all on (1,389 Python-function events): every operator carries the
    profiler's own host time, and the Python stacks are there to read."""
    findings = _host_busy(corpus_db(corpus, "mi300_bert_small.json.gz", kind="engines"))
    assert findings
    for f in findings:
        assert (
            "recorded Python stacks and allocator events (`with_stack=True`, "
            "`profile_memory=True`)" in f.advice
        )
        assert "part of this host time is the profiler's" in f.advice
        assert "py-spy, `with_stack=True`" not in f.advice  # it has them already


@pytest.mark.corpus
def test_a_capture_without_those_options_gets_no_caveat(corpus: Path) -> None:
    db = corpus_db(corpus, "v100_train_single_rank_ns.pt.trace.json.gz")
    assert workload_of(db).profiler_host_overhead == ()
    for f in idle_gpu.analyze(db, Thresholds()):
        assert "profiler's own host time" not in f.advice
