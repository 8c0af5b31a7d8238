"""Running out of memory is said in one line, whichever command it happens in.

An ingest's DuckDB limit follows its input and the report is retried once under the whole
share (:func:`tracelens.report.build_report`), so what still does not fit is the
machine's limit, not a bug: the user gets what happened and the knob, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click


def is_out_of_memory(exc: BaseException) -> bool:
    """DuckDB's OutOfMemoryException (by name: checking it must not import DuckDB), or
    Python's MemoryError."""
    if isinstance(exc, MemoryError):
        return True
    kind = type(exc)
    return kind.__name__ == "OutOfMemoryException" and kind.__module__.lstrip("_") == "duckdb"


def out_of_memory_message(exc: BaseException, subject: str | None = None) -> str:
    """What to tell the user: ``subject`` (the trace, where the caller knows it) ran out."""
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    where = f"{subject}: " if subject else ""
    return (
        f"{where}the analysis ran out of memory ({first}); set TRACELENS_MEMORY_LIMIT "
        "to give it more"
    )


@contextmanager
def out_of_memory_in_one_line() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        # imported here: --help loads this module and must stay light
        from tracelens.cli.options import EXIT_BAD_INPUT

        click.echo(f"tracelens: error: {out_of_memory_message(exc)}", err=True)
        sys.exit(EXIT_BAD_INPUT)
