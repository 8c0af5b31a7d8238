"""Synchronization-stall analyzer: planted .item() and torch.cuda.synchronize(), and corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus_cache import corpus_db

from ingest import load_trace
from tracelens.analyzers import sync_stalls
from tracelens.core.findings import finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.testing.planted_host import sync_stalls as planted_sync_stalls


def test_planted_sync_patterns_attributed_to_their_code(scenario_db) -> None:
    sc = planted_sync_stalls()
    db = scenario_db(sc)
    assert db.window_ns == sc.expected["window_ns"]
    findings = {f.evidence["pattern"]: f for f in sync_stalls.analyze(db, Thresholds())}
    assert set(findings) == {"scalar_read", "device_synchronize"}
    for pattern in ("scalar_read", "device_synchronize"):
        exp, f = sc.expected[pattern], findings[pattern]
        assert f.id == finding_id("sync_stalls", pattern, exp["site"])
        assert f.evidence["site"] == exp["site"]
        assert f.evidence["call_count"] == exp["calls"]
        assert f.evidence["blocked_ns"] == exp["blocked_ns"]
        assert f.evidence["idle_after_ns"] == exp["idle_after_ns"]
        assert f.impact_ns == exp["recoverable_ns"]
    item = findings["scalar_read"]
    assert item.evidence["operator_chain"] == "aten::item > aten::_local_scalar_dense"
    assert item.evidence["api_calls"] == ["cudaMemcpyAsync", "cudaStreamSynchronize"]
    assert ".item()" in item.advice
    sync = findings["device_synchronize"]
    assert sync.evidence["annotation"] == "log_metrics"
    assert "torch.cuda.synchronize()" in sync.advice
    # The device synchronize returns 2 us into each 963 us gap: reported for the blocked
    # host, but the gaps are log_metrics host code, and cost it nothing.
    assert sync.impact_ns == 0 and sync.severity.label == "info"
    assert item.impact_ns > sync.impact_ns


def test_sync_blocking_little_of_a_gap_is_host_code(scenario_db) -> None:
    sc = planted_sync_stalls()
    db = scenario_db(sc)
    rows = db.rows(
        """SELECT cause, detail, count(*), sum(end_ns - start_ns), sum(blocked_ns) FROM gaps
           GROUP BY cause, detail ORDER BY cause"""
    )
    assert rows == [
        ("host_compute", sc.expected["host_gap_detail"], 9, sc.expected["host_gap_ns"], 9 * 2_000),
        ("synchronization", "cudaStreamSynchronize", 10, 10 * 32_000, 10 * 25_000),
    ]


def test_sync_impact_matches_idle_gpu_synchronization_total(scenario_db) -> None:
    sc = planted_sync_stalls()
    db = scenario_db(sc)
    total = db.scalar("SELECT sum(end_ns - start_ns) FROM gaps WHERE cause = 'synchronization'")
    findings = sync_stalls.analyze(db, Thresholds())
    assert sum(f.evidence["idle_after_ns"] for f in findings) == total


def test_planted_training_sync_before_host_code_costs_no_gap(planted_trace) -> None:
    path, _ = planted_trace
    loaded = load_trace(path)
    try:
        (f,) = sync_stalls.analyze(TraceDB(loaded.con), Thresholds())
    finally:
        loaded.close()
    # cudaStreamSynchronize outside any operator, blocking 5,335 us per step while the GPU
    # works; it returns 5 us into each 1,030 us gap, the rest is the optimizer's host code.
    # The blocked host is reported (it recurs), the gap is not the sync's.
    assert f.evidence["pattern"] == "stream_synchronize"
    assert f.evidence["site"] == "(no operator)"
    assert f.evidence["blocked_ns"] == 10 * 5_335_000
    assert f.impact_ns == f.evidence["idle_after_ns"] == 0
    assert f.severity.label == "info"


def test_corpus_alexnet_idle_is_not_the_syncs(corpus: Path) -> None:
    """AlexNet inference on an A100: the GPU is idle 99.5 % of a 13 s window. The warm-up's
    cudaDeviceSynchronize returns 11 us into an 824 ms gap, and 17 ms later the host enters
    the first ``aten::cudnn_convolution`` for the rest of it; the long gaps are cuDNN's first
    convolutions (a 6 s cudaFree, a 3 s first cudaLaunchKernel loading modules, cudaMallocs)
    and a first max-pool. No sync blocked any gap for long, so no sync finding may claim GPU
    time, and the host code is named by its innermost operator."""
    db = corpus_db(corpus, "a100_alexnet_inference.json.gz")
    assert not db.scalar("SELECT count(*) FROM gaps WHERE cause = 'synchronization'")
    for f in sync_stalls.analyze(db, Thresholds()):
        assert f.impact_ns == 0 and f.severity.label == "info"
    top = db.rows(
        "SELECT cause, detail FROM gaps ORDER BY end_ns - start_ns DESC, start_ns LIMIT 4"
    )
    assert top == [
        ("host_compute", "aten::cudnn_convolution"),
        ("host_compute", "aten::cudnn_convolution"),
        ("host_compute", "aten::max_pool2d_with_indices"),
        ("host_compute", "aten::cudnn_convolution"),
    ]


def test_corpus_single_final_sync_is_not_reported(corpus: Path) -> None:
    # One cudaDeviceSynchronize at the end of profiling, GPU busy meanwhile: harmless.
    db = corpus_db(corpus, "v100_train_single_rank_ns.pt.trace.json.gz")
    assert sync_stalls.analyze(db, Thresholds()) == []


def test_corpus_nsys_pageable_copies_in_plain_cuda_program(corpus: Path) -> None:
    """A CUDA C vector add on an RTX 3060: two pageable HtoD ``cudaMemcpy`` (4 MiB each),
    one kernel, one pageable DtoH ``cudaMemcpy``. The GPU idles 306 us between the two
    HtoD copies and 121 us between the kernel and the DtoH copy, each time with the host
    inside the synchronous cudaMemcpy staging pageable memory: synchronization, all of the
    gap blocked. The 1.77 ms before the kernel is not the cudaDeviceSynchronize's: the kernel
    had been launched (a 1.04 ms first launch) 1.12 ms before it started, so the GPU held
    queued work."""
    db = corpus_db(corpus, "rtx3060_vecadd_nsys2025.5.sqlite", kind="nsys")
    gaps = db.rows("SELECT cause, detail, end_ns - start_ns, blocked_ns FROM gaps ORDER BY 1, 3")
    assert gaps == [
        (
            "gpu_dependency",
            "kernVectorAdd(const float *, const float *, float *, int)",
            1_765_695,
            0,
        ),
        ("synchronization", "cudaMemcpy", 121_408, 121_408),
        ("synchronization", "cudaMemcpy", 305_824, 305_824),
    ]
    (f,) = sync_stalls.analyze(db, Thresholds())
    assert f.evidence["pattern"] == "sync_copy"  # a CUDA C program: no tensor-copy wording
    assert f.evidence["site"] == "(no operator)"
    assert f.impact_ns == f.evidence["idle_after_ns"] == 121_408 + 305_824
    assert "torch" not in f.advice and ".to(" not in f.advice
    assert "cudaMemcpyAsync" in f.advice and "cudaHostAlloc" in f.advice


def test_corpus_nsys_without_kernels_reports_blocking_only(corpus: Path) -> None:
    db = corpus_db(corpus, "rtx4060l_no_kernel_table_nsys2023.3.sqlite", kind="nsys")
    findings = sync_stalls.analyze(db, Thresholds())
    assert {f.evidence["pattern"] for f in findings} == {
        "device_synchronize",
        "event_synchronize",
    }
    for f in findings:
        assert f.impact_ns == 0 and f.severity.label == "info"
        assert "GPU idle time is unknown" in f.summary


@pytest.mark.corpus
def test_transformers_mask_check_gets_its_own_advice(corpus: Path) -> None:
    """BERT-small on an MI300X: the one `bool(tensor)` sync is transformers' check, in
    `_prepare_4d_attention_mask_for_sdpa`, that the 2D attention mask is all ones. The
    generic advice (accumulate losses, `.item()` every N steps) is a training loop's; the
    expert names the library's check and what skips it. An earlier reading offered the
    decoder's remedy, `attention_mask=None` "keeping SDPA's causal path": but BERT is an
    encoder (its flash call has is_causal False), and `BertModel.forward` builds an
    all-ones mask when given none and checks it all the same. Only compiling or tracing,
    or a 4D mask (which SDPA then applies, ruling out its flash kernel), skip it; at one
    read a forward (21 µs here) it is rarely worth it."""
    db = corpus_db(corpus, "mi300_bert_small.json.gz", "engines")
    (f,) = [
        f for f in sync_stalls.analyze(db, Thresholds()) if f.evidence["pattern"] == "bool_check"
    ]
    assert "_prepare_4d_attention_mask_for_sdpa" in f.evidence["python_frame"]
    assert f.advice.startswith("The read is transformers' own")
    assert "torch.compile" in f.advice and "4D mask" in f.advice
    assert "`attention_mask=None` does not skip it" in f.advice
    assert "causal path" not in f.advice and "ruling out its flash kernel" in f.advice
    # ... and only that: the training-loop habits do not follow it
    assert "accumulate losses" not in f.advice and ".item()" not in f.advice
    assert (
        f.summary.startswith("1 blocking call (hipMemcpyWithStream)") and "in 1 gap " in f.summary
    )
