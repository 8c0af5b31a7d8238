"""The evidence of ``warmup`` findings (:mod:`tracelens.analyzers.warmup`)."""

from __future__ import annotations

from tracelens.analyzers.evidence_keys.model import (
    COUNT,
    NS,
    OBJECT,
    PCT,
    AnalyzerEvidence,
    Key,
    map_of,
)

EVIDENCE = AnalyzerEvidence(
    "warmup",
    "A capture whose first part (at least `warmup_min_share_pct` % of the window) is "
    "one-off work: first calls, autotuning, compilation, lazy initialization",
    keys=(
        Key(
            "span_start_offset_ns",
            NS,
            "Start of the warm-up span, from trace.t0_ns: always 0, the span starts the window",
        ),
        Key("span_end_offset_ns", NS, "End of the span, from trace.t0_ns: its length"),
        Key("share_pct", PCT, "The span as a share of the analysed window"),
        Key("steady_state_ns", NS, "The rest of the window, after the span"),
        Key(
            "evidence",
            map_of("kind of evidence", OBJECT),
            "The host intervals in the span that make it warm-up, by kind: annotated "
            "(ranges named warm-up), first_calls (first calls far slower than later ones), "
            "autotuning (convolutions choosing an algorithm, cudnnFind calls), compilation "
            "(JIT, module loading), lazy_init (first allocations, context and stream "
            "creation); kinds with none are left out",
            choices=("annotated", "first_calls", "autotuning", "compilation", "lazy_init"),
            fields=(
                Key("host_ns", NS, "Union of the kind's intervals inside the span"),
                Key("count", COUNT, "Its intervals inside the span"),
            ),
        ),
    ),
)
