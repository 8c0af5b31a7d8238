"""Per-operator cost: FLOPs and bytes against the GPU's roofline, and explicit attention.

For every operator call that launched kernels (``kernel_ops``) and whose recorded shapes
give its work (:mod:`tracelens.core.op_cost`), the *ideal* time is the longest of

- its FLOPs at ``efficiency x peak`` of the math it runs (the peak the clocks sustain:
  ``Arch.sustained_matrix`` of the sheet figure on MI300X) (FP16/BF16/FP8 tensor cores for
  those dtypes; for FP32 math the tensor-core rate the advice switches it to: TF32 from
  Ampere and on CDNA3, FP16 on Volta/Turing, the FP32 rate without tensor cores),
- its bytes at ``cost_memory_efficiency x`` the memory bandwidth,
- ``cost_min_kernel_ns`` per kernel it launched,

and its impact is the GPU time beyond the ideal: never negative, never more than its time.
A call whose longest kernel runs a grid that leaves at least ``occupancy_explain_idle_pct``
of the SMs without a block claims no impact: such a kernel is bound by latency (its
blocks' sequential loops), not by FLOPs or bytes spread over the whole GPU, so the roofline
gap is not what a faster kernel returns; the occupancy analyzer counts its idle SMs.
The bound resource is judged at the math the operator runs now (an FP32 convolution on a
V100 against the FP32 rate, not the FP16 tensor rate the advice would switch it to):
compute when its arithmetic intensity is at or above the ridge point ``peak / bandwidth``.
Without a known GPU there are no peaks and no estimate. FLOPs that imply a rate above the
GPU's fastest math for the dtype (``ceiling_tflops``) are overcounted: such an operator
reports no achieved rate, no bound and no impact (``flops_uncertain``).

A convolution's output size is read off the operators that start after it ends (its
consumer's first input), checked against the input and kernel sizes (``_conv_out``); its
own children read its input and are never taken for the output.

Explicit attention: in one parent call, a batched matmul [.., L, d] x [.., d, S], then a
softmax over [.., L, S], then a matmul [.., L, S] x [.., S, dv] is attention written out.
Its time (every kernel launched from the first matmul to the second, scaling and masking
included) against a fused kernel's (the FLOPs of QKᵀ and PV at
``cost_attention_efficiency``, the bytes of Q, K, V and the output: no L x S matrix in
memory) is its impact. The calls it covers are claimed: no per-operator estimate counts
them again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ingest.schema import sql_list
from tracelens.analyzers.moe_expert_cost import cost_moe_experts
from tracelens.analyzers.paged_attention_cost import cost_paged_decode_attention
from tracelens.core.gemm_alignment import GemmDims, off_multiple, required_multiple
from tracelens.core.gpu_specs import GpuSpec
from tracelens.core.op_cost import (
    ATTENTION,
    ATTENTION_OPS,
    CONV,
    CONV_BWD_WEIGHT,
    CONV_BWD_WITH_WEIGHT,
    MATMUL,
    MEMORY,
    AttentionShape,
    attention_rate_share,
    op_cost,
    parse_list,
)
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import workload_of
from tracelens.derived import require
from tracelens.derived.kernel_ops import KERNEL_OPS, REPLAY_OP_SPAN

_MATH_KINDS = (MATMUL, CONV, ATTENTION)


@dataclass
class OpEstimate:
    """One operator's work, aggregated over the calls whose shapes gave it."""

    op_name: str
    gpu_ns: int = 0  # all kernel time of the operator
    costed_ns: int = 0  # kernel time of the calls with a cost, not claimed by attention
    claimed_ns: int = 0  # kernel time claimed by explicit attention
    flops: float = 0.0
    bytes: float = 0.0
    ideal_ns: float = 0.0
    impact_ns: int = 0
    kind: str | None = None
    # kernel time of costed calls whose grid leaves most SMs idle: no roofline gap claimed
    grid_bound_ns: int = 0
    # kernel time of all its calls (costed or not) whose grid leaves most of the GPU idle
    grid_bound_gpu_ns: int = 0
    dtypes: set[str] = field(default_factory=set)
    math: str | None = None  # the peak used: "bf16 tensor", "fp32", ...
    peak_tflops: float | None = None
    # the rate of the math it runs now (FP32 on CUDA cores for FP32 operators): what the
    # bound resource is judged against, while the ideal uses the advised math
    now_tflops: float | None = None
    mem_gbps: float | None = None
    # the fastest rate the GPU has for its dtypes (the sheet figure, TF32 included for
    # FP32 data where the GPU has it): no kernel runs faster, so FLOPs implying more are
    # an estimate gone wrong (a misread output size), not a fast kernel
    ceiling_tflops: float | None = None
    # the efficiencies its math and its bytes are judged at (thresholds)
    math_eff: float = 1.0
    mem_eff: float = 1.0
    # kernel time of its GEMM calls whose K and N the shapes give, and of those off the
    # multiple tensor cores want (:mod:`tracelens.core.gemm_alignment`), with the first one
    gemm_known_ns: int = 0
    gemm_unaligned_ns: int = 0
    gemm_multiple: int = 8
    gemm_example: str | None = None
    # where its bytes come from, where not from its shapes (a paged KV cache's reads)
    bytes_basis: str | None = None
    # a fused attention operator's lowest share of the long-sequence rate over its calls
    # (``op_cost.attention_rate_share``) and the call shape that has it; None where its
    # calls all reach the plateau or it is no fused attention
    rate_share: float | None = None
    rate_shape: AttentionShape | None = None
    # every share its attention calls reach (one value where its calls are alike)
    rate_shares: set[float] = field(default_factory=set)

    @property
    def gemm_dims(self) -> GemmDims | None:
        """What its shapes say of its GEMMs' dimensions; None where they say nothing."""
        if not self.gemm_known_ns:
            return None
        return GemmDims(
            self.gemm_known_ns, self.gemm_unaligned_ns, self.gemm_multiple, self.gemm_example
        )

    @property
    def estimated_tflops(self) -> float | None:
        """FLOPs over kernel time, whatever the GPU can do."""
        return self.flops / self.costed_ns / 1e3 if self.costed_ns and self.flops else None

    @property
    def flops_uncertain(self) -> bool:
        """The FLOPs imply a rate above the GPU's peak: they are overcounted."""
        rate = self.estimated_tflops
        return bool(rate and self.ceiling_tflops and rate > self.ceiling_tflops)

    @property
    def achieved_tflops(self) -> float | None:
        """The rate the kernels achieved; None where the FLOPs cannot be right."""
        return None if self.flops_uncertain else self.estimated_tflops

    @property
    def achieved_gbps(self) -> float | None:
        return self.bytes / self.costed_ns if self.costed_ns and self.bytes else None

    @property
    def intensity(self) -> float | None:
        return self.flops / self.bytes if self.bytes else None

    @property
    def bound(self) -> str | None:
        """Which resource's time is the longer at the realistic efficiencies the ideal is
        judged at (the ridge of the derated roofs): the same term that sets the ideal, so a
        basis reading "ideal 538 µs" from its math never calls the operator memory-bound."""
        if not self.costed_ns or self.flops_uncertain:
            return None
        if self.kind == MEMORY or not self.peak_tflops or not self.mem_gbps:
            return "memory"
        math = (self.now_tflops or self.peak_tflops) * self.math_eff
        ridge = math * 1e3 / (self.mem_gbps * self.mem_eff)  # FLOP per byte
        return "compute" if (self.intensity or 0.0) >= ridge else "memory"

    def evidence(self) -> dict:
        return {
            "flops": round(self.flops),
            "bytes": round(self.bytes),
            "costed_ns": self.costed_ns,
            "achieved_tflops": _r(self.achieved_tflops),
            "flops_uncertain": self.flops_uncertain,
            "achieved_gbps": _r(self.achieved_gbps),
            "arithmetic_intensity": _r(self.intensity),
            "bound": self.bound,
            "peak_used": self.math,
            "peak_tflops": self.peak_tflops,
            "running_peak_tflops": self.now_tflops,
            "memory_gbps": self.mem_gbps,
            "ideal_ns": round(self.ideal_ns),
            "grid_bound_ns": self.grid_bound_ns,
            "dtypes": sorted(self.dtypes),
        }


