"""A graph-replayed MoE layer costed from the expert weights its callees take.

vLLM's ``vllm::moe_forward`` records only its activations and router logits; the expert
weights are views its callees take before the expert GEMMs run, in the capture trace.
The cost is the bytes of the experts the batch's tokens choose (uniform routing), at the
memory efficiency every memory-bound kernel is judged at (corpus: gpt-oss-20b on an
MI300X, tests/test_corpus_diagnoses.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from ingest import load_trace
from tracelens.analyzers.moe_expert_cost import expert_reads
from tracelens.core.thresholds import Thresholds
from tracelens.report import build_report
from tracelens.testing import Scenario, write_chrome_trace
from tracelens.testing.scenario import ApiCall, Kernel

US = 1_000
TOKENS, EXPERTS, TOP_K = 16, 8, 2
# two bf16 expert weights of 8 experts: [8, 2048, 4096] and [8, 4096, 2048], 128 MiB each
WEIGHTS = [[EXPERTS, 2048, 4096], [EXPERTS, 4096, 2048]]
WEIGHT_BYTES = 2 * EXPERTS * 2048 * 4096 * 2
KERNELS = ["fused_moe_kernel", "fused_moe_kernel"]


def _callees() -> str:
    return json.dumps(
        [[[TOKENS, EXPERTS], "c10::BFloat16"], [[TOKENS, TOP_K], "int"]]
        + [[w, "c10::BFloat16"] for w in WEIGHTS]
    )


def test_expert_reads_counts_the_experts_the_tokens_choose() -> None:
    shapes = json.dumps([[TOKENS, 4096], [TOKENS, EXPERTS]])
    read = expert_reads(shapes, _callees())
    assert read is not None
    touched = EXPERTS * (1 - (1 - TOP_K / EXPERTS) ** TOKENS)  # 7.92 of 8
    assert abs(read.nbytes - WEIGHT_BYTES * touched / EXPERTS) < 1
    assert read.per_tensor == [read.nbytes / 2, read.nbytes / 2]  # two equal weights
    assert "16 tokens choosing 2 of 8 experts each read about 7.9 of them" in read.basis
    assert "[8, 2048, 4096], [8, 4096, 2048] bf16: 256 MiB for 8 experts" in read.basis
    # MXFP4's block scales, where the kernels say MXFP4: a sixteenth more
    scaled = expert_reads(shapes, _callees(), 1 / 16)
    assert scaled is not None and abs(scaled.nbytes - read.nbytes * 17 / 16) < 1
    assert "with MXFP4's block scales (1/16 of the packed bytes)" in scaled.basis
    # without the router's width, the chosen ids or the weights, nothing is claimed
    assert expert_reads(json.dumps([[TOKENS, 4096]]), _callees()) is None
    no_ids = json.dumps([[w, "c10::BFloat16"] for w in WEIGHTS])
    assert expert_reads(shapes, no_ids) is None
    no_weights = json.dumps([[[TOKENS, TOP_K], "int"]])
    assert expert_reads(shapes, no_weights) is None


def _capture() -> Scenario:
    sc = Scenario(name="capture")
    t = 1_000 * US
    sc.api("cudaStreamBeginCapture", t, 5 * US)
    t += 10 * US
    moe = sc.op(
        "vllm::moe_forward",
        t,
        200 * US,
        [[TOKENS, 4096], [TOKENS, EXPERTS]],
        types=["c10::BFloat16", "c10::BFloat16"],
    )
    sc.op("TopK", t + 5 * US, 10 * US, [[TOKENS, TOP_K]], types=["int"])
    for i, w in enumerate(WEIGHTS):
        sc.op(
            "aten::view",
            t + (20 + 10 * i) * US,
            5 * US,
            [w, []],
            types=["c10::BFloat16", "ScalarList"],
        )
    for j, k in enumerate(KERNELS):
        sc.api_calls.append(
            ApiCall(
                "cudaLaunchKernel",
                t + (60 + 20 * j) * US,
                5 * US,
                sc.pid,
                sc.tid,
                sc.next_id(),
                moe.external_id,
                kernel=k,
            )
        )
    sc.api("cudaStreamEndCapture", t + 300 * US, 5 * US)
    return sc


def _replay(replays: int, kernel_ns: int) -> Scenario:
    sc = Scenario(name="replay")
    t = 0
    for _ in range(replays):
        corr = sc.next_id()
        sc.api_calls.append(ApiCall("cudaGraphLaunch", t, 20 * US, sc.pid, sc.tid, corr))
        for j, k in enumerate(KERNELS):
            sc.kernels.append(Kernel(k, t + 30 * US + j * (kernel_ns + 10 * US), kernel_ns, corr))
        t += 30 * US + len(KERNELS) * (kernel_ns + 10 * US)
    return sc


def test_a_replayed_moe_layer_is_costed_from_its_experts_weights(tmp_path: Path) -> None:
    trace = write_chrome_trace(_replay(4, 400 * US), tmp_path / "decode.pt.trace.json.gz")
    cap = tmp_path / "capture_traces"
    cap.mkdir()
    write_chrome_trace(_capture(), cap / "graph_capture_rank_0.pt.trace.json.gz")
    (cap / "execution_details.json").write_text(
        json.dumps([{"file": "graph_capture_rank_0.pt.trace.json.gz", "batch_size": TOKENS}])
    )
    loaded = load_trace(trace)
    try:
        r = build_report(loaded, Thresholds(), 10)
    finally:
        loaded.close()
    (moe,) = [f for f in r["findings"] if f["evidence"].get("operator") == "vllm::moe_forward"]
    touched = EXPERTS * (1 - (1 - TOP_K / EXPERTS) ** TOKENS)
    per_call = WEIGHT_BYTES * touched / EXPERTS
    cost = moe["evidence"]["cost"]
    assert abs(cost["bytes"] - 4 * per_call) < 4
    # ideal: the bytes at 70 % of the A100-80GB's 2039 GB/s, per call of 800 us; the
    # impact is the time beyond it, less what host gaps after the kernels would swallow
    ideal = per_call / (2039 * 0.7)
    assert abs(cost["ideal_ns"] - 4 * ideal) < 4 and cost["memory_gbps"] == 2039
    assert 0 < moe["impact_ns"] <= 4 * (800 * US - ideal)
    assert "mostly GEMM" in moe["title"]
    assert "memory-bound" in moe["impact_basis"] and "uniform routing" in moe["impact_basis"]
    assert moe["advice"].startswith("The MoE layer is memory-bound")
    assert "TunableOp" in moe["advice"] and "never sees these kernels" in moe["advice"]
    # bf16 experts: narrower weights are advised; the engine's fused_moe_kernel is tuned
    # from its per-device config files
    assert "narrower expert weights" in moe["advice"]
    assert "`benchmark_moe.py --tune`" in moe["advice"]
    # no MXFP4 kernel: no block scales are added, and the basis says scales are left out
    assert "block scales not taken as inputs are left out" in moe["impact_basis"]
