"""AMD GPUs in ROCm's terms: workgroup grids, compute units, wavefronts, Matrix Cores.

ROCm's tracer records ``hipExtModuleLaunchKernel`` grids (hipBLASLt/Tensile GEMMs) as the
global work size in work-items, every other launch in workgroups; a device the trace lists
no properties for is the host's other GPU model. An MI300X user reading a finding about
SMs, warps or Nsight Compute is reading advice for someone else's GPU.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from ingest.loader import load_trace
from tracelens.analyzers import occupancy, run_all
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB

_NVIDIA_WORDS = re.compile(
    r"\bSMs?\b|\bwarps?\b|tensor cores|Nsight Compute|nvidia-smi|cudaMalloc|\bNCCL\b|cuBLAS"
)
_MI300X = {
    "id": 0,
    "name": "AMD Instinct MI300X",
    "totalGlobalMem": 206141652992,
    "computeMajor": 9,
    "computeMinor": 4,
    "warpSize": 64,
    "numSms": 304,
    "maxThreadsPerBlock": 1024,
}
GEMM = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN"
ADD = "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<float>>"


def _rocm_trace(path: Path) -> Path:
    """A PyTorch-on-ROCm capture: 20 steps of one GEMM (hipExtModuleLaunchKernel, grid in
    work-items: 32768 = 128 workgroups of 256) and one add (hipLaunchKernel, 36
    workgroups), on device 2, which ``deviceProperties`` does not list."""
    ev: list[dict] = []
    t = 1000.0
    for i in range(20):
        for j, (op, api, kernel, grid) in enumerate(
            [
                ("aten::mm", "hipExtModuleLaunchKernel", GEMM, [32768, 1, 1]),
                ("aten::add", "hipLaunchKernel", ADD, [36, 1, 1]),
            ]
        ):
            corr = 100 + 2 * i + j
            ext = 10 + 2 * i + j
            ev.append(
                {"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": t, "dur": 8,
                 "args": {"External id": ext, "Input Dims": [[512, 512], [512, 512]],
                          "Input type": ["c10::BFloat16", "c10::BFloat16"]}}
            )  # fmt: skip
            ev.append(
                {"ph": "X", "cat": "cuda_runtime", "name": api, "pid": 1, "tid": 1,
                 "ts": t + 1, "dur": 5, "args": {"correlation": corr, "External id": ext}}
            )  # fmt: skip
            ev.append(
                {"ph": "X", "cat": "kernel", "name": kernel, "pid": 2, "tid": 7, "ts": t + 10,
                 "dur": 40 if j == 0 else 20,
                 "args": {"device": 2, "stream": 0, "correlation": corr, "External id": ext,
                          "grid": grid, "block": [256, 1, 1], "kind": "Dispatch Kernel"}}
            )  # fmt: skip
            t += 70
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [_MI300X],
        "roctracer_version": 4,
        "hip_runtime_version": 60342134,
        "traceEvents": ev,
    }
    path.write_text(json.dumps(doc))
    return path


def test_hip_module_launch_grids_are_workgroups_and_the_device_is_sized(tmp_path: Path) -> None:
    loaded = load_trace(_rocm_trace(tmp_path / "rocm.json"))
    try:
        db = TraceDB(loaded.con)
        grids = dict(db.rows("SELECT DISTINCT name, grid_x FROM kernels"))
        dev = db.rows("SELECT device_id, name, sm_count, compute_capability FROM devices")
        info = db.info
        findings = run_all(db, Thresholds())
    finally:
        loaded.close()
    assert grids == {GEMM: 128, ADD: 36}  # 32768 work-items / 256; the add as recorded
    assert dev == [(2, "AMD Instinct MI300X", 304, "9.4")]
    # the listed device 0 is the GPU that ran (ROCm records its physical index, 2), not
    # an idle one beside it
    assert info.get("device_ids_renumbered") == "GPU 2 is the trace's visible device 0"
    assert "host_gpus_without_work" not in info
    by_kernel = {f.evidence["kernel"]: f for f in findings if f.analyzer == "occupancy"}
    gemm, add = by_kernel[GEMM], by_kernel[ADD]
    assert gemm.title.startswith(f"`{GEMM}` launches 128 workgroups on 304 compute units")
    assert "4 64-wide wavefronts each" in gemm.summary and "304-CU GPU" in gemm.summary
    assert "hipBLASLt" in gemm.advice and "PYTORCH_TUNABLEOP_ENABLED=1" in gemm.advice
    assert "before capture" not in gemm.advice  # eager work: no graphs to re-capture
    # an elementwise kernel is told to grow or fuse, never about split-K GEMMs
    assert "split-K" not in add.advice and "fuse" in add.advice
    assert add.title.startswith(f"`{ADD[:79]}") and "36 workgroups" in add.title
    for f in findings:
        text = " ".join((f.title, f.summary, f.advice, f.impact_basis))
        assert not _NVIDIA_WORDS.search(text), (f.analyzer, _NVIDIA_WORDS.search(text))


def test_nvidia_grids_keep_nvidia_words(scenario_db) -> None:
    from tracelens.testing.planted_device import SMALL_GRID_KERNEL, occupancy_problems

    found = occupancy.analyze(scenario_db(occupancy_problems()), Thresholds())
    (grid,) = [f for f in found if f.evidence.get("kernel") == SMALL_GRID_KERNEL]
    assert " blocks on " in grid.title and " SMs" in grid.title
    assert "32-wide warps" in grid.summary


# --- the real traces --------------------------------------------------------------------


def _raw_grids(path: Path) -> dict[int, list[int]]:
    """Correlation id -> the grid the file records for each hipExtModuleLaunchKernel kernel."""
    with gzip.open(path) as f:
        doc = json.load(f)
    ext = {
        e["args"]["correlation"]
        for e in doc["traceEvents"]
        if e.get("name") == "hipExtModuleLaunchKernel" and "correlation" in e.get("args", {})
    }
    return {
        e["args"]["correlation"]: [e["args"]["grid"], e["args"]["block"]]
        for e in doc["traceEvents"]
        if e.get("cat") == "kernel" and e.get("args", {}).get("correlation") in ext
    }


@pytest.mark.corpus
def test_corpus_bert_on_mi300x_speaks_rocm(corpus: Path) -> None:
    """BERT-small inference on an MI300X (kernels on device 2, properties listed for 0).

    Expert reading: a tiny, host-bound capture (the GPU idles three quarters of its window
    while Python runs); its kernels are also too small for 304 compute units: `attn_fwd`
    runs 16 workgroups (2 query tiles x 8 heads of one 141-token sequence), so 95 % of the
    CUs idle during 29 % of the kernel time, and the Tensile GEMMs run 192-288 workgroups.
    The grids as recorded say 73728 for those GEMMs: work-items, 288 workgroups of 256.
    Batching sequences is the lever; the idle-host finding stays first.
    """
    path = corpus / "engines/mi300_bert_small.json.gz"
    raw = _raw_grids(path)
    loaded = load_trace(path)
    try:
        db = TraceDB(loaded.con)
        got = dict(
            (c, g) for c, *g in db.rows("SELECT correlation_id, grid_x, block_x FROM kernels")
        )
        findings = run_all(db, Thresholds())
    finally:
        loaded.close()
    assert len(raw) == 26
    for corr, (grid, block) in raw.items():
        assert got[corr] == [grid[0] // block[0], block[0]]
    ranked = sorted(findings, key=lambda f: -f.impact_ns)
    assert ranked[0].analyzer == "idle_gpu"
    (attn,) = [f for f in findings if f.evidence.get("kernel") == "attn_fwd"]
    assert attn.evidence["median_blocks"] == 16 and attn.evidence["sm_count"] == 304
    # an encoder pass, 141 queries against 141 keys: batching sequences (or smaller query
    # tiles) is the lever; splitting the key/value length is for decoding's one query
    assert "141 queries to 141 keys" in attn.advice and "batch the requests" in attn.advice
    assert "split-KV" not in attn.advice
    for f in findings:
        text = " ".join((f.title, f.summary, f.advice, f.impact_basis))
        assert not _NVIDIA_WORDS.search(text), (f.analyzer, _NVIDIA_WORDS.search(text))
