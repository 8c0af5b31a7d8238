"""Unfused memory-bound kernels: a planted eager RMSNorm with exact answers, the cases
where fusion is no advice (compiled models, CUDA C), and what an expert says of the
corpus traces."""

from __future__ import annotations

from pathlib import Path

from corpus_cache import corpus_db

from tracelens.analyzers import fusion, run_all
from tracelens.core.findings import finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.testing.planted_cost import A100, BF16_GEMM, compiled_pointwise, cuda_c_program
from tracelens.testing.planted_fusion import MS, RMSNORM, US, eager_rmsnorm
from tracelens.testing.scenario import Scenario

FUSION = finding_id("fusion", "memory_bound_runs")


def test_eager_rmsnorm_runs_fuse_into_their_longest_kernel(scenario_db) -> None:
    sc = eager_rmsnorm()
    exp = sc.expected
    db = scenario_db(sc)
    (f,) = fusion.analyze(db, Thresholds())
    ev = f.evidence
    assert f.id == FUSION
    # the lone `aten::add` after the second GEMM is one operator call: not a run
    assert (ev["runs"], ev["run_kernels"], ev["run_ns"]) == (
        exp["runs"],
        exp["run_kernels"],
        exp["run_ns"],
    )
    assert f.impact_ns == exp["saving_ns"] == ev["run_ns"] - ev["fused_estimate_ns"]
    assert f.subject_ns == exp["run_ns"]
    assert {o["operator"] for o in ev["operators"]} >= {"aten::copy_", "aten::pow", "aten::mul"}
    assert (
        ev["longest_runs"][0]["kernels"] == 7
        and ev["longest_runs"][0]["longest_kernel_ns"] == 100_000
    )
    # inference: fused blocks for the model, no optimizer; never "drop the FP32 upcast",
    # which RMSNorm implementations make on purpose (numerics)
    assert "torch.compile" in f.advice and "RMSNorm" in f.advice and "fused=True" not in f.advice
    assert "FP32" not in f.advice


def test_fusion_counts_the_elementwise_operators_once(scenario_db) -> None:
    """hot_ops estimates a third of each elementwise operator's time as fusion's return;
    with the runs found, those operators' findings are the same time and give way."""
    sc = eager_rmsnorm()
    db = scenario_db(sc)
    findings = run_all(db, Thresholds())
    ids = {f.id for f in findings}
    assert FUSION in ids
    for op in ("aten::pow", "aten::mul", "aten::copy_"):
        assert finding_id("hot_ops", op) not in ids
    assert sum(f.impact_ns for f in findings) <= db.window_ns


def test_compiled_models_and_cuda_c_get_no_fusion_finding(scenario_db) -> None:
    assert fusion.analyze(scenario_db(compiled_pointwise()), Thresholds()) == []
    assert fusion.analyze(scenario_db(cuda_c_program()), Thresholds()) == []


def test_qwen_eager_elementwise_is_the_largest_lever(corpus: Path) -> None:
    """Qwen2 inference on an MI300X, eager bf16: RMSNorm computed in FP32 (`copy_`, `pow`,
    `mean`, `add`, `rsqrt`, `mul`), the rotary embedding (`neg`, `cat`, `mul`, `add`) and
    SiLU·mul run as 787 one-operator kernels in 74 runs between the GEMMs: 12.1 ms, 28 % of
    the kernel time (the 13.3 ms launched before the host trace began are no operator's
    and count in no run). Fused, each run is about its longest kernel: 10.3 ms less, more
    than any other finding gives back, so an expert leads with it (the per-operator model
    rated `aten::mul` low at 2,761 GB/s: each pass is fast, there are just too many). The
    host is at most 3-4 ms ahead of the GPU after the harness's sync: replayed with its
    launches held, the fused runs end the pass 4.1 ms sooner, and the 713 launches fusing
    removes give back 3.2 ms of host time, so 7.4 ms comes back in this run; the title
    gives both."""
    db = corpus_db(corpus, "mi300_qwen_inference.json.gz", "engines")
    (f,) = fusion.analyze(db, Thresholds())
    ev = f.evidence
    assert (ev["runs"], ev["run_kernels"]) == (74, 787)
    assert 12_000_000 < ev["run_ns"] < 12_200_000
    assert 10_200_000 < ev["run_ns"] - ev["fused_estimate_ns"] < 10_400_000
    assert 7_300_000 < f.impact_ns < 7_450_000
    assert "about 10.3 ms less (7.36 ms of it in this run, the host pacing it)" in f.title
    assert "with the 713 launches fusing removes" in f.impact_basis
    assert [o["operator"] for o in ev["operators"][:2]] == ["aten::mul", "aten::copy_"]
    assert "RMSNorm" in f.advice and "FP32" not in f.advice
    top = run_all(db, Thresholds())[0]
    assert top.id == FUSION and top.severity.label == "high"


