"""Hot operators: GPU time attributed to the CPU operator that launched it.

One finding per operator holding at least ``hot_min_share_pct`` of GPU kernel time, with
its kernels. Where the recorded shapes give the operator's FLOPs and bytes and the GPU is
known, the impact is the time beyond what a realistic efficiency of the bound resource
would take (:mod:`tracelens.analyzers.cost_model`), and the evidence shows the achieved
TFLOP/s and GB/s. Without shapes, FP32 GEMMs on tensor-core GPUs keep the old estimate
(half their time) and elementwise kernels a third (what fusion typically returns); other
kinds are informational (impact 0), still ranked by share in the report's ``top_ops``.

Explicit attention (batched matmul, softmax, matmul in one module) is one finding whose
impact is its time beyond a fused attention kernel's; its calls count in no other
estimate. The advice follows the kind of the dominant kernel and the workload.
"""

from __future__ import annotations

import json
import re

from tracelens.analyzers.contract import finding
from tracelens.analyzers.cost_model import (
    AttentionSite,
    CostTables,
    OpEstimate,
    cost_tables,
    math_efficiency,
)
from tracelens.analyzers.warmup import warmup_span
from tracelens.core.findings import Finding, finding_id
from tracelens.core.gpu_terms import terms_for
from tracelens.core.kernel_kinds import KINDS, advice_for, classify, communication_advice
from tracelens.core.op_cost import (
    AttentionShape,
    attention_rate_share,
    dtype_of,
    tensor_bytes,
)
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_bytes, fmt_ns
from tracelens.core.workload import workload_of
from tracelens.derived import require
from tracelens.derived.kernel_ops import BEFORE_HOST_TRACE, KERNEL_OPS, UNATTRIBUTED

ANALYZER = "hot_ops"


def _rate_share_note(eff: float, shape: AttentionShape) -> str:
    """Why a fused attention call is judged below ``cost_attention_efficiency``."""
    mask = "a causal mask" if shape.causal else "no mask"
    return (
        f", the {100 * eff:.0f}% judged for long sequences less for {shape.keys:,} keys with "
        f"{mask} and heads of {shape.head_dim} (fused attention's rate falls for shorter "
        "sequences, causal masks and smaller heads, as FlashAttention-2's benchmarks show)"
    )


