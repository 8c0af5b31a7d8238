"""The LLM section of the text, Markdown and HTML reports (present when annotated).

Its latency part comes from ``tracelens.annotate`` ranges, its engine-steps part from the
step labels of vLLM and SGLang (:mod:`tracelens.report.render.engine_steps`); a trace may
have either or both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracelens.core.units import fmt_ns
from tracelens.report.render import engine_steps

if TYPE_CHECKING:
    from rich.console import Console

_METRICS = (
    ("TTFT", "ttft_ns"),
    ("TPOT", "tpot_ns"),
    ("ITL", "itl_ns"),
    ("end-to-end", "e2e_ns"),
)
_COLS = ("count", "mean", "p50", "p90", "p95", "p99", "max")


def _rows(llm: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = [(label, llm[key]) for label, key in _METRICS]
    breakdown = llm.get("ttft_breakdown") or {}
    if "queue_ns" in breakdown:
        out.append(("TTFT: queueing", breakdown["queue_ns"]))
        out.append(("TTFT: prefill", breakdown["prefill_ns"]))
    return out


def _shown(llm: dict[str, Any] | None) -> bool:
    """A section with only warnings (labels that did not parse) shows as report notes."""
    return bool(llm) and ("requests" in llm or bool(llm.get("engine_steps")))  # type: ignore[operator]


def _cell(col: str, s: dict[str, Any]) -> str:
    v = s.get(col)
    if col == "count":
        return f"{v or 0:,}"
    return fmt_ns(v)


def _rate(v: float | None, unit: str) -> str:
    return "-" if v is None else f"{v:,.2f} {unit}"


def _headline(llm: dict[str, Any]) -> str:
    if not llm["span_ns"]:
        return (
            f"{llm['requests']:,} requests, {llm['output_tokens']:,} output tokens "
            "(no token times: throughput unknown)"
        )
    return (
        f"{llm['requests']:,} requests, {llm['output_tokens']:,} output tokens over "
        f"{fmt_ns(llm['span_ns'])}: {_rate(llm['output_tokens_per_s'], 'tokens/s')}, "
        f"{_rate(llm['requests_per_s'], 'requests/s')}"
    )


def _steps_line(llm: dict[str, Any]) -> list[str]:
    lines = []
    for kind in ("prefill", "decode"):
        st = llm["steps"][kind]
        if not st["steps"]:
            continue
        busy = st["gpu_busy_pct"]
        gpu = "GPU busy -" if busy is None else f"GPU busy {busy:.1f}%"
        lines.append(
            f"{kind}: {st['steps']:,} steps, {fmt_ns(st['total_ns'])}, mean batch "
            f"{st['mean_batch']:.2f}, {gpu}"
        )
    return lines


def render_llm_text(report: dict[str, Any], console: Console) -> None:
    llm = report.get("llm")
    if not _shown(llm):
        return
    if "requests" in llm:
        _latency_text(llm, console)
    if llm.get("engine_steps"):
        engine_steps.render_text(llm["engine_steps"], console)


def _latency_text(llm: dict[str, Any], console: Console) -> None:
    # rich is imported for the text report only: the Markdown one never needs it
    from rich.table import Table

    t = Table(title="LLM serving latency (from llm.* annotations)", caption=_headline(llm))
    t.add_column("metric")
    for c in _COLS:
        t.add_column(c, justify="right", no_wrap=True)
    for label, s in _rows(llm):
        t.add_row(label, *(_cell(c, s) for c in _COLS))
    console.print(t)
    for line in _steps_line(llm):
        console.print(f"  {line}")


def render_llm_markdown(report: dict[str, Any]) -> list[str]:
    llm = report.get("llm")
    if not _shown(llm):
        return []
    out = ["## LLM serving latency", ""]
    if "requests" in llm:
        out += _latency_markdown(llm)
    if llm.get("engine_steps"):
        out += engine_steps.render_markdown(llm["engine_steps"])
    return out


def _latency_markdown(llm: dict[str, Any]) -> list[str]:
    out = [_headline(llm), ""]
    out.append("| metric | " + " | ".join(_COLS) + " |")
    out.append("|---|" + "---|" * len(_COLS))
    for label, s in _rows(llm):
        out.append(f"| {label} | " + " | ".join(_cell(c, s) for c in _COLS) + " |")
    out.append("")
    out += [f"- {line}" for line in _steps_line(llm)]
    out.append("")
    return out
