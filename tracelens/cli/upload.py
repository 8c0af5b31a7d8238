"""``tracelens upload``: send a trace to a tracelens service, into a series if asked."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from tracelens.cli.options import EXIT_GATE, fail, format_option
from tracelens.cli.server import Server, server_options

POLL_S = 0.5


@click.command("upload")
@click.argument("trace", type=click.Path(path_type=Path, dir_okay=False))
@server_options
@click.option("--name", default=None, help="Run name (default: from the file name).")
@click.option("--tags", default=None, help="Comma-separated tags (gpu=h100,job=nightly).")
@click.option("--slo", default=None, help="Serving objectives, as analyze --slo takes them.")
@click.option("--series", "series", default=None, help="The series the run belongs to.")
@click.option("--label", default=None, help="The run's label in its series (a commit, a build).")
@click.option(
    "--wait",
    "wait_s",
    type=click.IntRange(0, 86400),
    default=0,
    help="Wait up to this many seconds for the ingest; exit 1 when it fails.",
)
@format_option("text", "json")
def upload(
    trace: Path,
    server: str,
    token: str | None,
    name: str | None,
    tags: str | None,
    slo: str | None,
    series: str | None,
    label: str | None,
    wait_s: int,
    fmt: str,
) -> None:
    """Upload TRACE (PyTorch .json/.json.gz or nsys .sqlite) to a tracelens service."""
    if not trace.is_file():
        fail(f"{trace}: no such file")
    given = {"name": name, "tags": tags, "slo": slo, "series": series, "label": label}
    fields = {k: v for k, v in given.items() if v is not None}
    client = Server(server, token)
    run: dict[str, Any] = client.upload(trace, fields)
    if wait_s:
        deadline = time.monotonic() + wait_s
        while run["status"] not in ("ready", "failed") and time.monotonic() < deadline:
            time.sleep(POLL_S)
            run = client.get(f"/api/runs/{run['id']}")
    if fmt == "json":
        click.echo(json.dumps(run, indent=2))
    else:
        again = " (the same bytes were uploaded before)" if run.get("duplicate") else ""
        click.echo(f"{run['id']}\t{run['status']}\t{client.url}{run['links']['page']}{again}")
    if run["status"] == "failed":
        click.echo(f"tracelens: {trace}: ingest failed: {run.get('error')}", err=True)
        raise SystemExit(EXIT_GATE)