@dataclass
class AttentionSite:
    parent: str
    batch_heads: int
    lq: int
    s: int
    d: int
    dtype: str
    calls: int
    gpu_ns: int
    fused_ns: float
    op_ids: list[int]

    @property
    def impact_ns(self) -> int:
        return int(max(0.0, min(self.gpu_ns, self.gpu_ns - self.fused_ns)))


@dataclass
class CostTables:
    spec: GpuSpec | None
    ops: dict[str, OpEstimate]
    attention: list[AttentionSite]
    claimed_op_ids: set[int]


def cost_tables(db: TraceDB, t: Thresholds) -> CostTables:
    """The per-operator estimates and explicit-attention sites, computed once per TraceDB
    and set of cost thresholds."""
    key = (
        t.cost_gemm_efficiency,
        t.cost_conv_efficiency,
        t.cost_attention_efficiency,
        t.cost_memory_efficiency,
        t.cost_min_kernel_ns,
        t.occupancy_explain_idle_pct,
    )
    return db.memo(("cost_tables", key), lambda: _with_paged_attention(db, t, _build(db, t)))


def _with_paged_attention(db: TraceDB, t: Thresholds, tables: CostTables) -> CostTables:
    """The estimates, with decode attention over a paged KV cache costed from the engine's
    step labels, and graph-replayed MoE layers from their experts' weights, where the
    shapes gave them no cost."""
    cost_paged_decode_attention(db, t, tables.spec, tables.ops)
    cost_moe_experts(db, t, tables.spec, tables.ops)
    return tables


