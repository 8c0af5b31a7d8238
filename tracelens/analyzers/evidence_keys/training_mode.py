"""The evidence of ``training_mode`` findings (:mod:`tracelens.analyzers.training_mode`)."""

from __future__ import annotations

from tracelens.analyzers.evidence_keys.model import COUNT, NS, ROWS, TEXT, AnalyzerEvidence, Key

EVIDENCE = AnalyzerEvidence(
    "training_mode",
    "One finding when an inference or serving trace (no backward, no optimizer step) runs "
    "dropout kernels: the model was left in training mode. The report's `notes` then hold a "
    "line starting `the model ran in training mode`, naming this finding's id: by its time "
    "the finding is minor, but the measured outputs are not the served model's (nor BatchNorm's "
    "work, where the model has it)",
    keys=(
        Key("dropout_kernels", COUNT, "Kernels the dropout operators launched"),
        Key("dropout_kernel_ns", NS, "Their summed duration: the impact"),
        Key(
            "batch_norm_calls",
            COUNT,
            "BatchNorm operator calls (outermost): in training mode they normalize with each "
            "batch's statistics",
        ),
        Key(
            "operators",
            ROWS,
            "The dropout operators, by kernel time",
            fields=(
                Key("operator", TEXT, "Operator name"),
                Key("kernels", COUNT, "Kernels it launched"),
                Key("ns", NS, "Their summed duration"),
            ),
        ),
    ),
)
