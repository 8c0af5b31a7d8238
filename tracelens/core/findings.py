"""The finding: one problem, its cost, its proof and its fix."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from enum import IntEnum
from typing import Any


class Severity(IntEnum):
    INFO = 0
    LOW = 1
    MEDIUM = 2
    HIGH = 3
    CRITICAL = 4

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            names = ", ".join(s.label for s in cls)
            raise ValueError(f"unknown severity {text!r} (one of: {names})") from None


def finding_id(analyzer: str, *subject: object) -> str:
    """Stable id: a short hash of the analyzer and its subject (kernel, op, device, cause).

    It never depends on times or counts, so the same problem in a re-ingested or later
    trace keeps its id and its permalink.
    """
    key = "\x1f".join([analyzer, *(str(s) for s in subject)])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


@dataclass
class TimeRange:
    start_ns: int
    end_ns: int
    device_id: int | None = None
    label: str | None = None


@dataclass
class Finding:
    id: str
    analyzer: str
    title: str
    severity: Severity
    impact_ns: int
    impact_pct: float
    impact_basis: str
    summary: str
    evidence: dict[str, Any]
    advice: str
    time_ranges: list[TimeRange] = field(default_factory=list)
    # Ids of broader findings whose time this one explains in more depth (e.g. a sync-stall
    # site explains idle_gpu's 'synchronization' gaps). The ranking counts that time once.
    supersedes: list[str] = field(default_factory=list)
    # The time the finding is about (an operator's GPU time, the idle or blocked time, the
    # copies' time), never less than what it would give back: it orders findings that
    # give back the same time, the informational ones above all, biggest subject first.
    subject_ns: int = 0
    # False where no estimate of what it would give back could be made (an operator with
    # no recorded shapes, or no known GPU peaks): its impact_ns of 0 is unknown, not none,
    # and the renderers list it apart from the findings that give back little.
    costed: bool = True
    # What impact_pct is a share of, as a reader should see it: the analysed window, or
    # the part of it the findings describe (the time after a warm-up span or after a
    # capture-start wait; tracelens.analyzers.described_window).
    impact_share_of: str = "the analysed window"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["severity"] = self.severity.label
        d["impact_pct"] = round(self.impact_pct, 3)
        return d


def severity_for(impact_pct: float, thresholds: Any) -> Severity:
    """Severity from the share of the analysed window a finding would give back."""
    if impact_pct >= thresholds.severity_critical_pct:
        return Severity.CRITICAL
    if impact_pct >= thresholds.severity_high_pct:
        return Severity.HIGH
    if impact_pct >= thresholds.severity_medium_pct:
        return Severity.MEDIUM
    if impact_pct >= thresholds.severity_low_pct:
        return Severity.LOW
    return Severity.INFO
