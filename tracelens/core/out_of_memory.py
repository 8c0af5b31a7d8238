"""Running out of memory (or of spill quota) is said in one line, wherever it happens.

An ingest's DuckDB limit follows its input and the report is retried once under the whole
share (:func:`tracelens.report.build_report`), so what still does not fit is the
machine's limit, not a bug: the user gets what happened and the knob, never a traceback.
The CLI prints it and exits 2; the web shows it as the failed run's message.
"""

from __future__ import annotations


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
    # imported here: the CLI's --help loads this module and must stay light
    from ingest.limits import spill_quota_full

    if spill_quota_full(exc):
        return (
            f"{where}the analysis filled its spill quota ({first.rstrip('.')}); set "
            "TRACELENS_MAX_SPILL_BYTES to give it more"
        )
    return (
        f"{where}the analysis ran out of memory ({first}); set TRACELENS_MEMORY_LIMIT "
        "to give it more"
    )
