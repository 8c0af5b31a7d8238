"""The series as Prometheus metrics: per series, the latest run's headline numbers, how
many runs it has, its latest run's findings by severity and whether it is red.

Labels are the series and the metric (or severity) only, never a run: a series recorded
nightly adds no time series, and a dashboard follows one line per series and metric.
Values are in Prometheus' base units (seconds, ratios as percent kept as percent, rates
per second), each metric's label naming its unit. A fresh registry is filled per scrape:
nothing is kept between requests but the per-run numbers :mod:`web.run_series` caches.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tracelens.core.findings import Severity
from tracelens.series.metrics import METRICS
from web.run_series import SeriesState, all_series, series_summary
from web.services import Services

PREFIX = "tracelens_series"
# The metric label's value and the factor from the series' unit to Prometheus' base unit.
_SCALE = {"ns": ("seconds", 1e-9), "pct": ("percent", 1.0), "rate": ("per_second", 1.0)}


def metric_label(key: str, unit: str) -> str:
    """``ttft_p95`` (ns) -> ``ttft_p95_seconds``; ``tokens_per_s`` -> ``tokens_per_second``."""
    suffix = _SCALE[unit][0]
    base = key.removesuffix("_per_s")
    return f"{base}_{suffix}"


class _SeriesCollector(Collector):
    def __init__(self, svc: Services, states: list[SeriesState]) -> None:
        self.svc = svc
        self.states = states

    def collect(self) -> Iterator[Metric]:
        latest = GaugeMetricFamily(
            f"{PREFIX}_latest",
            "The latest ready run's headline metric, by series and metric (unit in its name).",
            labels=["series", "metric"],
        )
        runs = GaugeMetricFamily(f"{PREFIX}_runs", "Ready runs in the series.", labels=["series"])
        findings = GaugeMetricFamily(
            f"{PREFIX}_latest_findings",
            "Findings of the latest ready run, by severity.",
            labels=["series", "severity"],
        )
        red = GaugeMetricFamily(
            f"{PREFIX}_red",
            "1 when the latest run breaks one of the series' regression limits, else 0.",
            labels=["series"],
        )
        recorded = GaugeMetricFamily(
            f"{PREFIX}_latest_timestamp_seconds",
            "When the latest run was recorded (uploaded, where the trace does not say).",
            labels=["series"],
        )
        for state in self.states:
            runs.add_metric([state.name], len(state.ordered))
            red.add_metric([state.name], 1.0 if series_summary(self.svc, state).red else 0.0)
            if not state.ordered:
                continue
            last = state.ordered[-1]
            recorded.add_metric([state.name], last.order_ns / 1e9)
            for m in METRICS:
                value = last.point.metrics.get(m.key)
                if value is not None:
                    label = metric_label(m.key, m.unit)
                    latest.add_metric([state.name, label], value * _SCALE[m.unit][1])
            for sev in reversed(Severity):
                count = last.point.severities.get(sev.label, 0)
                findings.add_metric([state.name, sev.label], count)
        yield from (latest, runs, findings, red, recorded)


def exposition(svc: Services) -> bytes:
    """The text ``/metrics`` answers with (Prometheus exposition format 0.0.4)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SeriesCollector(svc, all_series(svc)))
    return generate_latest(registry)
