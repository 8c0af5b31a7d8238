"""Graph replays attributed to the operators recorded while the graph was captured.

A serving engine replays its decode step as one CUDA/HIP graph: hundreds of kernels from
one ``…GraphLaunch`` call, so the replay trace alone can only say "graph replay". vLLM and
SGLang can also record the capture (``capture_traces/`` beside the trace, listed in its
``execution_details.json``); there each launch call names the operator that issued it.
Replayed kernels are matched to captured launches by position in the graph and kernel
name (``tracelens/derived/kernel_ops.py``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ingest import TraceInputError, load_trace
from ingest.graph_captures import read_capture_entries
from tracelens.core.thresholds import Thresholds
from tracelens.report import build_report
from tracelens.testing import Scenario, write_chrome_trace
from tracelens.testing.scenario import ApiCall, Kernel

US = 1_000
CORPUS = Path(os.environ.get("TRACELENS_CORPUS", Path(__file__).parents[1] / "../shared/corpus"))
ENGINES = CORPUS / "engines"
GRAPH_NAMES = {"CUDA graph replay", "HIP graph replay"}

# The graph: (operator, kernels it launches) in launch order.
GRAPH = [
    ("aten::mm", ["gemm_a"]),
    ("vllm::unified_attention", ["attn_fwd", "attn_reduce"]),
    ("aten::mm", ["gemm_b"]),
]
KERNELS = [k for _, ks in GRAPH for k in ks]


def _capture(name_kernels: bool) -> Scenario:
    """The capture: launches inside Begin/EndCapture, each under its operator; no kernels run."""
    sc = Scenario(name="capture")
    t = 1_000 * US
    # a warm-up launch before capture begins is not part of the graph
    warm = sc.op("aten::fill_", 0, 50 * US)
    sc.launch(warm, "fill_kernel", 10 * US, 20 * US, 5 * US)
    sc.api("cudaStreamBeginCapture", t, 5 * US)
    t += 10 * US
    for op_name, kernels in GRAPH:
        op = sc.op(op_name, t, 20 * US * len(kernels))
        for k in kernels:
            sc.api_calls.append(
                ApiCall(
                    "cudaLaunchKernel",
                    t + 2 * US,
                    5 * US,
                    sc.pid,
                    sc.tid,
                    sc.next_id(),
                    op.external_id,
                    kernel=k if name_kernels else None,
                )
            )
            t += 20 * US
    sc.api("cudaStreamEndCapture", t, 5 * US)
    return sc


def _replay(replays: int, odd_one_out: bool = False) -> Scenario:
    """``replays`` graph launches of the graph; with ``odd_one_out`` the last one's last
    kernel is another kernel (a different graph, or a capture that no longer fits)."""
    sc = Scenario(name="replay")
    t = 0
    for r in range(replays):
        corr = sc.next_id()
        sc.api_calls.append(ApiCall("cudaGraphLaunch", t, 20 * US, sc.pid, sc.tid, corr))
        for j, k in enumerate(KERNELS):
            if odd_one_out and r == replays - 1 and j == len(KERNELS) - 1:
                k = "other_kernel"
            sc.kernels.append(Kernel(k, t + 30 * US + j * 100 * US, 90 * US, corr))
        t += 30 * US + len(KERNELS) * 100 * US
    return sc


def _write_run(tmp: Path, replay: Scenario, captures: list[tuple[Scenario, dict]]) -> Path:
    trace = write_chrome_trace(replay, tmp / "decode.pt.trace.json.gz")
    cap_dir = tmp / "capture_traces"
    cap_dir.mkdir()
    details = []
    for i, (sc, entry) in enumerate(captures):
        name = f"graph_capture_rank_0.{i}.pt.trace.json.gz"
        write_chrome_trace(sc, cap_dir / name)
        details.append({"file": name, **entry})
    (cap_dir / "execution_details.json").write_text(json.dumps(details))
    return trace


def _report(trace: Path, **kw) -> dict:
    loaded = load_trace(trace, **kw)
    try:
        return build_report(loaded, Thresholds(), 10)
    finally:
        loaded.close()


def _ops(report: dict) -> dict[str, int]:
    return {o["name"]: o["total_ns"] for o in report["top_ops"]}


def test_replayed_kernels_name_the_captured_operators(tmp_path: Path) -> None:
    trace = _write_run(tmp_path, _replay(3), [(_capture(True), {"batch_size": 8, "mode": "FULL"})])
    r = _report(trace)
    ops = _ops(r)
    # aten::mm launched gemm_a and gemm_b: 2 kernels x 3 replays x 90 us
    assert ops == {"aten::mm": 6 * 90 * US, "vllm::unified_attention": 6 * 90 * US}
    assert not GRAPH_NAMES & set(ops)
    assert any("4 kernel launches recorded (batch size 8, mode FULL)" in n for n in r["notes"])
    assert any(
        "12 of 12 replayed kernels attributed" in n and "kernel name" in n for n in r["notes"]
    )
    by_op = {o["name"]: o for o in r["top_ops"]}
    # one call of each captured operator per replay: aten::mm twice per graph
    assert by_op["aten::mm"]["count"] == 6 and by_op["vllm::unified_attention"]["count"] == 3


def test_without_captures_the_replay_is_named_and_a_mismatch_stays_unmatched(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    r = _report(write_chrome_trace(_replay(2), plain / "t.json"))
    assert set(_ops(r)) == {"CUDA graph replay"}
    assert not any("replayed kernels" in n for n in r["notes"])

    run = tmp_path / "run"
    run.mkdir()
    trace = _write_run(run, _replay(3, odd_one_out=True), [(_capture(True), {})])
    r = _report(trace)
    assert any("11 of 12 replayed kernels attributed" in n for n in r["notes"])
    assert _ops(r)["CUDA graph replay"] == 90 * US


def test_a_capture_without_kernel_names_matches_by_position_and_the_best_capture_wins(
    tmp_path: Path,
) -> None:
    # Two captures of the same size: the one whose kernel names agree is chosen; a capture
    # whose calls name no kernels (CUDA) matches by position alone.
    wrong = _capture(True)
    for a in wrong.api_calls:
        if a.kernel:
            a.kernel = "x_" + a.kernel
    trace = _write_run(tmp_path, _replay(2), [(wrong, {"batch_size": 4}), (_capture(True), {})])
    assert set(_ops(_report(trace))) == {"aten::mm", "vllm::unified_attention"}

    nameless = tmp_path / "nameless"
    nameless.mkdir()
    trace = _write_run(nameless, _replay(2), [(_capture(False), {})])
    r = _report(trace)
    assert set(_ops(r)) == {"aten::mm", "vllm::unified_attention"}
    assert any("by launch order (the capture names no kernels)" in n for n in r["notes"])


def test_capture_dir_option_and_bad_details_are_one_line_errors(tmp_path: Path) -> None:
    elsewhere = tmp_path / "caps"
    trace = _write_run(tmp_path, _replay(1), [(_capture(True), {})])
    shutil.move(tmp_path / "capture_traces", elsewhere)
    assert "HIP graph replay" not in _ops(_report(trace))
    assert set(_ops(_report(trace, capture_dir=elsewhere))) == {
        "aten::mm",
        "vllm::unified_attention",
    }
    (elsewhere / "execution_details.json").write_text('[{"file": "missing.json.gz"}]')
    with pytest.raises(TraceInputError, match=r"missing\.json\.gz not found") as exc:
        read_capture_entries(elsewhere)
    assert "\n" not in str(exc.value)
    (elsewhere / "execution_details.json").write_text("{not json")
    with pytest.raises(TraceInputError, match=r"execution_details\.json: not readable JSON"):
        load_trace(trace, capture_dir=elsewhere)


needs_corpus = pytest.mark.skipif(
    not ENGINES.is_dir(), reason=f"the real-trace corpus is not at {ENGINES}"
)


@needs_corpus
@pytest.mark.parametrize(
    ("trace", "kernels", "top_op"),
    [
        # vLLM on MI300X: the MoE layers' Triton GEMMs are 67 % of the step
        ("vllm_decode_full/graph_execution.json.gz", 421, "vllm::moe_forward"),
        # SGLang: the dense projections (aten::mm -> hipBLASLt) lead
        ("sglang_decode/sglang_Qwen3-8B_decode.json.gz", 544, "aten::mm"),
    ],
)
def test_corpus_replays_name_model_operators(trace: str, kernels: int, top_op: str) -> None:
    """Every replayed kernel of both engines' decode graphs matches its captured launch by
    position and name; hot operators then name model operators, not the replay."""
    r = _report(ENGINES / trace)
    assert any(f"{kernels:,} of {kernels:,} replayed kernels attributed" in n for n in r["notes"])
    ops = [o["name"] for o in r["top_ops"]]
    assert ops[0] == top_op and not GRAPH_NAMES & set(ops)
