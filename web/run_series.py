"""A series for a request: its runs in recording order, their trends, change points and
alerts (what the series API, its page, the home page and ``/metrics`` show).

Each ready run's headline numbers are read once per ingest generation from its stored
report (:meth:`web.run_data.RunData.series_point`); the trends are recomputed from them on
each request, which for a few hundred runs is a few milliseconds.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from litestar.exceptions import NotFoundException, ValidationException

from tracelens.report.render.diff import fmt_value
from tracelens.series.limits import Limit, limits_spec, parse_limits
from tracelens.series.metrics import BY_KEY, METRICS, run_metrics
from tracelens.series.trend import DEFAULT_WINDOW, MIN_BASELINE, band_of, judge
from web.catalog import Run, RunStatus
from web.catalog import runs as catalog_runs
from web.catalog import series as catalog_series
from web.series_schema import (
    Alert,
    ChangePoint,
    MetricTrend,
    SeriesDetail,
    SeriesLinks,
    SeriesRun,
    SeriesSummary,
    TrendPoint,
)
from web.services import Services
from web.storage import RunFiles

MAX_WINDOW = 100


@dataclass(frozen=True)
class FindingSeen:
    id: str
    title: str
    severity: str
    impact_pct: float


@dataclass(frozen=True)
class RunPoint:
    """What a series needs of one ready run's report."""

    metrics: dict[str, float | None]
    findings: tuple[FindingSeen, ...]
    severities: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class OrderedRun:
    run: Run
    point: RunPoint
    order_ns: int
    recorded: bool


def check_window(window: int | None) -> int:
    if window is None:
        return DEFAULT_WINDOW
    if not MIN_BASELINE <= window <= MAX_WINDOW:
        raise ValidationException(f"window must be between {MIN_BASELINE} and {MAX_WINDOW} runs")
    return window


def check_limits(text: str | None) -> str | None:
    """Limits in their canonical text (400 saying which item is wrong)."""
    try:
        return limits_spec(parse_limits(text))
    except ValueError as exc:
        raise ValidationException(f"limits: {exc}") from None


def check_name(name: str) -> str:
    try:
        return catalog_series.check_series_name(name)
    except ValueError as exc:
        raise ValidationException(str(exc)) from None


def _point(svc: Services, run: Run) -> RunPoint | None:
    """The run's numbers from its stored report; None when the report is gone (deleted or
    being replaced under us: the run leaves the series until it is ready again)."""
    path = RunFiles(svc.settings.runs_dir, run.id).report(run.generation)

    def read() -> RunPoint | None:
        try:
            report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        findings = tuple(
            FindingSeen(f["id"], f["title"], f["severity"], float(f["impact_pct"]))
            for f in report.get("findings") or []
        )
        return RunPoint(run_metrics(report), findings, dict(Counter(f.severity for f in findings)))

    return svc.run_data.series_point(run.id, run.generation, read)


def _epoch_ns(moment: datetime) -> int:
    if moment.tzinfo is None:  # SQLite hands timezone-aware columns back naive (UTC)
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1e9)


def ordered_runs(svc: Services, runs: list[Run]) -> list[OrderedRun]:
    """The ready runs with a readable report, ordered by recording time (upload time where
    the trace does not tell)."""
    out = []
    for run in runs:
        if run.status != RunStatus.READY:
            continue
        point = _point(svc, run)
        if point is None:
            continue
        recorded = run.recorded_ns is not None
        order = run.recorded_ns if run.recorded_ns is not None else _epoch_ns(run.created_at)
        out.append(OrderedRun(run, point, order, recorded))
    out.sort(key=lambda r: (r.order_ns, _epoch_ns(r.run.created_at), r.run.id))
    return out


def _compare_link(base: str, cand: str) -> str:
    return f"/compare?base={base}&cand={cand}"


def _alerts(ordered: list[OrderedRun], limits: list[Limit], window: int) -> list[Alert]:
    """The limits the latest run breaks, each against the median of the runs before it."""
    if not ordered:
        return []
    latest = ordered[-1]
    out = []
    for limit in limits:
        value = latest.point.metrics.get(limit.metric)
        if value is None:
            continue
        previous = [
            v for r in ordered[:-1] if (v := r.point.metrics.get(limit.metric)) is not None
        ][-window:]
        band = band_of(previous)
        if band is None or not limit.broken_by(value, band.median):
            continue
        metric = BY_KEY[limit.metric]
        bound = limit.bound(band.median)
        out.append(
            Alert(
                metric=limit.metric,
                limit=limit.spec(),
                run_id=latest.run.id,
                value=value,
                median=band.median,
                bound=bound,
                message=(
                    f"{metric.label} {fmt_value(value, metric.unit)} is beyond "
                    f"{fmt_value(bound, metric.unit)} (limit {limit.spec()} of the median "
                    f"{fmt_value(band.median, metric.unit)} of the {len(previous)} runs before)"
                ),
            )
        )
    return out


