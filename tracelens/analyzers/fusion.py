"""Unfused memory-bound kernels: runs of elementwise and normalization kernels, one per
operator, that eager PyTorch launches back to back between the matrix multiplies.

Each such kernel reads its inputs from memory and writes its result back, and the next
one reads that result again: an eager RMSNorm, rotary embedding or activation is half a
dozen passes over the same tensor. Fused (``torch.compile``, or a fused kernel for the
block), a run is one pass. Per operator, the hot-operator model cannot see that: each
kernel may run near the memory bandwidth and still be a pass fusion removes.

A run is a maximal sequence of memory-bound kernels (:mod:`tracelens.core.kernel_kinds`:
elementwise/copy, reduction/normalization) on one device, in start order, launched by at
least two operator calls. Its fused cost is estimated as its longest kernel (a fused
kernel still streams the largest tensor once), so the impact is each run's time beyond
its longest kernel: an estimate, high where a run joins unrelated tensors.

A run never crosses a communication kernel's start or end on its device (the collective
is a boundary torch.compile does not fuse across: its result is awaited in between), and
FBGEMM's kernels (``fbgemm_gpu``: table-batched embedding lookups and their backward,
index linearization, the quantize and dequantize codecs of quantized communication) end a
run instead of joining it: they are custom operators that Inductor calls as they are and
cannot fuse with their neighbours.

Only eager PyTorch is judged (its operators recorded by the PyTorch profiler, or as the
NVTX ranges ``emit_nvtx`` writes for Nsight Systems): compiled models (Triton kernels) and
graph replays have fused or fixed their kernels, and a CUDA C program names no operators
to fuse.
"""

from __future__ import annotations

import re

from ingest.derive_gaps import LAUNCH_CALLS
from ingest.schema import sql_list
from tracelens.analyzers.communication import comm_kernel_sql
from tracelens.analyzers.contract import finding
from tracelens.analyzers.hot_ops import operator_finding_id
from tracelens.analyzers.launch_replay import host_waits_recorded, replay_saving
from tracelens.analyzers.recording_caveats import profiler_launch_caveat
from tracelens.core.findings import Finding, TimeRange
from tracelens.core.kernel_kinds import classify
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_count, fmt_ns
from tracelens.core.workload import Workload, workload_of
from tracelens.derived import require
from tracelens.derived.kernel_ops import KERNEL_OPS

ANALYZER = "fusion"

# The kernel kinds whose time is memory traffic a fused kernel would not repeat.
_MEMORY_BOUND = ("elementwise", "reduction")
_TOP = 5

# FBGEMM's kernels: its namespace in the name, or the embedding kernels it names bare,
# launched by its operators (``fbgemm::``, ``fb::``) or the embedding lookup's autograd
# node (its backward's ``linearize_index_kernel``).
_FBGEMM_KERNEL = re.compile(
    r"fbgemm|^(?:void )?(?:linearize_index|split_embedding|bounds_check_indices|"
    r"permute_pooled_embs)"
)
_FBGEMM_OP = (
    "(starts_with(op_name, 'fbgemm::') OR starts_with(op_name, 'fb::') "
    "OR op_name LIKE '%SplitLookupFunction%')"
)

