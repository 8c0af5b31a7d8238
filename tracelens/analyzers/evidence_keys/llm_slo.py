"""The evidence of ``llm_slo`` findings (:mod:`tracelens.analyzers.llm_slo`)."""

from __future__ import annotations

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
    map_of,
)
from tracelens.llm.slo import LABELS, OBJECTIVES

_TRACE_PHASES = "the phases come from the trace's annotated requests"
_NO_PHASE = "no request shows that phase"


def _worst_value(objective: str) -> Key:
    return Key(
        f"{objective}_ns",
        NS_FRACTIONAL,
        f"Its {LABELS[objective]}"
        + (" (its longest inter-token gap)" if objective == "itl" else ""),
        when=f"`worst_objective` is `{objective}`",
        null="the request has no value for it",
    )


EVIDENCE = AnalyzerEvidence(
    "llm_slo",
    "SLO attainment below `llm_slo_min_attainment_pct` (with `--slo`): the objective that "
    "fails most and the serving phase its time goes to (the llm.slo section, "
    "docs/llm-latency.md)",
    keys=(
        Key(
            "applies_to",
            TEXT,
            "Whose requests are judged: a benchmark client's (`--bench`) or the trace's",
            choices=("client", "trace"),
        ),
        Key(
            "objectives",
            map_of("objective + `_ns`", NS),
            "The bounds given",
            choices=tuple(f"{o}_ns" for o in OBJECTIVES),
        ),
        Key(
            "attainment_pct",
            map_of("objective, or `all`", PCT),
            "Share of judged requests meeting each objective, and every one (`all`)",
            choices=(*OBJECTIVES, "all"),
        ),
        Key(
            "missed",
            map_of("objective", COUNT),
            "Judged requests missing each objective",
            choices=OBJECTIVES,
        ),
        Key("judged", COUNT, "Requests judged (those with a value for every objective)"),
        Key("failed", COUNT, "Requests the client saw fail (they meet no objective)"),
        Key("good_requests", COUNT, "Requests meeting every objective"),
        Key(
            "goodput_requests_per_s",
            NUMBER,
            "Good requests per second over the benchmark's duration or the requests' span",
            null="that duration is unknown or 0",
        ),
        Key(
            "goodput_output_tokens_per_s",
            NUMBER,
            "Their output tokens per second",
            null="that duration is unknown or 0",
        ),
        Key(
            "worst_objective",
            TEXT,
            "The objective the most requests miss",
            choices=OBJECTIVES,
        ),
        Key(
            "excess_ns",
            NS_FRACTIONAL,
            "What the requests missing it would have to lose to meet it, summed (the impact "
            "is this per judged request)",
        ),
        Key(
            "cause",
            OBJECT,
            "The serving phase the missing requests' time goes to",
            fields=(
                Key(
                    "phase",
                    TEXT,
                    "The phase that holds most of the time the objective measures",
                    choices=("queueing", "prefill", "decode"),
                    null="the trace shows no phases for these requests",
                ),
                Key("text", TEXT, "The same, in words"),
                Key("basis", TEXT, "Which requests the phases are summed over"),
                Key(
                    "queue_ns",
                    NS_FRACTIONAL,
                    "Their waits before prefill, summed",
                    when=_TRACE_PHASES,
                    null=_NO_PHASE,
                ),
                Key(
                    "prefill_ns",
                    NS_FRACTIONAL,
                    "Their prefill time, summed",
                    when=_TRACE_PHASES,
                    null=_NO_PHASE,
                ),
                Key(
                    "decode_ns",
                    NS_FRACTIONAL,
                    "Their first to last token, summed (from a client: end-to-end minus TTFT)",
                    null=_NO_PHASE,
                ),
                Key(
                    "decode_stalled_ns",
                    NS_FRACTIONAL,
                    "Other requests' prefill steps inside their decode gaps, summed",
                    when=_TRACE_PHASES,
                    null=_NO_PHASE,
                ),
                Key("ttft_ns", NS_FRACTIONAL, "Their time to first token, summed", null=_NO_PHASE),
            ),
        ),
        Key(
            "worst_requests",
            ROWS,
            "The missing requests with the largest value of the worst objective, up to 5",
            fields=(
                Key("rid", TEXT, "Request id"),
                *(_worst_value(o) for o in OBJECTIVES),
            ),
        ),
    ),
)
