"""Advice that names PyTorch APIs newer than the release a trace was recorded with.

The advice speaks today's PyTorch: `torch.compile` arrived with 2.0 (2023-03-15),
`torch.autocast` and the CUDA graph API with 1.10, optimizers' `foreach=` with 1.12. A
trace recorded before such a release ran an earlier one (the TensorBoard plugin's V100
ResNet-50 sample, 2021-06-08, PyTorch 1.8-1.9), so each finding whose advice names one
says it needs the newer release, and where that release had an older spelling, which.
The recording date is the trace's own clock (:mod:`tracelens.core.recorded_at`); no trace
format records the PyTorch version itself.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tracelens.core.findings import Finding
from tracelens.core.recorded_at import recorded_at_ns
from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import workload_of


def _ns(year: int, month: int, day: int) -> int:
    return int(datetime(year, month, day, tzinfo=UTC).timestamp()) * 10**9


_AMP_AUTOCAST = "`torch.cuda.amp.autocast()`"
# (text in the advice, the API as named, release, its date, the older spelling if any)
_APIS = (
    ("torch.compile", "`torch.compile`", "2.0", _ns(2023, 3, 15), None),
    ("torch.autocast", "`torch.autocast`", "1.10", _ns(2021, 10, 21), _AMP_AUTOCAST),
    ("torch.cuda.CUDAGraph", "`torch.cuda.CUDAGraph`", "1.10", _ns(2021, 10, 21), None),
    ("make_graphed_callables", "`make_graphed_callables`", "1.10", _ns(2021, 10, 21), None),
    ("foreach=True", "`foreach=True`", "1.12", _ns(2022, 6, 28), None),
    # fused Adam first; AdamW and SGD later in 2.x
    ("fused=True", "`fused=True` (Adam)", "1.13", _ns(2022, 10, 28), None),
)
PYTORCH_2_RELEASE_NS = _APIS[0][3]


def note_torch_compile_release(findings: list[Finding], db: TraceDB) -> None:
    """Say, in each finding whose advice names an API released after the trace was
    recorded, which release it needs."""
    if not workload_of(db).is_pytorch:
        return
    recorded_ns = recorded_at_ns(db.info, db.t0_ns)
    if recorded_ns is None or recorded_ns >= max(a[3] for a in _APIS):
        return
    day = datetime.fromtimestamp(recorded_ns / 1e9, tz=UTC).date().isoformat()
    for f in findings:
        newer = [a for a in _APIS if a[0] in f.advice and a[3] > recorded_ns]
        if not newer:
            continue
        named = ", ".join(
            f"{label} came with {release}" + (f" ({older} before it)" if older else "")
            for _, label, release, _, older in newer
        )
        f.advice = (
            f.advice.rstrip()
            + f" This trace was recorded on {day}, with an older PyTorch than this advice "
            f"assumes: {named}. Upgrade first, or use what that release has."
        )
