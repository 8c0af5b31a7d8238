"""A self-contained HTML report (inline CSS, no scripts), for attaching to a ticket or CI run."""

from __future__ import annotations

from html import escape
from typing import Any

from tracelens.core.units import fmt_bytes, fmt_ns
from tracelens.report.render.llm_section import render_llm_html
from tracelens.report.render.workload import workload_line

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#1d2330}
h1{font-size:1.4rem}h2{margin-top:2rem;border-bottom:1px solid #dde;padding-bottom:.2rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0}td,th{border-bottom:1px solid #eee;
padding:.3rem .5rem;text-align:left;vertical-align:top}th{background:#f5f6fa}
.num{text-align:right;white-space:nowrap}.sev{font-weight:600;text-transform:uppercase;
font-size:.8rem}.critical{color:#fff;background:#c0262d;padding:0 .3rem}.high{color:#c0262d}
.medium{color:#b26b00}.low{color:#2a6fb0}.info{color:#777}.finding{border:1px solid #dde;
border-radius:6px;padding:.6rem 1rem;margin:1rem 0}code{background:#f2f3f7;padding:0 .2rem;
word-break:break-all}.muted{color:#667}
"""


def _row(cells: list[str], classes: list[str] | None = None) -> str:
    classes = classes or [""] * len(cells)
    return (
        "<tr>"
        + "".join(f'<td class="{c}">{v}</td>' for v, c in zip(cells, classes, strict=True))
        + "</tr>"
    )


def _evidence(ev: dict[str, Any]) -> str:
    parts = []
    for key, value in ev.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            cols = list(value[0])
            head = "".join(f"<th>{escape(str(c))}</th>" for c in cols)
            body = "".join(_row([escape(str(r.get(c, ""))) for c in cols]) for r in value[:10])
            parts.append(f"<p><b>{escape(key)}</b></p><table><tr>{head}</tr>{body}</table>")
        else:
            parts.append(f"<div><b>{escape(key)}</b>: <code>{escape(str(value))}</code></div>")
    return "".join(parts)


def render_html(report: dict[str, Any]) -> str:
    src, m = report["source"], report["metrics"]
    out = [
        "<!doctype html><html lang=en><meta charset=utf-8>",
        f"<title>tracelens: {escape(src['path'])}</title><style>{_CSS}</style>",
        f"<h1>tracelens report: <code>{escape(src['path'])}</code></h1>",
        f"<p class=muted>{escape(src['format'])} · sha256 {escape(src['sha256'][:16])}… · "
        f"tracelens {escape(report['tracelens_version'])}</p><ul>",
    ]
    if (line := workload_line(report)) is not None:
        out.append(f"<li>workload: {escape(line)}</li>")
    for d in report["devices"]:
        out.append(
            f"<li>GPU {d['device_id']} ({escape(str(d['name'] or 'unknown'))}): busy "
            f"{d['busy_pct']:.2f}% of {fmt_ns(d['window_ns'])}</li>"
        )
    out.append(
        f"<li>{m['kernel_count']:,} kernels, {m['memcpy_count']:,} copies, "
        f"{m['memset_count']:,} memsets; HtoD {fmt_bytes(m['h2d_bytes'])} "
        f"({fmt_bytes(m['h2d_pageable_bytes'])} pageable)</li>"
    )
    out += [f"<li>note: {escape(n)}</li>" for n in report.get("notes", [])]
    out.append("</ul>")
    out.append(render_llm_html(report))
    out.append("<h2>Findings</h2>")
    for i, f in enumerate(report["findings"], 1):
        sev = escape(f["severity"])
        out.append(
            f'<div class=finding id="f-{escape(f["id"])}"><div><span class="sev {sev}">{sev}'
            f"</span> <b>{i}. {escape(f['title'])}</b></div>"
            f"<p>{escape(f['summary'])}</p>"
            f"<p><b>Impact:</b> {fmt_ns(f['impact_ns'])} ({f['impact_pct']:.2f}%) — "
            f"{escape(f['impact_basis'])}</p>"
            f"<p><b>What to do:</b> {escape(f['advice'])}</p>"
            f"<details><summary>Evidence</summary>{_evidence(f['evidence'])}</details>"
            f"<p class=muted>{escape(f['analyzer'])} · {escape(f['id'])}</p></div>"
        )
    for title, key in (("Top kernels", "top_kernels"), ("Top operators", "top_ops")):
        rows = report.get(key) or []
        if not rows:
            continue
        out.append(
            f"<h2>{title}</h2><table><tr><th>name</th><th>count</th><th>total</th>"
            "<th>mean</th><th>p50</th><th>p95</th><th>max</th></tr>"
        )
        for r in rows:
            out.append(
                _row(
                    [
                        f"<code>{escape(r['name'])}</code>",
                        f"{r['count']:,}",
                        fmt_ns(r["total_ns"]),
                        fmt_ns(r["mean_ns"]),
                        fmt_ns(r["p50_ns"]),
                        fmt_ns(r["p95_ns"]),
                        fmt_ns(r["max_ns"]),
                    ],
                    ["", "num", "num", "num", "num", "num", "num"],
                )
            )
        out.append("</table>")
    out.append("</html>\n")
    return "".join(out)
