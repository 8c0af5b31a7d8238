"""Findings grouped for reading: the ones to act on, the un-costed, the negligible.

Findings below the ``low`` severity (under half a percent of the window, or no time to give
back) stay in the JSON, but text, Markdown and HTML (the standalone page and the web run
page) list them in one "minor findings" line after the ones worth acting on. Those whose
savings could not be estimated (``costed`` false: an operator with no recorded shapes, or a
GPU with no known peaks) are not minor, whatever their severity: `vllm::moe_forward` at 67 %
of the GPU time is where a decode step goes, and "little or no time to give back" would
misstate it, so they are listed apart, after the costed findings; before them where such a
finding's time dwarfs what the costed ones give back (at least twice the largest impact):
vLLM's MoE at 7.17 ms of a 10.7 ms decode step would otherwise sit under a 532 µs GEMM
finding that a reader takes for the main issue.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracelens.core.finding_sections import MINOR_SEVERITY, Sections, sections, uncosted_leads
from tracelens.report.model import Finding

__all__ = ["MINOR_SEVERITY", "Sections", "minor_line", "sections", "uncosted_leads"]

UNCOSTED_HEADING = "Not costed: where much of the GPU time goes, with no estimate of the savings"
UNCOSTED_LEAD_HEADING = (
    "First, where most of the GPU time goes (not costed: no estimate of the savings)"
)


def minor_line(minor: Sequence[Finding]) -> str:
    """``3 minor findings (little or no time to give back): a; b; c``."""
    titles = "; ".join(f.title for f in minor)
    noun = "finding" if len(minor) == 1 else "findings"
    return f"{len(minor)} minor {noun} (little or no time to give back): {titles}"
