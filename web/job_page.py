"""What a job run's page shows: its ranks side by side, each metric as a heat strip.

The rank table holds what ``analyze_job`` measured of each rank (window, busy %, idle by
cause, compute, exposed communication, median step, clock offset); each metric also gets a
strip of one cell per rank, darker for a larger value, so the odd rank out is seen at a
glance in a job of hundreds. Cells are SVG rectangles with a fill attribute (no inline
style: the CSP forbids it), and each names its rank and value in a tooltip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracelens.core.units import fmt_ns
from web.timeline_aligned import AlignedClock

# The cells' colours, light to dark: the value's place between the metric's least and
# largest over the ranks.
_SHADES = ("#eef3fb", "#cfdcf3", "#a9c1ea", "#7ea2dd", "#4f7fcc", "#2a5fb5", "#163f86")
CELL_PX = 22
MAX_STRIP_PX = 720


@dataclass(frozen=True)
class HeatCell:
    rank: int
    x: int
    fill: str
    label: str


@dataclass(frozen=True)
class HeatStrip:
    metric: str
    cells: list[HeatCell]
    width: int
    cell: int


def _metrics(row: dict[str, Any]) -> dict[str, tuple[float | None, str]]:
    """A rank row's metrics: (value, as shown)."""
    idle = sum(int(v) for v in (row.get("idle_ns_by_cause") or {}).values())
    busy = row.get("busy_pct")

    def ns(v: Any) -> tuple[float | None, str]:
        return (None, "-") if v is None else (float(v), fmt_ns(int(v)))

    return {
        "window": ns(row.get("window_ns")),
        "busy %": (None, "-") if busy is None else (float(busy), f"{float(busy):.1f}%"),
        "idle": ns(idle),
        "compute": ns(row.get("compute_ns")),
        "exposed communication": ns(row.get("exposed_comm_ns")),
        "median step": ns(row.get("median_step_ns")),
    }


def heat_strips(ranks: list[dict[str, Any]]) -> list[HeatStrip]:
    """One strip per metric, one cell per rank, in the table's order."""
    if not ranks:
        return []
    cell = max(3, min(CELL_PX, MAX_STRIP_PX // len(ranks)))
    per_rank = [(int(r["rank"]), _metrics(r)) for r in ranks]
    strips = []
    for metric in per_rank[0][1]:
        values = [v for _, m in per_rank if (v := m[metric][0]) is not None]
        if not values:
            continue
        lo, hi = min(values), max(values)
        cells = []
        for i, (rank, m) in enumerate(per_rank):
            value, shown = m[metric]
            if value is None:
                fill = "#ffffff"
            else:
                t = 0.0 if hi == lo else (value - lo) / (hi - lo)
                fill = _SHADES[round(t * (len(_SHADES) - 1))]
            cells.append(HeatCell(rank, i * cell, fill, f"rank {rank}: {metric} {shown}"))
        strips.append(HeatStrip(metric, cells, cell * len(per_rank), cell))
    return strips


def idle_causes(ranks: list[dict[str, Any]]) -> list[str]:
    """The idle causes any rank has, largest in total first: the table's idle columns."""
    totals: dict[str, int] = {}
    for r in ranks:
        for cause, ns in (r.get("idle_ns_by_cause") or {}).items():
            totals[cause] = totals.get(cause, 0) + int(ns)
    return sorted(totals, key=lambda c: -totals[c])


def _timed(f: dict[str, Any]) -> list[tuple[int, int, int | None]]:
    """A finding's time ranges as (start, end, the rank whose clock they are on)."""
    return [
        (int(r["start_ns"]), int(r["end_ns"]), r.get("rank", f.get("rank")))
        for r in f.get("time_ranges") or []
        if r.get("start_ns") is not None and r.get("end_ns") is not None
    ]


def rank_highlights(report: dict[str, Any], t0_ns: int, shown: int) -> dict[str, list[list[int]]]:
    """What one rank's timeline (its own clock) highlights of each finding: the ranges on
    that rank's clock, of its findings and of the cross-rank ones reaching it (a
    straggler's: its own time before the collectives, or this rank's waits for it)."""
    out = {}
    for f in report["findings"]:
        mine = [[s - t0_ns, e - t0_ns] for s, e, rank in _timed(f) if rank == shown]
        if mine or f.get("rank") == shown:
            out[f["id"]] = mine
    return out


def aligned_highlights(
    report: dict[str, Any], clock: AlignedClock, shown: list[int]
) -> dict[str, list[list[Any]]]:
    """Every finding's ranges on the ranks ``shown``, on the aligned timeline, as [start,
    end, rank, role]: ``own`` for a range on the finding's own rank (a straggler's time
    before the collectives), ``wait`` for another rank's (its wait inside the collective
    for the straggler)."""
    on = set(shown)
    out: dict[str, list[list[Any]]] = {}
    for f in report["findings"]:
        ranges = []
        for s, e, rank in _timed(f):
            if rank is None or rank not in on or rank not in clock.ranks:
                continue
            role = "own" if rank == f.get("rank") else "wait"
            ranges.append([clock.aligned(rank, s), clock.aligned(rank, e), rank, role])
        out[f["id"]] = ranges
    return out


def job_context(
    report: dict[str, Any],
    t0_ns: int,
    rank: int | None = None,
    clock: AlignedClock | None = None,
    aligned_ranks: list[int] | None = None,
) -> dict[str, Any]:
    """What job_run.html needs of a job report beyond the report itself; the timeline is
    ``rank``'s (None: the reference rank's), or with ``clock`` ``aligned_ranks`` together
    on the reference clock."""
    ref = report["clock"]["reference_rank"]
    shown = ref if rank is None else rank
    offsets = {o["rank"]: o for o in report["clock"]["offsets"]}
    return {
        "reference_rank": ref,
        "shown_rank": shown,
        "aligned_ranks": aligned_ranks or [],
        "ranks": [r["rank"] for r in report["ranks"]],
        "offsets": offsets,
        "strips": heat_strips(report["ranks"]),
        "idle_causes": idle_causes(report["ranks"]),
        "highlights": aligned_highlights(report, clock, aligned_ranks or [])
        if clock is not None
        else rank_highlights(report, t0_ns, shown),
    }
