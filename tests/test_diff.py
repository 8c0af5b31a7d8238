"""Trace diff: self-diff is empty, naive -> tuned resolves the planted problems, CLI exits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ingest import load_trace
from tracelens.cli import main
from tracelens.core.findings import finding_id
from tracelens.report import build_report
from tracelens.report.diff import build_diff
from tracelens.report.render.diff import render_diff_markdown, render_diff_text
from tracelens.testing import write_chrome_trace
from tracelens.testing.planted_pair import decode_naive, decode_tuned


def _report(path: Path) -> dict:
    loaded = load_trace(path)
    try:
        return build_report(loaded, top=1000)
    finally:
        loaded.close()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> dict:
    d = tmp_path_factory.mktemp("pair")
    naive, tuned = decode_naive(tokens=32), decode_tuned(tokens=32)
    pn = write_chrome_trace(naive, d / "naive.pt.trace.json.gz")
    pt = write_chrome_trace(tuned, d / "tuned.pt.trace.json.gz")
    return {"naive": (pn, naive.expected), "tuned": (pt, tuned.expected)}


@pytest.fixture(scope="module")
def reports(pair: dict) -> dict:
    return {k: _report(p) for k, (p, _) in pair.items()}


def test_diff_of_a_trace_with_itself_is_empty(reports: dict) -> None:
    d = build_diff(reports["naive"], reports["naive"], max_regression_pct=0.0)
    assert d["empty"]
    assert d["kernels"] == [] and d["operators"] == []
    assert d["findings"]["appeared"] == d["findings"]["resolved"] == []
    assert d["findings"]["changed"] == []
    assert not any(r["changed"] for r in d["metrics"])
    assert d["verdict"]["status"] == "unchanged" and not d["verdict"]["regression"]
    assert "No differences." in render_diff_text(d)
    json.dumps(d)  # JSON-able as is


def test_naive_to_tuned_resolves_planted_problems(pair: dict, reports: dict) -> None:
    d = build_diff(reports["naive"], reports["tuned"], max_regression_pct=5.0)
    (_, en), (_, et) = pair["naive"], pair["tuned"]
    metrics = {r["key"]: r for r in d["metrics"]}
    assert metrics["window_ns"]["baseline"] == en["window_ns"]
    assert metrics["window_ns"]["candidate"] == et["window_ns"]
    assert metrics["kernel_count"]["changed"] is False
    v = d["verdict"]
    assert v["status"] == "faster" and v["metric"] == "window_ns" and not v["regression"]
    assert v["change_pct"] == pytest.approx(100.0 * (et["window_ns"] / en["window_ns"] - 1), 1e-3)
    resolved = {f["id"] for f in d["findings"]["resolved"]}
    assert finding_id("launch_overhead", 0) in resolved
    assert finding_id("sync_stalls", "scalar_read", "aten::item") in resolved
    # launch_overhead explains idle_gpu's launch gaps, so the broad finding never ranks
    assert finding_id("idle_gpu", 0, "launch_overhead") not in {
        f["id"] for f in reports["naive"]["findings"]
    }
    # The naive run's one-kernel adds are runs of memory-bound kernels: the fusion finding,
    # which counts their hot-operator finding's time. The tuned run replays them from a
    # CUDA graph, where fusion is not judged, so hot_ops names the replay (whatever Python
    # wrapper launched it).
    appeared = d["findings"]["appeared"]
    assert [f["title"].split("`")[1] for f in appeared] == ["CUDA graph replay"]
    assert finding_id("fusion", "memory_bound_runs") in resolved
    assert finding_id("hot_ops", "aten::add") not in {f["id"] for f in reports["naive"]["findings"]}
    # The FP32 GEMM became a bf16 GEMM. In the naive run the host's launches pace the GPU
    # (each token's tiny kernels, then a blocking .item()): replayed with them held, a faster
    # GEMM ends no token sooner, so it gives back nothing there. In the tuned run the graph
    # keeps the GPU fed, and the [8, 4096] x [4096, 4096] product, memory-bound (it reads the
    # 32 MiB weight) at a third of the A100's bandwidth, is what is left.
    mm = next(f for f in d["findings"]["changed"] if f["id"] == finding_id("hot_ops", "aten::mm"))
    assert mm["baseline_impact_ns"] == 0 < mm["impact_ns"]
    kernels = {r["name"]: r for r in d["kernels"]}
    assert kernels["ampere_sgemm_64x64_nn"]["status"] == "gone"
    assert kernels["ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn"]["status"] == "new"
    md = render_diff_markdown(d)
    assert md.startswith("# tracelens diff") and "FASTER" in md


def test_reverse_diff_is_a_regression(reports: dict) -> None:
    d = build_diff(reports["tuned"], reports["naive"], max_regression_pct=5.0)
    assert d["verdict"]["status"] == "regression" and d["verdict"]["regression"]
    appeared = {f["id"] for f in d["findings"]["appeared"]}
    assert finding_id("launch_overhead", 0) in appeared


def test_cli_exit_codes(pair: dict, tmp_path: Path) -> None:
    naive, tuned = str(pair["naive"][0]), str(pair["tuned"][0])
    runner = CliRunner()
    r = runner.invoke(main, ["diff", naive, naive, "--max-regression", "0"])
    assert r.exit_code == 0, r.output
    assert "UNCHANGED" in r.output and "No differences." in r.output
    r = runner.invoke(main, ["diff", tuned, naive, "--max-regression", "5", "--format", "json"])
    assert r.exit_code == 1
    assert json.loads(r.output)["verdict"]["status"] == "regression"
    bad = tmp_path / "bad.json"
    bad.write_text("not a trace")
    r = runner.invoke(main, ["diff", naive, str(bad)])
    assert r.exit_code == 2
    r = runner.invoke(main, ["diff", naive, str(tmp_path / "missing.json")])
    assert r.exit_code == 2


def test_corpus_self_diff_is_empty(corpus: Path) -> None:
    report = _report(corpus / "torch" / "v100_train_single_rank_ns.pt.trace.json.gz")
    assert build_diff(report, report)["empty"]


SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def _sample_pairs() -> list[tuple[Path, Path]]:
    pairs = []
    for naive in sorted(SAMPLES.glob("serve_continuous_naive_*.pt.trace.json.gz")):
        tuned = naive.with_name(naive.name.replace("_naive_", "_tuned_"))
        if tuned.exists():
            pairs.append((naive, tuned))
    return pairs


@pytest.mark.parametrize("naive_tuned", _sample_pairs() or [None], ids=lambda p: p and p[0].name)
def test_recorded_serving_naive_vs_tuned(naive_tuned: tuple[Path, Path] | None) -> None:
    if naive_tuned is None:
        pytest.skip("no recorded naive/tuned serving traces in sample_traces/")
    naive, tuned = (_report(p) for p in naive_tuned)
    d = build_diff(naive, tuned, max_regression_pct=5.0)
    metrics = {r["key"]: r for r in d["metrics"]}
    # Batching and a preallocated KV cache serve the same requests with lower latency.
    assert naive["llm"]["requests"] == tuned["llm"]["requests"]
    assert d["verdict"]["metric"] == "llm_e2e_p50_ns"
    assert d["verdict"]["status"] == "faster" and not d["verdict"]["regression"]
    assert metrics["llm_ttft_p50_ns"]["delta"] < 0
    assert not build_diff(tuned, tuned)["verdict"]["regression"]


def test_truncated_reports_say_so(reports: dict) -> None:
    def truncate(r: dict) -> dict:
        return {**r, "top_kernels": r["top_kernels"][:1], "top_ops": r["top_ops"][:1]}

    d = build_diff(truncate(reports["naive"]), truncate(reports["tuned"]))
    assert "kernel_ns" not in {r["key"] for r in d["metrics"]}
    assert d["notes"]
    assert build_diff(reports["naive"], reports["tuned"])["notes"] == []
