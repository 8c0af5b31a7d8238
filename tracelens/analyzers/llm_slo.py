"""SLO attainment below target: which objective fails most and the phase the time goes to.

Not one of :data:`tracelens.analyzers.ANALYZERS`: it needs the objectives (and perhaps a
benchmark client's results) the caller gives, so the report builder runs it beside them.
The finding appears when the share of judged requests meeting every objective is below
``llm_slo_min_attainment_pct``.

Impact is latency, per request on average like the queueing finding's: what the requests
missing the worst objective would have to lose to meet it (TTFT or end-to-end beyond the
bound; TPOT's excess times the tokens after the first; each inter-token gap's part beyond
the bound), summed and divided by the judged requests, at most the analysed window.
"""

from __future__ import annotations

from typing import Any

from tracelens.analyzers.contract import finding
from tracelens.core.findings import Finding, TimeRange
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.llm.slo import LABELS, bound_text, excess_of, missing, value_of
from tracelens.llm.slo_outcome import SloOutcome

ANALYZER = "llm_slo"
_TOP = 5

_ADVICE = {
    "queueing": (
        "Requests wait before their prefill starts: the server is at capacity for this load "
        "or admits requests late. Admit waiting requests at every step (continuous batching), "
        "give the scheduler room (`max_num_seqs`, `max_num_batched_tokens`, KV-cache blocks "
        "via `gpu_memory_utilization`) if memory allows, or add replicas and cap the admitted "
        "load at what meets the objective."
    ),
    "prefill": (
        "The prefill step itself is long: reuse shared prompt prefixes (vLLM "
        "`enable_prefix_caching`, SGLang's radix cache), give prefill more GPUs (tensor "
        "parallelism) or its own workers (prefill/decode disaggregation), and shorten prompts "
        "where the application allows."
    ),
    "decode": (
        "Decode steps are too slow for the objective: run fewer requests per step "
        "(`max_num_seqs`) when latency matters more than throughput, keep decode in CUDA "
        "graphs (`enforce_eager` off), and consider speculative decoding or FP8 weights and KV "
        "cache. When other requests' prefills stall decodes, chunked prefill "
        "(`enable_chunked_prefill`) or disaggregated prefill bounds the stall."
    ),
}
_NO_PHASE_ADVICE = (
    "Annotate the server's requests and steps with `tracelens.annotate` (or profile it while "
    "the benchmark runs) so the trace shows whether the time goes to queueing, prefill or "
    "decode."
)


def analyze_slo(db: TraceDB, t: Thresholds, outcome: SloOutcome | None) -> list[Finding]:
    if outcome is None or outcome.slo is None or outcome.objectives is None:
        return []
    slo = outcome.slo
    all_pct = slo["attainment_pct"]["all"]
    target = t.llm_slo_min_attainment_pct
    worst = slo["worst_objective"]
    if all_pct is None or all_pct >= target or worst is None:
        return []
    bound = dict(outcome.objectives.items())[worst]
    miss = missing(outcome.requests, outcome.objectives, worst)
    excess = sum(excess_of(j.request, worst, bound) for j in miss)
    impact = round(excess / slo["judged"]) if slo["judged"] else 0
    if db.window_ns:
        impact = min(impact, db.window_ns)
    cause: dict[str, Any] = slo["cause"] or {}
    phase = cause.get("phase")
    whose = "the client's" if slo["applies_to"] == "client" else "the trace's"
    worst_pct = slo["attainment_pct"][worst]
    title = (
        f"SLO attainment {all_pct:.0f}% (target {target:.0f}%): {bound_text(worst, bound)} "
        f"fails most ({100 - worst_pct:.0f}% of requests miss it)"
        + (f", mostly {phase}" if phase else "")
    )
    failed = f" ({slo['failed']:,} failed and meet none)" if slo["failed"] else ""
    objectives_text = ", ".join(
        f"{bound_text(n, b)} {slo['attainment_pct'][n]:.1f}%" for n, b in outcome.objectives.items()
    )
    worst_rows = sorted(miss, key=lambda j: (-(value_of(j.request, worst) or 0), j.request.rid))
    worst_rows = worst_rows[:_TOP]
    return [
        finding(
            ANALYZER,
            ("attainment",),
            impact,
            db,
            t,
            title=title,
            impact_basis=f"What the {len(miss):,} requests missing {bound_text(worst, bound)} "
            f"would have to lose to meet it ({fmt_ns(excess)} in all), divided by the "
            f"{slo['judged']:,} judged requests: mean latency per request, like the queueing "
            "finding's; at most the analysed window.",
            summary=f"{slo['good_requests']:,} of {whose} {slo['judged']:,} requests{failed} "
            f"meet every objective ({objectives_text}); goodput "
            f"{_rate(slo['goodput_requests_per_s'], 'requests/s')}, "
            f"{_rate(slo['goodput_output_tokens_per_s'], 'output tokens/s')}. "
            f"{LABELS[worst]} fails most. Among {cause.get('basis', 'these requests')}, "
            f"{cause.get('text', '')}",
            evidence={
                "applies_to": slo["applies_to"],
                "objectives": slo["objectives"],
                "attainment_pct": slo["attainment_pct"],
                "missed": slo["missed"],
                "judged": slo["judged"],
                "failed": slo["failed"],
                "good_requests": slo["good_requests"],
                "goodput_requests_per_s": slo["goodput_requests_per_s"],
                "goodput_output_tokens_per_s": slo["goodput_output_tokens_per_s"],
                "worst_objective": worst,
                "excess_ns": excess,
                "cause": cause,
                "worst_requests": [
                    {"rid": j.request.rid, f"{worst}_ns": value_of(j.request, worst)}
                    for j in worst_rows
                ],
            },
            advice=_ADVICE.get(phase or "", _NO_PHASE_ADVICE),
            time_ranges=[
                TimeRange(
                    j.request.start_ns, j.request.end_ns, None, f"{j.request.rid} misses {worst}"
                )
                for j in worst_rows
                if j.request.start_ns is not None and j.request.end_ns is not None
            ],
        )
    ]


def _rate(v: float | None, unit: str) -> str:
    return "-" if v is None else f"{v:,.2f} {unit}"