def math_efficiency(kind: str | None, t: Thresholds) -> tuple[float, str]:
    """The share of the math peak an operator of ``kind`` is judged at, and its threshold
    (1.0 and no name for memory-bound kinds)."""
    return {
        MATMUL: (t.cost_gemm_efficiency, "cost_gemm_efficiency"),
        CONV: (t.cost_conv_efficiency, "cost_conv_efficiency"),
        ATTENTION: (t.cost_attention_efficiency, "cost_attention_efficiency"),
    }.get(kind or "", (1.0, ""))


def math_peak(spec: GpuSpec, kind: str, dtype: str) -> tuple[str, float] | None:
    """(label, TFLOP/s) of the math an operator of ``kind`` and ``dtype`` runs, or should."""
    p = spec.peaks
    if kind == MEMORY:
        return ("fp32", p.fp32)
    sustained = spec.arch.sustained_matrix
    if dtype in ("fp16", "bf16", "fp8"):
        rate = {"fp16": p.fp16, "bf16": p.bf16, "fp8": p.fp8}[dtype]
        return (f"{dtype} tensor", rate * sustained) if rate else ("fp32", p.fp32)
    if dtype == "fp32":
        if p.tf32 and spec.has_tensor("tf32"):
            return ("tf32 tensor (FP32 math switched to TF32)", p.tf32 * sustained)
        if p.fp16 and spec.has_tensor("fp16"):
            return ("fp16 tensor (FP32 math switched to FP16 autocast)", p.fp16 * sustained)
        return ("fp32", p.fp32)
    return None


def ceiling_tflops(spec: GpuSpec, dtype: str) -> float | None:
    """The sheet peak of the fastest math data of ``dtype`` can run on this GPU."""
    p = spec.peaks
    if dtype == "fp32":
        return max(p.fp32, p.tf32 or 0.0) if spec.has_tensor("tf32") else p.fp32
    rate = {"fp16": p.fp16, "bf16": p.bf16, "fp8": p.fp8}.get(dtype)
    return rate or (p.fp32 if dtype in ("fp16", "bf16", "fp8") else None)


def _r(v: float | None) -> float | None:
    return round(v, 3) if v is not None else None


_CALLS = f"""
WITH calls AS (
    SELECT op_id, any_value(capture_id) AS capture_id, sum(dur_ns) AS ns,
           count(*) AS kernels
    FROM kernel_ops WHERE op_id IS NOT NULL GROUP BY op_id
),
captured AS (
    SELECT DISTINCT capture_id, op_seq, op_name, input_shapes, input_types
    FROM captured_launches WHERE op_seq IS NOT NULL
)
SELECT o.name, o.input_shapes, o.input_types, c.op_id, c.ns, c.kernels,
       p.input_shapes AS parent_shapes,
       -- an attention call's scalars say its mask; other calls' would only split keys
       CASE WHEN o.name IN ({sql_list(ATTENTION_OPS)}) THEN o.concrete_inputs END AS scalars
FROM calls c JOIN cpu_ops o ON o.op_id = c.op_id
-- a weight gradient's weight shape is its backward parent's third input
LEFT JOIN cpu_ops p ON p.op_id = o.parent_id
 AND o.name IN ({sql_list(CONV_BWD_WEIGHT)})
 AND p.name IN ({sql_list(CONV_BWD_WITH_WEIGHT)})
UNION ALL
-- a graph replay's operator call: the shapes recorded when the graph was captured, which
-- every replay runs (replay op ids are minus (replay * 2^20 + position in the capture))
SELECT cl.op_name, cl.input_shapes, cl.input_types, c.op_id, c.ns, c.kernels,
       NULL AS parent_shapes, NULL AS scalars
FROM calls c JOIN captured cl ON cl.capture_id = c.capture_id
 AND cl.op_seq = (-c.op_id) % {REPLAY_OP_SPAN}
WHERE c.op_id < 0
"""

