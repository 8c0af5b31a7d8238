"""The evidence of ``fusion`` findings (:mod:`tracelens.analyzers.fusion`)."""

from __future__ import annotations

from tracelens.analyzers.evidence_keys.model import (
    COUNT,
    NS,
    PCT,
    ROWS,
    TEXT,
    TEXTS,
    AnalyzerEvidence,
    Key,
)

_OPERATORS = (
    Key("operator", TEXT, "Operator name"),
    Key("kernels", COUNT, "Its kernels in the runs"),
    Key("ns", NS, "Their summed duration"),
)

EVIDENCE = AnalyzerEvidence(
    "fusion",
    "One finding for an eager PyTorch trace whose memory-bound kernels run back to back, "
    "one per operator call, in runs a fused kernel would replace",
    keys=(
        Key("runs", COUNT, "Runs of at least two operator calls' memory-bound kernels"),
        Key("run_kernels", COUNT, "Kernels in them"),
        Key("run_ns", NS, "Their summed duration (the finding's subject)"),
        Key("run_share_pct", PCT, "That share of all kernel time"),
        Key(
            "fused_estimate_ns",
            NS,
            "The runs' time fused: each run's longest kernel, summed; the impact is "
            "`run_ns` minus this",
        ),
        Key(
            "operators",
            ROWS,
            "The operators whose kernels take most of the runs' time (at most 5)",
            fields=_OPERATORS,
        ),
        Key(
            "longest_runs",
            ROWS,
            "The longest runs (at most 5)",
            fields=(
                Key("start_offset_ns", NS, "Start, from the trace's t0"),
                Key("end_offset_ns", NS, "End, from the trace's t0"),
                Key("kernels", COUNT, "Kernels in the run"),
                Key("ns", NS, "Their summed duration"),
                Key("longest_kernel_ns", NS, "The longest of them: the fused estimate"),
                Key("operators", TEXTS, "The operators that launched them, by name"),
            ),
        ),
    ),
)
