"""The evidence of ``engine_steps`` findings (:mod:`tracelens.analyzers.engine_steps`)."""

from __future__ import annotations

from ingest.derive_gaps import GAP_CAUSES
from tracelens.analyzers.evidence_keys.model import (
    COUNT,
    FLAG,
    GBPS,
    NS,
    NS_FRACTIONAL,
    NUMBER,
    PCT,
    ROWS,
    TEXT,
    TFLOPS,
    AnalyzerEvidence,
    Key,
    Kind,
    map_of,
)

_HOST_SIDE = tuple(c for c in GAP_CAUSES if c != "gpu_dependency")
_CLAIMED = (
    "The part of `host_idle_ns` in causes these steps hold at least half of on the "
    "device (`launch_overhead`, `host_compute`, `untraced`): the impact"
)


def _host_idle(where: str) -> tuple[Key, ...]:
    return (
        Key("host_idle_ns", NS, f"GPU idle {where} in host-side gap causes"),
        Key(
            "host_idle_ns_by_cause",
            map_of("gap cause", NS),
            "`host_idle_ns` by gap cause",
            choices=_HOST_SIDE,
        ),
        Key("counted_ns", NS, _CLAIMED),
    )


EVIDENCE = AnalyzerEvidence(
    "engine_steps",
    "Where vLLM's and SGLang's own labelled steps spend their time (the llm.engine_steps "
    "section, docs/engine-steps.md)",
    keys=(
        Key("source", TEXT, "The engine whose labels gave the steps", choices=("vllm", "sglang")),
    ),
    kinds=(
        Kind(
            "decode_gpu_idle",
            "Decode steps in which the GPU waits on the host",
            "launch_bound",
            keys=(
                Key("decode_steps", COUNT, "Decode steps"),
                Key("decode_ns", NS, "Their summed duration"),
                Key("gpu_busy_ns", NS, "GPU busy time inside them"),
                Key(
                    "gpu_busy_pct",
                    PCT,
                    "`gpu_busy_ns` as a share of the steps' time inside the GPU's activity window",
                ),
                *_host_idle("inside decode steps"),
                Key(
                    "idle_ns_by_cause",
                    map_of("gap cause", NS),
                    "GPU idle inside decode steps by gap cause, GPU-side waits included",
                    choices=GAP_CAUSES,
                ),
                Key("kernels_per_step", NUMBER, "Kernels per decode step, on average"),
                Key(
                    "median_kernel_ns",
                    NS_FRACTIONAL,
                    "Median kernel duration in decode steps",
                    null="no kernel ran in them",
                ),
                Key(
                    "launch_bound",
                    FLAG,
                    "Whether the waits are mostly launch gaps, or the kernels many "
                    "(`llm_launch_bound_min_kernels`) and short (`llm_short_kernel_ns`)",
                ),
            ),
        ),
        Kind(
            "between_steps",
            "Host time between steps with the GPU idle (scheduling, sampling, detokenizing)",
            "between_ns",
            keys=(
                Key("intervals", COUNT, "Steps that start after the previous one was done"),
                Key(
                    "between_ns",
                    NS,
                    "Host time from one step done to the next step's start, summed",
                ),
                Key("mean_gap_ns", NS, "`between_ns` / `intervals`"),
                *_host_idle("between steps"),
                Key(
                    "host_activity",
                    ROWS,
                    "What the host did in the idle between steps: gap details by idle time, "
                    "up to 5",
                    fields=(
                        Key(
                            "detail",
                            TEXT,
                            "The gap detail: the loader, blocking call or host code covering it",
                        ),
                        Key("ns", NS, "Idle time between steps in gaps with it"),
                    ),
                ),
            ),
        ),
        Kind(
            "mixed_itl",
            "Mixed steps (a prefill chunk with running decodes) stretch the decode requests' ITL",
            "mixed_steps",
            keys=(
                Key("mixed_steps", COUNT, "Mixed steps"),
                Key("mean_mixed_ns", NS_FRACTIONAL, "Their mean duration"),
                Key("decode_baseline_ns", NS_FRACTIONAL, "The median decode step"),
                Key("ratio", NUMBER, "`mean_mixed_ns` / `decode_baseline_ns`"),
                Key(
                    "excess_ns",
                    NS,
                    "Mixed steps' time beyond the baseline, summed",
                ),
                Key(
                    "excess_x_decode_requests_ns",
                    NS,
                    "The same, once per decode request in each step: the ITL added, summed",
                ),
                Key(
                    "decode_intervals_in_mixed",
                    COUNT,
                    "Inter-token intervals of decode requests in mixed steps",
                ),
                Key(
                    "share_of_itl_pct",
                    PCT,
                    "`decode_intervals_in_mixed` as a share of every inter-token interval",
                    null="no step names its decode requests",
                ),
                Key(
                    "mean_chunk_tokens",
                    NUMBER,
                    "Prompt tokens per mixed step, on average",
                    null="the steps' labels give no prompt tokens",
                ),
                Key("itl_p50_ns", NS_FRACTIONAL, "Median engine-side inter-token latency"),
                Key("itl_p99_ns", NS_FRACTIONAL, "Its 99th percentile"),
            ),
        ),
        Kind(
            "small_decode_batch",
            "Decode batches below the GPU's ridge point: weight GEMMs memory-bound "
            "(capacity, not time)",
            "ridge_flop_per_byte",
            keys=(
                Key("gpu", TEXT, "The GPU model the peaks are of"),
                Key("median_decode_tokens", NUMBER, "Median tokens per decode step"),
                Key("max_decode_tokens", COUNT, "Most tokens in a decode step"),
                Key(
                    "weight_dtype",
                    TEXT,
                    "Data type of the weight GEMMs, by costed time, else fp8 where the "
                    "GEMM kernels' names say so",
                    choices=("fp8", "fp16", "bf16", "fp32"),
                ),
                Key(
                    "weight_dtype_assumed",
                    FLAG,
                    "Whether `weight_dtype` is bf16 assumed (no recorded GEMM shapes, and no "
                    "kernel name gives it)",
                ),
                Key(
                    "ridge_flop_per_byte",
                    NUMBER,
                    "The GPU's ridge point: `peak_tflops` over `memory_gbps`, in FLOP per byte",
                ),
                Key("peak_used", TEXT, "The math whose peak that is (`bf16 tensor`, ...)"),
                Key("peak_tflops", TFLOPS, "That peak, as the clocks sustain it"),
                Key("memory_gbps", GBPS, "The GPU's memory bandwidth"),
                Key(
                    "compute_bound_from_tokens",
                    NUMBER,
                    "Tokens per step from which a weight GEMM becomes compute-bound",
                ),
                Key(
                    "mixture_of_experts",
                    FLAG,
                    "Whether operators or kernels name experts (each expert's GEMM sees "
                    "fewer tokens)",
                ),
                Key(
                    "expert_weight_dtype",
                    TEXT,
                    "Weight type the expert GEMM kernels' names spell (`…xmxfp4`, fp8)",
                    choices=("mxfp4", "fp8"),
                    null="not a mixture-of-experts model, or its expert kernels name no "
                    "narrow weight type",
                ),
                Key(
                    "decode_tokens_per_s",
                    NUMBER,
                    "Decode tokens per second over the steps' span",
                    null="the steps span no time",
                ),
            ),
        ),
    ),
)
