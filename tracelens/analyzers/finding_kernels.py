"""The kernels a finding is about, as SQL: for analyses that weigh a finding's kernel time.

A finding names its subject in its evidence: one operator, one kernel (on one device, where
it says), a list of operators (fusion's chains), or ``kernels`` rows (occupancy's GEMMs).
Host pacing and warm-up both read the kernels' time from this one definition.
"""

from __future__ import annotations

from tracelens.core.findings import Finding
from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.kernel_ops import KERNEL_OPS

_BY_OPERATOR = (
    "SELECT device_id, start_ns, start_ns + dur_ns AS end_ns FROM kernel_ops WHERE op_name = ?"
)
_BY_OPERATORS = (
    "SELECT device_id, start_ns, start_ns + dur_ns AS end_ns FROM kernel_ops "
    "WHERE op_name IN (SELECT unnest(?::VARCHAR[]))"
)
_BY_KERNEL = "SELECT device_id, start_ns, end_ns FROM kernels WHERE name = ?"
_BY_KERNELS = (
    "SELECT device_id, start_ns, end_ns FROM kernels WHERE name IN (SELECT unnest(?::VARCHAR[]))"
)


def kernel_names(f: Finding) -> list[str]:
    """The kernel names in a finding's ``kernels`` rows (``{"kernel": name, ...}``)."""
    rows = f.evidence.get("kernels")
    if not isinstance(rows, list):
        return []
    return [r["kernel"] for r in rows if isinstance(r, dict) and isinstance(r.get("kernel"), str)]


def finding_kernels(db: TraceDB, f: Finding) -> tuple[str, list[object]] | None:
    """A SELECT of (device_id, start_ns, end_ns) for the kernels ``f`` is about, with its
    parameters; None where its evidence names none."""
    ev = f.evidence
    if isinstance(ev.get("operator"), str):
        require(db, KERNEL_OPS)
        return _BY_OPERATOR, [ev["operator"]]
    if isinstance(ev.get("kernel"), str):
        if isinstance(ev.get("device_id"), int):
            return _BY_KERNEL + " AND device_id = ?", [ev["kernel"], ev["device_id"]]
        return _BY_KERNEL, [ev["kernel"]]
    ops = ev.get("operators")
    if isinstance(ops, list) and ops and all(isinstance(o, str) for o in ops):
        require(db, KERNEL_OPS)
        return _BY_OPERATORS, [ops]
    names = kernel_names(f)
    if names:
        return _BY_KERNELS, [names]
    return None
