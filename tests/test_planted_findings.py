"""The planted training loop: each bottleneck is found with the right numbers and rank."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest import load_trace
from tracelens.core.findings import finding_id
from tracelens.report import build_report
from tracelens.testing.reports import report_of_file


@pytest.fixture(scope="module")
def report(planted_trace: tuple[Path, dict]) -> dict:
    path, _ = planted_trace
    return report_of_file(path)


def _by(report: dict, analyzer: str) -> list[dict]:
    return [f for f in report["findings"] if f["analyzer"] == analyzer]


def test_metrics_and_busy(report: dict, planted_trace: tuple[Path, dict]) -> None:
    exp = planted_trace[1]
    m = report["metrics"]
    assert m["kernel_count"] == exp["kernel_count"]
    assert m["memcpy_count"] == exp["memcpy_count"]
    assert m["h2d_bytes"] == exp["h2d_bytes"]
    assert m["h2d_pageable_bytes"] == exp["h2d_pageable_bytes"]
    assert m["h2d_time_ns"] == exp["h2d_time_ns"]
    dev = report["devices"][0]
    assert dev["busy_ns"] == exp["busy_ns"]
    assert dev["window_ns"] == exp["window_ns"]


def test_idle_gaps_by_cause_exact(planted_trace: tuple[Path, dict]) -> None:
    path, exp = planted_trace
    loaded = load_trace(path)
    try:
        got = dict(
            loaded.con.execute(
                "SELECT cause, sum(end_ns - start_ns) FROM gaps GROUP BY cause"
            ).fetchall()
        )
    finally:
        loaded.close()
    assert got == exp["gap_ns_by_cause"]


def test_idle_time_is_explained_once(report: dict, planted_trace: tuple[Path, dict]) -> None:
    exp = planted_trace[1]["gap_ns_by_cause"]
    # The data-loading analyzer explains idle_gpu's data-loading gaps, so the broad idle
    # finding gives way to it instead of counting the time twice.
    assert not [f for f in _by(report, "idle_gpu") if f["evidence"]["cause"] == "data_loading"]
    loader = _by(report, "data_loading")[0]
    assert loader["impact_ns"] == exp["data_loading"]
    assert loader["supersedes"] == [finding_id("idle_gpu", 0, "data_loading")]
    assert "num_workers" in loader["advice"]
    # The stream synchronize returns 5 us into each 1,030 us gap: the optimizer's host code
    # is what the GPU waits for, and idle_gpu says so; the sync is reported for its blocked
    # host time only, with no GPU time of its own.
    (host,) = [f for f in _by(report, "idle_gpu") if f["evidence"]["cause"] == "host_compute"]
    assert host["impact_ns"] == exp["host_compute"]
    assert "Optimizer.step#SGD.step" in host["title"]
    assert host["evidence"]["host_activity"][0]["detail"] == "Optimizer.step#SGD.step"
    sync = _by(report, "sync_stalls")[0]
    assert sync["impact_ns"] == 0 and sync["severity"] == "info"
    assert sync["evidence"]["idle_after_gaps"] == 0
    assert "cudaStreamSynchronize" in sync["evidence"]["api_calls"]


def test_pageable_h2d(report: dict, planted_trace: tuple[Path, dict]) -> None:
    exp = planted_trace[1]
    f = next(
        f
        for f in _by(report, "h2d_transfers")
        if f["id"] == finding_id("h2d_transfers", "pageable")
    )
    totals = f["evidence"]["totals"]
    assert totals["bytes"] == exp["h2d_bytes"]
    assert totals["pageable_share_pct"] == 100.0
    # The planted A100 sits on PCIe 4.0 x16: 25 GB/s pinned. Each 4 MiB copy would take
    # 167,772 ns plus 2 us of per-copy latency instead of 400 us.
    assert f["evidence"]["host_link"]["achievable_gbps"] == 25.0
    assert f["impact_ns"] == 10 * round(400_000 - (4 * 1024 * 1024 / 25 + 2_000))
    assert "pin_memory" in f["advice"]
    exposed = next(
        f
        for f in _by(report, "h2d_transfers")
        if f["id"] == finding_id("h2d_transfers", "not_overlapped")
    )
    # No kernel ran during any copy: all 4 ms are exposed, but what pinning saves is
    # already counted by the pageable finding; overlap can hide the rest, once.
    assert exposed["evidence"]["totals"]["exposed_ns"] == exp["h2d_time_ns"]
    assert exposed["impact_ns"] + f["impact_ns"] == exp["h2d_time_ns"]


def test_hot_operator(report: dict, planted_trace: tuple[Path, dict]) -> None:
    exp = planted_trace[1]
    hot = _by(report, "hot_ops")
    top = hot[0] if hot[0]["evidence"]["operator"] == exp["hot_op"] else None
    assert top is not None
    assert top["evidence"]["gpu_ns"] == exp["hot_kernel_ns"]
    assert top["evidence"]["kernel_kind"] == "gemm_fp32"
    # Cost model: 2 x 4096^3 FLOPs per call; the FP32 matmul switched to TF32 runs at 70% of
    # the A100's 156 TFLOP/s, so each 5 ms call would take 1.2586 ms; the rest is impact.
    ideal_ns = 2 * 4096**3 / (0.7 * 156e12) * 1e9
    steps = exp["kernel_count"] // 22
    assert top["impact_ns"] == pytest.approx(exp["hot_kernel_ns"] - steps * ideal_ns, abs=steps)
    assert top["evidence"]["cost"]["bound"] == "compute"
    assert top["evidence"]["cost"]["achieved_tflops"] == pytest.approx(
        2 * 4096**3 / 5e-3 / 1e12, rel=1e-3
    )
    assert "TF32" in top["advice"] or "tf32" in top["advice"]
    assert report["top_kernels"][0]["name"] == exp["hot_kernel"]
    assert report["top_ops"][0]["name"] == exp["hot_op"]


def test_high_variance_kernel(report: dict, planted_trace: tuple[Path, dict]) -> None:
    exp = planted_trace[1]
    var = _by(report, "variance")
    assert len([f for f in var if f["evidence"]["kind"] == "kernel"]) == 1
    f = var[0]
    assert f["evidence"]["group"].startswith(exp["variance_kernel_prefix"])
    assert f["impact_ns"] == exp["variance_impact_ns"]
    assert f["evidence"]["p50_ns"] == 10_000
    assert f["evidence"]["p95_ns"] == 100_000
    assert f["evidence"]["count"] == 200


def test_ranking_is_by_impact(report: dict) -> None:
    impacts = [f["impact_ns"] for f in report["findings"]]
    assert impacts == sorted(impacts, reverse=True)
    top = [f["analyzer"] for f in report["findings"][:3]]
    # GEMM savings (37.4 ms) > data loading (18.45 ms) > optimizer host code (10.3 ms); the
    # copies' 4 ms are split between pinning (2.3 ms) and overlap (1.7 ms), counted once
    assert top == ["hot_ops", "data_loading", "idle_gpu"]


def test_ids_are_stable_across_reingest(planted_trace: tuple[Path, dict], tmp_path: Path) -> None:
    from tracelens.testing import training_steps, write_chrome_trace

    other = write_chrome_trace(training_steps(steps=7), tmp_path / "seven.json")
    a = load_trace(planted_trace[0])
    b = load_trace(other)
    try:
        ids_a = {f["id"] for f in build_report(a)["findings"]}
        ids_b = {f["id"] for f in build_report(b)["findings"]}
    finally:
        a.close()
        b.close()
    assert ids_a == ids_b


def test_reports_are_deterministic(planted_trace: tuple[Path, dict]) -> None:
    # Re-ingesting the same file must give the same report, byte for byte: the web app
    # compares them, and evidence lists with ties must not reorder between runs.
    reports = []
    for _ in range(3):
        loaded = load_trace(planted_trace[0])
        try:
            reports.append(build_report(loaded))
        finally:
            loaded.close()
    assert reports[0] == reports[1] == reports[2]
