"""Hot operators: GPU time attributed to the CPU operator that launched it.

One finding per operator holding at least ``hot_min_share_pct`` of GPU kernel time, with
its kernels; the advice and the savings estimate follow the kind of its dominant kernel
(FP32 GEMM, attention, elementwise, ...). Where no honest estimate exists the finding is
informational (impact 0) but still ranked by share in the report's ``top_ops``.
"""

from __future__ import annotations

from tracelens.analyzers.attribution import UNATTRIBUTED, build_kernel_attribution
from tracelens.core.findings import Finding, Severity, finding_id, severity_for
from tracelens.core.kernel_kinds import classify
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns

ANALYZER = "hot_ops"


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    total = db.scalar("SELECT sum(end_ns - start_ns) FROM kernels")
    if not total:
        return []
    build_kernel_attribution(db)
    ops = db.dicts(
        """SELECT op_name, sum(dur_ns) AS ns, count(*) AS kernels,
                  count(DISTINCT op_id) AS op_calls
           FROM kernel_ops GROUP BY op_name ORDER BY ns DESC, op_name LIMIT ?""",
        [t.hot_top_n],
    )
    cc = db.scalar("SELECT max(compute_capability) FROM devices")
    findings: list[Finding] = []
    informational = 0
    for op in ops:
        share = 100.0 * op["ns"] / total
        # Kernels no operator launched are listed in top_ops; as a "hot operator" they would
        # name no code to change.
        if share < t.hot_min_share_pct or op["op_name"] == UNATTRIBUTED:
            continue
        kernels = db.dicts(
            """SELECT kernel_name AS name, count(*) AS count, sum(dur_ns) AS total_ns,
                      CAST(avg(dur_ns) AS BIGINT) AS mean_ns
               FROM kernel_ops WHERE op_name = ? GROUP BY kernel_name
               ORDER BY total_ns DESC, name LIMIT 5""",
            [op["op_name"]],
        )
        kind = classify(kernels[0]["name"]) if kernels else classify("")
        fraction = kind.saving_fraction
        if kind.key == "gemm_fp32" and cc is not None and _cc_below(cc, 7.0):
            fraction = 0.0  # no tensor cores before Volta
        impact = int(op["ns"] * fraction)
        if not impact:
            # Without a savings estimate a hot operator is context, not a problem: only the
            # hottest few get a finding, the rest are in the report's top_ops table.
            informational += 1
            if informational > t.hot_info_findings:
                continue
        pct = db.pct_of_window(impact)
        name = op["op_name"]
        findings.append(
            Finding(
                id=finding_id(ANALYZER, name),
                analyzer=ANALYZER,
                title=f"`{name}` launches {share:.1f}% of GPU kernel time ({fmt_ns(op['ns'])}), "
                f"mostly {kind.label}",
                severity=severity_for(pct, t) if impact else Severity.INFO,
                impact_ns=impact,
                impact_pct=pct,
                impact_basis=kind.saving_basis
                if impact
                else "Informational: no reliable estimate of the savings for this kind of kernel.",
                summary=f"{int(op['op_calls']):,} calls of `{name}` launched "
                f"{int(op['kernels']):,} kernels totalling {fmt_ns(op['ns'])} "
                f"({share:.1f}% of all kernel time).",
                evidence={
                    "operator": name,
                    "gpu_ns": int(op["ns"]),
                    "share_pct": round(share, 3),
                    "operator_calls": int(op["op_calls"]),
                    "kernel_count": int(op["kernels"]),
                    "kernel_kind": kind.key,
                    "top_kernels": kernels,
                },
                advice=kind.advice,
            )
        )
    return findings


def _cc_below(cc: str, floor: float) -> bool:
    try:
        return float(cc) < floor
    except ValueError:
        return False
