"""Text and Markdown renderings of a diff (the dict of :func:`tracelens.report.diff.build_diff`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracelens.core.clipped import clipped
from tracelens.core.units import fmt_bytes, fmt_ns
from tracelens.report.render.markdown import md_text


def fmt_value(v: float | int | None, unit: str) -> str:
    """A metric in its unit, as the diff shows it (``-`` when missing)."""
    if v is None:
        return "-"
    if unit == "ns":
        return fmt_ns(v)
    if unit == "bytes":
        return fmt_bytes(v)
    if unit == "pct":
        return f"{v:.2f}%"
    if unit == "rate":
        return f"{v:,.1f}"
    return f"{v:,}"


def fmt_delta(row: dict[str, Any]) -> str:
    """A metric row's change, signed, with its percentage when known."""
    if row["delta"] is None:
        return "n/a"
    sign = "+" if row["delta"] > 0 else ""
    d = fmt_value(row["delta"], row["unit"]) if row["unit"] != "pct" else f"{row['delta']:.2f} pt"
    pct = f" ({row['delta_pct']:+.1f}%)" if row["delta_pct"] is not None else ""
    return f"{sign}{d}{pct}"


def _table_lines(rows: list[dict[str, Any]], fmt: str) -> list[str]:
    lines = []
    for r in rows:
        pct = f" ({r['delta_pct']:+.1f}%)" if r["delta_pct"] is not None else ""
        sign = "+" if r["delta_ns"] > 0 else ""
        cells = (
            clipped(r["name"], 70),
            r["status"],
            f"{r['baseline_count']:,} / {fmt_ns(r['baseline_ns'])}",
            f"{r['candidate_count']:,} / {fmt_ns(r['candidate_ns'])}",
            f"{sign}{fmt_ns(r['delta_ns'])}{pct}",
        )
        if fmt == "md":
            name = " ".join(cells[0].splitlines()).replace("`", "'").replace("|", "\\|")
            lines.append("| `" + name + "` | " + " | ".join(cells[1:]) + " |")
        else:
            lines.append(f"  {cells[0]:<72} {cells[1]:<8} {cells[2]:>20} {cells[3]:>20} {cells[4]}")
    return lines


@dataclass(frozen=True)
class DiffLinks:
    """Where the two runs, the comparison and a run's finding live (a service's diff)."""

    baseline: str
    candidate: str
    compare: str
    finding: Callable[[str, str], str]  # (side "baseline" | "candidate", finding id) -> URL


def finding_lines(f: dict[str, Any], md: bool, links: DiffLinks | None = None) -> list[str]:
    out = []
    bullet = "- " if md else "  "
    text = md_text if md else str

    def title(x: dict[str, Any], side: str) -> str:
        if links is None or not md:
            return text(x["title"])
        return f"[{text(x['title'])}]({links.finding(side, x['id'])})"

    for key, label, side in (
        ("appeared", "new", "candidate"),
        ("resolved", "resolved", "baseline"),
    ):
        for x in f[key]:
            out.append(
                f"{bullet}{label}: [{x['severity']}] {title(x, side)} ({fmt_ns(x['impact_ns'])})"
            )
    for x in f["changed"]:
        sign = "+" if x["delta_ns"] > 0 else ""
        out.append(
            f"{bullet}changed: [{x['baseline_severity']} -> {x['severity']}] "
            f"{title(x, 'candidate')} "
            f"({fmt_ns(x['baseline_impact_ns'])} -> {fmt_ns(x['impact_ns'])}, "
            f"{sign}{fmt_ns(x['delta_ns'])})"
        )
    return out


def render_diff_text(d: dict[str, Any]) -> str:
    lines = [
        f"baseline:  {d['baseline']['path']}",
        f"candidate: {d['candidate']['path']}",
        "",
        d["verdict"]["line"],
    ]
    if d["empty"]:
        lines += ["", "No differences."]
        return "\n".join(lines) + "\n"
    lines += ["", "Metrics"]
    for r in d["metrics"]:
        mark = "" if r["changed"] else "  (same)"
        lines.append(
            f"  {r['label']:<28} {fmt_value(r['baseline'], r['unit']):>14} "
            f"{fmt_value(r['candidate'], r['unit']):>14}  {fmt_delta(r)}{mark}"
        )
    for key, title in (("kernels", "Kernels"), ("operators", "Operators")):
        if d[key]:
            lines += ["", f"{title} (count / total time; largest changes first)"]
            lines += _table_lines(d[key], "text")
    f = d["findings"]
    lines += ["", f"Findings ({f['unchanged_count']} unchanged)"]
    lines += finding_lines(f, md=False) or ["  no findings appeared, resolved or changed"]
    return "\n".join(lines) + "\n"


def render_diff_markdown(d: dict[str, Any], links: DiffLinks | None = None) -> str:
    """``links``: a service's addresses, so a pasted diff leads back to both runs, the
    comparison and each finding."""
    base = f"`{md_text(d['baseline']['path']).replace('`', '')}`"
    cand = f"`{md_text(d['candidate']['path']).replace('`', '')}`"
    if links is not None:
        base, cand = f"[{base}]({links.baseline})", f"[{cand}]({links.candidate})"
    lines = [
        "# tracelens diff",
        "",
        f"**{d['verdict']['line']}**",
        "",
        f"- baseline: {base}",
        f"- candidate: {cand}",
    ]
    if links is not None:
        lines.append(f"- comparison: {links.compare}")
    if d["empty"]:
        lines += ["", "No differences."]
        return "\n".join(lines) + "\n"
    lines += [
        "",
        "## Metrics",
        "",
        "| metric | baseline | candidate | change |",
        "|---|---:|---:|---:|",
    ]
    for r in d["metrics"]:
        lines.append(
            f"| {r['label']} | {fmt_value(r['baseline'], r['unit'])} | "
            f"{fmt_value(r['candidate'], r['unit'])} | {fmt_delta(r)} |"
        )
    for key, title in (("kernels", "Kernels"), ("operators", "Operators")):
        if d[key]:
            lines += [
                "",
                f"## {title}",
                "",
                "| name | status | baseline (count / time) | candidate | change |",
                "|---|---|---:|---:|---:|",
            ]
            lines += _table_lines(d[key], "md")
    f = d["findings"]
    lines += ["", f"## Findings ({f['unchanged_count']} unchanged)", ""]
    lines += finding_lines(f, md=True, links=links) or [
        "No findings appeared, resolved or changed."
    ]
    return "\n".join(lines) + "\n"
