"""The LLM section of the text, Markdown and HTML reports (present when annotated).

Its latency part comes from ``tracelens.annotate`` ranges, its engine-steps part from the
step labels of vLLM and SGLang (:mod:`tracelens.report.render.engine_steps`); a trace may
have either or both.
"""

from __future__ import annotations

from msgspec import UNSET, UnsetType
from rich.console import Console
from rich.table import Table

from tracelens.core.units import fmt_ns
from tracelens.llm.model import Distribution, LlmLatency, LlmSection
from tracelens.report.render import engine_steps

_COLS = ("count", "mean", "p50", "p90", "p95", "p99", "max")


def _rows(llm: LlmLatency) -> list[tuple[str, Distribution]]:
    return [
        ("TTFT", llm.ttft_ns),
        ("TPOT", llm.tpot_ns),
        ("ITL", llm.itl_ns),
        ("end-to-end", llm.e2e_ns),
        ("TTFT: queueing", llm.ttft_breakdown.queue_ns),
        ("TTFT: prefill", llm.ttft_breakdown.prefill_ns),
    ]


def _shown(llm: LlmSection | UnsetType) -> LlmSection | None:
    """A section with only warnings (labels that did not parse) shows as report notes."""
    if llm is UNSET or (llm.requests is UNSET and llm.engine_steps is UNSET):
        return None
    return llm


def _cell(col: str, s: Distribution) -> str:
    if col == "count":
        return f"{s.count or 0:,}"
    v: float | None = getattr(s, col)
    return fmt_ns(v)


def _rate(v: float | None, unit: str) -> str:
    return "-" if v is None else f"{v:,.2f} {unit}"


def _headline(llm: LlmLatency) -> str:
    if not llm.span_ns:
        return (
            f"{llm.requests:,} requests, {llm.output_tokens:,} output tokens "
            "(no token times: throughput unknown)"
        )
    return (
        f"{llm.requests:,} requests, {llm.output_tokens:,} output tokens over "
        f"{fmt_ns(llm.span_ns)}: {_rate(llm.output_tokens_per_s, 'tokens/s')}, "
        f"{_rate(llm.requests_per_s, 'requests/s')}"
    )


def _steps_line(llm: LlmLatency) -> list[str]:
    lines = []
    for kind, st in (("prefill", llm.steps.prefill), ("decode", llm.steps.decode)):
        if not st.steps:
            continue
        busy = st.gpu_busy_pct
        gpu = "GPU busy -" if busy is None else f"GPU busy {busy:.1f}%"
        lines.append(
            f"{kind}: {st.steps:,} steps, {fmt_ns(st.total_ns)}, mean batch "
            f"{st.mean_batch:.2f}, {gpu}"
        )
    return lines


def render_llm_text(section: LlmSection | UnsetType, console: Console) -> None:
    llm = _shown(section)
    if llm is None:
        return
    if (latency := llm.latency) is not None:
        _latency_text(latency, console)
    if llm.engine_steps is not UNSET:
        engine_steps.render_text(llm.engine_steps, console)


def _latency_text(llm: LlmLatency, console: Console) -> None:
    t = Table(title="LLM serving latency (from llm.* annotations)", caption=_headline(llm))
    t.add_column("metric")
    for c in _COLS:
        t.add_column(c, justify="right", no_wrap=True)
    for label, s in _rows(llm):
        t.add_row(label, *(_cell(c, s) for c in _COLS))
    console.print(t)
    for line in _steps_line(llm):
        console.print(f"  {line}")


def render_llm_markdown(section: LlmSection | UnsetType) -> list[str]:
    llm = _shown(section)
    if llm is None:
        return []
    out = ["## LLM serving latency", ""]
    if (latency := llm.latency) is not None:
        out += _latency_markdown(latency)
    if llm.engine_steps is not UNSET:
        out += engine_steps.render_markdown(llm.engine_steps)
    return out


def _latency_markdown(llm: LlmLatency) -> list[str]:
    out = [_headline(llm), ""]
    out.append("| metric | " + " | ".join(_COLS) + " |")
    out.append("|---|" + "---|" * len(_COLS))
    for label, s in _rows(llm):
        out.append(f"| {label} | " + " | ".join(_cell(c, s) for c in _COLS) + " |")
    out.append("")
    out += [f"- {line}" for line in _steps_line(llm)]
    out.append("")
    return out
