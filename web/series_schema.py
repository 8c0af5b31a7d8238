"""The JSON bodies of the series API (``/api/series``), as msgspec Structs.

The same objects fill the series page and the home page's list of red series, so the page,
the API and ``tracelens series`` always say the same.
"""

from __future__ import annotations

import msgspec


class SeriesRun(msgspec.Struct):
    """A ready run of a series, in order: its headline metrics and top finding."""

    id: str
    name: str
    label: str | None
    # what the order comes from: the trace's recording time, or (unknown) the upload time
    ordered_by: str
    time: str
    metrics: dict[str, float | None]
    top_finding_id: str | None
    top_finding_title: str | None
    page: str


class TrendPoint(msgspec.Struct):
    """One run's value of a metric, the band the runs before it give it, and what it is:
    ``normal``, ``change`` (a change point), ``outlier``, ``pending`` (beyond, the next run
    will tell), ``shifted`` (after a change, not yet inside the band), or null (no band yet)."""

    run_id: str
    label: str | None
    value: float
    band_median: float | None
    band_low: float | None
    band_high: float | None
    kind: str | None
    # the diff of the run before it and this one, for a point beyond its band
    compare: str | None


class MetricTrend(msgspec.Struct):
    key: str
    label: str
    unit: str
    better: str
    points: list[TrendPoint]


class ChangePoint(msgspec.Struct):
    metric: str
    run_id: str
    previous_run_id: str
    direction: str  # "up" or "down"
    band_median: float
    value: float
    # "regression" or "improvement", by the metric's better direction; "more work" for GPU
    # busy rising where a step or latency got worse at the same run (busier, not better)
    meaning: str
    compare: str
    api_compare: str


class Alert(msgspec.Struct):
    """A limit the latest run breaks, against the median of the runs before it."""

    metric: str
    limit: str
    run_id: str
    value: float
    median: float
    bound: float
    message: str


class SeriesLinks(msgspec.Struct):
    self_: str = msgspec.field(name="self")
    page: str


class SeriesDetail(msgspec.Struct):
    name: str
    tags: list[str]
    limits: str | None
    window: int
    red: bool
    alerts: list[Alert]
    change_points: list[ChangePoint]
    outliers: list[TrendPoint]
    runs: list[SeriesRun]
    # runs of the series not (yet) ready: queued, ingesting or failed
    not_ready: int
    metrics: list[MetricTrend]
    links: SeriesLinks


class SeriesSummary(msgspec.Struct):
    name: str
    tags: list[str]
    limits: str | None
    runs: int
    latest_run_id: str | None
    latest_label: str | None
    red: bool
    alerts: list[Alert]
    links: SeriesLinks


class SeriesList(msgspec.Struct):
    series: list[SeriesSummary]


class SeriesChange(msgspec.Struct):
    """A series' definition: the tags selecting its runs (every one; null: runs named into
    it at upload only) and its regression limits (``ttft_p95=+10%,busy=-5pt``; null or an
    empty string for none). A field left out stays as it was."""

    tags: str | msgspec.UnsetType | None = msgspec.UNSET
    limits: str | msgspec.UnsetType | None = msgspec.UNSET
