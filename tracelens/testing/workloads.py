"""A workload as the advice reads it, made by hand: for tests of advice text that need no
trace (what ``core.workload.workload_of`` would detect, given directly)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tracelens.core.workload import GpuInfo, Workload


def pytorch_workload(kind: str = "training", vendor: str = "nvidia", **fields: Any) -> Workload:
    """A PyTorch ``kind`` run on a ``vendor`` GPU of no named model, eager and without
    graphs unless ``fields`` (any other :class:`Workload` field) say otherwise."""
    gpu = GpuInfo(vendor=vendor, name=None, arch=None, compute_capability=None, tensor_dtypes=())
    training = kind == "training"
    base = Workload(
        kind=kind,
        kind_basis="",
        framework="pytorch",
        framework_basis="",
        gpu=gpu,
        torch_compile=False,
        cuda_graphs=False,
        attention=None,
        optimizer_steps=int(training),
        backward_ops=int(training),
    )
    return replace(base, **fields)
