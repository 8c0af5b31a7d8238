"""A job report (several ranks) as text or Markdown: the rank table, then the findings."""

from __future__ import annotations

from typing import Any

from tracelens.core.units import fmt_ns
from tracelens.ranks.grouping import finding_scope
from tracelens.ranks.stragglers import skew_text
from tracelens.report.render.minor import UNCOSTED_HEADING, UNCOSTED_LEAD_HEADING, sections

_COLUMNS = (
    "rank",
    "window",
    "busy %",
    "top idle cause",
    "compute",
    "comm",
    "exposed comm",
    "median step",
    "clock offset",
)


# the terminal's headers: the table fits 80 columns
_SHORT = ("rank", "window", "busy%", "top idle", "compute", "comm", "exposed", "step", "offset")


def rank_rows(job: dict[str, Any]) -> list[list[str]]:
    rows = []
    for r in job["ranks"]:
        idle = r["idle_ns_by_cause"]
        cause = max(idle, key=lambda c: (idle[c], c)) if idle else None
        rows.append(
            [
                str(r["rank"]),
                fmt_ns(r["window_ns"]),
                f"{r['busy_pct']:.1f}" if r["busy_pct"] is not None else "-",
                f"{cause} {fmt_ns(idle[cause])}" if cause else "-",
                fmt_ns(r["compute_ns"]),
                fmt_ns(r["comm_ns"]),
                fmt_ns(r["exposed_comm_ns"]),
                fmt_ns(r["median_step_ns"]) if r["median_step_ns"] else "-",
                _offset(r["clock_offset_ns"]),
            ]
        )
    return rows


def _offset(ns: int) -> str:
    return "0" if ns == 0 else ("+" if ns > 0 else "-") + fmt_ns(abs(ns))


def _finding_line(f: dict[str, Any]) -> str:
    # a job-wide finding's title names its ranks already
    if f["analyzer"] == "ranks" or f.get("rank") is None:
        return f"[{f['severity']}] {f['title']}"
    return f"[{f['severity']}] {finding_scope(f)}: {f['title']}"


def headed_sections(findings: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The job's findings in the sections the single-trace renderers use (:mod:`minor`),
    each with its heading: the ones worth acting on, then the un-costed by their time, then
    the minor ones; the un-costed first where one holds at least twice the largest time the
    others give back. Ranked by impact alone, a 39 µs pinned-memory hint led sampled ranks
    whose 391 ms of idle time and 337 ms of exposed communication cannot be costed."""
    grouped = sections(findings)
    major, uncosted, minor, lead = grouped.major, grouped.uncosted, grouped.minor, grouped.lead
    ranked = ("Findings, ranked by the time they would give back", major)
    ordered = (
        [(UNCOSTED_LEAD_HEADING, uncosted), ranked]
        if lead
        else [ranked, (UNCOSTED_HEADING, uncosted)]
    )
    ordered.append(("Minor findings (little or no time to give back)", minor))
    return [(h, fs) for h, fs in ordered if fs]


def render_job_markdown(job: dict[str, Any], max_findings: int | None = None) -> str:
    out = [f"# tracelens job report ({len(job['ranks'])} ranks)", ""]
    out.append("| " + " | ".join(_COLUMNS) + " |")
    out.append("|" + "---|" * len(_COLUMNS))
    out.extend("| " + " | ".join(row) + " |" for row in rank_rows(job))
    out.append("")
    clock = job["clock"]
    out.append(
        f"Clocks aligned on rank {clock['reference_rank']} by {clock['method']}; "
        + "; ".join(
            f"rank {o['rank']}: {o['matched_collectives']} collectives, residual "
            f"{fmt_ns(o['residual_ns']) if o['residual_ns'] is not None else '-'}"
            for o in clock["offsets"]
            if o["method"] != "reference"
        )
        + "."
    )
    for s in job["collectives"]["skew"]:
        out.append(
            f"- {s['collective']} arrival skew over {s['count']} shared collectives: {skew_text(s)}"
        )
    out += ["", "## Findings", ""]
    shown = job["findings"][:max_findings] if max_findings else job["findings"]
    for heading, fs in headed_sections(shown):
        out += [f"**{heading}**", ""]
        for f in fs:
            out.append(f"### {_finding_line(f)}")
            out += ["", f["summary"], "", f"**Advice:** {f['advice']}", ""]
    if job["notes"]:
        out += ["## Notes", ""] + [f"- {n}" for n in job["notes"]]
    return "\n".join(out) + "\n"


def render_job_text(job: dict[str, Any], console: Any, max_findings: int | None = None) -> None:
    from rich import box
    from rich.table import Table

    # numbers never wrap mid-value; on a narrow terminal only the idle cause wraps
    table = Table(
        title=f"{len(job['ranks'])} ranks", title_justify="left", box=box.SIMPLE_HEAD,
        padding=(0, 1), pad_edge=False,
    )  # fmt: skip
    for c in _SHORT:
        idle = c == "top idle"
        table.add_column(
            c, justify="left" if c == "rank" or idle else "right", no_wrap=not idle,
            overflow="fold" if idle else "ellipsis",
        )  # fmt: skip
    for row in rank_rows(job):
        table.add_row(*row)
    console.print(table)
    for s in job["collectives"]["skew"]:
        console.print(
            f"{s['collective']} arrival skew ({s['count']} shared): {skew_text(s)}",
            highlight=False,
        )
    shown = job["findings"][:max_findings] if max_findings else job["findings"]
    i = 0
    for heading, fs in headed_sections(shown):
        console.print(f"\n{heading}", style="bold", highlight=False, markup=False)
        for f in fs:
            i += 1
            console.print(f"\n{i}. {_finding_line(f)}", highlight=False, markup=False)
            console.print(f"   {f['summary']}", highlight=False, markup=False)
            console.print(f"   Advice: {f['advice']}", highlight=False, markup=False)
    for n in job["notes"]:
        console.print(f"note: {n}", highlight=False, markup=False)
