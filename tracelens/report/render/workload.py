"""The report's ``workload`` section in one line, as every renderer shows it."""

from __future__ import annotations

from typing import Any

_FRAMEWORK = {
    "pytorch": "PyTorch",
    "tensorrt": "TensorRT",
    "jax": "JAX/XLA",
    "openmp_offload": "OpenMP offload",
    "cuda": "CUDA program",
    "hip": "HIP program",
    "unknown": "unknown framework",
}


def workload_line(report: dict[str, Any]) -> str | None:
    """``training · PyTorch · V100 SXM2 (Volta; tensor cores: fp16) · CUDA graphs``."""
    w = report.get("workload")
    if not w:
        return None
    gpu = w["gpu"]
    parts = [w["kind"], _FRAMEWORK.get(w["framework"], w["framework"])]
    if gpu.get("model") or gpu.get("arch"):
        dtypes = ", ".join(gpu.get("tensor_core_dtypes") or []) or "none"
        parts.append(
            f"{gpu.get('model') or gpu.get('name')} ({gpu.get('arch')}; tensor cores: {dtypes})"
        )
    elif gpu.get("vendor"):
        parts.append(f"{gpu['vendor'].upper()} GPU (model not recorded)")
    compiled = w.get("compiled") or {}
    if compiled.get("torch_compile"):
        parts.append("torch.compile/Triton kernels")
    if compiled.get("cuda_graphs"):
        parts.append("HIP graphs" if gpu.get("vendor") == "amd" else "CUDA graphs")
    if w.get("attention"):
        parts.append(f"attention: {w['attention']}")
    return " · ".join(parts)
