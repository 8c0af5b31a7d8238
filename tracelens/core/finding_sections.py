"""Findings grouped for reading: worth acting on, not costed, minor.

Every renderer (text, Markdown, HTML, the job view) uses one grouping: findings below the
``low`` severity are minor ("little or no time to give back"), except those whose savings
could not be estimated (``costed`` false), which are listed apart by their time; before
the costed ones where one holds at least twice the largest time those would give back
(vLLM's MoE at 7.17 ms of a 10.7 ms decode step under a 532 µs GEMM finding; sampled
ranks' 391 ms of idle time under a 39 µs pinned-memory hint).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

MINOR_SEVERITY = "info"

# A finding as the report's typed view holds it, or as its JSON dict (the HTML page, the
# job report): the sections are the same for both.
F = TypeVar("F")


def _field(f: Any, name: str, default: Any = None) -> Any:
    return f.get(name, default) if isinstance(f, Mapping) else getattr(f, name, default)


def _severity(f: Any) -> str:
    """The severity's label (a ranked finding holds the enum, the typed view and the JSON
    its text)."""
    sev = _field(f, "severity")
    return str(getattr(sev, "label", sev))


@dataclass(frozen=True)
class Sections(Generic[F]):
    """Findings grouped for reading: ``major`` (worth acting on, in ranked order),
    ``uncosted`` (no estimate of the savings, by their time), ``minor`` (little or nothing
    to give back), and ``lead``: whether the un-costed go first."""

    major: list[F]
    uncosted: list[F]
    minor: list[F]
    lead: bool

    def in_order(self) -> list[F]:
        """Every finding, in the order the reports present them."""
        first, then = (self.uncosted, self.major) if self.lead else (self.major, self.uncosted)
        return [*first, *then, *self.minor]


def reading_order(findings: Sequence[Any]) -> list[int]:
    """The JSON reports' ``reading_order``: positions in ``findings`` (ranked by impact), in
    the order the text, Markdown and HTML reports present them. Positions, not ids: a job's
    findings repeat an id on each rank that has it."""
    position = {id(f): i for i, f in enumerate(findings)}
    return [position[id(f)] for f in sections(findings).in_order()]


def sections(findings: Sequence[F]) -> Sections[F]:
    """The sections of ranked ``findings`` (typed or JSON dicts): the un-costed lead where
    one holds at least twice the largest time the costed ones would give back."""
    major = [f for f in findings if _severity(f) != MINOR_SEVERITY]
    info = [f for f in findings if _severity(f) == MINOR_SEVERITY]
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
