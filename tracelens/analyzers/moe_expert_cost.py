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
import math
from typing import TYPE_CHECKING

from tracelens.core.gpu_specs import GpuSpec
from tracelens.core.op_cost import MATMUL, MOE_OPERATOR, dtype_of, parse_list
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_bytes
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


def expert_reads(shapes_text: str | None, callees_text: str | None) -> tuple[float, str] | None:
    """Bytes of expert weights one call reads, and how that was read, from the call's
    inputs (tokens x hidden activations and tokens x experts router logits) and its
    callees' tensors; None where they do not give tokens, experts, top-k and weights."""
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
            if len(s) >= 3 and s[0] == experts and _bytes(s, d) >= experts * _MIN_EXPERT_BYTES
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
        total = sum(_bytes(s, d) for s, d in weights.items())
        touched = experts * (1 - (1 - k / experts) ** tokens)
        dtypes = sorted({(dtype_of(d) or (d, 0))[0] for d in weights.values()})
        how = (
            f"the expert weights its callees take ({', '.join(_shape(s) for s in weights)} "
            f"{'/'.join(dtypes)}: {fmt_bytes(total)} for {experts} experts); {tokens} tokens "
            f"choosing {k} of {experts} experts each read about {touched:.1f} of them a call "
            "under uniform routing (skewed routing reads fewer, and block scales not taken "
            "as inputs are left out: the ideal is a little short)"
        )
        return total * touched / experts, how
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
        calls = []
        basis = None
        for ns, kernels, shapes_text, callees_text in db.rows(_REPLAYED_CALLS, [name, name]):
            read = expert_reads(shapes_text, callees_text)
            if read is None:
                continue
            nbytes, basis = read
            ideal = min(float(ns), max(nbytes / bandwidth, int(kernels) * t.cost_min_kernel_ns))
            calls.append((int(ns), nbytes, ideal))
        if not calls:
            continue
        # per call, as the cost model goes: a fast call offsets no slow one
        est.costed_ns = sum(ns for ns, _, _ in calls)
        est.bytes = sum(b for _, b, _ in calls)
        est.ideal_ns = sum(ideal for _, _, ideal in calls)
        est.impact_ns = sum(int(ns - ideal) for ns, _, ideal in calls)
        est.kind = MATMUL  # no peak_tflops: judged by its bytes alone (packed weights)
        est.mem_gbps = spec.peaks.mem_gbps
        est.mem_eff = t.cost_memory_efficiency
        est.bytes_basis = basis


def _is_shape(s: object) -> bool:
    return isinstance(s, list | tuple) and bool(s) and all(isinstance(d, int) for d in s)


def _bytes(shape: tuple[int, ...], dtype: str) -> int:
    size = dtype_of(dtype)
    return math.prod(shape) * size[1] if size else 0


def _shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"
