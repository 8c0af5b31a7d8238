"""A model measured for inference while still in training mode: dropout kernels run.

Dropout is a no-op in eval mode (``module.eval()``), so a dropout kernel in a trace with
no backward pass and no optimizer step means the model was left in training mode: its
outputs are not the model's (a random share of activations is zeroed, differently every
run) and BatchNorm layers, if any, normalize with each batch's statistics and update their
running ones. ``torch.no_grad()`` and ``torch.inference_mode()`` do not change that; only
eval mode does. The time it costs is usually small (the dropout kernels themselves), but
the benchmark measures a different computation from the one it serves, which is why it is
reported whatever its share, and named in a note at the top of the report
(:func:`training_mode_notes`): ranked by time it is a minor finding, but the outputs the
benchmark measured are not the served model's. The note stays proportionate: where no
BatchNorm ran, the other layers take the same time in eval mode, and it says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracelens.analyzers.contract import finding
from tracelens.core.findings import Finding, TimeRange
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.core.workload import workload_of
from tracelens.derived import require
from tracelens.derived.kernel_ops import KERNEL_OPS

ANALYZER = "training_mode"

# The operators training-mode dropout launches (eval mode returns the input instead).
DROPOUT_OPS = (
    r"^aten::(native_dropout|dropout|feature_dropout|alpha_dropout|feature_alpha_dropout"
    r"|fused_dropout|_fused_dropout)$"
)
_SHOWN_RANGES = 20
# BatchNorm's operators: in training mode they normalize with each batch's statistics
# (``_native_batch_norm_legit_no_training`` is eval mode's own, so it is not one of them).
_BATCH_NORM_OPS = (
    "'aten::batch_norm', 'aten::native_batch_norm', 'aten::_batch_norm_impl_index', "
    "'aten::cudnn_batch_norm', 'aten::miopen_batch_norm', 'aten::_native_batch_norm_legit'"
)


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    wl = workload_of(db)
    if wl.kind not in ("inference", "serving") or not wl.is_pytorch:
        return []
    require(db, KERNEL_OPS)
    ops = db.dicts(
        f"""SELECT op_name, count(*) AS kernels, sum(dur_ns) AS ns
            FROM kernel_ops WHERE regexp_matches(op_name, '{DROPOUT_OPS}')
            GROUP BY op_name ORDER BY ns DESC, op_name"""
    )
    if not ops:
        return []
    kernels = sum(int(r["kernels"]) for r in ops)
    ns = sum(int(r["ns"]) for r in ops)
    first = db.dicts(
        f"""SELECT start_ns, start_ns + dur_ns AS end_ns, device_id FROM kernel_ops
            WHERE regexp_matches(op_name, '{DROPOUT_OPS}')
            ORDER BY start_ns LIMIT {_SHOWN_RANGES}"""
    )
    names = ", ".join(f"`{r['op_name']}`" for r in ops)
    # The outermost BatchNorm calls only.
    batch_norms = int(
        db.scalar(
            f"""SELECT count(*) FROM cpu_ops o
                WHERE o.name IN ({_BATCH_NORM_OPS})
                  AND NOT EXISTS (SELECT 1 FROM cpu_ops p WHERE p.op_id = o.parent_id
                                  AND p.name IN ({_BATCH_NORM_OPS}))"""
        )
        or 0
    )
    batch_norm_text = (
        f" Its {batch_norms:,} BatchNorm call{'s' if batch_norms != 1 else ''} normalize with "
        "each batch's statistics and update their running statistics."
        if batch_norms
        else " No BatchNorm ran; the other layers take the same time in eval mode."
    )
    return [
        finding(
            ANALYZER,
            ("dropout",),
            ns,
            db,
            t,
            title=f"Dropout runs in an {wl.kind} trace: the model is in training mode "
            f"({kernels} dropout kernel{'s' if kernels != 1 else ''}, {fmt_ns(ns)})",
            impact_basis="The dropout kernels' time, which eval mode removes; the larger "
            "cost is that the measured model is not the one served.",
            summary=f"{names} launched {kernels} kernel{'s' if kernels != 1 else ''} "
            f"({fmt_ns(ns)}) although the trace has no backward pass or optimizer step "
            f"({wl.kind_basis}). In training mode dropout zeroes a random share of "
            "activations, so outputs are not the model's and differ from run to run."
            + batch_norm_text,
            evidence={
                "dropout_kernels": kernels,
                "dropout_kernel_ns": ns,
                "batch_norm_calls": batch_norms,
                "operators": [
                    {"operator": r["op_name"], "kernels": int(r["kernels"]), "ns": int(r["ns"])}
                    for r in ops
                ],
            },
            advice="Call `model.eval()` before the measured passes: `torch.no_grad()` and "
            "`torch.inference_mode()` do not switch dropout off, only eval mode does. If the "
            "dropout is meant (Monte Carlo dropout sampling), this does not apply.",
            time_ranges=[
                TimeRange(int(r["start_ns"]), int(r["end_ns"]), r["device_id"], "dropout")
                for r in first
            ],
        )
    ]


def training_mode_notes(findings: Sequence[Finding]) -> list[str]:
    """A report note for the training-mode finding, if any: its own time is small, so it
    ranks among the minor findings, but it says that the whole capture measured the model
    in training mode, which a reader must know before acting on any other finding."""
    return [_note(f) for f in findings if f.analyzer == ANALYZER]


def _note(f: Finding) -> str:
    kernels = int(f.evidence["dropout_kernels"])
    batch_norms = int(f.evidence.get("batch_norm_calls") or 0)
    what = (
        f"and its {batch_norms:,} BatchNorm call{'s' if batch_norms != 1 else ''} normalized "
        "with each batch's statistics, so its outputs and the BatchNorm layers' time are not "
        "the served model's"
        if batch_norms
        else "so its outputs are not the served model's (no BatchNorm ran, and the other "
        "layers time as in eval mode)"
    )
    return (
        f"the model ran in training mode: dropout launched {kernels} "
        f"kernel{'s' if kernels != 1 else ''} ({fmt_ns(int(f.evidence['dropout_kernel_ns']))}) "
        f"in this trace with no backward pass, {what}: call `model.eval()` before measuring "
        f"(finding {ANALYZER} · {f.id})"
    )
