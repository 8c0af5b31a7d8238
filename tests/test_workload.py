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
