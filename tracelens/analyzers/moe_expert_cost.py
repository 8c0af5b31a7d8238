"""A mixture-of-experts layer's decode cost, from the expert weights its callees view.

A MoE operator's own inputs are its activations and router logits (vLLM's
``vllm::moe_forward``: ``[[32, 3072], [32, 32]]``, 32 tokens routed over 32 experts), so
its shapes alone cost nothing. The weights it reads are tensors its callees take before
the expert GEMMs run: in a vLLM capture of gpt-oss-20b on an MI300X, ``aten::view`` of
``[32, 1536, 5888]`` and ``[32, 1472, 3072]`` ``unsigned char`` (MXFP4, packed two
values a byte), one row per expert. With T tokens each choosing k of E experts, a call
reads the weights of the experts any token chose: E x (1 - (1 - k/E)^T) of them on
average under uniform routing (31.6 of 32 at T = 32, k = 4). Those bytes at the memory
efficiency the cost model judges every memory-bound kernel at are the call's ideal.

The estimate counts the recorded weight tensors only: block scales or biases the callees
do not take as separate inputs are left out (MXFP4's scales add about 6 %), so the ideal
is a little short and the saving a little long; skewed routing reads fewer experts than
uniform routing does, with the same effect. Both are said in the basis.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracelens.core.clipped import clipped
from tracelens.core.gpu_specs import GpuSpec
from tracelens.core.kernel_kinds import classify
from tracelens.core.op_cost import MATMUL, MOE_OPERATOR, dtype_of, parse_list, tensor_bytes
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_bytes, fmt_ns
from tracelens.derived.kernel_ops import REPLAY_OP_SPAN

if TYPE_CHECKING:  # the cost model calls this module: no import back at run time
    from tracelens.analyzers.cost_model import OpEstimate

# An expert's weights are at least this big: routing tables and token lists are not.
_MIN_EXPERT_BYTES = 1 << 20

# Each graph-replayed call of a MoE operator: its kernel time and kernels, with the
# shapes and callee tensors recorded when the graph was captured.
_REPLAYED_CALLS = f"""
WITH calls AS (
    SELECT op_id, any_value(capture_id) AS capture_id, sum(dur_ns) AS ns, count(*) AS kernels
    FROM kernel_ops WHERE op_id < 0 AND op_name = ? GROUP BY op_id
),
captured AS (
    SELECT DISTINCT capture_id, op_seq, input_shapes, callee_inputs FROM captured_launches
    WHERE op_seq IS NOT NULL AND op_name = ?
)
SELECT c.ns, c.kernels, cl.input_shapes, cl.callee_inputs
FROM calls c JOIN captured cl ON cl.capture_id = c.capture_id
 AND cl.op_seq = (-c.op_id) % {REPLAY_OP_SPAN}
"""


@dataclass(frozen=True)
class ExpertReads:
    """What one call of a MoE operator reads of its experts' weights."""

    nbytes: float  # all weight tensors, the experts the tokens choose
    per_tensor: list[float]  # the same per weight tensor, in the order the callees took them
    basis: str


def expert_reads(
    shapes_text: str | None, callees_text: str | None, scale_fraction: float = 0.0
) -> ExpertReads | None:
    """Bytes of expert weights one call reads, and how that was read, from the call's
    inputs (tokens x hidden activations and tokens x experts router logits) and its
    callees' tensors; None where they do not give tokens, experts, top-k and weights.
    ``scale_fraction``: block scales the kernels read beside the packed weights, as a
    share of their bytes (MXFP4: one byte per 32 values, 1/16), where not taken as
    inputs."""
    shapes = [s for s in parse_list(shapes_text) if _is_shape(s)]
    try:
        callees = json.loads(callees_text) if callees_text else []
    except ValueError:
        return None
    tensors = [
        (tuple(s), str(d))
        for s, d in (c for c in callees if isinstance(c, list) and len(c) == 2)
        if _is_shape(s)
    ]
    if not shapes or len(shapes[0]) != 2:
        return None
    tokens = shapes[0][0]
    # experts: the width of a tokens x E input that leads the callees' weight tensors
    for router in shapes[1:]:
        if len(router) != 2 or router[0] != tokens or router[1] < 2:
            continue
        experts = router[1]
        weights = {
            s: d
            for s, d in tensors
            if len(s) >= 3 and s[0] == experts and tensor_bytes(s, d) >= experts * _MIN_EXPERT_BYTES
        }
        # top-k: the expert ids chosen per token, an integer tokens x k tensor
        chosen = [
            s[1]
            for s, d in tensors
            if len(s) == 2
            and s[0] == tokens
            and 1 <= s[1] < experts
            and (dtype_of(d) or ("", 0))[0].startswith("int")
        ]
        if not weights or not chosen:
            continue
        k = chosen[0]
        sizes = [tensor_bytes(s, d) * (1 + scale_fraction) for s, d in weights.items()]
        total = sum(sizes)
        touched = experts * (1 - (1 - k / experts) ** tokens)
        dtypes = sorted({(dtype_of(d) or (d, 0))[0] for d in weights.values()})
        scales = (
            f", with MXFP4's block scales (1/{round(1 / scale_fraction)} of the packed bytes)"
            if scale_fraction
            else ""
        )
        how = (
            f"the expert weights its callees take ({', '.join(_shape(s) for s in weights)} "
            f"{'/'.join(dtypes)}{scales}: {fmt_bytes(total)} for {experts} experts); {tokens} "
            f"tokens choosing {k} of {experts} experts each read about {touched:.1f} of them a "
            "call under uniform routing (skewed routing reads fewer"
            + ("" if scale_fraction else ", and block scales not taken as inputs are left out")
            + ": the ideal is a little short)"
        )
        share = touched / experts
        return ExpertReads(total * share, [b * share for b in sizes], how)
    return None


