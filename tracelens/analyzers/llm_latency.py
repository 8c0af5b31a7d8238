"""LLM serving latency: why TTFT, TPOT and ITL are what they are (needs LLM annotations).

Four explanations (the last for prefill and decode steps separately), each a finding when
its ``llm_*`` threshold (:class:`~tracelens.core.thresholds.Thresholds`) is met:

- queueing dominates TTFT;
- prefill steps stall running decodes (ITL spikes);
- decode steps slow down as the KV cache grows;
- the GPU idles during prefill or decode steps (launch-bound when the kernels are many and
  short).

Impacts are on two bases, each stated in ``impact_basis``: latency a request waits
(queueing, stalls) is given *per request on average* (the sum over requests divided by the
number of requests), so it stays comparable with wall-clock findings; time the serving loop
spends (KV growth, idle GPU in steps) is wall-clock time within the steps.
"""

from __future__ import annotations

import msgspec

from tracelens.analyzers.contract import finding
from tracelens.core.findings import Finding, TimeRange
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.llm.analysis import LlmAnalysis, analyze_llm
from tracelens.llm.model import StepKind

ANALYZER = "llm_latency"


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    a = analyze_llm(db, t)
    if a is None:
        return []
    findings = [
        _queueing(db, t, a),
        _prefill_stalls(db, t, a),
        _kv_growth(db, t, a),
        _gpu_idle_in_steps(db, t, a, "prefill"),
        _gpu_idle_in_steps(db, t, a, "decode"),
    ]
    return [f for f in findings if f is not None]


def _queueing(db: TraceDB, t: Thresholds, a: LlmAnalysis) -> Finding | None:
    q = a.queueing
    share, n = q.queue_share_pct, q.requests
    if share is None or n == 0:
        return None
    mean_queue = q.queue_ns / n
    if share < t.llm_queue_min_share_pct or mean_queue < t.llm_queue_min_mean_ns:
        return None
    passed_over = q.requests_passed_over
    if passed_over:
        cause = (
            f"{passed_over:,} requests waited through two or more decode steps that ran with "
            f"fewer than the {q.max_decode_batch} requests this server has batched: waiting "
            "requests are only admitted when the running batch finishes (static batching)."
        )
        advice = (
            "Admit waiting requests at every step instead of when the batch drains: continuous "
            "(in-flight) batching, as in vLLM, TGI or TensorRT-LLM's in-flight batcher. Each "
            "step should run `prefill(new requests)` or merge them into the decode batch up to "
            "`max_num_seqs`/`max_batch_size`; a finished request frees its slot immediately."
        )
    else:
        cause = (
            "Every decode step that ran while requests waited was already at the largest "
            "batch size seen: the server is at capacity for this load."
        )
        advice = (
            "Raise the batch limit if memory allows (`max_num_seqs`, `max_num_batched_tokens`, "
            "KV-cache blocks via `gpu_memory_utilization`), make steps cheaper (see the other "
            "findings), or add replicas; for latency targets, cap the admitted load."
        )
    mean_ttft = q.ttft_ns / n
    return finding(
        ANALYZER,
        ("queueing",),
        round(mean_queue),
        db,
        t,
        title=f"Queueing is {share:.0f}% of time to first token "
        f"({fmt_ns(mean_queue)} of {fmt_ns(mean_ttft)} per request)",
        impact_basis=f"Mean wait from request arrival to the start of its prefill, over {n:,} "
        f"requests (summed: {fmt_ns(q.queue_ns)}); TTFT drops by this much on average if "
        "requests start prefill on arrival.",
        summary=f"Of the summed TTFT of {n:,} requests ({fmt_ns(q.ttft_ns)}), "
        f"{fmt_ns(q.queue_ns)} ({share:.1f}%) was spent waiting before prefill and "
        f"{fmt_ns(q.prefill_ns)} executing prefill. {cause}",
        evidence={
            "requests": n,
            "queue_ns": q.queue_ns,
            "prefill_ns": q.prefill_ns,
            "ttft_ns": q.ttft_ns,
            "queue_share_pct": round(share, 3),
            "max_queue_ns": q.max_queue_ns,
            "decode_steps_while_queued": q.decode_steps_while_queued,
            "requests_passed_over": passed_over,
            "max_decode_batch": q.max_decode_batch,
            "longest_waits": [
                {"rid": r.rid, "queue_ns": int(r.queue_ns), "ttft_ns": r.ttft_ns} for r in q.longest
            ],
        },
        advice=advice,
        time_ranges=[
            TimeRange(int(r.start_ns), int(r.prefill_start_ns), None, f"{r.rid} queued")
            for r in q.longest
        ],
    )


