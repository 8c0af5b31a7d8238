"""The engine-steps part of the LLM section (``llm.engine_steps``) in text, Markdown, HTML."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracelens.core.units import fmt_ns
from tracelens.llm.model import Distribution, EngineStepsSection
from tracelens.report.render.percentile_table import percentile_table

if TYPE_CHECKING:
    from rich.console import Console

_COLS = ("steps", "mean", "p50", "p90", "p95", "p99", "max")
_ENGINE = {"vllm": "vLLM", "sglang": "SGLang"}


def _rate(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f} tokens/s"


def _spread(d: Distribution) -> list[str]:
    return [fmt_ns(v) for v in (d.mean, d.p50, d.p90, d.p95, d.p99, d.max)]


def _rows(es: EngineStepsSection) -> list[list[str]]:
    out = []
    for phase, st in es.by_phase.items():
        if not st.steps:
            continue
        out.append([phase, f"{st.steps:,}", *_spread(st.step_ns)])
    itl = es.itl_ns
    if itl.count:
        # one value per request per step: the steps say how many measurements there are
        steps = _itl_steps(es)
        count = f"{itl.count:,}" if itl.count == steps else f"{itl.count:,} in {_steps(steps)}"
        out.append(["ITL (engine)", count, *_spread(itl)])
    return out


def _itl_steps(es: EngineStepsSection) -> int:
    """The steps the engine ITL comes from: decode and mixed ones."""
    return es.by_phase.decode.steps + es.by_phase.mixed.steps


def _steps(n: int) -> str:
    return f"{n:,} step" + ("" if n == 1 else "s")


def headline(es: EngineStepsSection) -> str:
    span = fmt_ns(es.span_ns) if es.span_ns else "-"
    tokens = [
        f"{kind} {n:,} tokens ({_rate(per_s)})"
        for kind, n, per_s in (
            ("prefill", es.prefill_tokens, es.prefill_tokens_per_s),
            ("decode", es.decode_tokens, es.decode_tokens_per_s),
        )
        if n
    ]
    return f"{_ENGINE.get(es.source, es.source)}: {_steps(es.count)} over {span}" + (
        f"; {', '.join(tokens)}" if tokens else ""
    )


def notes(es: EngineStepsSection) -> list[str]:
    """What the table does not show: batches, GPU use, the ITL basis, TTFT, host gaps."""
    out = []
    for phase, st in es.by_phase.items():
        if not st.steps:
            continue
        line = f"{phase}: {_steps(st.steps)}, {fmt_ns(st.total_ns)}"
        if st.mean_requests is not None:
            line += f", mean batch {st.mean_requests:.1f} requests"
        if st.gpu_busy_pct is not None:
            line += (
                f", GPU busy {st.gpu_busy_pct:.1f}%, "
                f"{st.kernels_per_step or 0:,.0f} kernels per step"
            )
        out.append(line)
    out.append(f"ITL (engine): {es.itl_basis}.")
    if es.itl_ns.count > 1 and _itl_steps(es) == 1:
        out.append(
            "One step gives every request the same ITL, that step's time, so its "
            "percentiles are no distribution, and the host's time between steps is not in "
            "it: a lower bound on ITL; record at least two steps."
        )
    out.append(f"{es.ttft_note}.")
    b = es.between_steps
    if b.intervals:
        idle = "" if b.gpu_idle_ns is None else f", GPU idle {fmt_ns(b.gpu_idle_ns)}"
        out.append(f"Host time between steps: {fmt_ns(b.ns)} in {b.intervals:,} gaps{idle}.")
    m = es.mixed
    if m.steps and m.decode_baseline_ns and m.mean_ns is not None:
        out.append(
            f"Mixed steps: {m.steps:,}, mean {fmt_ns(m.mean_ns)} against the "
            f"{fmt_ns(m.decode_baseline_ns)} median decode step."
        )
    return out


def render_text(es: EngineStepsSection, console: Console) -> None:
    t = percentile_table(
        "Engine steps (the engine's own step labels)", headline(es), "phase", _COLS
    )
    for row in _rows(es):
        t.add_row(*row)
    console.print(t)
    for line in notes(es):
        console.print(f"  {line}")


def render_markdown(es: EngineStepsSection) -> list[str]:
    out = ["### Engine steps", "", headline(es), ""]
    out.append("| phase | " + " | ".join(_COLS) + " |")
    out.append("|---|" + "---|" * len(_COLS))
    out += ["| " + " | ".join(row) + " |" for row in _rows(es)]
    out.append("")
    out += [f"- {line}" for line in notes(es)]
    out.append("")
    return out
