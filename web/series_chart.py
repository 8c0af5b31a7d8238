"""A series metric's chart as inline SVG: a point per run, the band, change points.

Drawn on the server, with presentation attributes only, so the page needs no script and
passes the strict Content-Security-Policy; the SVG scales to its box (``viewBox``), so the
same chart serves wide and narrow screens. Each point links to its run; a change point or
an outlier links to the diff of the run before it and itself.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from markupsafe import Markup

from tracelens.report.render.diff import fmt_value
from web.series_schema import MetricTrend, TrendPoint

if TYPE_CHECKING:
    from web.finding_history import Sighting

WIDTH, HEIGHT = 640, 170
_LEFT, _RIGHT, _TOP, _BOTTOM = 74, 14, 12, 26
_COLOURS = {"change": "#c0392b", "outlier": "#d68910", "pending": "#7d3c98"}


def _label(p: TrendPoint, unit: str) -> str:
    what = {"change": "change point", "outlier": "outlier", "pending": "beyond the band"}
    kind = what.get(p.kind or "", "")
    head = f"{p.label or p.run_id}: {fmt_value(p.value, unit)}"
    band = (
        f" (band {fmt_value(p.band_low, unit)} – {fmt_value(p.band_high, unit)})"
        if p.band_low is not None and p.band_high is not None
        else ""
    )
    return head + band + (f" — {kind}" if kind else "")


def metric_chart(trend: MetricTrend) -> Markup:
    """The chart of one metric's points (a single point is drawn too)."""
    pts = trend.points
    values = [p.value for p in pts]
    values += [v for p in pts for v in (p.band_low, p.band_high) if v is not None]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
    lo, hi = lo - pad, hi + pad
    w, h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    n = len(pts)

    def x(i: int) -> float:
        return _LEFT + (w * i / (n - 1) if n > 1 else w / 2)

    def y(v: float) -> float:
        return _TOP + h * (1 - (v - lo) / (hi - lo))

    out = [
        f'<svg class="series-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} '
        f'{HEIGHT}" preserveAspectRatio="xMidYMid meet" role="img" '
        f'aria-label="{escape(trend.label)} per run" data-metric="{escape(trend.key)}">',
        f'<line x1="{_LEFT}" y1="{_TOP + h}" x2="{_LEFT + w}" y2="{_TOP + h}" stroke="#999"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + h}" stroke="#999"/>',
    ]
    for v in (lo + pad, hi - pad) if hi - lo > 2 * pad else (lo + pad,):
        out.append(
            f'<text x="{_LEFT - 6}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end" '
            f'fill="#555">{escape(fmt_value(v, trend.unit))}</text>'
        )
    # The band: a shaded strip through the points that have one, the median dashed.
    banded = [(i, p) for i, p in enumerate(pts) if p.band_low is not None]
    if banded:
        upper = " ".join(f"{x(i):.1f},{y(p.band_high or 0):.1f}" for i, p in banded)
        lower = " ".join(f"{x(i):.1f},{y(p.band_low or 0):.1f}" for i, p in reversed(banded))
        out.append(
            f'<polygon class="band" points="{upper} {lower}" fill="#5dade2" '
            'fill-opacity="0.18" stroke="none"/>'
        )
        median = " ".join(f"{x(i):.1f},{y(p.band_median or 0):.1f}" for i, p in banded)
        out.append(
            f'<polyline class="band-median" points="{median}" fill="none" stroke="#5dade2" '
            'stroke-dasharray="4 3"/>'
        )
    line = " ".join(f"{x(i):.1f},{y(p.value):.1f}" for i, p in enumerate(pts))
    out.append(f'<polyline points="{line}" fill="none" stroke="#34495e" stroke-width="1.5"/>')
    for i, p in enumerate(pts):
        colour = _COLOURS.get(p.kind or "", "#34495e")
        href = p.compare if p.kind in _COLOURS and p.compare else f"/runs/{p.run_id}"
        title = escape(_label(p, trend.unit))
        cx, cy = x(i), y(p.value)
        if p.kind == "change":
            shape = (
                f'<rect x="{cx - 6:.1f}" y="{cy - 6:.1f}" width="12" height="12" '
                f'transform="rotate(45 {cx:.1f} {cy:.1f})" fill="{colour}"/>'
            )
        elif p.kind == "outlier":
            shape = (
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="6" fill="#fff" stroke="{colour}" '
                'stroke-width="2.5"/>'
            )
        else:
            shape = f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{colour}"/>'
        out.append(
            f'<a href="{escape(href)}" class="point" data-kind="{escape(p.kind or "")}" '
            f'data-run="{escape(p.run_id)}"><title>{title}</title>{shape}</a>'
        )
    first, last = pts[0], pts[-1]
    for i, p, anchor in ((0, first, "start"), (n - 1, last, "end")) if n > 1 else ():
        out.append(
            f'<text x="{x(i):.1f}" y="{HEIGHT - 8}" font-size="11" text-anchor="{anchor}" '
            f'fill="#555">{escape(p.label or p.run_id)}</text>'
        )
    out.append("</svg>")
    return Markup("".join(out))


def history_chart(sightings: list[Sighting]) -> Markup:
    """A finding's impact run by run, as bars; a run without it is a grey tick."""
    width, height, left, bottom = 640, 120, 40, 20
    top = max((s.impact_pct or 0.0 for s in sightings), default=0.0) or 1.0
    n = max(len(sightings), 1)
    slot = (width - left) / n
    out = [
        f'<svg class="history-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} '
        f'{height}" role="img" aria-label="impact of this finding run by run">',
        f'<text x="{left - 4}" y="14" font-size="11" text-anchor="end" fill="#555">'
        f"{top:.1f}%</text>",
    ]
    for i, s in enumerate(sightings):
        x = left + i * slot + slot * 0.15
        bar_w = max(slot * 0.7, 1.0)
        base = height - bottom
        title = escape(
            f"{s.label}: {s.impact_pct:.2f}% impact"
            if s.impact_pct is not None
            else f"{s.label}: absent"
        )
        if s.impact_pct is None:
            shape = f'<rect x="{x:.1f}" y="{base - 2}" width="{bar_w:.1f}" height="2" fill="#bbb"/>'
        else:
            h = max((base - 6) * s.impact_pct / top, 1.0)
            colour = "#2e86c1" if s.current else "#85929e"
            shape = (
                f'<rect x="{x:.1f}" y="{base - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{colour}"/>'
            )
        state = "present" if s.impact_pct is not None else "absent"
        out.append(
            f'<a href="/runs/{escape(s.run_id)}" data-run="{escape(s.run_id)}" '
            f'data-state="{state}"><title>{title}</title>{shape}</a>'
        )
    out.append("</svg>")
    return Markup("".join(out))