# Runs of memory-bound kernels: a run ends at any other kernel on the device, and at a
# communication kernel's end too (a run on the compute stream beside a long collective
# would otherwise join the kernels before it ends with those after). Kernels no operator
# launched (before the host trace, graph replays) break runs and count in none.
_RUN_KERNELS = f"""
WITH k AS (
    SELECT device_id, krow, start_ns, dur_ns, op_id, op_name,
           op_id IS NOT NULL AND op_id >= 0 AND NOT coalesce({_FBGEMM_OP}, false)
               AND kernel_name IN (SELECT unnest(?::VARCHAR[])) AS mem
    FROM kernel_ops
    UNION ALL
    SELECT device_id, NULL, end_ns, 0, NULL, NULL, false
    FROM kernels WHERE {comm_kernel_sql()}
),
r AS (
    SELECT *, sum(CASE WHEN mem THEN 0 ELSE 1 END)
                  OVER (PARTITION BY device_id ORDER BY start_ns, krow
                        ROWS UNBOUNDED PRECEDING) AS run
    FROM k
),
m AS (SELECT * FROM r WHERE mem),
q AS (SELECT device_id, run FROM m GROUP BY device_id, run HAVING count(DISTINCT op_id) >= 2)
SELECT m.* FROM m JOIN q USING (device_id, run)
"""
# One row per run.
_RUNS = """
SELECT device_id, run, count(*) AS kernels, sum(dur_ns) AS ns, max(dur_ns) AS longest_ns,
       min(start_ns) AS start_ns, max(start_ns + dur_ns) AS end_ns,
       list(DISTINCT op_name ORDER BY op_name) AS operators
FROM fusion_run_kernels GROUP BY device_id, run
"""


