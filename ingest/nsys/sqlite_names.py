"""Reading SQLite tables whose columns vary by version: by name, tolerating absence.

Nsight Systems added, renamed and moved columns over the years; readers ask for the first
of a few names that a table has, and decode text that may not be valid UTF-8.
"""

from __future__ import annotations


def first_column(columns: set[str], *names: str) -> str:
    """The first of ``names`` that the table has, else NULL."""
    for n in names:
        if n in columns:
            return n
    return "NULL"


def as_text(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)
