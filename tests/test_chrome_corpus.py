"""Every real PyTorch profiler trace in the corpus ingests and matches its README facts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ingest import load_trace
from tracelens.report import build_report

# file: (kernels, memcpys, memsets, h2d bytes, pageable h2d bytes, device, busy %, top kernel)
FACTS = {
    "torch/v100_train_single_rank_ns.pt.trace.json.gz": (
        4350,
        1600,
        145,
        0,
        0,
        0,
        98.42,
        "vectorized_elementwise_kernel<4, CUDAFunctor_add",
    ),
    "torch/a100_alexnet_inference.json.gz": (
        79,
        16,
        3,
        244_403_360,
        244_403_360,
        0,
        0.51,
        "ampere_sgemm_32x32_sliced1x4_tn",
    ),
    "torch/sampled_2rank/rank-0.json.gz": (
        1154,
        40,
        10,
        4_866_112,
        16_416,
        0,
        44.79,
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t",
    ),
    "torch/sampled_2rank/rank-1.json.gz": (
        1104,
        40,
        10,
        63_474_164,
        16_416,
        1,
        47.11,
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t",
    ),
    "torch/v100_resnet50_legacy2021.pt.trace.json.gz": (
        8772,
        12,
        312,
        115_607_040,
        115_607_040,
        0,
        60.57,
        "cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>",
    ),
}


def _unqualified(name: str) -> str:
    return re.sub(r"\b\w+::", "", name)


@pytest.fixture(scope="module")
def reports(corpus: Path) -> dict[str, dict]:
    out = {}
    for rel in FACTS:
        loaded = load_trace(corpus / rel)
        try:
            out[rel] = build_report(loaded)
        finally:
            loaded.close()
    return out


@pytest.mark.corpus
@pytest.mark.parametrize("rel", list(FACTS))
def test_counts_bytes_busy_and_top_kernel(reports: dict[str, dict], rel: str) -> None:
    kernels, memcpys, memsets, h2d, pageable, device, busy, top = FACTS[rel]
    r = reports[rel]
    m = r["metrics"]
    assert m["kernel_count"] == kernels
    assert m["memcpy_count"] == memcpys
    assert m["memset_count"] == memsets
    assert m["h2d_bytes"] == h2d
    assert m["h2d_pageable_bytes"] == pageable
    devs = {d["device_id"]: d for d in r["devices"]}
    assert list(devs) == [device]
    assert devs[device]["busy_pct"] == pytest.approx(busy, abs=0.1)
    # The README abbreviates names by dropping namespace qualifiers; compare the same way.
    assert _unqualified(top) in _unqualified(r["top_kernels"][0]["name"])
    assert r["source"]["format"] == "torch_chrome"


@pytest.mark.corpus
def test_ns_decimals_survive_exactly(corpus: Path) -> None:
    loaded = load_trace(corpus / "torch/v100_train_single_rank_ns.pt.trace.json.gz")
    try:
        # Timestamps carry three decimals of microseconds: none may be lost to floats.
        frac = loaded.con.execute(
            "SELECT count(*) FILTER (WHERE start_ns % 1000 <> 0), count(*) FROM kernels"
        ).fetchone()
    finally:
        loaded.close()
    assert frac[0] > frac[1] // 2


@pytest.mark.corpus
def test_legacy_2021_spellings(corpus: Path) -> None:
    loaded = load_trace(corpus / "torch/v100_resnet50_legacy2021.pt.trace.json.gz")
    try:
        q = loaded.con.execute
        # "stream 7" tids, lower-case "external id", capitalised categories
        assert q("SELECT DISTINCT stream_id FROM kernels").fetchall() == [(7,)]
        assert q("SELECT count(*) FROM cpu_ops WHERE external_id IS NULL").fetchone()[0] == 0
        assert q("SELECT count(*) FROM api_calls").fetchone()[0] == 11_923
        assert q("SELECT count(*) FROM memory_events").fetchone()[0] > 0
    finally:
        loaded.close()


@pytest.mark.corpus
def test_alexnet_is_almost_all_idle_and_says_why(reports: dict[str, dict]) -> None:
    r = reports["torch/a100_alexnet_inference.json.gz"]
    assert r["devices"][0]["busy_pct"] < 1
    # The idle time is the warm-up pass (CUDA/cuDNN initialization, the first
    # convolutions): the top finding says the capture is mostly warm-up, and idle_gpu keeps
    # only what happened after it (tests/test_warmup.py has the whole story).
    top = r["findings"][0]
    assert top["analyzer"] == "warmup" and "warm-up" in top["title"]
    assert top["impact_pct"] > 95
    host = [
        f
        for f in r["findings"]
        if f["analyzer"] == "idle_gpu" and f["evidence"]["cause"] == "host_compute"
    ]
    # after the warm-up, that idle is nearly all of the 80 ms left: the harness's cache
    # flush between passes and the allocations refilling the pool it freed, neither counted
    (after,) = host
    assert "93% of the 79.6 ms after" in after["title"]
    assert after["impact_ns"] < 1e6 and after["severity"] == "low"
    # The 233 MiB of pageable uploads are the model's weights, copied during the warm-up:
    # the metrics count them, but a steady-state finding about them would mislead.
    assert r["metrics"]["h2d_pageable_bytes"] == 244_403_360
    assert not [f for f in r["findings"] if "pageable" in f["title"]]


@pytest.mark.corpus
def test_profiler_folder_and_rank_choice(corpus: Path) -> None:
    folder = corpus / "torch/sampled_2rank"
    loaded = load_trace(folder, rank=1)
    try:
        assert loaded.path.name == "rank-1.json.gz"
        assert any("rank 1" in n for n in loaded.notes)
    finally:
        loaded.close()
    loaded = load_trace(folder)
    try:
        assert loaded.path.name == "rank-0.json.gz"
        assert any("2 traces" in n for n in loaded.notes)
    finally:
        loaded.close()
