"""The sweep's chart as inline SVG: p95 TTFT against output tokens/s, one point per run.

Drawn on the server so the page needs no script and no charting library: the SVG uses
presentation attributes only, which a strict Content-Security-Policy allows. The knee and
the best run meeting the objectives are marked.
"""

from __future__ import annotations

from html import escape
from typing import Any

WIDTH, HEIGHT = 640, 320
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 20, 20, 50


def _ticks(hi: float, n: int = 4) -> list[float]:
    return [hi * i / n for i in range(n + 1)]


def render_sweep_svg(sweep: dict[str, Any]) -> str:
    """An SVG chart of the runs that have both a p95 TTFT and a throughput ('' if < 2)."""
    pts = [
        r
        for r in sweep["runs"]
        if r["ttft_p95_ns"] is not None and r["output_tokens_per_s"] is not None
    ]
    if len(pts) < 2:
        return ""
    xmax = max(r["output_tokens_per_s"] for r in pts) * 1.1 or 1.0
    ymax = max(r["ttft_p95_ns"] for r in pts) / 1e6 * 1.1 or 1.0
    w, h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def x(v: float) -> float:
        return _LEFT + w * v / xmax

    def y(v_ms: float) -> float:
        return _TOP + h * (1 - v_ms / ymax)

    out = [
        f'<svg class="sweep-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} '
        f'{HEIGHT}" role="img" aria-label="p95 TTFT against output tokens per second">',
        f'<line x1="{_LEFT}" y1="{_TOP + h}" x2="{_LEFT + w}" y2="{_TOP + h}" stroke="#888"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + h}" stroke="#888"/>',
    ]
    for v in _ticks(xmax):
        out.append(
            f'<text x="{x(v):.1f}" y="{_TOP + h + 16}" font-size="11" text-anchor="middle" '
            f'fill="#555">{v:,.0f}</text>'
        )
    for v in _ticks(ymax):
        out.append(
            f'<text x="{_LEFT - 6}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end" '
            f'fill="#555">{v:,.0f}</text>'
        )
    out.append(
        f'<text x="{_LEFT + w / 2}" y="{HEIGHT - 8}" font-size="12" text-anchor="middle" '
        'fill="#333">output tokens/s</text>'
    )
    out.append(
        f'<text x="14" y="{_TOP + h / 2}" font-size="12" text-anchor="middle" fill="#333" '
        f'transform="rotate(-90 14 {_TOP + h / 2})">p95 TTFT (ms)</text>'
    )
    line = " ".join(
        f"{x(r['output_tokens_per_s']):.1f},{y(r['ttft_p95_ns'] / 1e6):.1f}" for r in pts
    )
    out.append(f'<polyline points="{line}" fill="none" stroke="#4a6fa5" stroke-width="1.5"/>')
    for r in pts:
        cx, cy = x(r["output_tokens_per_s"]), y(r["ttft_p95_ns"] / 1e6)
        mark = (
            "#c0392b"
            if r["label"] == sweep.get("knee")
            else "#27ae60"
            if r["label"] == sweep.get("best")
            else "#4a6fa5"
        )
        out.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{mark}">'
            f"<title>{escape(r['label'])}</title></circle>"
        )
        out.append(
            f'<text x="{cx + 7:.1f}" y="{cy - 7:.1f}" font-size="11" fill="#333">'
            f"{escape(r['label'])}</text>"
        )
    out.append("</svg>")
    return "".join(out)
