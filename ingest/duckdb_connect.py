"""Every DuckDB connection the project opens, opened one way.

DuckDB draws a progress bar on stdout for queries that run longer than about two seconds
(common on a loaded machine or a big trace). Printed into ``--format json`` output it
corrupts the report, and in the service it writes to the server's console, so it is off
on every connection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb


def connect(
    path: str | Path = ":memory:", *, read_only: bool = False, **config: Any
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to ``path`` that never prints progress.

    The setting is made per connection (``SET``), not as connect-time configuration:
    every connection to one file in a process must be opened with the same configuration.
    """
    con = duckdb.connect(str(path), read_only=read_only, config=config)
    con.execute("SET enable_progress_bar = false")
    return con
