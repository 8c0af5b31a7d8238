"""The report's workload section: what was recorded, judged from the trace alone.

Each corpus trace's expected workload is what its recording shows: the V100 traces train
(backward operators, optimizer steps) on Volta, whose tensor cores do FP16 only; the AlexNet
benchmark is inference on an A100; the nsys exports are CUDA C programs (no framework
operators), except the TensorRT engine; the MI300X traces are PyTorch on ROCm, the vLLM and
SGLang ones serving with graph replays.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest import load_trace
from tracelens.core.gpu_specs import lookup
from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import workload_of

CASES = [
    ("torch/v100_train_single_rank_ns.pt.trace.json.gz", "training", "pytorch", "Volta", ("fp16",)),
    ("torch/v100_resnet50_legacy2021.pt.trace.json.gz", "training", "pytorch", "Volta", ("fp16",)),
    ("torch/a100_alexnet_inference.json.gz", "inference", "pytorch", "Ampere", None),
    ("torch/sampled_2rank/rank-0.json.gz", "training", "pytorch", None, None),
    ("nsys/rtx3060_vecadd_nsys2025.5.sqlite", "compute", "cuda", "Ampere", None),
    ("nsys/t4_uvm_nsys2025.1.sqlite", "compute", "cuda", "Turing", ("fp16", "int8")),
    (
        "nsys/rtx3090_tensorrt_nvtx_textid_nsys2023.1.sqlite",
        "inference",
        "tensorrt",
        "Ampere",
        None,
    ),
    ("engines/mi300_bert_small.json.gz", "inference", "pytorch", "CDNA3", None),
    ("engines/vllm_decode_full/graph_execution.json.gz", "serving", "pytorch", "CDNA3", None),
    ("engines/sglang_decode/sglang_Qwen3-8B_decode.json.gz", "serving", "pytorch", "CDNA3", None),
]


@pytest.mark.corpus
@pytest.mark.parametrize(("rel", "kind", "framework", "arch", "dtypes"), CASES)
def test_corpus_workloads(
    corpus: Path, rel: str, kind: str, framework: str, arch: str | None, dtypes: tuple | None
) -> None:
    loaded = load_trace(corpus / rel)
    try:
        w = workload_of(TraceDB(loaded.con))
    finally:
        loaded.close()
    assert (w.kind, w.framework, w.gpu.arch) == (kind, framework, arch), w
    if dtypes is not None:
        assert w.gpu.tensor_dtypes == dtypes
    if "engines/" in rel:
        assert w.gpu.vendor == "amd" and w.gpu.spec is not None and w.gpu.spec.name == "MI300X"
    if "vllm" in rel or "sglang" in rel:
        assert w.cuda_graphs
        # Both decode over a paged KV cache (vLLM's unified attention, ROCm's
        # paged_attention_ll4mi): fused attention, not FlashAttention, though a cache
        # kernel of each names flash (`reshape_and_cache_flash_kernel`,
        # `create_flashinfer_kv_indices_triton`)
        assert w.attention == "fused" and w.paged_attention, w
    if "bert" in rel:
        assert w.attention == "flash"  # aten::_flash_attention_forward


def test_gpu_table_and_architecture_fallbacks() -> None:
    assert lookup("Tesla V100-SXM2-32GB").peaks.tf32 is None  # no TF32 before Ampere
    assert lookup("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert lookup("NVIDIA H100 PCIe").peaks.mem_gbps == 2000
    unknown = lookup("NVIDIA Future GPU", compute_capability="9.0")
    assert unknown is not None and unknown.arch.name == "Hopper" and unknown.assumed
    mi300 = lookup("", compute_capability="9.4", sm_count=304, vendor_hint="amd")
    assert mi300 is not None and mi300.name == "MI300X" and "304" in (mi300.assumed or "")
    assert lookup(None) is None


def test_amd_devices_with_empty_names_are_named_from_their_properties(corpus: Path) -> None:
    """vLLM on MI300X writes an empty deviceProperties name; gfx 9.4 with 304 compute units
    and 64-wide wavefronts is an MI300X, and the report says it was inferred."""
    from ingest.gpu_identity import inferred_name

    loaded = load_trace(corpus / "engines/vllm_decode_full/graph_execution.json.gz")
    try:
        name = loaded.con.execute("SELECT name FROM devices").fetchone()[0]
        w = workload_of(TraceDB(loaded.con))
    finally:
        loaded.close()
    assert name == "AMD Instinct MI300X"
    assert w.gpu.assumed and "304 compute units" in w.gpu.assumed
    assert inferred_name({"name": "", "warpSize": 32, "numSms": 108}) is None  # NVIDIA: no guess
    assert inferred_name({"name": "", "gcnArchName": "gfx90a:sramecc+:xnack-"}) == (
        "AMD GPU (gfx90a)"
    )


def test_an_optimizer_step_and_its_gpu_mirror_are_one_step(tmp_path: Path) -> None:
    """Kineto records each ``Optimizer.step#`` annotation twice: on the host thread
    (``user_annotation``) and mirrored over the kernels it launched on the GPU
    (``gpu_user_annotation``). Three steps are three, whatever the mirror and the
    ``zero_grad`` calls beside them; zero_grad alone still says training."""
    import gzip
    import json

    from tracelens.testing import write_chrome_trace
    from tracelens.testing.scenario import Scenario

    sc = Scenario("optimizer_steps")
    for i in range(3):
        s = i * 1_000_000
        sc.range("Optimizer.zero_grad#SGD.zero_grad", s, 10_000)
        step = sc.range("Optimizer.step#SGD.step", s + 20_000, 200_000)
        op = sc.op("aten::add_", step.start_ns + 1_000, 50_000, [[1024], [1024]])
        sc.launch(op, "vectorized_elementwise_kernel", op.start_ns + 1_000, s + 40_000, 30_000)
    path = write_chrome_trace(sc, tmp_path / "steps.pt.trace.json.gz")
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    mirrors = [
        {**e, "cat": "gpu_user_annotation", "pid": 0, "tid": 7, "args": {}}
        for e in trace["traceEvents"]
        if e.get("cat") == "user_annotation" and e["name"].startswith("Optimizer.step#")
    ]
    assert len(mirrors) == 3
    trace["traceEvents"] += mirrors
    with gzip.open(path, "wt") as f:
        json.dump(trace, f)
    loaded = load_trace(path)
    try:
        db = TraceDB(loaded.con)
        gpu_ranges = db.scalar(
            "SELECT count(*) FROM ranges WHERE name LIKE 'Optimizer.step#%' AND device_id = 0"
        )
        w = workload_of(db)
    finally:
        loaded.close()
    assert gpu_ranges == 3  # the mirrors are in the trace as GPU ranges
    assert w.kind == "training" and w.optimizer_steps == 3
    assert "3 optimizer steps" in w.kind_basis


@pytest.mark.corpus
def test_corpus_v100_training_counts_its_five_optimizer_steps(corpus: Path) -> None:
    """HTA's V100 trace profiles 5 steps (ProfilerStep#101-105), each with one SGD step
    recorded on the host and mirrored on the GPU, and one zero_grad: 5 optimizer steps."""
    loaded = load_trace(corpus / "torch/v100_train_single_rank_ns.pt.trace.json.gz")
    try:
        w = workload_of(TraceDB(loaded.con))
    finally:
        loaded.close()
    assert w.optimizer_steps == 5 and "5 optimizer steps" in w.kind_basis, w.kind_basis