# Whether an optimizer step launched kernels of the runs: a run kernel's operator inside an
# `Optimizer.step` range of its thread (PyTorch records one per step).
_OPTIMIZER_IN_RUNS = """
WITH steps AS (SELECT pid, tid, start_ns, end_ns FROM cpu_ops
               WHERE name LIKE 'Optimizer.step%')
SELECT count(*) > 0 FROM fusion_run_kernels k
JOIN cpu_ops o ON o.op_id = k.op_id
JOIN steps s ON s.pid IS NOT DISTINCT FROM o.pid AND s.tid = o.tid
            AND o.start_ns >= s.start_ns AND o.end_ns <= s.end_ns
"""


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    wl = workload_of(db)
    # A trace that thinned its launches keeps kernels hundreds of launches apart: two kept
    # ones in a row were not consecutive on the GPU, so it has no runs to find.
    if wl.torch_compile or wl.cuda_graphs or wl.graph_capture or wl.sampled_calls:
        return []
    total = int(db.scalar("SELECT coalesce(sum(end_ns - start_ns), 0) FROM kernels") or 0)
    if not total:
        return []
    require(db, KERNEL_OPS)
    # PyTorch operators, recorded as such or as the NVTX ranges `emit_nvtx` writes into an
    # Nsight export; a CUDA C program has no operators to fuse
    if not wl.is_pytorch and not db.scalar(
        "SELECT count(*) > 0 FROM kernel_ops WHERE starts_with(op_name, 'aten::')"
    ):
        return []
    names = [
        n
        for (n,) in db.rows("SELECT DISTINCT kernel_name FROM kernel_ops")
        if classify(n).key in _MEMORY_BOUND and not _FBGEMM_KERNEL.search(n)
    ]
    if not names:
        return []
    # The runs' kernels, found once (a window over every kernel) for the three questions
    # below; a scratch table of this analysis, not a derived table: it depends on the
    # kernel classification, which is code, and no other analyzer reads it.
    db.con.execute(f"CREATE OR REPLACE TEMP TABLE fusion_run_kernels AS {_RUN_KERNELS}", [names])
    # the longest runs, each row with the totals over all runs (one pass over the kernels)
    longest = db.dicts(
        f"""SELECT device_id, start_ns, end_ns, kernels, ns, longest_ns, operators,
                   count(*) OVER () AS all_runs, sum(kernels) OVER () AS all_kernels,
                   sum(ns) OVER () AS all_ns, sum(ns - longest_ns) OVER () AS all_saving
            FROM ({_RUNS}) ORDER BY ns DESC, start_ns LIMIT {_TOP}"""
    )
    if not longest:
        return []
    runs, kernels, run_ns, saving = (
        int(longest[0][k]) for k in ("all_runs", "all_kernels", "all_ns", "all_saving")
    )
    if db.pct_of_window(saving) < t.severity_low_pct:
        return []
    ops = db.dicts(
        """SELECT op_name AS operator, count(*) AS kernels, sum(dur_ns) AS ns
           FROM fusion_run_kernels GROUP BY op_name ORDER BY ns DESC, op_name"""
    )
    optimizer_in_runs = wl.is_training and bool(db.scalar(_OPTIMIZER_IN_RUNS))
    foreach = bool(
        db.scalar("SELECT count(*) > 0 FROM cpu_ops WHERE starts_with(name, 'aten::_foreach_')")
    )
    t0 = db.t0_ns
    share = 100.0 * run_ns / total
    top_ops = ", ".join(f"`{o['operator']}`" for o in ops[:_TOP])
    estimate = saving
    saving, paced = _replayed(db, t, run_ns, saving, kernels - runs)
    return [
        finding(
            ANALYZER,
            ("memory_bound_runs",),
            saving,
            db,
            t,
            subject_ns=run_ns,
            title=f"{fmt_ns(run_ns)} of kernel time ({share:.0f}%) is "
            f"{fmt_count(runs, 'unfused run')} of "
            "memory-bound kernels, one per operator: fused, about "
            f"{fmt_ns(estimate)} less"
            + (f" ({fmt_ns(saving)} of it in this run, the host pacing it)" if paced else ""),
            impact_basis=f"Each run's time beyond its longest kernel, summed over the "
            f"{fmt_count(runs, 'run')}: a fused kernel still streams the largest tensor once, "
            "and the other passes over memory go. An estimate; high where a run joins "
            "unrelated tensors." + paced,
            summary=f"{kernels:,} elementwise and normalization kernels ({share:.1f}% of "
            f"kernel time) run in {fmt_count(runs, 'run')} of consecutive ones between the "
            "compute kernels, "
            f"each launched by its own operator call (most time: {top_ops}). Each reads its "
            "inputs from memory and writes its result back for the next one to read again.",
            evidence={
                "runs": runs,
                "run_kernels": kernels,
                "run_ns": run_ns,
                "run_share_pct": round(share, 3),
                "fused_estimate_ns": run_ns - estimate,
                "operators": [
                    {"operator": o["operator"], "kernels": int(o["kernels"]), "ns": int(o["ns"])}
                    for o in ops[:_TOP]
                ],
                "longest_runs": [
                    {
                        "start_offset_ns": int(r["start_ns"] - t0),
                        "end_offset_ns": int(r["end_ns"] - t0),
                        "kernels": int(r["kernels"]),
                        "ns": int(r["ns"]),
                        "longest_kernel_ns": int(r["longest_ns"]),
                        "operators": list(r["operators"]),
                    }
                    for r in longest
                ],
            },
            advice=_advice(wl, optimizer_in_runs, foreach),
            # the operators' own hot-operator findings count part of the same time
            supersedes=[operator_finding_id(o["operator"]) for o in ops],
            time_ranges=[
                TimeRange(int(r["start_ns"]), int(r["end_ns"]), r["device_id"], "unfused run")
                for r in longest
            ],
        )
    ]


# The launch calls' median time: what fusing gives back on the host per kernel it removes.
_LAUNCH_NS = f"""SELECT CAST(median(end_ns - start_ns) AS BIGINT) FROM api_calls
                 WHERE name IN ({sql_list(LAUNCH_CALLS)})"""