def operator_finding_id(operator: str) -> str:
    """The id of the hot-operator finding of ``operator`` (for the analyzers that explain
    its time and supersede it)."""
    return finding_id(ANALYZER, operator)


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    total = db.scalar("SELECT sum(end_ns - start_ns) FROM kernels")
    if not total:
        return []
    require(db, KERNEL_OPS)
    wl = workload_of(db)
    span = warmup_span(db, t)
    tuning = span is not None and "autotuning" in span.kinds
    costs = cost_tables(db, t)
    findings: list[Finding] = []
    attention = _explicit_attention(db, t, costs, int(total))
    if attention is not None:
        findings.append(attention)
    ops = db.dicts(
        """SELECT op_name, sum(dur_ns) AS ns, count(*) AS kernels,
                  count(DISTINCT op_id) AS op_calls
           FROM kernel_ops GROUP BY op_name ORDER BY ns DESC, op_name LIMIT ?""",
        [t.hot_top_n],
    )
    cc = db.scalar("SELECT max(compute_capability) FROM devices")
    informational = 0
    for op in ops:
        share = 100.0 * op["ns"] / total
        # Kernels no operator launched are listed in top_ops; as a "hot operator" they would
        # name no code to change.
        if share < t.hot_min_share_pct or op["op_name"] in (UNATTRIBUTED, BEFORE_HOST_TRACE):
            continue
        name = op["op_name"]
        kernels = db.dicts(
            """SELECT kernel_name AS name, count(*) AS count, sum(dur_ns) AS total_ns,
                      CAST(avg(dur_ns) AS BIGINT) AS mean_ns
               FROM kernel_ops WHERE op_name = ? GROUP BY kernel_name
               ORDER BY total_ns DESC, name LIMIT 5""",
            [name],
        )
        top_kernel = kernels[0]["name"] if kernels else ""
        kind = classify(top_kernel)
        est = costs.ops.get(name) or OpEstimate(name, gpu_ns=int(op["ns"]))
        impact, basis, costed = _impact(db, est, kind.key, int(op["ns"]), cc, costs, t)
        if not impact:
            # Without a savings estimate a hot operator is context, not a problem: only the
            # hottest few get a finding, the rest are in the report's top_ops table.
            informational += 1
            if informational > t.hot_info_findings:
                continue
        evidence = {
            "operator": name,
            "gpu_ns": int(op["ns"]),
            "share_pct": round(share, 3),
            "operator_calls": int(op["op_calls"]),
            "kernel_count": int(op["kernels"]),
            "kernel_kind": kind.key,
            "top_kernels": kernels,
        }
        if est.costed_ns:
            evidence["cost"] = est.evidence()
        if est.claimed_ns:
            evidence["claimed_by_explicit_attention_ns"] = est.claimed_ns
        achieved = ""
        tflops, gbps = est.achieved_tflops, est.achieved_gbps
        # the rate of the resource that bounds it: a decode GEMM's TFLOP/s says nothing
        memory_bound = est.kind == "memory" or est.bound == "memory"
        if est.costed_ns and _mostly_grid_bound(est):
            # calls too small for the GPU: neither roof bounds them, launch latency does
            rate = f"{tflops:.1f} TFLOP/s, " if tflops is not None and tflops >= 0.1 else ""
            achieved = f", {rate}its grids too small for the GPU (latency-bound)"
        elif est.costed_ns and tflops is not None and tflops >= 0.1 and not memory_bound:
            achieved = f", {tflops:.1f} TFLOP/s"
        elif est.costed_ns and gbps is not None and gbps >= 1:
            achieved = f", {gbps:.0f} GB/s" + (
                f" (memory-bound, {tflops:.1f} TFLOP/s)"
                if est.kind != "memory" and tflops is not None and tflops >= 0.1
                else ""
            )
        findings.append(
            finding(
                ANALYZER,
                (name,),
                impact,
                db,
                t,
                subject_ns=int(op["ns"]),
                costed=costed,
                title=f"`{name}` launches {share:.1f}% of GPU kernel time ({fmt_ns(op['ns'])}), "
                f"mostly {kind.label}{achieved}",
                impact_basis=basis,
                summary=f"{int(op['op_calls']):,} calls of `{name}` launched "
                f"{int(op['kernels']):,} kernels totalling {fmt_ns(op['ns'])} "
                f"({share:.1f}% of all kernel time).",
                evidence=evidence,
                advice=_communication_advice(db, name)
                if kind.key == "communication" and wl.is_pytorch
                else advice_for(
                    kind,
                    wl,
                    top_kernel,
                    name,
                    autotuning_seen=tuning,
                    grid_bound=_mostly_grid_bound(est),
                    below_roofline=bool(est.costed_ns and impact),
                    memory_bound=est.kind != "memory" and est.bound == "memory",
                    gemm_dims=est.gemm_dims,
                    # shapes known and no call's grid too small for the GPU: nothing to batch
                    small_gemms=not (est.gemm_known_ns > 0 and est.grid_bound_gpu_ns == 0),
                ),
            )
        )
    _say_one_switch(findings)
    return findings


# FSDP runs: FSDP1's module (`FullyShardedDataParallel.forward`, its `_pre_forward`...) or
# FSDP2's ranges (`FSDP::pre_forward`, `FSDP::all_gather`...).
_FSDP = """
SELECT (SELECT count(*) FROM cpu_ops WHERE name ILIKE '%FullyShardedDataParallel%'
        OR starts_with(name, 'FSDP::')) +
       (SELECT count(*) FROM ranges WHERE name ILIKE '%FullyShardedDataParallel%'
        OR starts_with(name, 'FSDP::')) > 0
"""
# An operator's calls inside distributed Shampoo's optimizer step (the profiler's
# `Optimizer.step#<class>.step` range around every optimizer's step).
_IN_SHAMPOO_STEP = r"""
SELECT count(*) > 0 AND bool_and(EXISTS (
    SELECT 1 FROM (SELECT pid, tid, name, start_ns, end_ns FROM ranges
                   UNION ALL SELECT pid, tid, name, start_ns, end_ns FROM cpu_ops) s
    WHERE s.pid = o.pid AND s.tid = o.tid AND s.start_ns <= o.start_ns
      AND s.end_ns >= o.end_ns
      AND regexp_matches(s.name, '^Optimizer\.step#\w*Shampoo\w*\.step$')))
FROM cpu_ops o WHERE o.name = ?
"""