def _prefill_stalls(db: TraceDB, t: Thresholds, a: LlmAnalysis) -> Finding | None:
    s = a.prefill_stalls
    base, mean_stalled = s.baseline_itl_ns, s.mean_stalled_itl_ns
    if not s.stalled_gaps or not base or mean_stalled is None:
        return None
    ratio = mean_stalled / base
    if ratio < t.llm_stall_min_ratio:
        return None
    requests = max(1, a.summary.requests)
    itl = a.summary.itl_ns
    return finding(
        ANALYZER,
        ("prefill_stalls",),
        round(s.excess_ns / requests),
        db,
        t,
        title=f"Prefills stall running decodes: {s.stalled_gaps:,} inter-token gaps "
        f"average {fmt_ns(mean_stalled)}, {ratio:.1f}× the usual {fmt_ns(base)}",
        impact_basis=f"Inter-token time above the median unstalled gap ({fmt_ns(base)}) in gaps "
        f"that contain a prefill step, summed ({fmt_ns(s.excess_ns)}) and divided by the "
        f"{requests:,} requests; chunked prefill spreads this over many steps instead.",
        summary=f"{s.stalled_gaps:,} of {s.decode_gaps:,} decode inter-token gaps "
        f"({s.requests_stalled:,} requests) contain a whole prefill step of other requests, "
        f"so those requests' next token waits for someone else's prompt. ITL p50 is "
        f"{fmt_ns(itl.p50)}, p99 {fmt_ns(itl.p99)}.",
        evidence={
            "decode_gaps": s.decode_gaps,
            "stalled_gaps": s.stalled_gaps,
            "requests_stalled": s.requests_stalled,
            "baseline_itl_ns": base,
            "mean_stalled_itl_ns": mean_stalled,
            "excess_ns": s.excess_ns,
            "itl_p50_ns": itl.p50,
            "itl_p99_ns": itl.p99,
            "worst_gaps": [
                {
                    "rid": w.rid,
                    "token": int(w.token_index),
                    "itl_ns": int(w.itl_ns),
                    "prefills": int(w.prefills),
                    "prefill_ns": int(w.prefill_ns),
                }
                for w in a.worst_stalls
            ],
        },
        advice="Split long prompts into chunks that share a step with the running decodes "
        "(chunked prefill: vLLM `enable_chunked_prefill=True` with `max_num_batched_tokens` "
        "around 512-2048; TensorRT-LLM `enable_chunked_context`), or disaggregate prefill and "
        "decode onto different workers, so a new request's prompt no longer freezes every "
        "running request for a whole prefill.",
        time_ranges=[
            TimeRange(int(w.start_ns), int(w.end_ns), None, f"{w.rid} stalled")
            for w in a.worst_stalls
        ],
    )


def _kv_growth(db: TraceDB, t: Thresholds, a: LlmAnalysis) -> Finding | None:
    k = a.kv_growth
    if k is None or k.ns_per_cached_token <= 0:
        return None
    if k.decode_steps < t.llm_kv_min_steps:
        return None
    gain = k.r2 - k.r2_without_cache_term
    if k.growth_pct_of_decode < t.llm_kv_min_growth_pct or gain < t.llm_kv_min_r2_gain:
        return None
    first, last = k.first_step, k.last_step
    return finding(
        ANALYZER,
        ("kv_growth",),
        k.growth_ns,
        db,
        t,
        title=f"Decode steps slow down as the KV cache grows: +{fmt_ns(k.ns_per_cached_token)}"
        f" per cached token, {k.growth_pct_of_decode:.0f}% of decode time",
        impact_basis="Least-squares fit of decode step time to batch size and cached generated "
        "tokens; the cache term (per-token cost × cached tokens) summed over "
        f"{k.decode_steps:,} decode steps is the time spent on cache growth.",
        summary=f"Each generated token already in the KV cache adds "
        f"{fmt_ns(k.ns_per_cached_token)} to a decode step (fit R² {k.r2:.2f}, "
        f"{k.r2_without_cache_term:.2f} without the cache term). The first decode step "
        f"took {fmt_ns(first.dur_ns)}, the last {fmt_ns(last.dur_ns)}; TPOT rises with "
        f"sequence position.",
        evidence=msgspec.to_builtins(k),
        advice="Make per-step cost independent of how much has been generated: preallocate the "
        "KV cache (or use a paged cache) instead of `torch.cat`-ing keys and values every step, "
        "use a fused attention kernel (`torch.nn.functional.scaled_dot_product_attention`, "
        "FlashAttention/FlashInfer decode kernels) that reads the cache once, and consider a "
        "quantized KV cache (FP8) or a cap on generated length when long outputs dominate.",
    )


