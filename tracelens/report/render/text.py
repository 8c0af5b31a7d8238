"""Terminal report with rich: header facts, ranked findings, hot kernels and operators."""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import UNSET
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tracelens.core.units import fmt_bytes, fmt_count, fmt_ns
from tracelens.report.model import Finding, KernelStats, Report
from tracelens.report.render.llm_section import render_llm_text
from tracelens.report.render.minor import (
    UNCOSTED_HEADING,
    UNCOSTED_LEAD_HEADING,
    minor_line,
    sections,
)
from tracelens.report.render.transfers import unified_memory_text
from tracelens.report.render.workload import workload_line

SEVERITY_STYLE = {
    "critical": "bold white on red",
    "high": "bold red",
    "medium": "yellow",
    "low": "cyan",
    "info": "dim",
}


def render_text(report: Report, console: Console, max_findings: int | None = None) -> None:
    src, m, tr = report.source, report.metrics, report.trace
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("trace", Text(src.path))
    fmt = src.format + (f" (schema {tr.format_version})" if tr.format_version else "")
    head.add_row("format", fmt)
    if tr.rank is not UNSET:
        # the world size, where the trace records it (a single process's has none)
        world = "" if tr.world_size is UNSET else f" of {tr.world_size}"
        head.add_row("rank", f"{tr.rank}{world}")
    head.add_row("workload", Text(workload_line(report.workload)))
    for d in report.devices:
        head.add_row(
            f"GPU {d.device_id}",
            f"{d.name or 'unknown'}: busy {d.busy_pct:.2f}% of {fmt_ns(d.window_ns)}",
        )
    head.add_row(
        "activity",
        f"{fmt_count(m.kernel_count, 'kernel')} · {fmt_count(m.memcpy_count, 'copy', 'copies')} · "
        f"{fmt_count(m.memset_count, 'memset')}",
    )
    uvm = unified_memory_text(
        m.uvm_migration_count, m.uvm_bytes, m.uvm_htod_bytes, m.uvm_dtoh_bytes
    )
    head.add_row(
        "transfers",
        f"HtoD {fmt_bytes(m.h2d_bytes)} ({fmt_bytes(m.h2d_pageable_bytes)} pageable) in "
        f"{fmt_ns(m.h2d_time_ns)} · DtoH {fmt_bytes(m.dtoh_bytes)}" + (f" · {uvm}" if uvm else ""),
    )
    for note in report.notes:
        head.add_row("note", Text(note, style="yellow"))
    console.print(Panel(head, title=f"tracelens {report.tracelens_version}", expand=False))
    render_llm_text(report.llm, console)

    shown = report.findings[:max_findings] if max_findings else report.findings
    grouped = sections(shown)
    findings, uncosted, minor, lead = grouped.major, grouped.uncosted, grouped.minor, grouped.lead
    if lead:
        _uncosted_table(console, uncosted, UNCOSTED_LEAD_HEADING)
    if not findings:
        console.print(
            "[green]No significant findings.[/green]"
            if minor or uncosted
            else "[green]No findings.[/green]"
        )
    else:
        table = Table(title="Findings, ranked by the time they would give back", expand=True)
        table.add_column("#", justify="right")
        table.add_column("severity")
        table.add_column("impact", justify="right", no_wrap=True)
        table.add_column("finding", ratio=1)
        for i, f in enumerate(findings, 1):
            table.add_row(
                str(i),
                Text(f.severity, style=SEVERITY_STYLE[f.severity]),
                f"{fmt_ns(f.impact_ns)}\n{f.impact_pct:.1f}%",
                Text(f.title),
            )
        console.print(table)
        # rich.markdown (markdown-it and pygments behind it) only for reports with advice
        from rich.markdown import Markdown

        for i, f in enumerate(findings, 1):
            body = Group(
                Text(f.summary),
                Text(
                    f"Impact: {fmt_ns(f.impact_ns)} ({f.impact_pct:.1f}% of "
                    f"{f.impact_share_of}) — {f.impact_basis}",
                    style="dim",
                ),
                Markdown("**What to do:** " + f.advice),
            )
            console.print(
                Panel(
                    body,
                    title=Text(f"{i}. {f.title}"),
                    subtitle=f"{f.analyzer} · {f.id}",
                    border_style=SEVERITY_STYLE[f.severity].replace("bold ", ""),
                )
            )
    if uncosted and not lead:
        _uncosted_table(console, uncosted, UNCOSTED_HEADING)
    if minor:
        console.print(Text(minor_line(minor), style="dim"))
    tables: tuple[tuple[str, Sequence[KernelStats]], ...] = (
        ("Top kernels", report.top_kernels),
        ("Top operators (GPU time launched)", report.top_ops),
    )
    for title, rows in tables:
        if not rows:
            continue
        t = Table(title=title, expand=True)
        t.add_column("name", ratio=1, overflow="ellipsis", no_wrap=True)
        for col in ("count", "total", "mean", "p50", "p95", "max"):
            t.add_column(col, justify="right", no_wrap=True)
        for r in rows:
            t.add_row(
                Text(r.name),
                f"{r.count:,}",
                fmt_ns(r.total_ns),
                fmt_ns(r.mean_ns),
                fmt_ns(r.p50_ns),
                fmt_ns(r.p95_ns),
                fmt_ns(r.max_ns),
            )
        console.print(t)


def _uncosted_table(console: Console, uncosted: Sequence[Finding], title: str) -> None:
    table = Table(title=title, expand=True)
    table.add_column("GPU time", justify="right", no_wrap=True)
    table.add_column("finding", ratio=1)
    for f in uncosted:
        table.add_row(
            fmt_ns(f.subject_ns),
            Text(f"{f.title}\n{f.impact_basis}\n{f.analyzer} · {f.id}"),
        )
    console.print(table)