def _communication_advice(db: TraceDB, operator: str) -> str:
    """A hot communication operator's advice from what the trace shows runs around it."""
    from tracelens.analyzers.communication import ddp_reducer_runs

    return communication_advice(
        ddp=ddp_reducer_runs(db),
        fsdp=bool(db.scalar(_FSDP)),
        shampoo=bool(db.scalar(_IN_SHAMPOO_STEP, [operator])),
    )


def _say_one_switch(findings: list[Finding]) -> None:
    """Where several operators' estimates assume the same switch of FP32 math to tensor
    cores (V100 ResNet-50: three cuDNN convolution operators, FP16 autocast), say in each
    that one change covers them all: they are one fix, not three."""
    switched: dict[str, list[Finding]] = {}
    for f in findings:
        peak = str((f.evidence.get("cost") or {}).get("peak_used") or "")
        if f.impact_ns > 0 and "switched to" in peak:
            switched.setdefault(peak, []).append(f)
    for peak, group in switched.items():
        if len(group) < 2:
            continue
        how = peak[peak.index("(") + 1 : peak.rindex(")")] if "(" in peak else peak
        for f in group:
            others = [f"`{g.evidence['operator']}`" for g in group if g is not f]
            if len(others) == 1:
                tail = f"as does that of {others[0]}: one change for both."
            elif len(others) == 2:
                tail = f"as do those of {others[0]} and {others[1]}: one change for all 3."
            else:
                tail = f"as do those of {len(others)} other operators: one change for all."
            f.summary += f" Its estimate assumes {how}, {tail}"


def claimed_operators(db: TraceDB, t: Thresholds) -> set[str]:
    """Operators whose time a hot_ops finding already counts (impact > 0)."""
    return {
        f.evidence["operator"]
        for f in analyze(db, t)
        if f.impact_ns > 0 and "operator" in f.evidence
    }


def _no_estimate_why(db: TraceDB, name: str, costs: CostTables) -> str:
    """Why an operator has no savings estimate.

    A custom operator (vLLM's ``moe_forward``, its attention wrapper) records its
    activations' shapes, but its weights and KV cache are module state, not inputs: what
    it computes and reads is not in the trace, so no saving is claimed.
    """
    if costs.spec is None:
        return "the trace does not name a GPU with known peaks"
    shapes = db.scalar(
        """SELECT any_value(input_shapes) FROM (
               SELECT input_shapes FROM cpu_ops WHERE name = ?
               UNION ALL SELECT input_shapes FROM captured_launches WHERE op_name = ?)
           WHERE input_shapes IS NOT NULL AND input_shapes NOT IN ('', '[]')""",
        [name, name],
    )
    if not shapes:
        return "no recorded shapes give its FLOPs and bytes"
    head = (
        f"its recorded input shapes, such as {shapes}, are its activations: no cost model "
        "gives this operator's FLOPs and bytes from them"
    )
    big = _largest_callee_tensor(db, name)
    if big is not None:
        nbytes, shape, dtype = big
        # vLLM's attention takes its layer's whole KV cache through a callee ([2, blocks,
        # block size, heads, head size]: K and V stacked); the context a call reads of it
        # (per request, and only a window in sliding-window layers) is nowhere recorded
        what = (
            "its KV cache (K and V)"
            if len(shape) == 5 and shape[0] == 2 and _ATTENTION_NAME.search(name)
            else "a tensor of model state (weights or a cache)"
        )
        return (
            f"{head}, and its callees take {what}, {_shape_text(shape)} {dtype} "
            f"({fmt_bytes(nbytes)}), but not which part of it each call reads (layers with a "
            "sliding window read only the last tokens)"
        )
    return f"{head}, and what else it reads, weights or a KV cache, is not recorded"


# An attention operator, by name: its 5-D [2, ...] callee tensor is its K and V cache.
_ATTENTION_NAME = re.compile(r"(?i)attention|attn")
# A callee's tensor this big is model state (weights, a KV cache), not an activation.
_STATE_BYTES = 64 << 20


