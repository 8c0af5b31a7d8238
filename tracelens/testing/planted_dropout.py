"""Planted training-mode case: an inference loop whose model was left in training mode.

Each step runs an add and, unless ``dropout`` is False, ``aten::native_dropout`` with its
30 µs kernel; ``batch_norm`` adds an ``aten::batch_norm`` call (its
``aten::native_batch_norm`` inside); ``training`` adds a backward operator and an optimizer
step, which makes the dropout expected.
"""

from __future__ import annotations

from tracelens.testing.planted_cost import A100, ADD
from tracelens.testing.scenario import Scenario

US = 1_000
MS = 1_000_000
DROPOUT_KERNEL = (
    "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, "
    "unsigned int, 1, 4, bool>(at::cuda::detail::TensorInfo<float const, unsigned int>)"
)
DROPOUT_KERNEL_NS = 30 * US


def dropout_in_inference(
    training: bool = False, dropout: bool = True, steps: int = 4, batch_norm: bool = False
) -> Scenario:
    sc = Scenario(name="planted_dropout_in_inference", devices=[A100])
    for k in range(steps):
        s = k * 2 * MS
        sc.range(f"ProfilerStep#{k}", s, 2 * MS)
        add = sc.op("aten::add", s + 10 * US, 20 * US, [[1024, 1024], [1024, 1024]])
        sc.launch(add, ADD, s + 15 * US, s + 100 * US, 500 * US)
        if dropout:
            drop = sc.op("aten::native_dropout", s + 40 * US, 20 * US, [[1024, 1024]])
            sc.launch(drop, DROPOUT_KERNEL, s + 45 * US, s + 700 * US, DROPOUT_KERNEL_NS)
        if batch_norm:
            sc.op("aten::batch_norm", s + 70 * US, 8 * US, [[1024, 1024]])
            sc.op("aten::native_batch_norm", s + 71 * US, 6 * US, [[1024, 1024]])
        if training:
            sc.op("AddBackward0", s + 80 * US, 10 * US)
            sc.op("Optimizer.step#SGD.step", s + 100 * US, 20 * US)
    return sc
