"""A series' regression limits, and the latest run judged against them.

The text is ``METRIC=CHANGE`` pairs separated by commas: ``ttft_p95=+10%,busy=-5pt``.
A change is a signed number with ``%`` (relative to the band's median) or ``pt`` (points,
for the metrics that are percentages). ``+`` means a rise beyond it is a regression, ``-``
a fall; without a sign, the metric's worse direction (up for times, down for throughput and
busy share). The latest run is compared with the median of the runs before it (its band,
:mod:`tracelens.series.trend`), so a regression left in place becomes the new normal once
it is most of the window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from tracelens.series.metrics import BY_KEY, METRICS

_ITEM = re.compile(r"^([a-z0-9_]+)\s*=\s*([+-]?)\s*(\d+(?:\.\d+)?)\s*(%|pt)$")


@dataclass(frozen=True)
class Limit:
    metric: str
    direction: Literal[1, -1]  # +1: a rise is bad; -1: a fall
    amount: float
    unit: Literal["%", "pt"]

    def spec(self) -> str:
        amount = f"{self.amount:g}"
        return f"{self.metric}={'+' if self.direction > 0 else '-'}{amount}{self.unit}"

    def bound(self, median: float) -> float:
        """The value beyond which a run breaks this limit."""
        step = abs(median) * self.amount / 100.0 if self.unit == "%" else self.amount
        return median + self.direction * step

    def broken_by(self, value: float, median: float) -> bool:
        bound = self.bound(median)
        return value > bound if self.direction > 0 else value < bound


def parse_limits(text: str | None) -> list[Limit]:
    """The limits in ``text`` (empty for none); ValueError saying which item is wrong."""
    limits: list[Limit] = []
    for raw in (text or "").split(","):
        item = raw.strip().lower()
        if not item:
            continue
        m = _ITEM.match(item)
        if m is None:
            raise ValueError(
                f"limit {raw.strip()!r} is not METRIC=[+|-]NUMBER(%|pt), e.g. ttft_p95=+10%"
            )
        key, sign, number, unit = m.groups()
        metric = BY_KEY.get(key)
        if metric is None:
            known = ", ".join(x.key for x in METRICS)
            raise ValueError(f"limit {raw.strip()!r}: unknown metric {key!r} (one of {known})")
        if unit == "pt" and metric.unit != "pct":
            raise ValueError(f"limit {raw.strip()!r}: points (pt) apply to percentages only; use %")
        worse: Literal[1, -1] = 1 if metric.better == "lower" else -1
        direction: Literal[1, -1] = worse if not sign else (1 if sign == "+" else -1)
        if any(x.metric == key for x in limits):
            raise ValueError(f"limit {raw.strip()!r}: {key} is limited twice")
        limits.append(Limit(key, direction, float(number), "%" if unit == "%" else "pt"))
    return limits


def limits_spec(limits: list[Limit]) -> str | None:
    """The canonical text of ``limits`` (what is stored), None for none."""
    return ",".join(x.spec() for x in limits) or None
