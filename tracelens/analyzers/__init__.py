"""Analyzers: each module has ``ANALYZER`` (its name) and ``analyze(db, thresholds)``.

A new check is one new module here, added to :data:`ANALYZERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from tracelens.analyzers import (
    communication,
    data_loading,
    h2d_transfers,
    hot_ops,
    idle_gpu,
    launch_overhead,
    llm_latency,
    memory,
    occupancy,
    steps,
    sync_stalls,
    variance,
)
from tracelens.core.findings import Finding, severity_for
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns

ANALYZERS: list[ModuleType] = [
    idle_gpu,
    h2d_transfers,
    hot_ops,
    variance,
    launch_overhead,
    sync_stalls,
    llm_latency,
    data_loading,
    steps,
    memory,
    communication,
    occupancy,
]

AnalyzeFn = Callable[[TraceDB, Thresholds], list[Finding]]


def run_all(db: TraceDB, thresholds: Thresholds) -> list[Finding]:
    """Every analyzer's findings, ranked by the time they would give back."""
    findings: list[Finding] = []
    for module in ANALYZERS:
        findings.extend(module.analyze(db, thresholds))
    findings = _count_once(findings, thresholds)
    findings.sort(key=lambda f: (-f.impact_ns, -int(f.severity), f.analyzer, f.id))
    return findings


def _count_once(findings: list[Finding], t: Thresholds) -> list[Finding]:
    """Keep the ranking honest when a specific finding explains part of a broader one.

    The specific findings keep their impact. The broader one is dropped when they explain
    at least half of it; otherwise it keeps only the unexplained rest, and says so.
    """
    by_id = {f.id: f for f in findings}
    explained: dict[str, list[Finding]] = {}
    for f in findings:
        for sid in f.supersedes:
            if sid in by_id and sid != f.id:
                explained.setdefault(sid, []).append(f)
    dropped: set[str] = set()
    for sid, specific in explained.items():
        broad = by_id[sid]
        covered = sum(f.impact_ns for f in specific)
        if broad.impact_ns <= 0 or covered * 2 >= broad.impact_ns:
            dropped.add(sid)
            continue
        rest = broad.impact_ns - covered
        broad.impact_pct = broad.impact_pct * rest / broad.impact_ns
        broad.impact_ns = rest
        broad.severity = severity_for(broad.impact_pct, t)
        names = ", ".join(f"{f.analyzer} `{f.id}`" for f in specific)
        broad.impact_basis += (
            f" {fmt_ns(covered)} of it is explained and counted by {names}; this is the rest."
        )
    return [f for f in findings if f.id not in dropped]