# The calls the per-key costs apply to: every call of _CALLS but those explicit attention
# claimed, with its convolution output (``"56,56"``) where one was read.
_COSTED_CALLS = f"""
SELECT c.name, c.input_shapes, c.input_types, co.out_text, c.parent_shapes, c.scalars,
       c.op_id, c.ns, c.kernels
FROM ({_CALLS}) c LEFT JOIN cost_conv_out co ON co.op_id = c.op_id
WHERE NOT EXISTS (SELECT 1 FROM cost_claimed x WHERE x.op_id = c.op_id)
"""

# The distinct call keys, numbered in the order of their first call: eager calls by op id,
# then graph replays' calls (negative ids) by replay and position.
_CALL_KEYS = f"""
CREATE OR REPLACE TEMP TABLE cost_keys AS
SELECT row_number() OVER (ORDER BY first) AS key_id,
       name, input_shapes, input_types, out_text, parent_shapes, scalars
FROM (
    SELECT name, input_shapes, input_types, out_text, parent_shapes, scalars,
           min(CASE WHEN op_id >= 0 THEN op_id ELSE {2**62} - op_id END) AS first
    FROM ({_COSTED_CALLS}) GROUP BY ALL
)
"""

# Per operator, the sums over its costed calls of what each call's key costs: parameters
# are the costed keys' ids, compute and memory times, FLOPs, bytes and GEMM alignment (1
# for K or N off the multiple, 0 for both on it, -1 for no GEMM; one list each), then the
# least time a kernel takes. A call's ideal is the longest of its compute time,
# memory time and kernels x that least time, never more than its own time; its impact is
# its time beyond the ideal (whole nanoseconds, truncated per call), none for calls whose
# grid leaves most SMs idle.
_CALL_SUMS = f"""
WITH costs AS (
    SELECT unnest(?::BIGINT[]) AS key_id, unnest(?::DOUBLE[]) AS compute_ns,
           unnest(?::DOUBLE[]) AS memory_ns, unnest(?::DOUBLE[]) AS flops,
           unnest(?::DOUBLE[]) AS nbytes, unnest(?::DOUBLE[]) AS unaligned
),
per AS (
    SELECT c.name, c.ns, g.op_id IS NOT NULL AS grid_bound, k.flops, k.nbytes, k.unaligned,
           greatest(k.compute_ns, k.memory_ns, c.kernels * ?::DOUBLE) AS ideal
    FROM ({_COSTED_CALLS}) c
    JOIN cost_keys ck ON ck.name = c.name
     AND ck.input_shapes IS NOT DISTINCT FROM c.input_shapes
     AND ck.input_types IS NOT DISTINCT FROM c.input_types
     AND ck.out_text IS NOT DISTINCT FROM c.out_text
     AND ck.parent_shapes IS NOT DISTINCT FROM c.parent_shapes
     AND ck.scalars IS NOT DISTINCT FROM c.scalars
    JOIN costs k ON k.key_id = ck.key_id
    LEFT JOIN cost_grid_bound g ON g.op_id = c.op_id
)
SELECT name, sum(ns), sum(flops), sum(nbytes), sum(least(ideal, ns::DOUBLE)),
       coalesce(sum(ns) FILTER (WHERE grid_bound), 0),
       coalesce(sum(CAST(trunc(greatest(0.0, ns::DOUBLE - ideal)) AS BIGINT))
                FILTER (WHERE NOT grid_bound), 0),
       coalesce(sum(ns) FILTER (WHERE unaligned >= 0), 0),
       coalesce(sum(ns) FILTER (WHERE unaligned > 0), 0)
FROM per GROUP BY name ORDER BY name
"""


def _call_inputs(db: TraceDB, claimed: set[int], conv_out: dict[int, list[int] | None]) -> None:
    """The Python-side facts _COSTED_CALLS reads, as parameter tables: the op ids explicit
    attention claimed and the convolution outputs read off neighbouring operators."""
    outs = [(op_id, out) for op_id, out in conv_out.items() if out]
    db.con.execute(
        "CREATE OR REPLACE TEMP TABLE cost_claimed AS SELECT unnest(?::BIGINT[]) AS op_id",
        [sorted(claimed)],
    )
    db.con.execute(
        "CREATE OR REPLACE TEMP TABLE cost_conv_out AS "
        "SELECT unnest(?::BIGINT[]) AS op_id, unnest(?::VARCHAR[]) AS out_text",
        [[op_id for op_id, _ in outs], [",".join(str(v) for v in out) for _, out in outs]],
    )


