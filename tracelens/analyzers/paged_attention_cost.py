"""Decode attention over a paged KV cache, costed from the engine's own step labels.

A decode step's attention reads each running request's whole KV cache: for every layer,
the context's keys and values. The operator's recorded inputs give the cache only as its
pool (SGLang passes the K and V buffers, ``[835874, 1, 8, 128]`` bf16 for Qwen3-8B on an
MI300X: every slot of the pool, not the ones a step reads), so its shapes alone cost
nothing. The serving engine's step label says how many context tokens the step's
requests hold (``sk32785``), and the pool says what one token weighs per layer (K and V,
heads x head size x element bytes). A step then reads about context tokens x that weight
for each call of the operator in it (one call a layer): at the memory efficiency the
cost model judges every memory-bound kernel at, that is the step's ideal attention time.

Only where the pool is among the inputs: vLLM's attention operator takes the layer's name
and finds its cache itself, so its KV dtype (FP8 caches are common) and any sliding window
are not in the trace, and it stays uncosted. A model whose layers read less than the whole
context (sliding windows) makes this ideal too long, so the saving is never overstated.
Only pure decode steps count: a mixed step's prefill attention is compute-bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracelens.core.gpu_specs import GpuSpec
from tracelens.core.op_cost import ATTENTION, dtype_of, parse_list
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_bytes
from tracelens.llm.engine_steps import engine_steps

if TYPE_CHECKING:  # the cost model calls this module: no import back at run time
    from tracelens.analyzers.cost_model import OpEstimate

# A KV pool holds at least this many token slots; activations of a decode batch do not.
_MIN_POOL_SLOTS = 4096

# Each attention operator's recorded calls (eager or captured for a graph) with their
# shapes and types, for the operators whose kernels ran inside pure decode steps.
_CANDIDATES = """
SELECT DISTINCT name, input_shapes, input_types FROM (
    SELECT o.name, o.input_shapes, o.input_types FROM cpu_ops o
    WHERE regexp_matches(lower(o.name), 'attention|attn') AND o.input_shapes IS NOT NULL
    UNION ALL
    SELECT op_name, input_shapes, input_types FROM captured_launches
    WHERE regexp_matches(lower(op_name), 'attention|attn') AND input_shapes IS NOT NULL
)
"""

# Per operator, per pure decode step: its kernel time and calls in the step's GPU span.
_IN_STEPS = """
SELECT s.step_id, s.context_tokens, sum(k.dur_ns) AS ns, count(*) AS kernels,
       count(DISTINCT k.op_id) AS calls
FROM engine_steps s JOIN kernel_ops k
  ON k.start_ns >= s.gpu_start_ns AND k.start_ns < s.gpu_end_ns
WHERE s.phase = 'decode' AND s.context_tokens > 0 AND k.op_name = ?
GROUP BY s.step_id, s.context_tokens ORDER BY s.step_id
"""


def kv_token_bytes(shapes_text: str | None, types_text: str | None) -> tuple[int, str] | None:
    """Bytes one token's keys and values take in one layer, from a K and a V pool among
    the inputs (two equal 4-D shapes ``[slots, page, heads, head size]`` of many slots),
    and how that was read; None where the inputs hold no such pool."""
    shapes, types = parse_list(shapes_text), parse_list(types_text)
    seen: dict[tuple[int, ...], int] = {}
    for i, shape in enumerate(shapes):
        if not (
            isinstance(shape, list) and len(shape) == 4 and all(isinstance(d, int) for d in shape)
        ):
            continue
        key = tuple(shape)
        if key in seen and shape[0] * shape[1] >= _MIN_POOL_SLOTS:
            dtype = dtype_of(str(types[i]) if i < len(types) else None)
            if dtype is None:
                return None
            heads, size = shape[2], shape[3]
            token = 2 * heads * size * dtype[1]
            return token, (
                f"K and V pools of {shape[0] * shape[1]:,} token slots, {heads} heads x "
                f"{size} {dtype[0]} each: {fmt_bytes(token)} per token a layer"
            )
        seen[key] = i
    return None


def cost_paged_decode_attention(
    db: TraceDB, t: Thresholds, spec: GpuSpec | None, ops: dict[str, OpEstimate]
) -> None:
    """Give each attention operator that ran in pure decode steps, and whose inputs hold
    its KV pools, the bytes those steps read (see the module), where the cost model found
    no cost for it from its shapes."""
    if spec is None or not spec.peaks.mem_gbps or engine_steps(db) is None:
        return
    per_token: dict[str, tuple[int, str]] = {}
    for name, shapes_text, types_text in db.rows(_CANDIDATES):
        est = ops.get(name)
        if est is None or est.costed_ns or name in per_token:
            continue
        kv = kv_token_bytes(shapes_text, types_text)
        if kv is not None:
            per_token[name] = kv
    bandwidth = spec.peaks.mem_gbps * t.cost_memory_efficiency  # bytes per ns
    for name, (token_bytes, how) in sorted(per_token.items()):
        steps = db.rows(_IN_STEPS, [name])
        if not steps:
            continue
        est = ops[name]
        # per step, as the cost model goes call by call: a fast step offsets no slow one
        ideals = [
            (
                int(s[2]),
                min(
                    float(s[2]),
                    max(
                        float(s[1]) * token_bytes * int(s[4]) / bandwidth,
                        int(s[3]) * t.cost_min_kernel_ns,
                    ),
                ),
            )
            for s in steps
        ]
        contexts = sorted(int(s[1]) for s in steps)
        est.costed_ns = sum(ns for ns, _ in ideals)
        est.bytes = sum(float(s[1]) * token_bytes * int(s[4]) for s in steps)
        est.ideal_ns = sum(ideal for _, ideal in ideals)
        est.impact_ns = sum(int(ns - ideal) for ns, ideal in ideals)
        est.kind = ATTENTION
        est.mem_gbps = spec.peaks.mem_gbps
        est.mem_eff = t.cost_memory_efficiency
        est.bytes_basis = (
            "the KV cache "
            + (
                "its one decode step reads"
                if len(steps) == 1
                else f"its {len(steps):,} decode steps read"
            )
            + f": {contexts[len(contexts) // 2]:,} context tokens"
            + (" in the median step" if len(steps) > 1 else "")
            + " by the engine's step labels, for each of its calls (one a layer); "
            + how
        )
