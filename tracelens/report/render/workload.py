"""The report's ``workload`` section in one line, as every renderer shows it."""

from __future__ import annotations

from tracelens.core.gpu_terms import terms_for
from tracelens.report.model import Workload

_FRAMEWORK = {
    "pytorch": "PyTorch",
    "tensorrt": "TensorRT",
    "jax": "JAX/XLA",
    "openmp_offload": "OpenMP offload",
    "cuda": "CUDA program",
    "hip": "HIP program",
    "unknown": "unknown framework",
}


def workload_line(w: Workload) -> str:
    """``training · PyTorch · V100 SXM2 (Volta; tensor cores: fp16) · CUDA graphs``."""
    gpu = w.gpu
    parts = [w.kind, _FRAMEWORK.get(w.framework, w.framework)]
    if gpu.model or gpu.arch:
        dtypes = ", ".join(gpu.tensor_core_dtypes) or "none"
        cores = terms_for(gpu.vendor).matrix_cores
        parts.append(f"{gpu.model or gpu.name} ({gpu.arch}; {cores}: {dtypes})")
    elif gpu.vendor:
        parts.append(f"{gpu.vendor.upper()} GPU (model not recorded)")
    if w.compiled.torch_compile:
        parts.append("torch.compile/Triton kernels")
    if w.compiled.cuda_graphs:
        parts.append(terms_for(gpu.vendor).graphs)
    if w.attention:
        parts.append(f"attention: {w.attention}")
    return " · ".join(parts)
