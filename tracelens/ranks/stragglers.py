"""Stragglers and arrival skew: who reaches each collective last, and who waits for it.

A collective found on every rank (paired through the clock alignment) is a *group*. On the
aligned clock, each rank's arrival is its collective kernel's start; the last arrival is
when the transfer can begin, so every other rank waits from its own arrival until then
(at most its kernel's duration: a rank cannot wait longer than the kernel ran). Had the
last rank arrived with the second-to-last, the job would have reached the end of the
collective that much earlier: that gap, summed over the groups a rank is last in, is what
fixing that rank gives back (the straggler finding's impact). What the rank did since its
previous collective (more GPU work than the others, or an idle GPU and its cause) says
why it was late.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import median
from typing import Any

from tracelens.core.units import fmt_ns
from tracelens.ranks.clock import Alignment
from tracelens.ranks.extract import Collective, RankExtract


@dataclass(frozen=True)
class Group:
    kind: str
    members: dict[int, Collective]  # rank -> its collective
    arrivals: dict[int, int]  # rank -> arrival on the aligned clock (ns)
    last: int  # the rank that arrived last
    skew_ns: int  # last arrival minus first
    lead_ns: int  # last arrival minus the second-to-last: what the last rank held back
    waits: dict[int, int]  # rank -> how long it waited for the last one


@dataclass(frozen=True)
class Straggler:
    rank: int
    late: int  # groups it arrived last in
    groups: int
    held_back_ns: int  # sum of its lead over the second-to-last arrival
    others_wait_ns: int  # every other rank's wait in those groups, summed
    cause: str  # "compute" | a gap cause | "unknown"
    excess_compute_ns: int  # its compute before those collectives beyond the others' median
    excess_idle_ns: int  # likewise for its GPU idle time
    idle_cause: str | None


def groups(extracts: list[RankExtract], alignments: dict[int, Alignment]) -> list[Group]:
    """The collectives every rank shares, in the reference rank's order."""
    ref = extracts[0]
    members: dict[int, dict[int, Collective]] = {
        j: {ref.rank: c} for j, c in enumerate(ref.collectives)
    }
    for e in extracts[1:]:
        for i, j in alignments[e.rank].pairs:
            members[j][e.rank] = e.collectives[i]
    n = len(extracts)
    out: list[Group] = []
    for j in sorted(members):
        m = members[j]
        if len(m) != n:
            continue
        arr = {r: c.start_ns - alignments[r].offset_ns for r, c in m.items()}
        order = sorted(arr, key=lambda r: (arr[r], r))
        last = order[-1]
        t_last = arr[last]
        waits = {r: max(0, min(t_last - arr[r], m[r].end_ns - m[r].start_ns)) for r in m}
        waits[last] = 0
        lead = t_last - arr[order[-2]] if n > 1 else 0
        out.append(
            Group(ref.collectives[j].kind, m, arr, last, t_last - arr[order[0]], lead, waits)
        )
    return out


def stragglers(extracts: list[RankExtract], found: list[Group]) -> list[Straggler]:
    """Each rank that was last in at least one group, most held-back time first. A group
    whose last two ranks arrive together (a tie, as in a balanced job) has no last rank."""
    out: list[Straggler] = []
    for e in extracts:
        mine = [g for g in found if g.last == e.rank and g.lead_ns > 0]
        if not mine:
            continue
        ex_compute = ex_idle = 0
        causes: Counter[str] = Counter()
        for g in mine:
            c = g.members[e.rank]
            others = [o for r, o in g.members.items() if r != e.rank]
            ex_compute += max(0, c.compute_ns - int(median(o.compute_ns for o in others)))
            extra_idle = max(0, c.idle_ns - int(median(o.idle_ns for o in others)))
            ex_idle += extra_idle
            if c.idle_cause and extra_idle:
                causes[c.idle_cause] += extra_idle
        idle_cause = causes.most_common(1)[0][0] if causes else None
        if ex_compute == 0 and ex_idle == 0:
            cause = "unknown"
        elif ex_compute >= ex_idle:
            cause = "compute"
        else:
            cause = idle_cause or "unknown"
        out.append(
            Straggler(
                rank=e.rank,
                late=len(mine),
                groups=len(found),
                held_back_ns=sum(g.lead_ns for g in mine),
                others_wait_ns=sum(sum(g.waits.values()) for g in mine),
                cause=cause,
                excess_compute_ns=ex_compute,
                excess_idle_ns=ex_idle,
                idle_cause=idle_cause,
            )
        )
    return sorted(out, key=lambda s: (-s.held_back_ns, s.rank))


# Up to this many skews per kind are listed as they are: percentiles of two values
# name one of them (or their midpoint) and hide the other.
LISTED_SKEWS = 2


def skew_by_kind(found: list[Group]) -> list[dict[str, object]]:
    """Arrival skew per collective kind: count, p50 (a true median, the midpoint of an even
    count, as the per-rank tables' medians are), p95, max (ns), and ``values_ns`` (every
    skew, ascending) where there are at most :data:`LISTED_SKEWS`."""
    by: dict[str, list[int]] = {}
    for g in found:
        by.setdefault(g.kind, []).append(g.skew_ns)
    rows: list[dict[str, object]] = []
    for kind, vals in sorted(by.items()):
        vals.sort()
        row: dict[str, object] = {
            "collective": kind,
            "count": len(vals),
            "p50_ns": int(median(vals)),
            "p95_ns": _pct(vals, 95),
            "max_ns": vals[-1],
        }
        if len(vals) <= LISTED_SKEWS:
            row["values_ns"] = list(vals)
        rows.append(row)
    return rows


def skew_text(s: Mapping[str, Any]) -> str:
    """One kind's skew for a report line: its values where few, else p50, p95, max."""
    values = s.get("values_ns")
    if isinstance(values, list):
        return "values " + ", ".join(fmt_ns(int(v)) for v in values)
    return (
        f"p50 {fmt_ns(int(s['p50_ns']))}, p95 {fmt_ns(int(s['p95_ns']))}, "
        f"max {fmt_ns(int(s['max_ns']))}"
    )


def _pct(sorted_vals: list[int], p: float) -> int:
    """Nearest-rank percentile of an ascending list."""
    k = max(0, min(len(sorted_vals) - 1, math.ceil(p / 100 * len(sorted_vals)) - 1))
    return sorted_vals[k]