# Calls whose longest kernel's grid fills at most the given share of the device's SMs
# (grids are recorded by Kineto and ROCm's tracer; others leave them NULL).
_GRID_BOUND_CALLS = """
WITH k AS (
    SELECT ko.op_id, ko.op_name, ko.dur_ns, d.sm_count,
           greatest(coalesce(k.grid_x, 1), 1) * greatest(coalesce(k.grid_y, 1), 1)
             * greatest(coalesce(k.grid_z, 1), 1) AS blocks
    FROM kernel_ops ko
    JOIN kernels k ON k.device_id = ko.device_id AND k.start_ns = ko.start_ns
                  AND k.name = ko.kernel_name
    JOIN devices d ON d.device_id = ko.device_id
    WHERE ko.op_id IS NOT NULL AND k.grid_x IS NOT NULL AND d.sm_count > 0
)
SELECT op_id, any_value(op_name) AS op_name, sum(dur_ns) AS ns FROM k GROUP BY op_id
HAVING arg_max(blocks, dur_ns) <= ? * any_value(sm_count)
"""

_CONV_NAMES = (
    "'aten::convolution', 'aten::_convolution', 'aten::cudnn_convolution', "
    "'aten::miopen_convolution', 'aten::conv2d', 'aten::conv1d', 'aten::conv3d'"
)
# The output of a convolution is the first input of one of the next operators on its thread
# (its bias add, batch norm, activation): the shapes do not record stride or padding. Only
# operators that begin once the convolution has ended can be its consumers: its own
# children (``aten::_convolution`` inside ``aten::convolution``, the ``contiguous`` of its
# input) read its input, which for a stride-2 convolution with as many output as input
# channels has the batch and channel counts of the output at 4x its area. Rows whose first
# input is no tensor of 3 or more dimensions are left out first: they cannot be an output.
_CONV_NEXT = f"""
WITH o AS (
    SELECT op_id, name, input_shapes, start_ns, end_ns, depth,
           list([start_ns, depth]) OVER w AS nxt_at,
           list(input_shapes) OVER w AS nxt
    FROM cpu_ops
    WHERE input_shapes IS NOT NULL
      AND (name IN ({_CONV_NAMES}) OR regexp_matches(input_shapes, '^\\[\\[ *\\d+, *\\d+, *\\d+'))
    WINDOW w AS (PARTITION BY pid, tid ORDER BY start_ns, op_id
                 ROWS BETWEEN 1 FOLLOWING AND 16 FOLLOWING)
)
SELECT op_id, input_shapes, end_ns, depth, nxt_at, nxt FROM o
WHERE name IN ({_CONV_NAMES}) AND op_id IN (SELECT op_id FROM kernel_ops)
"""
# Following operators read for the output: the consumer comes first, later ones may read
# any tensor of the same batch and channel count.
_CONV_CONSUMERS = 8


def _plausible_out(x: int, out: int, k: int) -> bool:
    """``out`` is a convolution output size of input size ``x`` and kernel size ``k`` at
    dilation 1 for some stride up to ``max(k, 2)`` and padding up to ``k - 1``: what a
    shape read off a neighbouring operator must satisfy before it is taken as the output.
    """
    if out == x:  # "same" padding at stride 1, also for dilated kernels
        return True
    return any(
        (x + 2 * p - k) // s + 1 == out
        for s in range(1, max(k, 2) + 1)
        for p in range(k)
        if x + 2 * p >= k
    )


def _conv_out(
    shapes_text: str,
    nxt: list[str] | None,
    nxt_at: list[list[int]] | None = None,
    end_ns: int | None = None,
    depth: int | None = None,
) -> list[int] | None:
    """The output spatial size of a convolution call, read off the operators after it.

    ``nxt_at`` holds each following operator's ``[start_ns, depth]``; an operator that
    starts before the convolution ends (at the same time only when it is no deeper) is
    inside it and is skipped. None where no consumer gives a plausible output: the FLOPs
    are then unknown, not guessed.
    """
    shapes = parse_list(shapes_text)
    if len(shapes) < 2 or not isinstance(shapes[0], list) or not isinstance(shapes[1], list):
        return None
    x, w = shapes[0], shapes[1]
    if len(x) < 3 or len(w) != len(x):
        return None
    seen = 0
    for i, text in enumerate(nxt or []):
        if nxt_at is not None and end_ns is not None and i < len(nxt_at):
            start, d = nxt_at[i]
            if start < end_ns or (start == end_ns and depth is not None and d > depth):
                continue
        seen += 1
        if seen > _CONV_CONSUMERS:
            break
        cand = parse_list(text)
        first = cand[0] if cand and isinstance(cand[0], list) else None
        if not first or len(first) != len(x) or first[0] != x[0] or first[1] != w[0]:
            continue
        out = [int(v) for v in first[2:]]
        if all(_plausible_out(xi, oi, ki) for xi, oi, ki in zip(x[2:], out, w[2:], strict=True)):
            return out
    return None


