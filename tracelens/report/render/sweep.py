"""Text (a rich table) and Markdown renderings of a sweep (:func:`..sweep.build_sweep`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from tracelens.core.units import fmt_ns
from tracelens.report.render.markdown import md_text

_PARAM_NAMES = {
    "max_concurrency": "concurrent",
    "request_rate": "req/s",
    "mean_batch": "batch (mean)",
    "given": "",
}
HEADERS = (
    "run",
    "load",
    "p50 TTFT",
    "p95 TTFT",
    "p50 TPOT",
    "p95 TPOT",
    "output tok/s",
    # From this run to the next: the factors p95 TTFT and throughput grow by.
    "TTFT× / tok/s×",
    "mark",
)


def _param(run: dict[str, Any]) -> str:
    if run["param"] is None:
        return "-"
    v = run["param"]
    shown = f"{v:,.0f}" if float(v).is_integer() else f"{v:,.2f}"
    return f"{shown} {_PARAM_NAMES.get(run['param_source'], run['param_source'])}".rstrip()


def _growth(run: dict[str, Any]) -> str:
    if run["ttft_growth"] is None:
        return "-"
    return f"{run['ttft_growth']:.2f} / {run['throughput_growth']:.2f}"


def _marks(sweep: dict[str, Any], run: dict[str, Any]) -> str:
    marks = []
    if run["label"] == sweep["knee"]:
        marks.append("knee")
    if run["label"] == sweep["best"]:
        marks.append("best in SLO")
    elif sweep["slo"] is not None and run["meets_slo"] is False:
        marks.append("misses SLO")
    return ", ".join(marks)


def sweep_rows(sweep: dict[str, Any]) -> list[tuple[str, ...]]:
    """The table's cells, one tuple per run, in the sweep's order."""
    return [
        (
            r["label"],
            _param(r),
            fmt_ns(r["ttft_p50_ns"]),
            fmt_ns(r["ttft_p95_ns"]),
            fmt_ns(r["tpot_p50_ns"]),
            fmt_ns(r["tpot_p95_ns"]),
            "-" if r["output_tokens_per_s"] is None else f"{r['output_tokens_per_s']:,.1f}",
            _growth(r),
            _marks(sweep, r),
        )
        for r in sweep["runs"]
    ]


def _summary_lines(sweep: dict[str, Any]) -> list[str]:
    order = "load" if sweep["order"] == "param" else "output tokens/s"
    knee = (
        f"knee: {sweep['knee']} (p95 TTFT grows faster than throughput after it)"
        if sweep["knee"]
        else "knee: none (p95 TTFT never grows faster than throughput between runs)"
    )
    lines = [f"runs ordered by {order}; {knee}"]
    if sweep["slo"] is not None:
        best = sweep["best"] or "no run meets them"
        lines.append(f"objectives {sweep['slo']} at {sweep['slo_percentile']}: best run {best}")
    return lines


def render_sweep_text(sweep: dict[str, Any], console: Console) -> None:
    table = Table(title="Latency against throughput", title_justify="left")
    for i, h in enumerate(HEADERS):
        # The run's name is what the reader looks for: never cut, never wrapped.
        table.add_column(h, justify="left" if i in (0, 1, 8) else "right", no_wrap=i == 0)
    for row in sweep_rows(sweep):
        table.add_row(*row)
    console.print(table)
    for line in _summary_lines(sweep):
        console.print(line, highlight=False, markup=False)
    for note in sweep["notes"]:
        console.print(f"note: {note}", highlight=False, markup=False)


def render_sweep_markdown(sweep: dict[str, Any]) -> str:
    lines = ["## Latency against throughput", ""]
    lines.append("| " + " | ".join(HEADERS) + " |")
    lines.append("|" + "---|" * len(HEADERS))
    for row in sweep_rows(sweep):
        cells = [md_text(c).replace("|", "\\|") for c in row]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.extend(md_text(line) + "  " for line in _summary_lines(sweep))
    lines.extend(f"- {md_text(note)}" for note in sweep["notes"])
    return "\n".join(lines) + "\n"
