"""Advice that needs a PyTorch release newer than the one a trace was recorded with.

`torch.compile` arrived with PyTorch 2.0 (2023-03-15). A trace recorded before then ran an
earlier release (the TensorBoard plugin's V100 ResNet-50 sample, 2021, PyTorch 1.8-1.9),
and advice to compile must say it needs an upgrade first. The recording date is the
trace's own clock (:mod:`tracelens.core.recorded_at`); no trace format records the
PyTorch version itself.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tracelens.core.findings import Finding
from tracelens.core.recorded_at import recorded_at_ns
from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import workload_of

PYTORCH_2_RELEASE_NS = int(datetime(2023, 3, 15, tzinfo=UTC).timestamp()) * 10**9


def note_torch_compile_release(findings: list[Finding], db: TraceDB) -> None:
    """Say, in each finding whose advice compiles, that `torch.compile` needs PyTorch 2.0
    where the trace was recorded before it existed."""
    if not workload_of(db).is_pytorch:
        return
    recorded_ns = recorded_at_ns(db.info, db.t0_ns)
    if recorded_ns is None or recorded_ns >= PYTORCH_2_RELEASE_NS:
        return
    day = datetime.fromtimestamp(recorded_ns / 1e9, tz=UTC).date().isoformat()
    for f in findings:
        if "torch.compile" in f.advice:
            f.advice = (
                f.advice.rstrip()
                + f" `torch.compile` needs PyTorch 2.0 or later (March 2023); this trace was "
                f"recorded on {day}, with an earlier release: upgrade first, or take the "
                "measures above that do not compile."
            )
