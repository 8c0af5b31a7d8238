"""The band of normal variation of one metric over a series, and what leaves it.

For each run, the band is the median of the (up to) ``window`` runs before it that have
the metric, ± three times their median absolute deviation scaled to a standard deviation
(1.4826 × MAD: robust, one wild run does not widen it), and never narrower than
:data:`MIN_HALF_WIDTH_PCT` of the median (identical runs would otherwise make every
rounding difference news). With fewer than :data:`MIN_BASELINE` earlier runs there is no
band yet.

A run beyond its band is

- a **change** (a change point) when the next run is beyond the same band on the same side
  too: the metric moved and stayed;
- an **outlier** when the next run is back inside (or beyond on the other side);
- **pending** when it is the latest run: the next one will tell;
- **shifted** when the run before it was a change or shifted on the same side: the same
  move, not a new one (until the band has caught up with the new level).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Literal

DEFAULT_WINDOW = 10
MIN_BASELINE = 3
# 1.4826 × MAD estimates the standard deviation of normally distributed values.
MAD_TO_SIGMA = 1.4826
BAND_SIGMAS = 3.0
MIN_HALF_WIDTH_PCT = 1.0

Kind = Literal["normal", "change", "outlier", "pending", "shifted"]


@dataclass(frozen=True)
class Band:
    median: float
    low: float
    high: float

    def side(self, value: float) -> int:
        """+1 above the band, -1 below, 0 inside."""
        return 1 if value > self.high else -1 if value < self.low else 0


@dataclass(frozen=True)
class Judged:
    """One run's value, its band (None: too few runs before it) and what it is."""

    index: int
    value: float
    band: Band | None
    side: int
    kind: Kind | None


def band_of(previous: list[float]) -> Band | None:
    """The band the last ``window`` values before a run give it."""
    if len(previous) < MIN_BASELINE:
        return None
    median = statistics.median(previous)
    mad = statistics.median(abs(v - median) for v in previous)
    half = max(BAND_SIGMAS * MAD_TO_SIGMA * mad, abs(median) * MIN_HALF_WIDTH_PCT / 100.0)
    return Band(median, median - half, median + half)


def judge(values: list[float | None], window: int = DEFAULT_WINDOW) -> list[Judged]:
    """Each run that has a value (``index`` into ``values``, the series in order), judged."""
    if window < MIN_BASELINE:
        raise ValueError(f"window must be at least {MIN_BASELINE} runs, got {window}")
    present = [(i, v) for i, v in enumerate(values) if v is not None]
    out: list[Judged] = []
    for k, (index, value) in enumerate(present):
        band = band_of([v for _, v in present[max(0, k - window) : k]])
        side = band.side(value) if band is not None else 0
        kind: Kind | None = None
        if band is not None:
            previous = out[-1] if out else None
            if side == 0:
                kind = "normal"
            elif (
                previous is not None
                and previous.kind in ("change", "shifted")
                and (previous.side == side)
            ):
                kind = "shifted"
            elif k + 1 < len(present):
                kind = "change" if band.side(present[k + 1][1]) == side else "outlier"
            else:
                kind = "pending"
        out.append(Judged(index, value, band, side, kind))
    return out
