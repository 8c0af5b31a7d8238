"""The LLM section of the text and Markdown reports (present when annotated).

Its latency part comes from ``tracelens.annotate`` ranges, its engine-steps part from the
step labels of vLLM and SGLang (:mod:`tracelens.report.render.engine_steps`); a trace may
have either or both. A benchmark client's numbers (``llm.client``) and SLO attainment
(``llm.slo``, :mod:`tracelens.report.render.slo_section`) follow when the report has them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import UNSET, UnsetType

from tracelens.core.units import fmt_ns
from tracelens.llm.model import ClientSummary, Distribution, LlmLatency, LlmSection
from tracelens.report.render import engine_steps
from tracelens.report.render.percentile_table import percentile_table
from tracelens.report.render.slo_section import (
    SLO_COLS,
    client_headline,
    client_title,
    slo_lines,
    slo_rows,
    slo_title,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

_COLS = ("count", "mean", "p50", "p90", "p95", "p99", "max")


def _rows(llm: LlmLatency | ClientSummary) -> list[tuple[str, Distribution]]:
    """Latency rows of the trace's numbers, or (without breakdown) of a client's."""
    out = [
        ("TTFT", llm.ttft_ns),
        ("TPOT", llm.tpot_ns),
        ("ITL", llm.itl_ns),
        ("end-to-end", llm.e2e_ns),
    ]
    if isinstance(llm, LlmLatency):
        out.append(("TTFT: queueing", llm.ttft_breakdown.queue_ns))
        out.append(("TTFT: prefill", llm.ttft_breakdown.prefill_ns))
    return out


def _shown(llm: LlmSection | UnsetType) -> LlmSection | None:
    """A section with only warnings (labels that did not parse) shows as report notes."""
    if llm is UNSET:
        return None
    parts = (llm.requests, llm.engine_steps, llm.client, llm.slo)
    return llm if any(p is not UNSET for p in parts) else None


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
    if llm.client is not UNSET:
        client = llm.client
        console.print(_latency_table(client_title(client), client_headline(client), _rows(client)))
    if llm.slo is not UNSET:
        from rich.table import Table

        t = Table(title=slo_title(llm.slo))
        for c in SLO_COLS:
            t.add_column(c, justify="left" if c == "objective" else "right", no_wrap=True)
        for row in slo_rows(llm.slo):
            t.add_row(*row)
        console.print(t)
        for line in slo_lines(llm.slo):
            console.print(f"  {line}")


def _latency_table(title: str, caption: str, rows: list[tuple[str, Distribution]]) -> Table:
    t = percentile_table(title, caption, "metric", _COLS)
    for label, s in rows:
        t.add_row(label, *(_cell(c, s) for c in _COLS))
    return t


def _latency_text(llm: LlmLatency, console: Console) -> None:
    rows = _rows(llm)
    console.print(
        _latency_table("LLM serving latency (from llm.* annotations)", _headline(llm), rows)
    )
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
    if llm.client is not UNSET:
        client = llm.client
        out += [f"### {client_title(client)}", "", client_headline(client), ""]
        out += _markdown_table(_rows(client))
    if llm.slo is not UNSET:
        slo = llm.slo
        out += [f"### {slo_title(slo)}", ""]
        out.append("| " + " | ".join(SLO_COLS) + " |")
        out.append("|---|" + "---:|" * (len(SLO_COLS) - 1))
        out += ["| " + " | ".join(row) + " |" for row in slo_rows(slo)]
        out.append("")
        out += [f"- {line}" for line in slo_lines(slo)]
        out.append("")
    return out


def _markdown_table(rows: list[tuple[str, Distribution]]) -> list[str]:
    out = ["| metric | " + " | ".join(_COLS) + " |", "|---|" + "---|" * len(_COLS)]
    for label, s in rows:
        out.append(f"| {label} | " + " | ".join(_cell(c, s) for c in _COLS) + " |")
    out.append("")
    return out


def _latency_markdown(llm: LlmLatency) -> list[str]:
    out = [_headline(llm), "", *_markdown_table(_rows(llm))]
    out += [f"- {line}" for line in _steps_line(llm)]
    out.append("")
    return out
