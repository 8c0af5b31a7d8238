"""Storms of small collectives, judged across ranks.

Hundreds of small all-reduces per step (unbucketed gradients, per-parameter reductions,
metrics reduced one scalar at a time) are latency-bound: each costs a kernel launch and a
round of synchronisation among all ranks whatever its size, so the exchange takes the
count times that latency rather than bytes over bandwidth. One rank showing it may be an
accident of the capture; every rank showing it is the program's pattern, and coalescing
is the fix.

What coalescing gives back, per rank: the small collectives' kernel time minus what the
same bytes would take in buckets of ``comm_storm_bucket_bytes`` — one small collective's
median time per bucket (its latency, an upper bound: that median includes waiting for
peers) plus the bytes at the best rate the rank's large collectives reached — scaled by
the share of the small collectives' time that no compute hides. The job's impact is the
median of the ranks that storm (they run at once).
"""

from __future__ import annotations

import math
from statistics import median
from typing import Any

from tracelens.core.findings import finding_id, severity_for
from tracelens.core.thresholds import Thresholds
from tracelens.core.units import fmt_bytes, fmt_ns
from tracelens.ranks.extract import RankExtract, SmallCollectives
from tracelens.ranks.grouping import ranks_label
from tracelens.ranks.job_findings import ANALYZER


def storm_saving_ns(s: SmallCollectives, t: Thresholds) -> int:
    """What coalescing ``s`` into buckets would give back on its rank (see the module)."""
    if not s.count or not s.kernel_ns:
        return 0
    steps = max(1, s.steps)
    buckets = steps * math.ceil(s.bytes / steps / t.comm_storm_bucket_bytes)
    bucketed = buckets * s.median_ns
    if s.best_large_gbps:
        bucketed += int(s.bytes / s.best_large_gbps)
    saved = max(0, s.kernel_ns - bucketed)
    return int(saved * s.exposed_ns / s.kernel_ns)


def _per_step(s: SmallCollectives) -> float:
    return s.count / max(1, s.steps)


def storm_finding(
    extracts: list[RankExtract], window_ns: int, t: Thresholds
) -> dict[str, Any] | None:
    """One finding when most ranks issue a storm of small collectives, else None."""
    storming = [
        e
        for e in extracts
        if e.small is not None and _per_step(e.small) >= t.comm_storm_min_per_step
    ]
    if len(extracts) < 2 or 2 * len(storming) <= len(extracts):
        return None
    smalls = {e.rank: e.small for e in storming if e.small is not None}
    saving = {r: storm_saving_ns(s, t) for r, s in smalls.items()}
    impact = int(median(saving.values()))
    pct = 100.0 * impact / window_ns if window_ns else 0.0
    if pct < t.comm_min_exposed_pct:
        return None
    ranks = sorted(smalls)
    rep = max(ranks, key=lambda r: (saving[r], -r))
    s = smalls[rep]
    per_step = int(median(_per_step(x) for x in smalls.values()))
    unit = "step" if s.steps else "capture"
    kinds = ", ".join(f"`{k}`" for k in s.kinds[:3])
    return {
        "id": finding_id(ANALYZER, "small-collective-storm"),
        "analyzer": ANALYZER,
        "title": f"{ranks_label(ranks).capitalize()} each issue about {per_step:,} collectives "
        f"of under {fmt_bytes(t.comm_small_collective_bytes)} per {unit}: latency-bound, "
        "coalesce them",
        "severity": severity_for(pct, t).label,
        "impact_ns": impact,
        "impact_pct": round(pct, 3),
        "subject_ns": impact,
        "costed": True,
        # the job's findings are shares of the median rank's window (its analysed window)
        "impact_share_of": "the median rank's analysed window",
        "impact_basis": "Per rank: the small collectives' kernel time minus the same bytes "
        f"in {fmt_bytes(t.comm_storm_bucket_bytes)} buckets (one small collective's median "
        "time per bucket, plus the bytes at the rank's best large-collective rate), times "
        "the share of it no compute hides; the median over the ranks that storm, as they "
        "run at once. Part of the exposed communication the communication findings count.",
        "summary": f"On {len(ranks)} of {len(extracts)} ranks. Rank {rep}: {s.count:,} "
        f"collectives ({kinds}) moved {fmt_bytes(s.bytes)} in {fmt_ns(s.kernel_ns)} of kernel "
        f"time, {fmt_ns(s.exposed_ns)} of it not hidden by compute; one takes "
        f"{fmt_ns(s.median_ns)} (median) whatever its size.",
        "evidence": {
            "ranks": ranks,
            "per_step_median": per_step,
            "small_collective_bytes": t.comm_small_collective_bytes,
            "bucket_bytes": t.comm_storm_bucket_bytes,
            "saving_ns_by_rank": {str(r): v for r, v in saving.items()},
            "rank": rep,
            "count": s.count,
            "steps": s.steps,
            "kernel_ns": s.kernel_ns,
            "exposed_ns": s.exposed_ns,
            "bytes": s.bytes,
            "median_ns": s.median_ns,
            "collectives": list(s.kinds),
        },
        "advice": "Coalesce the small collectives: for DDP keep gradient bucketing on "
        "(`bucket_cap_mb` 25 or more; no `find_unused_parameters=True`, which reduces "
        "parameters one by one), for FSDP wrap larger units; reduce metrics and scalars "
        "once per step as one tensor (`torch.cat` or a flat buffer, then one "
        "`all_reduce`), or batch point-to-point ops with `batch_isend_irecv`; "
        "`torch.distributed` coalescing managers (`_coalescing_manager`) issue a group as one "
        "NCCL call.",
        "time_ranges": [],
        "supersedes": [],
        "rank": rep,
        "ranks": ranks,
    }
