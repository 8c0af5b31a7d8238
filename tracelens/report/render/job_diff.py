"""Text and Markdown renderings of a job diff (:func:`tracelens.ranks.job_diff.build_job_diff`):
the verdict, a line per rank, the stragglers before and after, the job's finding changes,
then the full diff of the rank that changed most."""

from __future__ import annotations

from typing import Any

from tracelens.core.units import fmt_ns
from tracelens.report.render.diff import finding_lines, render_diff_markdown, render_diff_text


def _rank_cells(r: dict[str, Any]) -> list[str]:
    v = r["verdict"]
    f = r["diff"]["findings"]
    if v.get("metric") is None:
        change = "-"
    else:
        change = f"{fmt_ns(v['baseline'])} -> {fmt_ns(v['candidate'])} ({v['change_pct']:+.1f}%)"
    return [
        str(r["rank"]),
        v["status"],
        v.get("metric_label") or "-",
        change,
        f"+{len(f['appeared'])} / -{len(f['resolved'])} / ~{len(f['changed'])}",
    ]


def _stragglers(side: list[dict[str, Any]]) -> str:
    if not side:
        return "none"
    return ", ".join(
        f"rank {s['rank']} (last at {s['last_in']} of {s['of']}, job waits "
        f"{fmt_ns(s['held_back_ns'])}, {s['cause']})"
        for s in side
    )


def _most_changed(d: dict[str, Any]) -> dict[str, Any] | None:
    changed = [r for r in d["ranks"] if r["verdict"].get("change_pct") is not None]
    if not changed:
        return None
    return max(changed, key=lambda r: (abs(r["verdict"]["change_pct"]), -r["rank"]))


def _finding_lines(d: dict[str, Any], md: bool) -> list[str]:
    return finding_lines(d["findings"], md) or [
        ("- " if md else "  ") + "no job finding appeared, resolved or changed"
    ]


def _header(d: dict[str, Any]) -> list[str]:
    out = []
    if d["only_in_baseline"]:
        out.append(f"ranks only in the baseline: {d['only_in_baseline']}")
    if d["only_in_candidate"]:
        out.append(f"ranks only in the candidate: {d['only_in_candidate']}")
    return out


def render_job_diff_text(d: dict[str, Any]) -> str:
    lines = [
        f"baseline:  {len(d['baseline']['ranks'])} ranks",
        f"candidate: {len(d['candidate']['ranks'])} ranks",
        "",
        d["verdict"]["line"],
        *_header(d),
        "",
        "Ranks (rank, status, headline, change, findings +appeared / -resolved / ~changed)",
    ]
    lines += ["  " + "  ".join(_rank_cells(r)) for r in d["ranks"]]
    lines += [
        "",
        f"Stragglers: {_stragglers(d['stragglers']['baseline'])} -> "
        f"{_stragglers(d['stragglers']['candidate'])}",
        "",
        "Job findings",
        *_finding_lines(d, md=False),
    ]
    worst = _most_changed(d)
    if worst is not None:
        lines += ["", f"Rank {worst['rank']}, which changed most", ""]
        lines.append(render_diff_text(worst["diff"]).rstrip("\n"))
    return "\n".join(lines) + "\n"


def render_job_diff_markdown(d: dict[str, Any]) -> str:
    lines = [
        "# tracelens job diff",
        "",
        f"**{d['verdict']['line']}**",
        "",
        *(f"- {h}" for h in _header(d)),
        *([""] if _header(d) else []),
        "| rank | status | headline | change | findings (+/-/~) |",
        "|---:|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(_rank_cells(r)) + " |" for r in d["ranks"]]
    lines += [
        "",
        f"**Stragglers:** {_stragglers(d['stragglers']['baseline'])} → "
        f"{_stragglers(d['stragglers']['candidate'])}",
        "",
        "## Job findings",
        "",
        *_finding_lines(d, md=True),
    ]
    worst = _most_changed(d)
    if worst is not None:
        body = render_diff_markdown(worst["diff"]).replace("# tracelens diff", "", 1).strip()
        lines += ["", f"## Rank {worst['rank']}, which changed most", "", body]
    return "\n".join(lines) + "\n"