def test_v100_training_runs_are_batch_norm_and_activations(corpus: Path) -> None:
    """ResNet-50 training in FP32 on a V100: the runs are BatchNorm, ReLU and the residual
    adds, forward and backward (`cudnn_batch_norm_backward`, `threshold_backward`, `add_`):
    a third of the kernel time. Second to moving the convolutions to FP16 (the
    tensor-core finding), and the advice is for training: fused normalization and
    activation, never the inference blocks."""
    db = corpus_db(corpus, "v100_train_single_rank_ns.pt.trace.json.gz")
    findings = run_all(db, Thresholds())
    (f,) = [f for f in findings if f.id == FUSION]
    assert findings[0].analyzer == "occupancy" and findings[1] is f
    ops = [o["operator"] for o in f.evidence["operators"]]
    assert "aten::cudnn_batch_norm_backward" in ops and "aten::threshold_backward" in ops
    assert "fused normalization and activation" in f.advice and "rotary" not in f.advice
    # its optimizer runs `_foreach_` ops outside these runs: no optimizer advice here
    assert "foreach=True" not in f.advice and "fused=True" not in f.advice


def test_legacy_resnet_per_parameter_sgd_is_told_to_batch_its_updates(corpus: Path) -> None:
    """The 2021 ResNet-50 capture updates its parameters one at a time (`aten::add_` per
    parameter inside `Optimizer.step#SGD.step`, no `_foreach_` op): those kernels are in
    the runs, so the advice names the multi-tensor or fused optimizer. A reviewer found the
    host time the finding credits to fusing (5,946 launches removed, 53.5 ms) half the
    optimizer's: 2,898 of those launches are its per-parameter `add_`/`mul_` kernels,
    which `torch.compile(model)` does not touch and only a multi-tensor optimizer
    removes. The basis says how many and how much of it that is."""
    db = corpus_db(corpus, "v100_resnet50_legacy2021.pt.trace.json.gz")
    (f,) = fusion.analyze(db, Thresholds())
    assert "foreach=True" in f.advice and "one parameter at a time" in f.advice
    assert "with the 5,946 launches fusing removes (53.5 ms of host time" in f.impact_basis
    assert (
        "2,898 of those launches (26.1 ms) are the optimizer's per-parameter updates inside "
        "`Optimizer.step`: a multi-tensor (foreach) or fused optimizer removes them, "
        "compiling the model does not." in f.impact_basis
    )


_NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
_HFP8 = (
    "void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::_hfp8_to_float_gpu("
    "at::Tensor const&, long, long)::{lambda(unsigned char)#1}, at::detail::Array<char*, 2> >"
    "(int, fbgemm_gpu::_hfp8_to_float_gpu(at::Tensor const&, long, long)::"
    "{lambda(unsigned char)#1}, at::detail::Array<char*, 2>)"
)


