"""The evidence of ``llm_latency`` findings (:mod:`tracelens.analyzers.llm_latency`)."""

from __future__ import annotations

from ingest.derive_gaps import GAP_CAUSES
from tracelens.analyzers.evidence_keys.model import (
    COUNT,
    NS,
    NS_FRACTIONAL,
    NUMBER,
    OBJECT,
    PCT,
    ROWS,
    TEXT,
    AnalyzerEvidence,
    Key,
    Kind,
    map_of,
)

_KV_STEP = (
    Key("dur_ns", NS, "Its duration"),
    Key("batch", COUNT, "Requests in it"),
    Key("cached", COUNT, "Generated tokens already in the KV cache, over its requests"),
)


def _gpu_idle(kind: str, other: str) -> tuple[Key, ...]:
    """The keys of the finding about the GPU idling in ``kind`` steps."""
    return (
        Key(f"{kind}_steps", COUNT, f"The {kind} steps (llm.{kind} ranges)"),
        Key(f"{kind}_ns", NS, "Their summed duration"),
        Key("gpu_busy_ns", NS, "GPU busy time inside them, over every device"),
        Key(
            "gpu_busy_pct",
            PCT,
            "`gpu_busy_ns` as a share of step time times the devices",
        ),
        Key("kernels_per_step", NUMBER, "Kernels launched per step, on average"),
        Key(
            "median_kernel_ns",
            NS_FRACTIONAL,
            "Median over steps of each step's median kernel duration",
        ),
        Key(
            "idle_ns_by_cause",
            map_of("gap cause", NS),
            "GPU idle time inside these steps by gap cause",
            choices=GAP_CAUSES,
        ),
        Key(
            f"{other}_gpu_busy_pct",
            PCT,
            f"The same share for the {other} steps, to compare",
            null=f"there are no {other} steps",
        ),
    )


EVIDENCE = AnalyzerEvidence(
    "llm_latency",
    "Why TTFT, TPOT and ITL are what they are, from `tracelens.annotate` (llm.*) ranges",
    kinds=(
        Kind(
            "queueing",
            "Queueing before prefill dominates time to first token",
            "queue_share_pct",
            keys=(
                Key("requests", COUNT, "Requests with a queueing time and a first token"),
                Key("queue_ns", NS, "Their waits from arrival to prefill start, summed"),
                Key("prefill_ns", NS, "Their prefill time, summed"),
                Key("ttft_ns", NS, "Their time to first token, summed"),
                Key("queue_share_pct", PCT, "`queue_ns` as a share of `ttft_ns`"),
                Key("max_queue_ns", NS, "The longest wait"),
                Key(
                    "decode_steps_while_queued",
                    COUNT,
                    "Decode steps that ran entirely inside a request's wait, summed over "
                    "waiting requests",
                ),
                Key(
                    "requests_passed_over",
                    COUNT,
                    "Requests that waited through two or more decode steps running below the "
                    "largest batch (static batching)",
                ),
                Key(
                    "max_decode_batch",
                    COUNT,
                    "Largest decode batch of the run",
                    null="there are no decode steps",
                ),
                Key(
                    "longest_waits",
                    ROWS,
                    "The longest waits, up to 5",
                    fields=(
                        Key("rid", TEXT, "Request id"),
                        Key("queue_ns", NS, "Its wait before prefill"),
                        Key(
                            "ttft_ns",
                            NS,
                            "Its time to first token",
                            null="no token of it is in the capture",
                        ),
                    ),
                ),
            ),
        ),
        Kind(
            "prefill_stalls",
            "Prefill steps inside running requests' inter-token gaps",
            "stalled_gaps",
            keys=(
                Key("decode_gaps", COUNT, "Inter-token gaps ending in a decode step"),
                Key("stalled_gaps", COUNT, "Of those, gaps a whole prefill step ran inside"),
                Key("requests_stalled", COUNT, "Requests with a stalled gap"),
                Key("baseline_itl_ns", NS_FRACTIONAL, "Median of the unstalled decode gaps"),
                Key("mean_stalled_itl_ns", NS_FRACTIONAL, "Mean of the stalled gaps"),
                Key(
                    "excess_ns",
                    NS,
                    "Stalled gaps' time above the baseline, summed (the impact is this per "
                    "request)",
                ),
                Key("itl_p50_ns", NS_FRACTIONAL, "Median inter-token latency over all gaps"),
                Key("itl_p99_ns", NS_FRACTIONAL, "The 99th percentile of inter-token latency"),
                Key(
                    "worst_gaps",
                    ROWS,
                    "The longest stalled gaps, up to 5",
                    fields=(
                        Key("rid", TEXT, "Request id"),
                        Key("token", COUNT, "Index of the token the gap ends in"),
                        Key("itl_ns", NS, "The gap's length"),
                        Key("prefills", COUNT, "Prefill steps inside it"),
                        Key("prefill_ns", NS, "Their summed duration"),
                    ),
                ),
            ),
        ),
        Kind(
            "kv_growth",
            "Decode steps slow down as the KV cache grows: a least-squares fit of decode "
            "step time to batch size and cached tokens (the llm.kv_growth section)",
            "ns_per_cached_token",
            keys=(
                Key("decode_steps", COUNT, "Decode steps fitted"),
                Key(
                    "ns_per_cached_token",
                    NS_FRACTIONAL,
                    "Time each generated token in the cache adds to a step (the fit's c)",
                ),
                Key(
                    "ns_per_batch_request",
                    NS_FRACTIONAL,
                    "Time each request in the batch adds (the fit's b)",
                ),
                Key("r2", NUMBER, "R² of the fit"),
                Key("r2_without_cache_term", NUMBER, "R² of the fit without the cache term"),
                Key(
                    "growth_ns",
                    NS,
                    "The cache term summed over decode steps: the impact",
                ),
                Key("decode_ns", NS, "Summed decode step time"),
                Key("growth_pct_of_decode", PCT, "`growth_ns` as a share of `decode_ns`"),
                Key("first_step", OBJECT, "The first decode step", fields=_KV_STEP),
                Key("last_step", OBJECT, "The last decode step", fields=_KV_STEP),
                Key("max_cached_tokens", COUNT, "Most cached tokens in one step"),
            ),
        ),
        Kind(
            "prefill_gpu_idle",
            "The GPU idles during prefill steps (launch-bound when kernels are many and short)",
            "prefill_steps",
            keys=_gpu_idle("prefill", "decode"),
        ),
        Kind(
            "decode_gpu_idle",
            "The GPU idles during decode steps (launch-bound when kernels are many and short)",
            "prefill_gpu_busy_pct",
            keys=_gpu_idle("decode", "prefill"),
        ),
    ),
)
