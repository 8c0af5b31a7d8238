"""The report's ``llm`` section: latency numbers and their breakdown, when annotated.

Two sources fill it: ``tracelens.annotate`` ranges (requests and their tokens) and the step
labels vLLM and SGLang write themselves (``engine_steps``). Either alone makes the section;
its shape is :class:`tracelens.llm.model.LlmSection`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.llm_latency import LLM_PER_REQUEST
from tracelens.llm.analysis import analyze_llm
from tracelens.llm.engine_steps import engine_steps
from tracelens.llm.latency_metrics import summarize
from tracelens.llm.model import LlmLatency, TtftBreakdown


def llm_section(db: TraceDB, t: Thresholds) -> dict[str, Any] | None:
    """The ``llm`` dict of the JSON report, or None when the trace has no LLM annotations."""
    a = analyze_llm(db, t)
    engine = engine_steps(db)
    if a is None and engine is None:
        return None
    out: dict[str, Any] = {}
    if a is not None:
        s = a.summary
        require(db, LLM_PER_REQUEST)
        latency = LlmLatency(
            requests=s.requests,
            output_tokens=s.output_tokens,
            ttft_ns=s.ttft_ns,
            tpot_ns=s.tpot_ns,
            itl_ns=s.itl_ns,
            e2e_ns=s.e2e_ns,
            output_tokens_per_s=s.output_tokens_per_s,
            requests_per_s=s.requests_per_s,
            span_ns=s.span_ns,
            ttft_breakdown=TtftBreakdown(
                queue_ns=summarize(db, "SELECT queue_ns AS v FROM llm_per_request"),
                prefill_ns=summarize(db, "SELECT prefill_ns AS v FROM llm_per_request"),
                queue_share_pct=a.queueing.queue_share_pct,
            ),
            steps=a.steps,
            kv_growth=a.kv_growth,
            prefill_stalls=a.prefill_stalls,
            per_request=a.per_request,
        )
        out = msgspec.to_builtins(latency)
    if engine is not None and engine.section is not None:
        out["engine_steps"] = msgspec.to_builtins(engine.section)
    out["warnings"] = [*(a.warnings if a else []), *(engine.warnings if engine else [])]
    return out
