"""The canonical tables of a trace as Parquet or CSV files, one file per table.

For a distributed SQL engine, a notebook elsewhere or an archive: DuckDB writes each file
itself (``COPY ... TO``), so nothing passes through Python and no Arrow library is needed.
The files hold the tables exactly as ``docs/schema.md`` describes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import duckdb

from ingest.schema import CANONICAL_TABLES, sql_literal

ExportFormat = Literal["parquet", "csv"]

_COPY_OPTIONS: dict[ExportFormat, str] = {
    "parquet": "FORMAT parquet, COMPRESSION zstd",
    "csv": "FORMAT csv, HEADER true",
}


def export_tables(
    con: duckdb.DuckDBPyConnection, directory: str | Path, fmt: ExportFormat = "parquet"
) -> list[Path]:
    """Write every canonical table of ``con`` to ``directory`` (created if missing) as
    ``<table>.parquet`` or ``<table>.csv``; the paths written, in schema order."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for table in CANONICAL_TABLES:
        path = out / f"{table.name}.{fmt}"
        # A path cannot be a parameter of COPY; quoting it as a literal is enough.
        con.execute(f"COPY {table.name} TO {sql_literal(str(path))} ({_COPY_OPTIONS[fmt]})")
        written.append(path)
    return written
