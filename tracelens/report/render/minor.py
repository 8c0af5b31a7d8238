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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tracelens.report.model import Finding

MINOR_SEVERITY = "info"

UNCOSTED_HEADING = "Not costed: where much of the GPU time goes, with no estimate of the savings"
UNCOSTED_LEAD_HEADING = (
    "First, where most of the GPU time goes (not costed: no estimate of the savings)"
)

# A finding as the report's typed view holds it, or as its JSON dict (the HTML page, the
# job report): the sections are the same for both.
F = TypeVar("F")


def _field(f: Any, name: str, default: Any = None) -> Any:
    return f.get(name, default) if isinstance(f, Mapping) else getattr(f, name, default)


@dataclass(frozen=True)
class Sections(Generic[F]):
    """Findings grouped for reading: ``major`` (worth acting on, in ranked order),
    ``uncosted`` (no estimate of the savings, by their time), ``minor`` (little or nothing
    to give back), and ``lead``: whether the un-costed go first."""

    major: list[F]
    uncosted: list[F]
    minor: list[F]
    lead: bool


def sections(findings: Sequence[F]) -> Sections[F]:
    """The sections of ranked ``findings`` (typed or JSON dicts): the un-costed lead where
    one holds at least twice the largest time the costed ones would give back."""
    major = [f for f in findings if _field(f, "severity") != MINOR_SEVERITY]
    info = [f for f in findings if _field(f, "severity") == MINOR_SEVERITY]
    uncosted = [f for f in info if not _field(f, "costed", True)]
    # already so in a ranked list (no impact, the bigger subject first); a job's findings
    # are ranked the same way, a hand-made list need not be
    uncosted.sort(key=lambda f: -int(_field(f, "subject_ns") or 0))
    subjects = [int(_field(f, "subject_ns") or 0) for f in uncosted]
    impacts = [int(_field(f, "impact_ns") or 0) for f in major]
    minor = [f for f in info if _field(f, "costed", True)]
    return Sections(major, uncosted, minor, uncosted_leads(subjects, impacts))


def uncosted_leads(subject_ns: Sequence[int], major_impact_ns: Sequence[int]) -> bool:
    """Whether the un-costed findings (their GPU time) go before the costed ones (their
    impacts): where one holds at least twice the largest time those would give back."""
    return bool(subject_ns) and max(subject_ns) >= 2 * max(major_impact_ns, default=0)


def minor_line(minor: Sequence[Finding]) -> str:
    """``3 minor findings (little or no time to give back): a; b; c``."""
    titles = "; ".join(f.title for f in minor)
    noun = "finding" if len(minor) == 1 else "findings"
    return f"{len(minor)} minor {noun} (little or no time to give back): {titles}"
