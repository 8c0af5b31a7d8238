"""Markdown: ready to paste into a performance-review ticket."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from msgspec import UNSET

from tracelens.core.units import fmt_bytes, fmt_count, fmt_ns
from tracelens.report.model import Finding, KernelStats, Report
from tracelens.report.render.llm_section import render_llm_markdown
from tracelens.report.render.minor import (
    UNCOSTED_HEADING,
    UNCOSTED_LEAD_HEADING,
    minor_line,
    sections,
)
from tracelens.report.render.transfers import unified_memory_text
from tracelens.report.render.workload import workload_line

_CODE_SPAN = re.compile(r"(`[^`\n]*`)")
_OUTSIDE_CODE = str.maketrans({"<": "&lt;", ">": "&gt;", "[": "\\[", "]": "\\]"})


def md_text(v: Any) -> str:
    """Text from a trace, safe in Markdown: one line, no HTML, no links, no headings.

    Names come from the recorded program: a newline in an operator name would start a
    heading, raw HTML or a ``[x](javascript:…)`` link would pass into a ticket. Code
    spans are left as they are (nothing inside them is interpreted).
    """
    text = " ".join(str(v).splitlines())
    parts = _CODE_SPAN.split(text)
    out = "".join(p if i % 2 else p.translate(_OUTSIDE_CODE) for i, p in enumerate(parts))
    return "\\" + out if out[:1] in ("#", ">", "=") else out


def _cell(v: Any) -> str:
    return md_text(v).replace("|", "\\|")


def _evidence_lines(evidence: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for key, value in evidence.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            cols = list(value[0].keys())
            lines.append(f"- **{key}**:")
            lines.append("")
            lines.append("  | " + " | ".join(cols) + " |")
            lines.append("  | " + " | ".join("---" for _ in cols) + " |")
            for row in value[:10]:
                lines.append("  | " + " | ".join(_cell(row.get(c, "")) for c in cols) + " |")
            lines.append("")
        elif isinstance(value, dict):
            inner = ", ".join(f"{k}: {_cell(v)}" for k, v in value.items())
            lines.append(f"- **{key}**: {inner}")
        elif isinstance(value, list):
            lines.append(f"- **{key}**: {', '.join(_cell(v) for v in value) or '-'}")
        else:
            lines.append(f"- **{key}**: {_cell(value)}")
    return lines


def finding_markdown(
    f: Finding, permalink: str | None = None, heading: str = "###", scope: str | None = None
) -> str:
    """One finding for a ticket; ``scope`` says what part of the trace was analysed when it
    was not the whole (the restriction's note), since the impact is a share of that part."""
    out = [f"{heading} \\[{f.severity.upper()}\\] {md_text(f.title)}", ""]
    out.append(
        f"**Impact:** {fmt_ns(f.impact_ns)} ({f.impact_pct:.2f}% of {f.impact_share_of})"
        f" — {md_text(f.impact_basis)}"
    )
    if scope:
        out += ["", f"**Scope:** {md_text(scope)}"]
    out += ["", md_text(f.summary), "", "**Evidence**", ""]
    out += _evidence_lines(f.evidence)
    out += ["", f"**What to do:** {md_text(f.advice)}", ""]
    meta = f"`{f.analyzer}` · finding `{f.id}`"
    if permalink:
        meta += f" · [permalink]({permalink})"
    out += [f"<sub>{meta}</sub>", ""]
    return "\n".join(out)


def render_markdown(report: Report, max_findings: int | None = None) -> str:
    src = report.source
    m = report.metrics
    out = [f"# tracelens report: `{md_text(src.path).replace('`', '')}`", ""]
    out.append(f"- format: `{src.format}`, sha256 `{src.sha256[:16]}…`")
    tr = report.trace
    if tr.rank is not UNSET:
        world = "" if tr.world_size is UNSET else f" of {tr.world_size}"
        out.append(f"- rank {tr.rank}{world}")
    out.append(f"- workload: {_cell(workload_line(report.workload))}")
    for d in report.devices:
        out.append(
            f"- GPU {d.device_id} ({md_text(d.name or 'unknown')}): "
            f"busy {d.busy_pct:.2f}% of {fmt_ns(d.window_ns)}"
        )
    uvm = unified_memory_text(
        m.uvm_migration_count, m.uvm_bytes, m.uvm_htod_bytes, m.uvm_dtoh_bytes
    )
    out.append(
        f"- {fmt_count(m.kernel_count, 'kernel')}, {fmt_count(m.memcpy_count, 'copy', 'copies')}, "
        f"{fmt_count(m.memset_count, 'memset')}; HtoD {fmt_bytes(m.h2d_bytes)} "
        f"({fmt_bytes(m.h2d_pageable_bytes)} pageable) in {fmt_ns(m.h2d_time_ns)}; "
        f"DtoH {fmt_bytes(m.dtoh_bytes)}" + (f"; {uvm}" if uvm else "")
    )
    for note in report.notes:
        out.append(f"- note: {md_text(note)}")
    out.append("")
    out += render_llm_markdown(report.llm)
    out += ["## Findings", ""]
    shown = report.findings[:max_findings] if max_findings else report.findings
    grouped = sections(shown)
    findings, uncosted, minor, lead = grouped.major, grouped.uncosted, grouped.minor, grouped.lead
    uncosted_block: list[str] = []
    if uncosted:
        uncosted_block += [f"**{UNCOSTED_LEAD_HEADING if lead else UNCOSTED_HEADING}:**", ""]
        uncosted_block += [
            f"- {md_text(f.title)}: {fmt_ns(f.subject_ns)}. {md_text(f.impact_basis)} "
            f"(`{f.analyzer}` · `{f.id}`)"
            for f in uncosted
        ]
        uncosted_block.append("")
    if lead:
        out += uncosted_block
    if not findings:
        out += ["No significant findings." if minor or uncosted else "No findings.", ""]
    else:
        out += ["| # | severity | impact | finding |", "|---|---|---|---|"]
        for i, f in enumerate(findings, 1):
            out.append(
                f"| {i} | {f.severity} | {fmt_ns(f.impact_ns)} ({f.impact_pct:.1f}%) | "
                f"{_cell(f.title)} |"
            )
        out.append("")
    for f in findings:
        out.append(finding_markdown(f))
    if not lead:
        out += uncosted_block
    if minor:
        out += [_cell(minor_line(minor)), ""]
    out += _stats_table("Top kernels", "kernel", report.top_kernels, name_width=120)
    out += _stats_table("Top operators (GPU time launched)", "operator", report.top_ops)
    return "\n".join(out)


def _stats_table(
    title: str, what: str, rows: Sequence[KernelStats], name_width: int | None = None
) -> list[str]:
    if not rows:
        return []
    calls = "count" if what == "kernel" else "calls"
    out = [
        f"## {title}",
        "",
        f"| {what} | {calls} | total | mean | p50 | p95 | max |",
        "|---|---|---|---|---|---|---|",
    ]
    for k in rows:
        out.append(
            f"| `{_cell(k.name)[:name_width]}` | {k.count:,} | {fmt_ns(k.total_ns)} | "
            f"{fmt_ns(k.mean_ns)} | {fmt_ns(k.p50_ns)} | {fmt_ns(k.p95_ns)} | "
            f"{fmt_ns(k.max_ns)} |"
        )
    out.append("")
    return out
