"""Un-costed operator findings whose FP32 matrix kernels the FP32 finding costs.

An operator with no recorded shapes gets no estimate of its own (`hot_ops`: "no recorded
shapes give its FLOPs and bytes"), while the FP32 GEMM/convolution finding counts its
FP32 kernels among the time tensor cores would halve. Listed side by side, a ResNet-50's
`aten::convolution_backward` read as "not costed" at 211 ms beside "137 ms" for the same
kernels: the operator's finding now says which finding costs them.
"""

from __future__ import annotations

from tracelens.core.findings import Finding
from tracelens.core.kernel_kinds import is_fp32_math
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.derived import require
from tracelens.derived.kernel_ops import KERNEL_OPS

# An operator is cited where at least this share of its kernel time is FP32 matrix math.
_MIN_SHARE = 0.1


def cite_fp32_finding(findings: list[Finding], db: TraceDB) -> None:
    """Append to each un-costed `hot_ops` finding the share of its kernel time the FP32
    GEMM/convolution finding of its device costs, with that finding's id."""
    fp32 = {
        int(f.evidence["device_id"]): f
        for f in findings
        if f.analyzer == "occupancy" and "fp32_ns" in f.evidence and f.costed and f.impact_ns > 0
    }
    if not fp32:
        return
    require(db, KERNEL_OPS)
    for f in findings:
        op = f.evidence.get("operator")
        if f.analyzer != "hot_ops" or f.costed or not op:
            continue
        rows = db.rows(
            "SELECT device_id, kernel_name, sum(dur_ns) FROM kernel_ops WHERE op_name = ? "
            "GROUP BY device_id, kernel_name",
            [op],
        )
        total = sum(int(n) for _, _, n in rows)
        by_device: dict[int, int] = {}
        for d, k, n in rows:
            if d is not None and int(d) in fp32 and is_fp32_math(str(k)):
                by_device[int(d)] = by_device.get(int(d), 0) + int(n)
        counted = sum(by_device.values())
        if not total or counted < _MIN_SHARE * total:
            continue
        dev = max(by_device, key=lambda d: (by_device[d], -d))
        f.impact_basis += (
            f" {fmt_ns(counted)} of its kernel time is FP32 GEMM/convolution kernels, which "
            f"the FP32 math finding ({fp32[dev].id}) counts in its estimate."
        )
