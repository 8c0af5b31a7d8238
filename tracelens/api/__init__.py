"""The Python API: :func:`load` a trace, read its tables as polars DataFrames, query it
with SQL, restrict it, and get its report, findings and diff (``docs/api.md``)."""

from tracelens.api.trace import LlmFrames, Trace, diff, load, open_database

__all__ = ["LlmFrames", "Trace", "diff", "load", "open_database"]