def cost_moe_experts(
    db: TraceDB, t: Thresholds, spec: GpuSpec | None, ops: dict[str, OpEstimate]
) -> None:
    """Give each graph-replayed MoE operator the cost of reading its experts' weights
    (see the module), where the cost model found no cost for it from its shapes."""
    if spec is None or not spec.peaks.mem_gbps:
        return
    bandwidth = spec.peaks.mem_gbps * t.cost_memory_efficiency  # bytes per ns
    for name, est in sorted(ops.items()):
        if est.costed_ns or not MOE_OPERATOR.search(name):
            continue
        gemms = _gemm_kernels(db, name)
        # MXFP4 weights travel with one scale byte per 32 values, which the callees take
        # as a tensor of their own or not at all: counted where the kernels say MXFP4
        scale_fraction = 1 / 16 if any(_MXFP4.search(k) for k, _, _ in gemms) else 0.0
        calls = []
        read = None
        # every replay of a graph runs the same captured calls: each key is read once
        reads: dict[tuple[str | None, str | None], ExpertReads | None] = {}
        for ns, kernels, shapes_text, callees_text in db.rows(_REPLAYED_CALLS, [name, name]):
            key = (shapes_text, callees_text)
            if key not in reads:
                reads[key] = expert_reads(shapes_text, callees_text, scale_fraction)
            got = reads[key]
            if got is None:
                continue
            read = got
            ideal = min(
                float(ns), max(read.nbytes / bandwidth, int(kernels) * t.cost_min_kernel_ns)
            )
            calls.append((int(ns), read.nbytes, ideal))
        if not calls or read is None:
            continue
        by_kernel, shown = _by_kernel(gemms, read, len(calls))
        basis = read.basis + by_kernel
        # per call, as the cost model goes: a fast call offsets no slow one
        est.costed_ns = sum(ns for ns, _, _ in calls)
        est.bytes = sum(b for _, b, _ in calls)
        est.ideal_ns = sum(ideal for _, _, ideal in calls)
        est.impact_ns = sum(int(ns - ideal) for ns, _, ideal in calls)
        if scale_fraction and 0 < shown < est.impact_ns:
            # MX-scaled weights are unpacked in registers on a GPU without FP4 matrix
            # instructions (the MI300X): whether any kernel streams them at the roofline's
            # rate is not shown, the faster projection's rate is. Ranked on that; the
            # roofline's figure stays in the basis as the bound.
            basis += (
                f"; ranked on that {fmt_ns(int(shown))}: the roofline's "
                f"{fmt_ns(est.impact_ns)} assumes these packed weights stream at "
                f"{100 * t.cost_memory_efficiency:.0f}% of the bandwidth, a rate no kernel "
                "here reaches while unpacking them, so it is the most this layer could give "
                "back"
            )
            est.impact_ns = int(shown)
        est.kind = MATMUL  # no peak_tflops: judged by its bytes alone (packed weights)
        est.mem_gbps = spec.peaks.mem_gbps
        est.mem_eff = t.cost_memory_efficiency
        est.bytes_basis = basis


# The expert GEMM kernels of an operator, in launch order: (name, total ns, launches).
_GEMMS = """
SELECT kernel_name, sum(dur_ns) AS ns, count(*) AS n FROM kernel_ops
WHERE op_name = ? GROUP BY kernel_name ORDER BY min(krow)
"""

_MXFP4 = re.compile(r"(?i)mxfp4")


def _gemm_kernels(db: TraceDB, name: str) -> list[tuple[str, int, int]]:
    return [
        (str(k), int(ns), int(n))
        for k, ns, n in db.rows(_GEMMS, [name])
        if classify(str(k)).key == "gemm"
    ]


def _by_kernel(
    gemms: list[tuple[str, int, int]], read: ExpertReads, calls: int
) -> tuple[str, float]:
    """Each expert GEMM's share, where the kernels pair one to one with the weight
    tensors (launched in the order the callees took them: gate/up, then down): its bytes,
    its rate, and what the slower would save at the faster one's rate. Two projections
    of one layer read different shapes, and one kernel can be far slower than the other
    at the same job: the finding then names which."""
    # the longest GEMM kernels, one per weight tensor, in launch order (a finalize or
    # scatter kernel named for the matmul it completes is no expert GEMM)
    longest = sorted(sorted(gemms, key=lambda g: -g[1])[: len(read.per_tensor)], key=gemms.index)
    gemms = longest
    if len(gemms) != len(read.per_tensor) or len(gemms) < 2:
        return "", 0.0
    rates = []
    parts = []
    for (kernel, ns, n), per_call in zip(gemms, read.per_tensor, strict=True):
        if ns <= 0 or n != calls:
            return "", 0.0
        rate = per_call * n / ns  # bytes per ns = GB/s
        rates.append((rate, ns, per_call * n))
        parts.append(
            f"`{clipped(kernel, 48)}` {fmt_bytes(per_call)} a call at {rate / 1e3:.2f} TB/s"
        )
    fast = max(r for r, _, _ in rates)
    saving = sum(ns - nbytes / fast for r, ns, nbytes in rates if r < fast / 1.5)
    return (
        "; by kernel: "
        + ", ".join(parts)
        + (
            f"; the slower at the faster one's rate would take {fmt_ns(int(saving))} less, "
            "a saving this GPU has shown it reaches"
            if saving > 0
            else ""
        )
    ), saving


def _is_shape(s: object) -> bool:
    return isinstance(s, list | tuple) and bool(s) and all(isinstance(d, int) for d in s)


def _shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"
