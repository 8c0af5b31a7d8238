"""What an analyzer is, and the one way an analyzer builds a finding.

An analyzer is a module with ``ANALYZER`` (its name, the first part of every id it gives)
and ``analyze(db, thresholds)``; :data:`tracelens.analyzers.ANALYZERS` lists them.

:func:`finding` fills the parts of a :class:`~tracelens.core.findings.Finding` that follow
from the analyzer, its subject and its impact, so every analyzer derives them the same way:
the id is a hash of the analyzer and the subject (never times or counts), the impact's
share is of the analysed window, and severity follows that share. The analyzer writes what
only it knows: title, basis, summary, evidence, advice and time ranges.
"""

from __future__ import annotations

from typing import Any, Protocol

from tracelens.core.findings import Finding, Severity, TimeRange, finding_id, severity_for
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB


class Analyzer(Protocol):
    """An analyzer module: its name and its findings on one trace."""

    ANALYZER: str

    def analyze(self, db: TraceDB, thresholds: Thresholds) -> list[Finding]: ...


def finding(
    analyzer: str,
    subject: tuple[object, ...],
    impact_ns: int,
    db: TraceDB,
    t: Thresholds,
    *,
    title: str,
    impact_basis: str,
    summary: str,
    evidence: dict[str, Any],
    advice: str,
    time_ranges: list[TimeRange] | None = None,
    supersedes: list[str] | None = None,
    severity: Severity | None = None,
    subject_ns: int | None = None,
    costed: bool = True,
) -> Finding:
    """A finding of ``analyzer`` about ``subject`` that would give back ``impact_ns``.

    Severity follows the impact's share of the window; a finding that gives back no time
    is informational. ``severity`` overrides that only for findings whose weight is not
    time (a memory risk). The ranking (:mod:`tracelens.analyzers.ranking`) derives severity
    from the share again once every millisecond is counted once.
    """
    pct = db.pct_of_window(impact_ns)
    if severity is None:
        severity = severity_for(pct, t) if impact_ns > 0 else Severity.INFO
    return Finding(
        id=finding_id(analyzer, *subject),
        analyzer=analyzer,
        title=title,
        severity=severity,
        impact_ns=impact_ns,
        impact_pct=pct,
        impact_basis=impact_basis,
        summary=summary,
        evidence=evidence,
        advice=advice,
        time_ranges=time_ranges or [],
        supersedes=supersedes or [],
        subject_ns=max(impact_ns, subject_ns or 0),
        costed=costed,
    )
