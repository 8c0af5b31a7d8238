"""The HTML report: Jinja templates that the standalone page and the web run page share.

``templates/report_body.html`` holds the report's parts as macros (trace facts, LLM
latency, findings, optional sections, hot kernels and operators); ``templates/report.html``
lays them out as a self-contained page (CSS inline, no scripts, no requests) for attaching
to a ticket or CI run, and the web app's run page lays out the same macros around its
timeline. ``static/report.css`` styles them in both: inlined here, served by the web app.

The templates read the report's JSON form (a dict), which also holds any registered section
the report model does not declare yet; the functions they share with the text and Markdown
renderers are given its parts in their typed form.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from tracelens import __version__
from tracelens.core.units import fmt_bytes, fmt_ns
from tracelens.ranks.grouping import finding_scope
from tracelens.report.build import optional_sections
from tracelens.report.model import Workload
from tracelens.report.render.minor import (
    UNCOSTED_HEADING,
    UNCOSTED_LEAD_HEADING,
    sections,
)
from tracelens.report.render.transfers import unified_memory_text
from tracelens.report.render.workload import workload_line

HERE = Path(__file__).resolve().parent
TEMPLATES_DIR = HERE / "templates"
STATIC_DIR = HERE / "static"

# Optional report sections with a panel of their own; any other is shown generically.
_OWN_PANELS = frozenset({"llm"})
# Words a section heading writes in capitals.
_ACRONYMS = frozenset({"llm", "gpu", "cpu", "nccl", "ttft", "tpot", "itl", "h2d", "d2h"})

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def markdown_inline(text: str | None) -> Markup:
    """The little Markdown titles use (code spans, bold), escaped first."""
    out = html.escape(text or "")
    out = _CODE.sub(r"<code>\1</code>", out)
    return Markup(_BOLD.sub(r"<strong>\1</strong>", out))


def markdown_blocks(text: str | None) -> Markup:
    """Advice text: inline Markdown plus paragraphs and line breaks."""
    inline = str(markdown_inline(text))
    paragraphs = [p.replace("\n", "<br>") for p in inline.split("\n\n") if p.strip()]
    return Markup("".join(f"<p>{p}</p>" for p in paragraphs))


def section_title(key: str) -> str:
    """``llm_latency`` -> ``LLM latency``: a heading for an optional report section."""
    words = key.replace("_", " ").split()
    text = " ".join(w.upper() if w.lower() in _ACRONYMS else w for w in words)
    return text[:1].upper() + text[1:]


def _workload_line(report: Mapping[str, Any]) -> str | None:
    workload = report.get("workload")
    return workload_line(msgspec.convert(workload, Workload)) if workload else None


def _unified_memory(metrics: Mapping[str, Any]) -> str | None:
    return unified_memory_text(
        int(metrics.get("uvm_migration_count") or 0),
        int(metrics.get("uvm_bytes") or 0),
        int(metrics.get("uvm_htod_bytes") or 0),
        int(metrics.get("uvm_dtoh_bytes") or 0),
    )


def _split_findings(findings: list[dict[str, Any]]) -> tuple[Any, ...]:
    """:func:`tracelens.report.render.minor.sections` of the findings' JSON form, as the
    template unpacks them: worth acting on, un-costed, minor, whether the un-costed lead."""
    s = sections(findings)
    return s.major, s.uncosted, s.minor, s.lead


def generic_sections(report: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """(key, heading, value) of the optional sections shown as a generic panel each."""
    return [
        (key, section_title(key), value)
        for key, value in optional_sections(report).items()
        if key not in _OWN_PANELS
    ]


def html_environment(*template_dirs: Path) -> Environment:
    """The Jinja environment the report renders in; ``template_dirs`` come before the
    report's own (the web app's pages), so they can import the report's macros."""
    env = Environment(
        loader=FileSystemLoader([*(str(d) for d in template_dirs), str(TEMPLATES_DIR)]),
        autoescape=select_autoescape(["html"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ns"] = fmt_ns
    env.filters["ranks"] = finding_scope
    env.filters["bytes"] = fmt_bytes
    env.filters["md"] = markdown_blocks
    env.filters["mdi"] = markdown_inline
    env.filters["pct"] = lambda v: "-" if v is None else f"{float(v):.1f}%"
    env.filters["num"] = lambda v: f"{v:,}" if isinstance(v, int) else v
    env.globals["version"] = __version__
    env.globals["dict"] = dict
    env.globals["workload_line"] = _workload_line
    env.globals["unified_memory"] = _unified_memory
    env.globals["generic_sections"] = generic_sections
    env.globals["split_findings"] = _split_findings
    env.globals["uncosted_heading"] = UNCOSTED_HEADING
    env.globals["uncosted_lead_heading"] = UNCOSTED_LEAD_HEADING
    return env


def render_html(report: Mapping[str, Any]) -> str:
    """The standalone page of a report's JSON form: one file, readable offline."""
    css = Markup((STATIC_DIR / "report.css").read_text(encoding="utf-8"))
    return html_environment().get_template("report.html").render(report=report, css=css)
