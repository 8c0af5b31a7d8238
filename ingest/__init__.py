"""Readers: PyTorch profiler Chrome traces and Nsight Systems SQLite exports -> DuckDB."""

from ingest.errors import TraceInputError
from ingest.loader import LoadedTrace, detect_format, load_trace

__all__ = ["LoadedTrace", "TraceInputError", "detect_format", "load_trace"]
