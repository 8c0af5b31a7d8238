"""``tracelens export TRACE --parquet DIR | --csv DIR``: the canonical tables as files."""

from __future__ import annotations

from pathlib import Path

import click

from ingest import TraceInputError
from tracelens.cli.options import fail, parse_restriction, restrict_or_fail, restriction_options


@click.command("export")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--parquet",
    "parquet_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Write each table as DIR/<table>.parquet.",
)
@click.option(
    "--csv",
    "csv_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Write each table as DIR/<table>.csv.",
)
@click.option("--rank", type=int, default=None, help="For a profiler output folder: this rank.")
@restriction_options
def export(
    path: Path,
    parquet_dir: Path | None,
    csv_dir: Path | None,
    rank: int | None,
    window: str | None,
    steps: str | None,
    range_name: str | None,
) -> None:
    """Write a trace's canonical tables (docs/schema.md) as Parquet or CSV files."""
    from tracelens.api.export import ExportFormat, export_tables
    from tracelens.api.trace import open_trace

    if (parquet_dir is None) == (csv_dir is None):
        raise click.UsageError("give one of --parquet DIR or --csv DIR")
    restriction = parse_restriction(window, steps, range_name)
    try:
        loaded = open_trace(path, rank=rank)
    except TraceInputError as exc:
        fail(str(exc))
    loaded = restrict_or_fail(loaded, restriction)
    fmt: ExportFormat = "parquet" if parquet_dir is not None else "csv"
    directory = parquet_dir or csv_dir or Path(".")
    try:
        written = export_tables(loaded.con, directory, fmt)
    except OSError as exc:
        fail(f"{directory}: cannot write ({exc.strerror or exc})")
    finally:
        loaded.close()
    click.echo(f"wrote {len(written)} tables to {directory}", err=True)