def _build(db: TraceDB, t: Thresholds) -> CostTables:
    spec = workload_of(db).gpu.spec
    if not db.scalar("SELECT count(*) FROM kernels"):
        return CostTables(spec, {}, [], set())
    require(db, KERNEL_OPS)
    has_shapes = bool(
        db.scalar(
            """SELECT (SELECT count(*) FROM cpu_ops WHERE input_shapes IS NOT NULL LIMIT 1)
                    + (SELECT count(*) FROM captured_launches
                       WHERE input_shapes IS NOT NULL LIMIT 1)"""
        )
    )
    ops: dict[str, OpEstimate] = {}
    for name, ns in db.rows("SELECT op_name, sum(dur_ns) FROM kernel_ops GROUP BY op_name"):
        ops[name] = OpEstimate(name, gpu_ns=int(ns))
    # Which calls are latency-bound follows from their grids alone, so it is known with
    # shapes or without: hot_ops claims no saving for them either way (the occupancy
    # finding counts their idle SMs), and a trace with shapes and one without agree.
    db.con.execute(
        f"CREATE OR REPLACE TEMP TABLE cost_grid_bound AS {_GRID_BOUND_CALLS}",
        [1 - t.occupancy_explain_idle_pct / 100.0],
    )
    for name, ns in db.rows(
        "SELECT op_name, sum(ns) FROM cost_grid_bound GROUP BY op_name ORDER BY op_name"
    ):
        if name in ops:
            ops[name].grid_bound_gpu_ns += int(ns)
    if not has_shapes:
        return CostTables(spec, ops, [], set())
    attention = _explicit_attention(db, t, spec)
    claimed = {i for site in attention for i in site.op_ids}
    conv_out: dict[int, list[int] | None] = {}
    if db.scalar(f"SELECT count(*) FROM cpu_ops WHERE name IN ({_CONV_NAMES})"):
        for op_id, shapes_text, end_ns, depth, nxt_at, nxt in db.rows(_CONV_NEXT):
            conv_out[int(op_id)] = _conv_out(shapes_text, nxt, nxt_at, end_ns, depth)
    # What follows from a call's operator, shapes and types alone (its cost, the peak it
    # is judged at, its compute and memory times) is worked out once per distinct key in
    # Python: a million calls repeat a few thousand keys. The per-call sums then run in
    # SQL (:data:`_CALL_SUMS`), so no call crosses into Python. What a key adds to its
    # operator besides the sums (its dtype, the fastest math, the kind the operator is
    # shown as) is applied in the order of the key's first call (eager calls by op id,
    # then replays): repeating it for the same key changes nothing.
    _call_inputs(db, claimed, conv_out)
    if claimed:
        for name, ns in db.rows(
            f"SELECT name, sum(ns) FROM ({_CALLS}) WHERE op_id IN "
            "(SELECT op_id FROM cost_claimed) GROUP BY name ORDER BY name"
        ):
            ops.setdefault(name, OpEstimate(name)).claimed_ns += int(ns)
    db.con.execute(_CALL_KEYS)
    key_ids: list[int] = []
    sums_of_keys: list[tuple[float, float, float, float, float]] = []
    amd = workload_of(db).amd
    for key_id, name, shapes_text, types_text, out_text, parent_text, scalars in db.iter_rows(
        "SELECT * FROM cost_keys ORDER BY key_id"
    ):
        est = ops.get(name)
        if est is None:
            est = ops[name] = OpEstimate(name)
        out = [int(v) for v in out_text.split(",")] if out_text else None
        sums = _first_of_key(
            est, spec, t, name, shapes_text, types_text, out, parent_text, scalars, amd
        )
        if sums is not None:
            key_ids.append(key_id)
            sums_of_keys.append(sums)
    if not key_ids:
        return CostTables(spec, ops, attention, claimed)
    columns = [[float(v) for v in column] for column in zip(*sums_of_keys, strict=True)]
    for name, ns, flops, nbytes, ideal, grid_ns, impact, gemm_ns, unaligned_ns in db.rows(
        _CALL_SUMS, [key_ids, *columns, float(t.cost_min_kernel_ns)]
    ):
        est = ops[name]
        est.gemm_known_ns += int(gemm_ns)
        est.gemm_unaligned_ns += int(unaligned_ns)
        est.costed_ns += int(ns)
        est.flops += flops
        est.bytes += nbytes
        est.ideal_ns += ideal
        est.grid_bound_ns += int(grid_ns)
        est.impact_ns += int(impact)
    return CostTables(spec, ops, attention, claimed)


