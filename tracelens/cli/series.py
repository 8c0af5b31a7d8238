"""``tracelens series``: a series of runs on a tracelens service, as a table or JSON;
``--check`` for CI (exit 1 when the latest run breaks the series' limits)."""

from __future__ import annotations

import json
from typing import Any

import click

from tracelens.cli.options import EXIT_GATE, fail, format_option
from tracelens.cli.server import Server, server_options
from tracelens.series.limits import limits_spec, parse_limits
from tracelens.series.trend import MIN_BASELINE

_MARKS = {"change": "▲change", "outlier": "○outlier", "pending": "?beyond", "shifted": "·"}


@click.command("series")
@click.argument("name", required=False)
@server_options
@click.option("--check", is_flag=True, help="Exit 1 when the series is red (a limit broken).")
@click.option(
    "--window",
    type=click.IntRange(MIN_BASELINE, 100),
    default=None,
    help="Runs before each run that give its band (default 10).",
)
@click.option(
    "--limits",
    default=None,
    help="Set the series' regression limits first (ttft_p95=+10%,busy=-5pt; '' for none).",
)
@click.option(
    "--tags",
    default=None,
    help="Set the tags selecting the series' runs first (every one; '' for none).",
)
@format_option("text", "json")
def series(
    name: str | None,
    server: str,
    token: str | None,
    check: bool,
    window: int | None,
    limits: str | None,
    tags: str | None,
    fmt: str,
) -> None:
    """Show series NAME (its runs, trends, change points, alerts), or list every series."""
    client = Server(server, token)
    if name is None:
        if check or limits is not None or tags is not None:
            fail("--check, --limits and --tags need a series NAME")
        listing = client.get("/api/series")
        if fmt == "json":
            click.echo(json.dumps(listing, indent=2))
        else:
            for s in listing["series"]:
                state = "red" if s["red"] else "ok"
                click.echo(f"{s['name']}\t{s['runs']} runs\t{state}")
        return
    if limits is not None or tags is not None:
        change: dict[str, Any] = {}
        if limits is not None:
            try:
                change["limits"] = limits_spec(parse_limits(limits))
            except ValueError as exc:
                fail(f"--limits: {exc}")
        if tags is not None:
            change["tags"] = tags
        client.put(f"/api/series/{name}", change)
    detail = client.get(f"/api/series/{name}", window=window)
    if fmt == "json":
        click.echo(json.dumps(detail, indent=2))
    else:
        click.echo(render_series_text(detail, client.url))
    if check and detail["red"]:
        for alert in detail["alerts"]:
            click.echo(f"tracelens: series {name} is red: {alert['message']}", err=True)
        raise SystemExit(EXIT_GATE)


def render_series_text(d: dict[str, Any], server: str = "") -> str:
    """The series as a table: a row per run, a column per metric the runs have; change
    points with the address of their diff on ``server``."""
    # Imported here: tracelens.report.render loads the report package (every analyzer and
    # DuckDB), which a command that only reads a server's answer never needs otherwise.
    from tracelens.report.render.diff import fmt_value

    lines = [
        f"series {d['name']}: {len(d['runs'])} ready run{'' if len(d['runs']) == 1 else 's'}"
        + (f", {d['not_ready']} not ready" if d["not_ready"] else "")
        + f"; limits {d['limits'] or 'none'}; window {d['window']}"
        + ("; RED" if d["red"] else "")
    ]
    metrics = [m for m in d["metrics"] if m["points"]]
    marks: dict[tuple[str, str], str] = {
        (m["key"], p["run_id"]): _MARKS.get(p["kind"] or "", "")
        for m in metrics
        for p in m["points"]
    }
    header = ["run", "label", "recorded"] + [m["key"] for m in metrics]
    rows = [header]
    for r in d["runs"]:
        cells = [r["id"], r["label"] or "", r["time"][:16].replace("T", " ")]
        for m in metrics:
            value = fmt_value(r["metrics"].get(m["key"]), m["unit"])
            mark = marks.get((m["key"], r["id"]), "")
            cells.append(f"{value} {mark}".rstrip() if mark and mark != "·" else value)
        rows.append(cells)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    names = {r["id"]: r["label"] or r["id"] for r in d["runs"]}
    for c in d["change_points"]:
        lines.append(
            f"change point: {c['metric']} {c['direction']} ({c['meaning']}) at "
            f"{names.get(c['run_id'], c['run_id'])}, from "
            f"{names.get(c['previous_run_id'], c['previous_run_id'])}: {server}{c['compare']}"
        )
    for a in d["alerts"]:
        lines.append(f"alert: {a['metric']}: {a['message']}")
    return "\n".join(lines)
