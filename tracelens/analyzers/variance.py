"""High-variance operations: kernels and operators whose duration swings widely.

Kernels are grouped by name and launch configuration (grid, block), operators by name and
input shapes, so different work is never compared. A group is erratic when it has enough
instances, a coefficient of variation at or above ``variance_min_cv`` and a p95 at least
``variance_min_p95_over_p50`` times its median. Impact is the time spent above the median:
what the group would give back if every instance ran at its typical speed.
"""

from __future__ import annotations

from tracelens.findings import Finding, TimeRange, finding_id, severity_for
from tracelens.thresholds import Thresholds
from tracelens.tracedb import TraceDB
from tracelens.units import fmt_ns

ANALYZER = "variance"

_GROUPS = {
    "kernel": (
        "kernels",
        "name || ' grid(' || coalesce(grid_x, 0) || ',' || coalesce(grid_y, 0) || ','"
        " || coalesce(grid_z, 0) || ') block(' || coalesce(block_x, 0) || ','"
        " || coalesce(block_y, 0) || ',' || coalesce(block_z, 0) || ')'",
    ),
    "operator": ("cpu_ops", "name || coalesce(' ' || input_shapes, '')"),
}


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    findings: list[Finding] = []
    for kind, (table, key) in _GROUPS.items():
        rows = db.dicts(
            f"""
            WITH x AS (SELECT {key} AS k, name, start_ns, end_ns - start_ns AS d FROM {table}),
            s AS (
                SELECT k, any_value(name) AS name, count(*) AS n, avg(d) AS mean,
                       stddev_pop(d) AS sd, quantile_cont(d, 0.5) AS p50,
                       quantile_cont(d, 0.95) AS p95, max(d) AS mx, sum(d) AS total
                FROM x GROUP BY k HAVING count(*) >= ?
            )
            SELECT s.*, (SELECT sum(x.d - s.p50) FROM x WHERE x.k = s.k AND x.d > s.p50)
                       AS above
            FROM s
            WHERE mean > 0 AND sd / mean >= ? AND p95 >= ? * p50
            ORDER BY above DESC LIMIT ?
            """,
            [
                t.variance_min_count,
                t.variance_min_cv,
                t.variance_min_p95_over_p50,
                t.variance_top_n,
            ],
        )
        for r in rows:
            above = int(r["above"] or 0)
            pct = db.pct_of_window(above)
            cv = r["sd"] / r["mean"]
            slowest = db.dicts(
                f"""SELECT start_ns, end_ns FROM (SELECT {key} AS k, start_ns, end_ns FROM {table})
                    WHERE k = ? ORDER BY end_ns - start_ns DESC LIMIT 5""",
                [r["k"]],
            )
            where = "on the GPU" if kind == "kernel" else "on the host"
            findings.append(
                Finding(
                    id=finding_id(ANALYZER, kind, r["k"]),
                    analyzer=ANALYZER,
                    title=f"Erratic {kind} `{_short(r['name'])}`: p95 {fmt_ns(r['p95'])} vs "
                    f"median {fmt_ns(r['p50'])} (CV {cv:.2f})",
                    severity=severity_for(pct, t),
                    impact_ns=above,
                    impact_pct=pct,
                    impact_basis="Time its instances spent above the group's median duration.",
                    summary=f"{int(r['n']):,} instances {where}, mean {fmt_ns(r['mean'])}, "
                    f"median {fmt_ns(r['p50'])}, p95 {fmt_ns(r['p95'])}, max {fmt_ns(r['mx'])}; "
                    f"{fmt_ns(above)} spent above the median.",
                    evidence={
                        "kind": kind,
                        "group": r["k"],
                        "count": int(r["n"]),
                        "mean_ns": round(r["mean"], 1),
                        "p50_ns": round(r["p50"], 1),
                        "p95_ns": round(r["p95"], 1),
                        "max_ns": int(r["mx"]),
                        "cv": round(cv, 3),
                        "total_ns": int(r["total"]),
                        "above_median_ns": above,
                    },
                    advice=_advice(kind),
                    time_ranges=[
                        TimeRange(s["start_ns"], s["end_ns"], None, "slowest instance")
                        for s in slowest
                    ],
                )
            )
    return findings


def _short(name: str, n: int = 80) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def _advice(kind: str) -> str:
    if kind == "kernel":
        return (
            "Same kernel, same launch configuration, very different durations: look at what "
            "runs beside the slow instances on the timeline (concurrent kernels or copies "
            "contending for SMs or memory bandwidth, NCCL traffic), clock throttling "
            "(`nvidia-smi -q -d CLOCK,PERFORMANCE`), and data-dependent work (sparsity, "
            "dynamic shapes hidden behind the same grid). Lock clocks when benchmarking."
        )
    return (
        "Same operator and input shapes, very different host durations: the slow calls "
        "usually hide allocator work (cudaMalloc after cache misses), implicit syncs, "
        "garbage collection or contention with other threads. Check the slow instances' "
        "children on the timeline; warm up the caching allocator and avoid per-step "
        "allocations."
    )
