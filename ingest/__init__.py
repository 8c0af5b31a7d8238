"""Readers: PyTorch profiler Chrome traces and Nsight Systems SQLite exports -> DuckDB."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ingest.errors import TraceInputError

if TYPE_CHECKING:
    from ingest.loader import LoadedTrace, detect_format, load_trace

__all__ = ["LoadedTrace", "TraceInputError", "detect_format", "load_trace"]

# The loader (DuckDB, NumPy, both readers) is imported on first use of one of its names:
# catching TraceInputError, as every command does, then costs no more than the exception.
_FROM_LOADER = frozenset({"LoadedTrace", "detect_format", "load_trace"})


def __getattr__(name: str) -> Any:
    if name in _FROM_LOADER:
        from ingest import loader

        value = getattr(loader, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
