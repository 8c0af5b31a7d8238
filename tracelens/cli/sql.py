"""``tracelens sql TRACE "SELECT ..."``: a query over a trace's tables, as a table, CSV or JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ingest import TraceInputError
from tracelens.cli.options import fail, parse_restriction, restrict_or_fail, restriction_options

if TYPE_CHECKING:
    import polars as pl

# A table on the terminal stops here (CSV and JSON print every row).
DEFAULT_MAX_ROWS = 100


@click.command("sql")
@click.argument("path", type=click.Path(path_type=Path))
@click.argument("query")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
    help="Output format (json: one object per row).",
)
@click.option(
    "--max-rows",
    type=click.IntRange(1),
    default=DEFAULT_MAX_ROWS,
    show_default=True,
    help="Rows the table shows (csv and json print all).",
)
@click.option("--rank", type=int, default=None, help="For a profiler output folder: this rank.")
@restriction_options
def sql(
    path: Path,
    query: str,
    fmt: str,
    max_rows: int,
    rank: int | None,
    window: str | None,
    steps: str | None,
    range_name: str | None,
) -> None:
    """Run QUERY over the tables of the trace at PATH (docs/schema.md lists them).

    PATH is a trace, or a trace database kept with `tracelens analyze --db`, which opens
    at once.
    """
    import duckdb

    from tracelens.api.trace import Trace, open_trace

    restriction = parse_restriction(window, steps, range_name)
    try:
        loaded = open_trace(path, rank=rank)
    except TraceInputError as exc:
        fail(str(exc))
    trace = Trace(restrict_or_fail(loaded, restriction))
    try:
        frame = trace.sql(query)
    except duckdb.Error as exc:
        fail(f"query failed: {str(exc).splitlines()[0]}")
    finally:
        trace.close()
    if fmt == "csv":
        click.echo(_flat(frame).write_csv(), nl=False)
    elif fmt == "json":
        click.echo(json.dumps(frame.to_dicts(), indent=1, default=str))
    else:
        _print_table(frame, max_rows)


def _flat(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its list and struct columns as JSON text: CSV has no nested values
    (polars refuses them), and a query over ``args`` or ``list()`` returns them."""
    import polars as pl

    nested = [n for n, t in frame.schema.items() if t.is_nested()]
    if not nested:
        return frame
    as_json = [
        pl.Series(
            n, [None if v is None else json.dumps(v, default=str) for v in frame[n].to_list()]
        )
        for n in nested
    ]
    return frame.with_columns(as_json)


def _print_table(frame: pl.DataFrame, max_rows: int) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(show_lines=False)
    for name, dtype in frame.schema.items():
        numeric = dtype.is_numeric()
        # Text, not str: names such as "[param|clear_cache]" are not console markup
        table.add_column(Text(name), justify="right" if numeric else "left", overflow="fold")
    for row in frame.head(max_rows).iter_rows():
        table.add_row(*(Text("" if v is None else str(v)) for v in row))
    console = Console()
    console.print(table)
    if frame.height > max_rows:
        console.print(f"({frame.height - max_rows:,} more rows; --max-rows or --format csv)")
