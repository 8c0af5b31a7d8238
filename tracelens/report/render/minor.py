"""Findings grouped for reading: the ones to act on, the un-costed, the negligible.

Findings below the ``low`` severity (under half a percent of the window, or no time to give
back) stay in the JSON, but text, Markdown and HTML (the standalone page and the web run
page) list them in one "minor findings" line after the ones worth acting on. Those whose
savings could not be estimated (``costed`` false: an operator with no recorded shapes, or a
GPU with no known peaks) are not minor, whatever their severity: `vllm::moe_forward` at 67 %
of the GPU time is where a decode step goes, and "little or no time to give back" would
misstate it, so they are listed apart, after the costed findings.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracelens.report.model import Finding

MINOR_SEVERITY = "info"

UNCOSTED_HEADING = "Not costed: where much of the GPU time goes, with no estimate of the savings"


def split_findings(
    findings: Sequence[Finding],
) -> tuple[list[Finding], list[Finding], list[Finding]]:
    """(findings worth acting on, un-costed ones, minor ones), each in ranked order."""
    major = [f for f in findings if f.severity != MINOR_SEVERITY]
    uncosted = [f for f in findings if f.severity == MINOR_SEVERITY and not f.costed]
    minor = [f for f in findings if f.severity == MINOR_SEVERITY and f.costed]
    return major, uncosted, minor


def minor_line(minor: Sequence[Finding]) -> str:
    """``3 minor findings (little or no time to give back): a; b; c``."""
    titles = "; ".join(f.title for f in minor)
    noun = "finding" if len(minor) == 1 else "findings"
    return f"{len(minor)} minor {noun} (little or no time to give back): {titles}"
