"""The evidence keys of every analyzer's findings: what each holds, declared once.

One module per analyzer declares its ``EVIDENCE``
(:class:`~tracelens.analyzers.evidence_keys.model.AnalyzerEvidence`): the keys every
finding has and, where the analyzer reports different problems, the keys of each kind.
:data:`EVIDENCE` lists them in the order of :data:`tracelens.analyzers.ANALYZERS`, then
``llm_slo`` (run by the report builder beside the others). The evidence section of
``docs/json-schema.md`` is generated from it (``tracelens schema --evidence``), and
``tests/test_evidence_keys.py`` checks every finding of the planted and corpus traces
against it, so the document stays what the analyzers write.
"""

from __future__ import annotations

from tracelens.analyzers.evidence_keys import (
    communication,
    data_loading,
    engine_steps,
    fusion,
    h2d_transfers,
    hot_ops,
    idle_gpu,
    launch_overhead,
    llm_latency,
    llm_slo,
    memory,
    occupancy,
    steps,
    sync_stalls,
    training_mode,
    variance,
    warmup,
)
from tracelens.analyzers.evidence_keys.model import AnalyzerEvidence, Key, Kind, Type

EVIDENCE: tuple[AnalyzerEvidence, ...] = (
    idle_gpu.EVIDENCE,
    h2d_transfers.EVIDENCE,
    hot_ops.EVIDENCE,
    fusion.EVIDENCE,
    variance.EVIDENCE,
    launch_overhead.EVIDENCE,
    sync_stalls.EVIDENCE,
    llm_latency.EVIDENCE,
    engine_steps.EVIDENCE,
    data_loading.EVIDENCE,
    steps.EVIDENCE,
    memory.EVIDENCE,
    communication.EVIDENCE,
    occupancy.EVIDENCE,
    training_mode.EVIDENCE,
    warmup.EVIDENCE,
    llm_slo.EVIDENCE,
)

BY_ANALYZER: dict[str, AnalyzerEvidence] = {e.analyzer: e for e in EVIDENCE}

__all__ = ["BY_ANALYZER", "EVIDENCE", "AnalyzerEvidence", "Key", "Kind", "Type"]
