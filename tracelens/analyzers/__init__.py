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
from tracelens.findings import Finding
from tracelens.thresholds import Thresholds
from tracelens.tracedb import TraceDB

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
    findings.sort(key=lambda f: (-f.impact_ns, -int(f.severity), f.analyzer, f.id))
    return findings
