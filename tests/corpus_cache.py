"""Corpus traces ingested once per test session and shared read-only by analyzer tests."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ingest import load_trace
from tracelens.core.tracedb import TraceDB


@cache
def _db(path: Path) -> TraceDB:
    # Kept open for the session: ingest is the slow part, analyzers only read (and add
    # their own temp tables, which are deterministic per trace).
    return TraceDB(load_trace(path).con)


def corpus_db(corpus: Path, name: str, kind: str = "torch") -> TraceDB:
    """The TraceDB of ``<kind>/<name>`` under the corpus root (kind: torch or nsys)."""
    return _db(corpus / kind / name)