def _first_of_key(
    est: OpEstimate,
    spec: GpuSpec | None,
    t: Thresholds,
    name: str,
    shapes_text: str | None,
    types_text: str | None,
    out: list[int] | None,
    parent_text: str | None = None,
    scalars_text: str | None = None,
    amd: bool = False,
) -> tuple[float, float, float, float, float] | None:
    """A call key's compute and memory times, FLOPs, bytes and GEMM alignment (None: not
    costed), applying what the key tells of its operator ``est``: its dtype, the fastest
    math for it, the kind the operator is shown as (its first math kind, else memory), and
    the first GEMM dimension off the multiple tensor cores want."""
    parent = parse_list(parent_text)
    weight = parent[2] if len(parent) > 2 and isinstance(parent[2], list) else None
    cost = op_cost(
        name,
        parse_list(shapes_text),
        parse_list(types_text),
        out,
        weight,
        parse_list(scalars_text),
    )
    if cost is None or spec is None:
        return None
    # Shapes no tensor can have (1e308 x 0) give infinite or undefined work: not a cost
    # to judge, and NaN has no order for the per-call sums to compare against.
    if not (math.isfinite(cost.flops) and math.isfinite(cost.bytes)):
        return None
    peak = math_peak(spec, cost.kind, cost.dtype)
    if peak is None:
        return None
    label, tflops = peak
    eff = math_efficiency(cost.kind, t)[0]
    if cost.attention is not None:
        share = attention_rate_share(cost.attention)
        eff *= share
        est.rate_shares.add(round(share, 4))
        if share < 1.0 and (est.rate_share is None or share < est.rate_share):
            est.rate_share, est.rate_shape = share, cost.attention
    compute_ns = cost.flops / (eff * tflops * 1e3) if cost.kind in _MATH_KINDS else 0.0
    memory_ns = cost.bytes / (t.cost_memory_efficiency * spec.peaks.mem_gbps)
    est.dtypes.add(cost.dtype)
    if cost.kind in _MATH_KINDS and (top := ceiling_tflops(spec, cost.dtype)):
        est.ceiling_tflops = max(est.ceiling_tflops or 0.0, top)
    if est.kind is None or (est.kind == MEMORY and cost.kind != MEMORY):
        est.kind = cost.kind
        est.math = label if cost.kind in _MATH_KINDS else None
        est.peak_tflops = tflops if cost.kind in _MATH_KINDS else None
        est.now_tflops = (
            (spec.peaks.fp32 if cost.dtype == "fp32" else tflops)
            if cost.kind in _MATH_KINDS
            else None
        )
    est.mem_gbps = spec.peaks.mem_gbps
    est.math_eff = math_efficiency(est.kind, t)[0] * (est.rate_share or 1.0)
    est.mem_eff = t.cost_memory_efficiency
    unaligned = -1.0
    if cost.kn is not None:
        est.gemm_multiple = required_multiple(cost.dtype, amd)
        off = off_multiple(cost.kn, est.gemm_multiple)
        unaligned = 1.0 if off else 0.0
        if off and est.gemm_example is None:
            est.gemm_example = off
    return compute_ns, memory_ns, cost.flops, cost.bytes, unaligned


_ATTN_OPS = """
SELECT o.op_id, o.name, o.input_shapes, o.input_types, o.pid, o.tid, o.start_ns, o.end_ns,
       o.parent_id, coalesce(p.name, '(top level)') AS parent
FROM cpu_ops o LEFT JOIN cpu_ops p ON p.op_id = o.parent_id
WHERE o.name IN ('aten::bmm', 'aten::matmul', 'aten::softmax', 'aten::_softmax')
  AND coalesce(p.name, '') NOT IN ('aten::matmul', 'aten::softmax')
-- Only a softmax and its two neighbours can form the matmul-softmax-matmul triple, so the
-- other calls need not reach Python (a model's every Linear on 3-d input is an
-- aten::matmul). A softmax's neighbours are kept, so the triples, and the greedy matching
-- over them, are the same as over the whole sequence.
WINDOW w AS (PARTITION BY o.pid, o.tid, o.parent_id ORDER BY o.start_ns, o.op_id)
QUALIFY coalesce(o.name IN ('aten::softmax', 'aten::_softmax')
                 OR lag(o.name IN ('aten::softmax', 'aten::_softmax')) OVER w
                 OR lead(o.name IN ('aten::softmax', 'aten::_softmax')) OVER w, false)
ORDER BY o.pid, o.tid, o.parent_id NULLS FIRST, o.start_ns, o.op_id
"""


