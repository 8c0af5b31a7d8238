"""The evidence of ``hot_ops`` findings (:mod:`tracelens.analyzers.hot_ops`)."""

from __future__ import annotations

from tracelens.analyzers.evidence_keys.model import (
    BYTES,
    COUNT,
    FLAG,
    GBPS,
    NS,
    NUMBER,
    OBJECT,
    PCT,
    ROWS,
    TEXT,
    TEXTS,
    TFLOPS,
    AnalyzerEvidence,
    Key,
    Kind,
)
from tracelens.core.kernel_kinds import KINDS

_MATH_ONLY = "the operator is memory-bound by kind (elementwise, copies): no math peak applies"

EVIDENCE = AnalyzerEvidence(
    "hot_ops",
    "Operators holding at least `hot_min_share_pct` % of GPU kernel time, with a cost "
    "estimate where the recorded shapes give their work; explicit attention as one finding",
    kinds=(
        Kind(
            "operator",
            "One operator (the subject is its name) and the kernels it launched",
            "operator",
            keys=(
                Key("operator", TEXT, "The operator's name"),
                Key("gpu_ns", NS, "Kernel time of the kernels it launched (kernel_ops)"),
                Key("share_pct", PCT, "`gpu_ns` as a share of all kernel time"),
                Key("operator_calls", COUNT, "Its calls that launched kernels"),
                Key("kernel_count", COUNT, "Kernels they launched"),
                Key(
                    "kernel_kind",
                    TEXT,
                    "What its top kernel is, which chooses the advice",
                    choices=tuple(KINDS),
                ),
                Key(
                    "top_kernels",
                    ROWS,
                    "Its kernels by total time, up to 5",
                    fields=(
                        Key("name", TEXT, "Kernel name"),
                        Key("count", COUNT, "Launches of it by this operator"),
                        Key("total_ns", NS, "Their summed duration"),
                        Key("mean_ns", NS, "Their mean duration"),
                    ),
                ),
                Key(
                    "cost",
                    OBJECT,
                    "The roofline estimate over its calls whose recorded shapes give FLOPs "
                    "and bytes (tracelens/analyzers/cost_model.py)",
                    when="some of its calls have recorded shapes and the GPU's peaks are known",
                    fields=(
                        Key("flops", COUNT, "FLOPs of those calls"),
                        Key(
                            "bytes",
                            BYTES,
                            "Their compulsory memory traffic: inputs read and output written once",
                        ),
                        Key(
                            "costed_ns",
                            NS,
                            "Kernel time of those calls (not claimed by explicit attention)",
                        ),
                        Key(
                            "achieved_tflops",
                            TFLOPS,
                            "`flops` / `costed_ns`",
                            null="the calls do no math (`flops` is 0), or `flops_uncertain`",
                        ),
                        Key(
                            "flops_uncertain",
                            FLAG,
                            "`flops` / `costed_ns` is above the GPU's peak for the dtypes: "
                            "the FLOPs are overcounted, no rate is reported and no impact "
                            "estimated",
                        ),
                        Key("achieved_gbps", GBPS, "`bytes` / `costed_ns`", null="`bytes` is 0"),
                        Key(
                            "arithmetic_intensity",
                            NUMBER,
                            "FLOP per byte: `flops` / `bytes`",
                            null="`bytes` is 0",
                        ),
                        Key(
                            "bound",
                            TEXT,
                            "The bound resource at the math it runs now: compute when the "
                            "intensity is at or above the ridge point (peak / bandwidth)",
                            choices=("compute", "memory"),
                            null="`flops_uncertain`: the intensity is overcounted too",
                        ),
                        Key(
                            "peak_used",
                            TEXT,
                            'The math whose peak sets the ideal time (`"bf16 tensor"`, `"tf32 '
                            'tensor (FP32 math switched to TF32)"`, `"fp32"`, ...)',
                            null=_MATH_ONLY,
                        ),
                        Key(
                            "peak_tflops",
                            TFLOPS,
                            "That peak, as the clocks sustain it",
                            null=_MATH_ONLY,
                        ),
                        Key(
                            "running_peak_tflops",
                            TFLOPS,
                            "The peak of the math it runs now (FP32 on CUDA cores for FP32 "
                            "operators), which judges bound",
                            null=_MATH_ONLY,
                        ),
                        Key("memory_gbps", GBPS, "The GPU's memory bandwidth"),
                        Key(
                            "ideal_ns",
                            NS,
                            "Time at a realistic efficiency of the bound resource (the cost_* "
                            "thresholds), at least `cost_min_kernel_ns` a kernel",
                        ),
                        Key(
                            "grid_bound_ns",
                            NS,
                            "Kernel time of those calls whose longest kernel's grid leaves at "
                            "least `occupancy_explain_idle_pct` % of the SMs idle: bound by "
                            "latency, so no roofline gap is claimed for them",
                        ),
                        Key(
                            "dtypes",
                            TEXTS,
                            "Data types of the costed calls (fp32, bf16, ...)",
                        ),
                    ),
                ),
                Key(
                    "claimed_by_explicit_attention_ns",
                    NS,
                    "Its kernel time inside explicit attention, counted by that finding instead",
                    when="some of its calls are part of explicit attention",
                ),
            ),
        ),
        Kind(
            "explicit_attention",
            "Attention written as batched matmul, softmax and matmul, against a fused kernel",
            "sites",
            keys=(
                Key(
                    "sites",
                    ROWS,
                    "Where it is computed: one row per parent module and shape, up to 5",
                    fields=(
                        Key("parent", TEXT, "The enclosing operator or module"),
                        Key("batch_x_heads", COUNT, "Batch size times attention heads"),
                        Key("query_len", COUNT, "Query length L"),
                        Key("key_len", COUNT, "Key length S"),
                        Key("head_dim", COUNT, "Head dimension d"),
                        Key("dtype", TEXT, "Data type of the matmuls"),
                        Key("calls", COUNT, "Attention computations at this site"),
                        Key(
                            "gpu_ns",
                            NS,
                            "Their kernel time, first matmul to second (scaling, masking)",
                        ),
                        Key(
                            "fused_estimate_ns",
                            NS,
                            "A fused kernel's time for the same work (at most `gpu_ns`)",
                        ),
                    ),
                ),
                Key("gpu_ns", NS, "Kernel time of every site"),
                Key("share_pct", PCT, "`gpu_ns` as a share of all kernel time"),
                Key("fused_estimate_ns", NS, "A fused kernel's time for every site"),
            ),
        ),
    ),
)