def _largest_callee_tensor(db: TraceDB, name: str) -> tuple[int, list[int], str] | None:
    """The largest tensor the operator's captured callees take, at least ``_STATE_BYTES``,
    as (bytes, shape, dtype); None without one."""
    best: tuple[int, list[int], str] | None = None
    for (text,) in db.rows(
        "SELECT DISTINCT callee_inputs FROM captured_launches "
        "WHERE op_name = ? AND callee_inputs IS NOT NULL",
        [name],
    ):
        for shape, dtype in json.loads(text):
            nbytes = tensor_bytes(shape, dtype)
            if nbytes >= _STATE_BYTES and (best is None or nbytes > best[0]):
                best = (nbytes, shape, (dtype_of(dtype) or (dtype, 0))[0])
    return best


def _shape_text(shape: list[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _impact(
    db: TraceDB,
    est: OpEstimate,
    kind: str,
    ns: int,
    cc: str | None,
    costs: CostTables,
    t: Thresholds,
) -> tuple[int, str, bool]:
    """(time it would give back, how that was estimated, whether it could be)."""
    unclaimed = max(0, ns - est.claimed_ns)
    if est.costed_ns and costs.spec is not None and est.flops_uncertain:
        # a rate no kernel reaches: the FLOPs are overcounted, and so would be the ideal
        return (
            0,
            (
                f"Not costed: its recorded shapes give {est.flops / 1e12:.3g} TFLOP in "
                f"{fmt_ns(est.costed_ns)} of kernels, {est.estimated_tflops or 0:.3g} TFLOP/s, "
                f"above the {costs.spec.name}'s peak of {est.ceiling_tflops:g} TFLOP/s: the "
                "FLOPs are uncertain (an output size the shapes do not pin down), so no "
                "estimate is made."
            ),
            False,
        )
    if est.costed_ns and costs.spec is not None and _mostly_grid_bound(est):
        # the roofline assumes the whole GPU; these grids keep most of it idle
        pct = 100.0 * est.grid_bound_ns / est.costed_ns
        rest = min(int(est.impact_ns), unclaimed)
        return (
            rest,
            (
                f"{pct:.0f}% of its costed kernel time runs in grids that leave most of the "
                f"{costs.spec.name}'s {terms_for(costs.spec.vendor).units} without a "
                f"{terms_for(costs.spec.vendor).block}: bound by latency, not by its FLOPs and "
                f"bytes (ideal {fmt_ns(int(est.ideal_ns))} at the roofline), so no roofline gap "
                "is claimed for those calls; the occupancy finding counts their idle "
                f"{terms_for(costs.spec.vendor).units}."
                + (f" The rest gives back {fmt_ns(rest)} at the roofline." if rest else "")
            ),
            True,
        )
    if est.costed_ns and costs.spec is not None:
        impact = min(int(est.impact_ns), unclaimed)
        cover = 100.0 * est.costed_ns / ns
        parts = []
        knobs = []
        if est.kind != "memory" and est.peak_tflops:
            eff, eff_name = math_efficiency(est.kind, t)
            if eff_name:
                knobs.append(eff_name)
            # the sheet's figure, except where the matrix cores sustain only part of it
            sheet = costs.spec.sustained_note(est.peak_tflops, est.math or "")
            share = est.rate_share if eff_name else None
            parts.append(
                f"{est.flops / 1e12:.3g} TFLOP at "
                + (
                    f"{'down to ' if len(est.rate_shares) > 1 else ''}{100 * eff * share:.0f}% of "
                    if share is not None
                    else f"{100 * eff:.0f}% of "
                    if eff_name
                    else ""
                )
                + f"{est.math} peak {est.peak_tflops:.4g} TFLOP/s{sheet}"
                + (_rate_share_note(eff, est.rate_shape) if share and est.rate_shape else "")
            )
        knobs.append("cost_memory_efficiency")
        parts.append(
            f"{est.bytes / 1e9:.3g} GB"
            + (f" ({est.bytes_basis})" if est.bytes_basis else "")
            + f" at {100 * t.cost_memory_efficiency:.0f}% of {est.mem_gbps:g} GB/s"
        )
        counted = (
            ""
            if cover >= 99.95
            else f", counted on the {cover:.0f}% of it whose input shapes were recorded"
        )
        return (
            impact,
            (
                "Its kernels' time beyond what they would take at a realistic efficiency of "
                f"the bound resource{counted} ({est.bound}-bound: {'; '.join(parts)} on the "
                f"{costs.spec.name}; ideal {fmt_ns(int(est.ideal_ns))}, at least "
                f"{fmt_ns(t.cost_min_kernel_ns)} a kernel; the efficiencies are the thresholds "
                f"{' and '.join(knobs)})."
            ),
            True,
        )
    if est.claimed_ns >= ns:
        return 0, "Informational: its time is counted in the explicit-attention finding.", True
    if kind in ("gemm_fp32", "elementwise") and 2 * est.grid_bound_gpu_ns >= ns:
        return (
            0,
            (
                "Informational: most of its kernel time runs in grids that leave most of the "
                "GPU idle, bound by launch latency rather than by its math or bytes; the "
                "occupancy finding counts their idle SMs."
            ),
            True,
        )
    if kind in ("gemm_fp32", "elementwise"):
        fraction = KINDS[kind].saving_fraction
        if kind == "gemm_fp32" and cc is not None and _cc_below(cc, 7.0):
            fraction = 0.0  # no tensor cores before Volta
        impact = int(unclaimed * fraction)
        if impact:
            return (
                impact,
                KINDS[kind].saving_basis + (" (No recorded shapes: no FLOP/byte estimate.)"),
                True,
            )
    why = _no_estimate_why(db, est.op_name, costs)
    return 0, f"Not costed: no reliable estimate of the savings ({why}).", False


def _explicit_attention(
    db: TraceDB, t: Thresholds, costs: CostTables, total: int
) -> Finding | None:
    sites: list[AttentionSite] = costs.attention
    if not sites:
        return None
    wl = workload_of(db)
    gpu_ns = sum(s.gpu_ns for s in sites)
    if 100.0 * gpu_ns / total < t.hot_min_share_pct:
        return None
    known = costs.spec is not None
    impact = sum(s.impact_ns for s in sites) if known else 0
    fused = sum(min(s.fused_ns, s.gpu_ns) for s in sites)
    share = 100.0 * gpu_ns / total
    calls = sum(s.calls for s in sites)
    low = min(attention_rate_share(AttentionShape(s.s, False, s.d)) for s in sites)
    return finding(
        ANALYZER,
        ("explicit_attention",),
        impact,
        db,
        t,
        subject_ns=gpu_ns,
        title=f"Explicit attention (matmul, softmax, matmul) takes {share:.1f}% of GPU kernel "
        f"time ({fmt_ns(gpu_ns)})"
        + (f"; a fused attention kernel would take about {fmt_ns(int(fused))}" if known else ""),
        impact_basis=(
            "Its kernel time beyond a fused attention kernel's: the FLOPs of QKᵀ and PV at "
            f"{t.cost_attention_efficiency:.0%} of the {costs.spec.name}'s peak for the dtype"
            + (
                f" for long sequences, {100 * t.cost_attention_efficiency * low:.0f}% for its "
                "shortest (fused attention's rate falls for shorter sequences and smaller "
                "heads, as FlashAttention-2's benchmarks show)"
                if low < 1.0
                else ""
            )
            + ", reading Q, K, V and writing the output once (no L x S scores in memory)."
            if known and costs.spec is not None
            else "Informational: the trace does not name a GPU with known peaks."
        ),
        summary=f"{calls:,} attention computations written as batched matmul, softmax and "
        f"matmul in {len({s.parent for s in sites})} module(s) ran {fmt_ns(gpu_ns)} of "
        "kernels, writing and re-reading the full score matrix.",
        evidence={
            "sites": [
                {
                    "parent": s.parent,
                    "batch_x_heads": s.batch_heads,
                    "query_len": s.lq,
                    "key_len": s.s,
                    "head_dim": s.d,
                    "dtype": s.dtype,
                    "calls": s.calls,
                    "gpu_ns": s.gpu_ns,
                    "fused_estimate_ns": round(min(s.fused_ns, s.gpu_ns)),
                }
                for s in sites[:5]
            ],
            "gpu_ns": gpu_ns,
            "share_pct": round(share, 3),
            "fused_estimate_ns": round(fused),
        },
        advice=advice_for(KINDS["attention"], wl, "softmax", "explicit attention"),
    )


def _mostly_grid_bound(est: OpEstimate) -> bool:
    """At least half of the operator's costed time is in calls too small for the GPU."""
    return bool(est.costed_ns) and 2 * est.grid_bound_ns >= est.costed_ns


def _cc_below(cc: str, floor: float) -> bool:
    try:
        return float(cc) < floor
    except ValueError:
        return False
