"""Analyzers: each module has ``ANALYZER`` (its name) and ``analyze(db, thresholds)``.

A new check is one new module here, added to :data:`ANALYZERS`; it builds its findings
with :func:`tracelens.analyzers.contract.finding` (:mod:`tracelens.analyzers.contract`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tracelens.analyzers import (
    communication,
    data_loading,
    engine_steps,
    fusion,
    h2d_transfers,
    hot_ops,
    idle_gpu,
    launch_overhead,
    llm_latency,
    memory,
    occupancy,
    steps,
    sync_stalls,
    training_mode,
    variance,
    warmup,
)
from tracelens.analyzers.contract import Analyzer
from tracelens.analyzers.described_window import share_of_described_window
from tracelens.analyzers.fp32_cited import cite_fp32_finding
from tracelens.analyzers.host_paced import leave_out_host_paced
from tracelens.analyzers.pytorch_release import note_torch_compile_release
from tracelens.analyzers.ranking import rank
from tracelens.core.findings import Finding
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import workload_of

ANALYZERS: list[Analyzer] = [
    idle_gpu,
    h2d_transfers,
    hot_ops,
    fusion,
    variance,
    launch_overhead,
    sync_stalls,
    llm_latency,
    engine_steps,
    data_loading,
    steps,
    memory,
    communication,
    occupancy,
    training_mode,
    warmup,
]


def run_all(
    db: TraceDB,
    thresholds: Thresholds,
    extra: Sequence[Finding] = (),
    on_progress: Callable[[int, int], None] | None = None,
) -> list[Finding]:
    """Every analyzer's findings, ranked by the time they would give back.

    ``extra``: findings of checks that need more than the trace (the SLO attainment of
    :mod:`tracelens.analyzers.llm_slo`), ranked with the rest; warm-up does not trim them,
    since they judge requests, not the trace's time. ``on_progress(done, total)`` after
    each analyzer.
    """
    findings: list[Finding] = []
    for done, module in enumerate(ANALYZERS, start=1):
        findings.extend(module.analyze(db, thresholds))
        if on_progress is not None:
            on_progress(done, len(ANALYZERS))
    findings = warmup.leave_out_warmup(findings, db, thresholds)
    leave_out_host_paced(findings, db, thresholds)
    note_torch_compile_release(findings, db)
    cite_fp32_finding(findings, db)
    share_of_described_window(findings, db, thresholds)
    findings = [*findings, *extra]
    return rank(findings, thresholds, timing_valid=not workload_of(db).graph_capture)
