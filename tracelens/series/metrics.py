"""The headline numbers a series follows, read from one run's report.

Each is one number per run, with the direction that is better: GPU busy share, median
step time, the LLM latencies (TTFT, TPOT, ITL at p50 and p95), output tokens/s, goodput
(output tokens/s of requests meeting the objectives) and the top finding's impact. A run
without one (a training trace has no TTFT) has None for it, never zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tracelens.report.diff import headline_metrics

Unit = Literal["pct", "ns", "rate"]
Better = Literal["higher", "lower"]


@dataclass(frozen=True)
class SeriesMetric:
    key: str
    label: str
    unit: Unit
    better: Better


METRICS: tuple[SeriesMetric, ...] = (
    SeriesMetric("busy", "GPU busy", "pct", "higher"),
    SeriesMetric("step", "median step time", "ns", "lower"),
    SeriesMetric("ttft_p50", "TTFT p50", "ns", "lower"),
    SeriesMetric("ttft_p95", "TTFT p95", "ns", "lower"),
    SeriesMetric("tpot_p50", "TPOT p50", "ns", "lower"),
    SeriesMetric("tpot_p95", "TPOT p95", "ns", "lower"),
    SeriesMetric("itl_p50", "ITL p50", "ns", "lower"),
    SeriesMetric("itl_p95", "ITL p95", "ns", "lower"),
    SeriesMetric("tokens_per_s", "output tokens/s", "rate", "higher"),
    SeriesMetric("goodput", "goodput (output tokens/s)", "rate", "higher"),
    SeriesMetric("top_impact", "top finding impact", "pct", "lower"),
)
BY_KEY = {m.key: m for m in METRICS}


def run_metrics(report: dict[str, Any]) -> dict[str, float | None]:
    """Every metric of :data:`METRICS` for one report, by key (None where it has none)."""
    head = headline_metrics(report)
    out: dict[str, float | None] = {m.key: None for m in METRICS}
    out["busy"] = _num(head.get("gpu_busy_pct"))
    out["step"] = _num(head.get("step_median_ns"))
    llm = report.get("llm")
    if isinstance(llm, dict):
        for name in ("ttft", "tpot", "itl"):
            dist = llm.get(f"{name}_ns")
            if isinstance(dist, dict):
                out[f"{name}_p50"] = _num(dist.get("p50"))
                out[f"{name}_p95"] = _num(dist.get("p95"))
        out["tokens_per_s"] = _num(llm.get("output_tokens_per_s"))
        slo = llm.get("slo")
        if isinstance(slo, dict):
            out["goodput"] = _num(slo.get("goodput_output_tokens_per_s"))
    findings = report.get("findings") or []
    # Findings are ranked by impact: the first is the one most worth fixing. A run with
    # none has nothing left to give back.
    out["top_impact"] = float(findings[0]["impact_pct"]) if findings else 0.0
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
