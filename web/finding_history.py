"""A finding across its run's series: when it first appeared, its impact run by run, and
when it was resolved (absent from a later run and not back since).

Read from the numbers the series keeps of each ready run (:mod:`web.run_series`), so a
finding page costs no report loads once its series has been looked at.
"""

from __future__ import annotations

from dataclasses import dataclass

from web.catalog import Run
from web.run_series import OrderedRun, series_state
from web.services import Services


@dataclass(frozen=True)
class Sighting:
    run_id: str
    label: str
    impact_pct: float | None  # None: absent from that run
    current: bool  # the run whose finding page this is


@dataclass(frozen=True)
class FindingHistory:
    series: str
    sightings: list[Sighting]
    first_seen: Sighting | None
    resolved: Sighting | None  # the first run without it after its last appearance
    reappeared: bool  # absent from some run between appearances


def _label(r: OrderedRun) -> str:
    return r.run.label or r.run.name


def finding_history(svc: Services, run: Run, finding_id: str) -> FindingHistory | None:
    """The history of ``finding_id`` in ``run``'s series; None outside a series."""
    if not run.series:
        return None
    state = series_state(svc, run.series)
    sightings = []
    for r in state.ordered:
        seen = next((f for f in r.point.findings if f.id == finding_id), None)
        sightings.append(
            Sighting(r.run.id, _label(r), seen.impact_pct if seen else None, r.run.id == run.id)
        )
    present = [i for i, s in enumerate(sightings) if s.impact_pct is not None]
    if not present:
        return FindingHistory(run.series, sightings, None, None, False)
    first, last = present[0], present[-1]
    resolved = sightings[last + 1] if last + 1 < len(sightings) else None
    gaps = len(present) != last - first + 1
    return FindingHistory(run.series, sightings, sightings[first], resolved, gaps)