def _trends(
    ordered: list[OrderedRun], window: int
) -> tuple[list[MetricTrend], list[ChangePoint], list[TrendPoint]]:
    trends: list[MetricTrend] = []
    changes: list[ChangePoint] = []
    outliers: list[TrendPoint] = []
    for metric in METRICS:
        values = [r.point.metrics.get(metric.key) for r in ordered]
        judged = judge(values, window)
        if not judged:
            continue
        points = []
        for k, j in enumerate(judged):
            run = ordered[j.index].run
            prev = ordered[judged[k - 1].index].run if k > 0 else None
            link = (
                _compare_link(prev.id, run.id)
                if prev is not None and j.kind in ("change", "outlier", "pending")
                else None
            )
            point = TrendPoint(
                run_id=run.id,
                label=run.label,
                value=j.value,
                band_median=j.band.median if j.band else None,
                band_low=j.band.low if j.band else None,
                band_high=j.band.high if j.band else None,
                kind=j.kind,
                compare=link,
            )
            points.append(point)
            if j.kind == "outlier":
                outliers.append(point)
            if j.kind == "change" and prev is not None and j.band is not None:
                up = j.side > 0
                worse = up == (metric.better == "lower")
                changes.append(
                    ChangePoint(
                        metric=metric.key,
                        run_id=run.id,
                        previous_run_id=prev.id,
                        direction="up" if up else "down",
                        band_median=j.band.median,
                        value=j.value,
                        meaning="regression" if worse else "improvement",
                        compare=_compare_link(prev.id, run.id),
                        api_compare=f"/api/compare?base={prev.id}&cand={run.id}",
                    )
                )
        trends.append(MetricTrend(metric.key, metric.label, metric.unit, metric.better, points))
    return trends, _busier_is_not_better(changes), outliers


# Time metrics: a run whose step or latency got worse did more (or slower) GPU work.
_TIMES = {"step", "ttft_p50", "ttft_p95", "tpot_p50", "tpot_p95", "itl_p50", "itl_p95"}


def _busier_is_not_better(changes: list[ChangePoint]) -> list[ChangePoint]:
    """A GPU busier at the run where a step or latency got worse is not an improvement:
    it is busy with more or slower work (a slower kernel raises busy % and step time
    together), so that change is the regression's, ``more work``, not a gain."""
    slower = {c.run_id for c in changes if c.metric in _TIMES and c.meaning == "regression"}
    for c in changes:
        if c.metric == "busy" and c.direction == "up" and c.run_id in slower:
            c.meaning = "more work"
    return changes


def _links(name: str) -> SeriesLinks:
    return SeriesLinks(self_=f"/api/series/{name}", page=f"/series/{name}")


@dataclass(frozen=True)
class SeriesState:
    """A series as read now: its definition and its runs in order."""

    name: str
    tags: list[str]
    limits: str | None
    ordered: list[OrderedRun]
    not_ready: int


def series_state(svc: Services, name: str) -> SeriesState:
    """The series ``name`` (404 when no run is in it and it is not defined)."""
    with svc.catalog.session() as s:
        definition = catalog_series.definition(s, name)
        tags = definition.tags if definition is not None else None
        runs = catalog_series.members(s, name, tags)
        limits = definition.limits if definition is not None else None
    if definition is None and not runs:
        raise NotFoundException(f"no series {name!r}")
    ordered = ordered_runs(svc, runs)
    return SeriesState(
        name=name,
        tags=[t for t in (tags or "").split(",") if t],
        limits=limits,
        ordered=ordered,
        not_ready=sum(1 for r in runs if r.status != RunStatus.READY),
    )


def _limits_of(state: SeriesState) -> list[Limit]:
    try:
        return parse_limits(state.limits)
    except ValueError:  # stored by an older version with other metric names: none apply
        return []


def series_detail(svc: Services, name: str, window: int | None = None) -> SeriesDetail:
    window = check_window(window)
    state = series_state(svc, name)
    trends, changes, outliers = _trends(state.ordered, window)
    alerts = _alerts(state.ordered, _limits_of(state), window)
    return SeriesDetail(
        name=state.name,
        tags=state.tags,
        limits=state.limits,
        window=window,
        red=bool(alerts),
        alerts=alerts,
        change_points=changes,
        outliers=outliers,
        runs=[
            SeriesRun(
                id=r.run.id,
                name=r.run.name,
                label=r.run.label,
                ordered_by="recorded" if r.recorded else "uploaded",
                time=datetime.fromtimestamp(r.order_ns / 1e9, UTC).isoformat(),
                metrics=r.point.metrics,
                top_finding_id=r.point.findings[0].id if r.point.findings else None,
                top_finding_title=r.point.findings[0].title if r.point.findings else None,
                page=f"/runs/{r.run.id}",
            )
            for r in state.ordered
        ],
        not_ready=state.not_ready,
        metrics=trends,
        links=_links(state.name),
    )


def series_summary(svc: Services, state: SeriesState) -> SeriesSummary:
    latest = state.ordered[-1].run if state.ordered else None
    alerts = _alerts(state.ordered, _limits_of(state), DEFAULT_WINDOW)
    return SeriesSummary(
        name=state.name,
        tags=state.tags,
        limits=state.limits,
        runs=len(state.ordered),
        latest_run_id=latest.id if latest else None,
        latest_label=latest.label if latest else None,
        red=bool(alerts),
        alerts=alerts,
        links=_links(state.name),
    )


def all_series(svc: Services) -> list[SeriesState]:
    with svc.catalog.session() as s:
        names = catalog_series.names(s)
    return [series_state(svc, n) for n in names]


def define_series(svc: Services, name: str, tags: Any, limits: Any) -> None:
    """Set what the request gave of a series' definition (``...`` for a field not given)."""
    name = check_name(name)
    with svc.catalog.session() as s:
        current = catalog_series.definition(s, name)
        new_tags = current.tags if current is not None else None
        new_limits = current.limits if current is not None else None
        if tags is not ...:
            norm = catalog_runs.normalize_tags(tags) if tags else ","
            new_tags = norm if norm != "," else None
        if limits is not ...:
            new_limits = check_limits(limits)
        catalog_series.define(s, name, new_tags, new_limits)