def _explicit_attention(db: TraceDB, t: Thresholds, spec: GpuSpec | None) -> list[AttentionSite]:
    rows = db.dicts(_ATTN_OPS)
    if not rows:
        return []
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["pid"], r["tid"], r["parent_id"]), []).append(r)
    found: list[tuple[dict, dict, dict]] = []
    for seq in groups.values():
        i = 0
        while i + 2 < len(seq):
            a, sm, b = seq[i], seq[i + 1], seq[i + 2]
            if _is_attention(a, sm, b):
                found.append((a, sm, b))
                i += 3
            else:
                i += 1
    if not found:
        return []
    spans = _span_kernels(
        db, [(a["pid"], a["tid"], a["start_ns"], b["end_ns"]) for a, _, b in found]
    )
    sites: dict[tuple, AttentionSite] = {}
    for i, (a, _sm, b) in enumerate(found):
        sa, sb = parse_list(a["input_shapes"]), parse_list(b["input_shapes"])
        types = parse_list(a["input_types"])
        q, kt, v = sa[0], sa[1], sb[1]
        lq, d, s, dv = q[-2], q[-1], kt[-1], v[-1]
        bh = max(1, _prod(q[:-2]))
        dtype = {"float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16"}.get(
            types[0] if types else "", "fp32"
        )
        ids, ns = spans[i]
        fused = float("inf")
        if spec is not None:
            peak = math_peak(spec, ATTENTION, dtype)
            es = 4 if dtype == "fp32" else 2
            flops = 2.0 * bh * lq * s * (d + dv)
            moved = es * bh * (lq * d + s * d + s * dv + lq * dv)
            if peak:
                # written out, its mask is not recorded: judged as a fused call without one
                share = attention_rate_share(AttentionShape(s, False, d))
                fused = max(
                    flops / (t.cost_attention_efficiency * share * peak[1] * 1e3),
                    moved / (t.cost_memory_efficiency * spec.peaks.mem_gbps),
                    t.cost_min_kernel_ns,
                )
        key = (a["parent"], bh, lq, s, d, dtype)
        site = sites.get(key)
        if site is None:
            site = sites[key] = AttentionSite(a["parent"], bh, lq, s, d, dtype, 0, 0, 0.0, [])
        site.calls += 1
        site.gpu_ns += ns
        site.fused_ns += fused if fused != float("inf") else ns
        site.op_ids.extend(ids)
    return sorted(sites.values(), key=lambda s: (-s.gpu_ns, s.parent, s.lq))


def _span_kernels(db: TraceDB, spans: list[tuple]) -> list[tuple[list[int], int]]:
    """For each (pid, tid, start, end): the operator calls with kernels that start in it on
    that thread (the attention's matmuls, scaling, masking, softmax) and their kernel time."""
    # The spans are this query's input, found in Python: a parameter table for the one
    # query below, not a derived table.
    db.con.execute(
        "CREATE OR REPLACE TEMP TABLE attention_spans "
        "(i INT, pid BIGINT, tid BIGINT, s BIGINT, e BIGINT)"
    )
    db.con.executemany(
        "INSERT INTO attention_spans VALUES (?, ?, ?, ?, ?)",
        [(i, *span) for i, span in enumerate(spans)],
    )
    rows = db.rows(
        """WITH calls AS (SELECT op_id, sum(dur_ns) AS ns FROM kernel_ops GROUP BY op_id)
           SELECT w.i, list(c.op_id ORDER BY c.op_id), sum(c.ns)
           FROM attention_spans w JOIN cpu_ops o
             ON o.pid = w.pid AND o.tid = w.tid AND o.start_ns >= w.s AND o.start_ns <= w.e
           JOIN calls c ON c.op_id = o.op_id
           GROUP BY w.i"""
    )
    out: list[tuple[list[int], int]] = [([], 0) for _ in spans]
    for i, ids, ns in rows:
        out[int(i)] = ([int(x) for x in ids], int(ns))
    return out


def _prod(dims: list) -> int:
    out = 1
    for x in dims:
        out *= int(x)
    return out


def _is_attention(a: dict, sm: dict, b: dict) -> bool:
    if "softmax" not in sm["name"] or "softmax" in a["name"] or "softmax" in b["name"]:
        return False
    sa, ss, sb = (parse_list(x["input_shapes"]) for x in (a, sm, b))
    try:
        q, kt = sa[0], sa[1]
        x = ss[0]
        p, v = sb[0], sb[1]
        if min(len(q), len(kt), len(p), len(v)) < 3 or len(x) < 2:
            return False
        lq, d, s = q[-2], q[-1], kt[-1]
        return (
            kt[-2] == d
            and list(x[-2:]) == [lq, s]
            and list(p[-2:]) == [lq, s]
            and v[-2] == s
            and _prod(q[:-2]) == _prod(p[:-2]) == _prod(x[:-2])
            and lq > 1
            and s > 1
        )
    except (IndexError, TypeError):
        return False