def _rmsnorm_beside(comm_end_after: int | None, fbgemm_at: int | None) -> Scenario:
    """The planted RMSNorm's seven kernels between two GEMMs, with a collective on its
    own stream that starts before them and ends after the ``comm_end_after``-th, and/or
    FBGEMM's HFP8 dequantize as the ``fbgemm_at``-th kernel instead of RMSNorm's."""
    sc = Scenario(name="planted_rmsnorm_beside", devices=[A100])
    for k in range(4):
        s = k * 3 * MS
        gpu = s + 100 * US
        mm = sc.op("aten::mm", s + 10 * US, 20 * US)
        sc.launch(mm, BF16_GEMM, s + 15 * US, gpu, 1 * MS)
        gpu += 1 * MS
        host = s + 40 * US
        ends = []
        for i, (name, kernel, dur) in enumerate(RMSNORM):
            if i == fbgemm_at:
                name, kernel = "fbgemm::HFP8QuantizedToFloat", _HFP8
            op = sc.op(name, host, 15 * US)
            sc.launch(op, kernel, host + 5 * US, gpu, dur * US)
            gpu += dur * US
            ends.append(gpu)
            host += 20 * US
        if comm_end_after is not None:
            comm = sc.op("record_param_comms", s + 20 * US, 10 * US)
            start = s + 1 * MS  # before the RMSNorm's first kernel, on its own stream
            sc.launch(
                comm,
                _NCCL,
                s + 25 * US,
                start,
                ends[comm_end_after - 1] + 5 * US - start,
                stream_id=9,
            )
        mm2 = sc.op("aten::mm", host, 20 * US)
        sc.launch(mm2, BF16_GEMM, host + 5 * US, gpu, 1 * MS)
    return sc


def test_runs_stop_at_collectives_and_leave_fbgemm_out(scenario_db) -> None:
    """torch.compile fuses neither across a collective (its result is awaited in between)
    nor into FBGEMM's custom operators: a collective ending in the middle of the RMSNorm
    splits its run in two (3 + 4 kernels), and FBGEMM's HFP8 dequantize in its place ends
    the run there and joins none (3 + 3)."""
    plain = fusion.analyze(scenario_db(_rmsnorm_beside(None, None)), Thresholds())
    assert [f.evidence["runs"] for f in plain] == [4]
    (split,) = fusion.analyze(scenario_db(_rmsnorm_beside(3, None)), Thresholds())
    assert (split.evidence["runs"], split.evidence["run_kernels"]) == (8, 28)
    assert sorted({r["kernels"] for r in split.evidence["longest_runs"]}) in ([3, 4], [4])
    (fb,) = fusion.analyze(scenario_db(_rmsnorm_beside(None, 3)), Thresholds())
    assert (fb.evidence["runs"], fb.evidence["run_kernels"]) == (8, 24)
    assert all(not o["operator"].startswith("fbgemm::") for o in fb.evidence["operators"])


def test_runs_the_host_paces_give_back_what_a_replay_does(scenario_db) -> None:
    """Ten steps of two one-operator elementwise kernels (400 and 100 us) launched back to
    back and a GEMM, then 2.4 ms of recorded host code with the GPU idle: fused, each run is 100 us
    shorter, but the next step's launch comes when the host gets to it, so only the last
    step ends sooner, plus the launch each fused run removes (its call's 5 us)."""
    sc = Scenario(name="paced_runs", devices=[A100])
    for i in range(10):
        t = i * 3 * MS
        a = sc.op("aten::mul", t, 20 * US)
        sc.launch(a, "vectorized_elementwise_kernel<mul>", t + 5 * US, t + 20 * US, 400 * US)
        b = sc.op("aten::add", t + 30 * US, 20 * US)
        sc.launch(b, "vectorized_elementwise_kernel<add>", t + 35 * US, t + 420 * US, 100 * US)
        mm = sc.op("aten::mm", t + 60 * US, 20 * US)
        sc.launch(mm, BF16_GEMM, t + 65 * US, t + 520 * US, 50 * US)
        sc.op("prepare_next_batch", t + 560 * US, 2_430 * US, category="python_function")
    db = scenario_db(sc)
    (f,) = fusion.analyze(db, Thresholds())
    assert f.evidence["run_ns"] - f.evidence["fused_estimate_ns"] == 10 * 100 * US
    # the last step's ~100 us (the replay's runs scaled as a whole), and 10 removed
    # launches of 5 us
    assert 145 * US < f.impact_ns <= 100 * US + 10 * 5 * US
    assert "(150 µs of it in this run, the host pacing it)" in f.title
    assert "up to 1 ms once the host keeps the GPU fed" in f.impact_basis
