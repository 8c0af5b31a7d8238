"""Occupancy and tensor cores: grids too small for the GPU, low occupancy, FP32 math.

- *Underfilled grids*: launches with fewer blocks than the device has SMs (times
  ``occupancy_min_blocks_per_sm``) leave SMs idle for the whole kernel. Impact is each
  launch's duration times its idle-SM share, summed: an upper bound on what spreading the
  same work over every SM (split-K, more rows per launch, batching) returns.
- *Low occupancy*: kernels whose profiler-estimated achieved occupancy is below
  ``occupancy_low_pct`` (registers or shared memory per block limit the resident warps).
  Informational: whether more warps would help depends on the kernel.
- *FP32 on tensor-core GPUs*: FP32 GEMMs and single-precision cuDNN kernels on compute
  capability 7.0+ (FP16 tensor cores; TF32/BF16 from 8.0). Impact is half their time
  (tensor-core math runs at least 2x the FP32 rate), counting only operators for which
  hot_ops reports no impact of its own and calls not in explicit attention, so no
  millisecond is counted twice. The advice fits the GPU (FP16 autocast before Ampere) and
  the framework.

Each group holds at least ``occupancy_min_share_pct`` of kernel time. On AMD GPUs the
same checks speak ROCm's terms (workgroups on compute units, 64-wide wavefronts, Matrix
Cores, rocprof-compute): ``gpu_terms`` holds the words. ROCm traces carry no occupancy
estimate, so the low-occupancy check has nothing to read there.
"""

from __future__ import annotations

import re

from tracelens.analyzers import h2d_transfers, hot_ops
from tracelens.analyzers.contract import finding
from tracelens.analyzers.cost_model import cost_tables
from tracelens.core.clipped import clipped
from tracelens.core.findings import Finding
from tracelens.core.gemm_alignment import combined
from tracelens.core.gpu_terms import AMD, GpuTerms, terms_for
from tracelens.core.kernel_kinds import KINDS, classify, fp32_math_advice, is_fp32_math
from tracelens.core.kernel_libraries import CUBLAS, TENSILE, TRITON, gemm_library
from tracelens.core.op_cost import attention_lengths, parse_list
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_count, fmt_ns
from tracelens.core.workload import workload_of
from tracelens.derived import require
from tracelens.derived.kernel_ops import KERNEL_OPS

ANALYZER = "occupancy"
# Library GEMM/convolution/attention kernels pick low occupancy by design (large tiles).
_BY_DESIGN = {"gemm", "gemm_fp32", "conv", "attention", "communication"}
# The most threads a block (workgroup) may have, on every NVIDIA GPU since Fermi and on AMD.
_MAX_THREADS_PER_BLOCK = 1024
# Share of FP32 GEMM/conv time that tensor-core math gives back (as hot_ops assumes).
_FP32_SAVING = KINDS["gemm_fp32"].saving_fraction

# Blocks (workgroups) in a launch's grid; a missing dimension counts as 1.
_BLOCKS = (
    "greatest(coalesce(grid_x, 1), 1) * greatest(coalesce(grid_y, 1), 1)"
    " * greatest(coalesce(grid_z, 1), 1) AS blocks"
)

_UNDERFILLED = f"""
WITH k AS (
    SELECT k.name, k.end_ns - k.start_ns AS d,
           {_BLOCKS},
           grid_x, grid_y, grid_z, block_x, block_y, block_z
    FROM kernels k WHERE k.device_id = ? AND k.grid_x IS NOT NULL
)
SELECT name, count(*) AS launches, sum(d) AS ns,
       CAST(round(sum(d * (1 - blocks / ?))) AS BIGINT) AS idle_sm_ns,
       CAST(median(blocks) AS BIGINT) AS median_blocks,
       arg_max([grid_x, grid_y, grid_z], d) AS grid,
       arg_max([block_x, block_y, block_z], d) AS block
FROM k WHERE blocks < ? AND name NOT ILIKE '%nccl%'
GROUP BY name HAVING sum(d) >= ? ORDER BY idle_sm_ns DESC, name LIMIT 5
"""