def _gpu_idle_in_steps(
    db: TraceDB, t: Thresholds, a: LlmAnalysis, kind: StepKind
) -> Finding | None:
    """The GPU idles inside ``kind`` steps; launch-bound when the kernels are many and short."""
    d = a.steps.of_kind(kind)
    busy_pct, busy_ns = d.gpu_busy_pct, d.gpu_busy_ns
    if busy_pct is None or busy_ns is None or not d.steps or not d.kernels_per_step:
        return None
    max_busy_pct = t.llm_prefill_max_busy_pct if kind == "prefill" else t.llm_decode_max_busy_pct
    if busy_pct >= max_busy_pct:
        return None
    idle_ns = int(d.total_ns * len(db.devices) - busy_ns)
    median_kernel = d.median_kernel_ns
    launch_bound = (
        median_kernel is not None
        and median_kernel < t.llm_short_kernel_ns
        and d.kernels_per_step >= t.llm_launch_bound_min_kernels
    )
    causes = d.idle_by_cause
    top_cause = max(causes, key=causes.__getitem__) if causes else None
    other: StepKind = "decode" if kind == "prefill" else "prefill"
    if launch_bound:
        title = (
            f"{kind.capitalize()} is launch-bound: {d.kernels_per_step:.0f} kernels of median "
            f"{fmt_ns(median_kernel)} per step keep the GPU only {busy_pct:.0f}% busy"
        )
        advice = (
            f"Each {kind} step is a long chain of tiny kernels and the host cannot launch them "
            f"as fast as the GPU runs them. Capture the {kind} step in a CUDA graph "
            '(`torch.compile(mode="reduce-overhead")`, vLLM/TensorRT-LLM CUDA graphs: keep '
            "`enforce_eager` off), fuse ops with `torch.compile`, and batch more requests per "
            "step so every kernel does more work."
        )
    else:
        title = f"GPU idle {100 - busy_pct:.0f}% of {kind} time" + (
            f" (mostly {top_cause})" if top_cause else ""
        )
        advice = (
            f"The GPU waits on the host during {kind} steps. Remove per-token host syncs "
            "(`.item()`, `.cpu()`, `.tolist()` on the sampled tokens: keep them on the GPU and "
            "copy asynchronously into pinned memory), stop copying inputs from pageable memory "
            "every step (build them on the GPU or use pinned buffers with "
            "`non_blocking=True`), and then capture the step in a CUDA graph."
        )
    return finding(
        ANALYZER,
        (f"{kind}_gpu_idle",),
        idle_ns,
        db,
        t,
        title=title,
        impact_basis=f"GPU idle time inside the {d.steps:,} {kind} steps (step time minus the "
        "union of kernels, copies and memsets in it); at best the steps shrink by this much.",
        summary=f"{kind.capitalize()} steps took {fmt_ns(d.total_ns)} in all; the GPU was "
        f"busy {busy_pct:.1f}% of it ({fmt_ns(d.gpu_busy_ns)}), running "
        f"{d.kernels_per_step:.1f} kernels per step (median kernel "
        f"{fmt_ns(median_kernel)}). {other.capitalize()} steps kept it "
        f"{_pct(a.steps.of_kind(other).gpu_busy_pct)} busy.",
        evidence={
            f"{kind}_steps": d.steps,
            f"{kind}_ns": d.total_ns,
            "gpu_busy_ns": d.gpu_busy_ns,
            "gpu_busy_pct": round(busy_pct, 3),
            "kernels_per_step": round(d.kernels_per_step, 2),
            "median_kernel_ns": median_kernel,
            "idle_ns_by_cause": causes,
            f"{other}_gpu_busy_pct": a.steps.of_kind(other).gpu_busy_pct,
        },
        advice=advice,
    )


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"
