"""A trace file's report, as ``tracelens analyze --format json`` builds it, for tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ingest import load_trace
from tracelens.report import build_report


def report_of_file(path: str | Path) -> dict[str, Any]:
    """Ingest ``path`` into a fresh in-memory database, build its report, close it."""
    loaded = load_trace(path)
    try:
        return build_report(loaded)
    finally:
        loaded.close()