# The part of one kernel's idle-SM time spent in operators hot_ops already gives an impact:
# counting it again here would claim the same milliseconds twice.
_CLAIMED_IDLE = f"""
WITH k AS (
    SELECT start_ns, end_ns - start_ns AS d,
           {_BLOCKS}
    FROM kernels WHERE device_id = ? AND name = ? AND grid_x IS NOT NULL
), ko AS (
    SELECT DISTINCT start_ns FROM kernel_ops
    WHERE device_id = ? AND kernel_name = ? AND list_contains(?::VARCHAR[], op_name)
)
SELECT coalesce(CAST(round(sum(d * (1 - blocks / ?))) AS BIGINT), 0)
FROM k JOIN ko USING (start_ns)
"""

_LOW_OCCUPANCY = """
SELECT name, count(*) AS launches, sum(end_ns - start_ns) AS ns,
       avg(est_occupancy_pct) AS occupancy_pct, max(registers_per_thread) AS registers,
       max(shared_memory_bytes) AS shared_memory_bytes
FROM kernels
-- 0 is what the profiler writes when it cannot estimate (e.g. opt-in shared memory)
WHERE device_id = ? AND est_occupancy_pct > 0 AND name NOT ILIKE '%nccl%'
GROUP BY name HAVING avg(est_occupancy_pct) < ? AND sum(end_ns - start_ns) >= ?
ORDER BY ns DESC, name
"""


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    total = db.scalar("SELECT sum(end_ns - start_ns) FROM kernels")
    if not total:
        return []
    findings: list[Finding] = []
    devices = db.dicts("SELECT device_id, name, sm_count, compute_capability FROM devices")
    min_ns = total * t.occupancy_min_share_pct / 100.0
    for dev in devices:
        d = int(dev["device_id"])
        sms = dev["sm_count"]
        if sms:
            rows = db.dicts(
                _UNDERFILLED, [d, float(sms), sms * t.occupancy_min_blocks_per_sm, min_ns]
            )
            claimed = sorted(hot_ops.claimed_operators(db, t)) if rows else []
            stalled = h2d_transfers.fault_stalled_ns(db) if rows else {}
            for r in rows:
                in_hot_ops = 0
                if claimed:
                    require(db, KERNEL_OPS)
                    in_hot_ops = int(
                        db.scalar(_CLAIMED_IDLE, [d, r["name"], d, r["name"], claimed, float(sms)])
                        or 0
                    )
                under = _underfilled(
                    db,
                    t,
                    d,
                    int(sms),
                    r,
                    total,
                    in_hot_ops,
                    stalled.get(str(r["name"]), 0),
                    _cc(dev["compute_capability"]),
                )
                # Time a hot-operator finding counts is kept here only to say why, and only
                # when the grid leaves most of the GPU idle; a nearly full grid says nothing.
                if under.impact_ns > 0 or (
                    under.evidence["idle_pct"] >= t.occupancy_explain_idle_pct
                ):
                    findings.append(under)
        low = db.dicts(_LOW_OCCUPANCY, [d, t.occupancy_low_pct, min_ns])
        low = [r for r in low if classify(r["name"]).key not in _BY_DESIGN]
        findings.extend(_low_occupancy(db, t, d, r, total) for r in low[:5])
        cc = _cc(dev["compute_capability"])
        if cc is not None and cc >= 7.0:
            fp32 = _fp32_math(db, t, d, cc, dev["compute_capability"], total)
            if fp32 is not None:
                findings.append(fp32)
    return findings


