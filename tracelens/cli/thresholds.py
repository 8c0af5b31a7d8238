"""``tracelens thresholds``: every threshold an analyzer decides with, and its meaning."""

from __future__ import annotations

import click

from tracelens.core.thresholds import Thresholds


@click.command("thresholds")
def list_thresholds() -> None:
    """List the analyzers' thresholds and their defaults."""
    import dataclasses
    import inspect

    source = inspect.getsource(Thresholds)
    docs: dict[str, str] = {}
    comment: list[str] = []
    for line in source.splitlines():
        s = line.strip()
        if s.startswith("#"):
            comment.append(s.lstrip("# "))
        elif ":" in s and comment and not s.startswith(("def", "@", "class")):
            docs[s.split(":")[0]] = " ".join(comment)
            comment = []
        elif not s:
            comment = []
    for f in dataclasses.fields(Thresholds):
        click.echo(f"{f.name} = {f.default}")
        if f.name in docs:
            click.echo(f"    {docs[f.name]}")
    from ingest.derive_gaps import GAP_RULES

    click.echo("")
    click.echo("# Gap causes, decided at ingest (re-ingest to change; not overridable per run):")
    for name, (value, doc) in GAP_RULES.items():
        click.echo(f"{name} = {value}")
        click.echo(f"    {doc}")