# Of the launches fusing removes, those inside an optimizer step: a per-parameter
# optimizer's updates, which a multi-tensor or fused optimizer removes and compiling the
# model does not (each run keeps one kernel, counted outside the step where the run
# reaches out of it: ResNet-50's steps each join the last backward kernels).
_OPTIMIZER_REMOVED = """
WITH steps AS (SELECT pid, tid, start_ns, end_ns FROM cpu_ops
               WHERE name LIKE 'Optimizer.step%'),
inside AS (
    SELECT DISTINCT k.device_id, k.krow FROM fusion_run_kernels k
    JOIN cpu_ops o ON o.op_id = k.op_id
    JOIN steps s ON s.pid IS NOT DISTINCT FROM o.pid AND s.tid = o.tid
                AND o.start_ns >= s.start_ns AND o.end_ns <= s.end_ns
),
per_run AS (
    SELECT k.device_id, k.run, count(*) AS n, count(i.krow) AS n_in
    FROM fusion_run_kernels k LEFT JOIN inside i USING (device_id, krow)
    GROUP BY k.device_id, k.run
)
SELECT coalesce(sum(CASE WHEN n_in = n THEN n - 1 ELSE n_in END), 0) FROM per_run
"""


def _replayed(
    db: TraceDB, t: Thresholds, run_ns: int, saving: int, removed: int
) -> tuple[int, str]:
    """What fusing the runs gives back in this run where the host paces the GPU, and the
    basis's words for it; the estimate and no words where the GPU paces it. Replayed with
    the host's launches held (:mod:`launch_replay`), the runs fused end the device's work
    only so much sooner; fusing also removes launches, host time the replay holds fixed,
    so each removed kernel's launch call is added back (its median time). A ResNet-50
    whose steps wait on a `num_workers=0` loader: 88 ms estimated, ~9 ms replayed."""
    sel = "SELECT device_id, start_ns, start_ns + dur_ns AS end_ns FROM fusion_run_kernels"
    if saving <= 0 or not host_waits_recorded(db, sel, []):
        return saving, ""
    replayed = replay_saving(db, sel, [], 1.0 - saving / run_ns, t.idle_drain_min_wait_ns)
    launch_ns = int(db.scalar(_LAUNCH_NS) or 0)
    launches = removed * launch_ns
    capped = min(saving, replayed + launches)
    if capped >= 0.8 * saving:
        return saving, ""
    optimizer = int(db.scalar(_OPTIMIZER_REMOVED) or 0)
    return capped, (
        " Replayed with the host's launches held where they were (each blocking call "
        "returning as soon as the GPU work before it is done), the runs fused end the run "
        f"only {fmt_ns(replayed)} sooner: elsewhere the GPU waits on the host (the idle-GPU "
        f"findings); with the {removed:,} launches fusing removes ({fmt_ns(launches)} of "
        f"host time at their median), {fmt_ns(capped)} comes back in this run, up to "
        f"{fmt_ns(saving)} once the host keeps the GPU fed."
        + profiler_launch_caveat(workload_of(db))
        + (
            f" {optimizer:,} of those launches ({fmt_ns(optimizer * launch_ns)}) are the "
            "optimizer's per-parameter updates inside `Optimizer.step`: a multi-tensor "
            "(foreach) or fused optimizer removes them, compiling the model does not."
            if optimizer
            else ""
        )
    )


def _advice(wl: Workload, optimizer_in_runs: bool, foreach: bool) -> str:
    """Compile first; else the fused kernels for what the runs hold: the model's blocks,
    and the optimizer's steps where they are in the runs."""
    blocks = (
        "fused normalization and activation kernels"
        if wl.is_training
        else "fused kernels for the model's normalization and activation blocks (fused "
        "LayerNorm/RMSNorm with the residual add, bias with activation, and in LLMs the "
        "rotary embedding and SwiGLU)"
    )
    if optimizer_in_runs:
        # a per-parameter loop first needs the multi-tensor form; foreach already batches
        # tensors per op, and fused=True makes the whole step one kernel
        blocks += (
            ", and a fused optimizer step (`fused=True` on Adam, AdamW or SGD)"
            if foreach
            else ", and an optimizer that updates all parameters at once (`foreach=True`, or "
            "`fused=True` on Adam, AdamW or SGD) instead of one parameter at a time"
        )
    return (
        "Compile the model (`torch.compile(model)`): it fuses each such run of pointwise and "
        f"normalization operators into one kernel. Where compiling is not an option, use "
        f"{blocks}."
    )
