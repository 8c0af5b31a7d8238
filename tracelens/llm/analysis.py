"""Everything tracelens derives from LLM annotations of one trace, computed once.

The report section (:mod:`tracelens.llm.section`) and the findings
(:mod:`tracelens.analyzers.llm_latency`) both read this; it is computed once per trace
database. Only the KV-growth fit depends on a threshold (``llm_kv_min_steps``); a run with
another value refits it and keeps the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.llm.annotations import parse_annotations
from tracelens.llm.kv_growth import kv_growth
from tracelens.llm.latency_metrics import latency_summary, per_request
from tracelens.llm.model import (
    AnnotatedRequest,
    KvGrowth,
    LatencySummary,
    PrefillStalls,
    Queueing,
    StalledGap,
    StepProfiles,
)
from tracelens.llm.prefill_stalls import prefill_stalls
from tracelens.llm.queueing import queueing
from tracelens.llm.step_profile import early_step_warnings, step_profile


@dataclass
class LlmAnalysis:
    summary: LatencySummary
    per_request: list[AnnotatedRequest]
    steps: StepProfiles
    queueing: Queueing
    prefill_stalls: PrefillStalls
    # the longest stalled gaps, worst first (the prefill-stall finding's evidence)
    worst_stalls: list[StalledGap]
    kv_growth: KvGrowth | None
    # the llm_kv_min_steps that kv_growth was fitted under
    kv_min_steps: int
    warnings: list[str] = field(default_factory=list)


def analyze_llm(db: TraceDB, t: Thresholds) -> LlmAnalysis | None:
    """None when the trace has no LLM annotations (computed once per TraceDB; the KV-growth
    fit once per ``llm_kv_min_steps``)."""
    base = db.memo("llm_analysis", lambda: _analyze(db, t))
    if base is None or base.kv_min_steps == t.llm_kv_min_steps:
        return base
    return db.memo(
        ("llm_analysis", t.llm_kv_min_steps),
        lambda: replace(
            base,
            kv_growth=kv_growth(db, t.llm_kv_min_steps),
            kv_min_steps=t.llm_kv_min_steps,
        ),
    )


def _analyze(db: TraceDB, t: Thresholds) -> LlmAnalysis | None:
    found = parse_annotations(db)
    result: LlmAnalysis | None = None
    if found.present:
        summary, requests = latency_summary(db), per_request(db)
        steps, waits = step_profile(db), queueing(db)
        stalls, worst = prefill_stalls(db)
        result = LlmAnalysis(
            summary=summary,
            per_request=requests,
            steps=steps,
            queueing=waits,
            prefill_stalls=stalls,
            worst_stalls=worst,
            kv_growth=kv_growth(db, t.llm_kv_min_steps),
            kv_min_steps=t.llm_kv_min_steps,
            warnings=[*found.warnings, *early_step_warnings(db)],
        )
    return result