def _underfilled(
    db: TraceDB,
    t: Thresholds,
    dev: int,
    sms: int,
    r: dict,
    total: int,
    in_hot_ops: int,
    fault_stalled: int = 0,
    cc: float | None = None,
) -> Finding:
    # The part of its time the kernel waited on page faults is the page-fault finding's:
    # a wider grid would wait as long.
    stalled = min(fault_stalled, int(r["ns"]))
    faulting = stalled / max(1, int(r["ns"]))
    in_faults = int(int(r["idle_sm_ns"]) * faulting)
    impact = max(0, int(r["idle_sm_ns"]) - in_hot_ops - in_faults)
    share = 100.0 * r["ns"] / total
    blocks = int(r["median_blocks"])
    idle_pct = 100.0 * (1 - blocks / sms)
    w = terms_for(workload_of(db).gpu.vendor)
    threads = 1
    for n in r["block"] or []:
        threads *= max(int(n or 1), 1)
    per_block = -(-threads // w.warp_lanes)
    noun = w.block if blocks == 1 else w.blocks
    return finding(
        ANALYZER,
        ("underfilled_grid", dev, r["name"]),
        impact,
        db,
        t,
        subject_ns=int(r["ns"]),
        # SMs waiting on page faults are not idle for want of blocks: the title gives the
        # kernel's time outside its fault stall, and names the stall
        title=f"`{clipped(r['name'])}` launches {blocks} {noun} "
        f"on {sms} {w.units}, "
        f"leaving {idle_pct:.0f}% of GPU {dev}'s {w.units} idle for "
        + (
            f"{fmt_ns(int(r['ns']) - stalled)}, outside the {fmt_ns(stalled)} it stalled on "
            "page faults"
            if in_faults
            else fmt_ns(r["ns"])
        ),
        impact_basis=f"Each launch's duration times the share of {w.units} its grid leaves "
        f"without a {w.block}, summed: an upper bound on what spreading the same work over "
        f"every {w.unit} returns"
        + (
            f"; {fmt_ns(in_hot_ops)} of it lies in operators whose hot-operator finding "
            "already counts that time, and is left out here"
            if in_hot_ops
            else ""
        )
        + (
            f"; {fmt_ns(in_faults)} of it falls in the time the kernel waited on page "
            "faults, which the page-fault finding counts, and is left out here."
            if in_faults
            else "."
        ),
        summary=f"{fmt_count(int(r['launches']), 'launch', 'launches')} ({share:.1f}% of "
        "kernel time) with a median "
        f"grid of {blocks} {noun} of {threads} threads ({per_block} "
        f"{w.warp_lanes}-wide {w.warps if per_block != 1 else w.warp} each) on a "
        f"{sms}-{w.unit} GPU."
        + (
            f" For {fmt_ns(stalled)} of its {fmt_ns(r['ns'])} it waited on page faults (the "
            f"page-fault finding's time): {w.units} waiting on pages do not want for "
            f"{w.blocks}, so that time is not counted idle here."
            if in_faults
            else ""
        ),
        evidence={
            "device_id": dev,
            "kernel": r["name"],
            "launches": int(r["launches"]),
            "kernel_ns": int(r["ns"]),
            "share_pct": round(share, 3),
            "median_blocks": blocks,
            "sm_count": sms,
            "grid": list(r["grid"]),
            "block": list(r["block"]),
            "warps_per_block": per_block,
            "warp_lanes": w.warp_lanes,
            "idle_pct": round(idle_pct, 1),
            "idle_sm_ns": int(r["idle_sm_ns"]),
            "idle_sm_ns_in_hot_ops": in_hot_ops,
            "idle_sm_ns_in_fault_stalls": in_faults,
        },
        advice=_underfilled_advice(db, r["name"], blocks, sms, w, threads, cc),
    )


# Queries per sequence up to which an attention call is a decoding step (one new token,
# or a few speculative ones): there the key/value length is what can be split.
_DECODE_QUERY_MAX = 16


def _attention_lengths(db: TraceDB, kernel: str) -> tuple[int, int] | None:
    """The query and key lengths of the calls launching ``kernel`` most often (from the
    launching operator's recorded shapes, or the operator enclosing it); None if unknown."""
    require(db, KERNEL_OPS)
    rows = db.rows(
        """WITH k AS (SELECT op_id FROM kernel_ops WHERE kernel_name = ?),
                ids AS (SELECT op_id FROM k
                        UNION ALL SELECT p.parent_id FROM cpu_ops p JOIN k USING (op_id))
           SELECT c.name, c.input_shapes, count(*) AS n FROM ids JOIN cpu_ops c USING (op_id)
           WHERE c.input_shapes IS NOT NULL
           GROUP BY 1, 2 ORDER BY n DESC, 1, 2""",
        [kernel],
    )
    for name, shapes, _ in rows:
        lengths = attention_lengths(name, parse_list(shapes))
        if lengths is not None:
            return lengths
    return None


def _threads_per_sm(cc: float | None) -> int | None:
    """The most threads one NVIDIA SM holds at once, by compute capability (CUDA
    programming guide); None where unknown."""
    if cc is None:
        return None
    if cc == 7.5:  # Turing
        return 1024
    if cc in (8.6, 8.7, 8.9) or cc >= 12.0:  # consumer Ampere, Ada, consumer Blackwell
        return 1536
    return 2048


def _underfilled_advice(
    db: TraceDB,
    name: str,
    blocks: int,
    sms: int,
    w: GpuTerms,
    threads: int = 0,
    cc: float | None = None,
) -> str:
    head = (
        f"A grid of {blocks} {w.block if blocks == 1 else w.blocks} keeps at most {blocks} of "
        f"{sms} {w.units} busy. "
        "Give each launch more parallel work: "
    )
    kind = classify(name).key
    wl = workload_of(db)
    torch = wl.is_pytorch
    amd = w is AMD
    if kind in ("gemm", "gemm_fp32"):
        # Name a library's knobs only for that library's kernels (TunableOp does not reach
        # a Triton kernel).
        library = gemm_library(name)
        if library == TRITON:
            where = " (in the Triton kernel's configs: smaller blocks or split-K for this shape)"
        elif library == TENSILE and amd:
            where = " (hipBLASLt picks them for bf16/fp16" + (
                (
                    "; `PYTORCH_TUNABLEOP_ENABLED=1` lets PyTorch try them for your shapes)"
                    if not wl.tunableop_on
                    else "; PyTorch's TunableOp, on in the recorded environment, tries them "
                    "for your shapes where it tunes)"
                )
                if torch
                else ")"
            )
        elif library == CUBLAS and not amd:
            where = " (cuBLASLt picks them for bf16/fp16)"
        else:
            where = ""
        return head + (
            "batch requests or sequences together so the matrices grow, group many small "
            "GEMMs into one launch ("
            + ("`torch.bmm`, grouped GEMM" if torch else "batched or grouped GEMM")
            + "), or use split-K/stream-K "
            f"variants or smaller tiles for skinny matrices{where}."
        )
    if kind == "attention" and not re.search(r"(?i)softmax", name):
        lengths = _attention_lengths(db, name)
        if lengths is not None and lengths[0] > _DECODE_QUERY_MAX:
            lq, lk = lengths
            return head + (
                f"these calls attend {lq:,} queries to {lk:,} keys, a short sequence cut "
                f"into few query tiles per head: more sequences per launch (batch the "
                f"requests), or a kernel with smaller query tiles so each sequence gives more "
                f"{w.blocks}."
            )
        return head + (
            "more sequences per batch, or a kernel that splits the key/value length across "
            f"{w.blocks} (split-KV / flash-decoding) when batch x heads is small, as in "
            "decoding."
        )
    if kind in ("elementwise", "reduction", "attention") and torch:  # lone softmax: a reduction
        return head + (
            "its tensors are too small for the GPU: batch more work into each launch, or "
            + (
                "see why Inductor left it unfused (graph breaks)"
                if wl.compiled
                else "fuse it into its neighbours (`torch.compile`)"
            )
            + " so fewer, larger kernels run."
        )
    if threads >= _MAX_THREADS_PER_BLOCK:
        # Blocks this large already take all the threads a block may have (on Turing all
        # an SM runs at once): more work per block or a grid-stride loop keeps the same
        # blocks, so only more blocks reach the idle units.
        per_sm = None if amd else _threads_per_sm(cc)
        full = (
            f" (on this GPU, all one {w.unit} runs at once)"
            if per_sm is not None and per_sm <= threads
            else ""
        )
        return (
            f"A grid of {blocks} {w.block if blocks == 1 else w.blocks} keeps at most "
            f"{blocks} of {sms} {w.units} busy. Its {w.blocks} already hold {threads:,} "
            f"threads, the most a {w.block} can{full}, so more work per {w.block} or a "
            f"grid-stride loop cannot reach the idle {w.units}: split each {w.block}'s work "
            f"across several {w.blocks} (where one {w.block} handles one row, give each row "
            f"two or more {w.blocks} that each reduce their part, then combine the partial "
            "results in a second small kernel or with atomics), so the grid has at least "
            f"{sms} {w.blocks}; or run independent kernels on other streams meanwhile."
        )
    return head + (
        f"more elements per launch (larger batches, a grid-stride loop sized to the {w.unit} "
        "count), one batched launch instead of many small ones, or independent kernels on "
        "separate streams so they share the GPU."
    )


def _low_occupancy(db: TraceDB, t: Thresholds, dev: int, r: dict, total: int) -> Finding:
    share = 100.0 * r["ns"] / total
    w = terms_for(workload_of(db).gpu.vendor)
    return finding(
        ANALYZER,
        ("low_occupancy", dev, r["name"]),
        0,
        db,
        t,
        subject_ns=int(r["ns"]),
        title=f"`{clipped(r['name'])}` runs at {r['occupancy_pct']:.0f}% estimated occupancy "
        f"({share:.1f}% of kernel time)",
        impact_basis="Informational: low occupancy slows a kernel only when it cannot hide "
        "memory latency otherwise; no reliable estimate of the gain.",
        summary=f"{int(r['launches']):,} launches, {r['registers']} registers per thread, "
        f"{r['shared_memory_bytes']} bytes of shared memory per {w.block}.",
        evidence={
            "device_id": dev,
            "kernel": r["name"],
            "launches": int(r["launches"]),
            "kernel_ns": int(r["ns"]),
            "share_pct": round(share, 3),
            "est_occupancy_pct": round(float(r["occupancy_pct"]), 2),
            "registers_per_thread": r["registers"],
            "shared_memory_bytes": r["shared_memory_bytes"],
        },
        advice=f"Few {w.warps} fit on each {w.unit}, usually because of registers per thread "
        f"or shared memory per {w.block}. For your own Triton/"
        + ("HIP" if w is AMD else "CUDA")
        + " kernels lower `num_warps`/tile sizes or cap registers (`__launch_bounds__`"
        + (")" if w is AMD else ", `maxrregcount`)")
        + "; for library kernels check the input shapes and dtype select a better-tuned "
        f"kernel. Confirm in {w.kernel_profiler} that the kernel is latency-bound before "
        "tuning.",
    )


def _fp32_math(
    db: TraceDB, t: Thresholds, dev: int, cc: float, cc_text: str, total: int
) -> Finding | None:
    require(db, KERNEL_OPS)
    rows = db.dicts(
        """SELECT kernel_name AS name, op_name, count(*) AS launches, sum(dur_ns) AS ns
           FROM kernel_ops WHERE device_id = ? GROUP BY kernel_name, op_name""",
        [dev],
    )
    fp32 = [r for r in rows if is_fp32_math(r["name"])]
    fp32_ns = sum(int(r["ns"]) for r in fp32)
    if fp32_ns < total * t.occupancy_min_share_pct / 100.0:
        return None
    # Operators hot_ops gives an impact, and calls explicit attention counts, are claimed.
    claimed = hot_ops.claimed_operators(db, t)
    costs = cost_tables(db, t)
    in_attention = costs.claimed_op_ids
    if in_attention:
        ids = ",".join(str(i) for i in sorted(in_attention))
        attn = {
            (r[0], r[1]): int(r[2])
            for r in db.rows(
                f"""SELECT kernel_name, op_name, sum(dur_ns) FROM kernel_ops
                    WHERE device_id = ? AND op_id IN ({ids}) GROUP BY ALL""",
                [dev],
            )
        }
    else:
        attn = {}
    unclaimed_ns = sum(
        int(r["ns"]) - attn.get((r["name"], r["op_name"]), 0)
        for r in fp32
        if r["op_name"] not in claimed
    )
    impact = int(unclaimed_ns * _FP32_SAVING)
    # The advice covers the FP32 kernels this finding counts: those of operators with a
    # hot-operator finding of their own get its advice there, not the same words twice.
    mine = [r for r in fp32 if r["op_name"] not in claimed] or fp32

    # cuDNN runs some convolutions as cuBLAS GEMMs (`volta_sgemm_64x64_nt` under
    # `aten::cudnn_convolution`): the launching operator says which math it is
    def is_conv(r: dict) -> bool:
        return classify(r["name"]).key != "gemm_fp32" or "conv" in str(r["op_name"] or "")

    # advice for the math that holds a tenth of the time or more (V100 ResNet training:
    # 0.3 ms of `aten::mm` beside 273 ms of convolutions gets no GEMM advice)
    conv_ns = sum(int(r["ns"]) for r in mine if is_conv(r))
    gemm_ns = sum(int(r["ns"]) for r in mine if not is_conv(r))
    gemms = gemm_ns > 0 and gemm_ns * 10 >= conv_ns + gemm_ns
    convs = conv_ns > 0 and conv_ns * 10 >= conv_ns + gemm_ns
    what = (
        "These GEMMs and convolutions run in plain FP32"
        if gemms and convs
        else "These GEMMs run in plain FP32"
        if gemms
        else "These convolutions run in plain FP32"
    )
    by_kernel: dict[str, int] = {}
    for r in fp32:
        by_kernel[r["name"]] = by_kernel.get(r["name"], 0) + int(r["ns"])
    top = sorted(by_kernel.items(), key=lambda kv: -kv[1])[:5]
    share = 100.0 * fp32_ns / total
    return finding(
        ANALYZER,
        ("fp32_on_tensor_cores", dev),
        impact,
        db,
        t,
        subject_ns=int(fp32_ns),
        title=f"{share:.0f}% of GPU {dev}'s kernel time is FP32 GEMM/convolution on a GPU with "
        + (
            f"Matrix Cores ({_gfx(db, cc_text)})"
            if workload_of(db).amd
            else f"tensor cores (compute capability {cc_text})"
        ),
        impact_basis=f"Half of the FP32 GEMM/convolution time ({fmt_ns(unclaimed_ns)}) "
        "that neither a hot-operator finding's cost estimate nor the explicit-attention "
        "finding already counts; "
        f"{terms_for(workload_of(db).gpu.vendor).matrix_cores} typically run matrix math at "
        "least 2x the FP32 rate."
        + (
            # only the operators whose FP32 kernels are here: naming others claims nothing
            f" hot_ops counts the rest ({', '.join(sorted(overlap))})."
            if (overlap := claimed & {r["op_name"] for r in fp32})
            else ""
        ),
        summary=f"FP32 GEMM and single-precision cuDNN kernels ran {fmt_ns(fp32_ns)} "
        f"({share:.1f}% of kernel time).",
        evidence={
            "device_id": dev,
            "compute_capability": cc_text,
            "fp32_ns": fp32_ns,
            "share_pct": round(share, 3),
            "claimed_by_hot_ops": sorted(claimed),
            "unclaimed_ns": unclaimed_ns,
            "kernels": [{"kernel": k, "ns": ns} for k, ns in top],
        },
        advice=fp32_math_advice(
            workload_of(db),
            what=what,
            gemms=gemms,
            convs=convs,
            fft=next((r["name"] for r in mine if _FFT_CONV.search(r["name"])), None),
            # what the recorded shapes say of these GEMMs' dimensions (none: the rule)
            gemm_dims=combined(
                costs.ops[name].gemm_dims
                for name in {r["op_name"] for r in mine if not is_conv(r)}
                if name in costs.ops
            ),
        ),
    )


# cuDNN's FFT convolutions: complex GEMMs (`ampere_gcgemm_64x64_nt`, `…cgemm…`) between
# `fft2d_r2c`/`fft2d_c2r` kernels.
_FFT_CONV = re.compile(r"(?i)fft|g?cgemm")


def _gfx(db: TraceDB, cc_text: str) -> str:
    """AMD's name for the target (gfx942), else its major.minor as the profiler wrote it."""
    arch = db.info.get("gcn_arch")
    return str(arch).split(":")[0] if arch else f"gfx {cc_text}"


def _cc(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None
