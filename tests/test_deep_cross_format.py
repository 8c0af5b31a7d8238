"""The deeper analyzers give the same findings for a planted scenario in both input formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest import load_trace
from tracelens.analyzers import launch_overhead, steps, sync_stalls
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.testing import write_chrome_trace
from tracelens.testing.nsys_writer import write_nsys_sqlite
from tracelens.testing.planted_host import launch_bound, uneven_steps
from tracelens.testing.planted_host import sync_stalls as planted_sync_stalls

CASES = {
    "launch": (launch_bound, launch_overhead),
    "sync": (planted_sync_stalls, sync_stalls),
    "steps": (uneven_steps, steps),
}


def _summaries(path: Path, analyzer) -> list[tuple[str, int]]:
    loaded = load_trace(path)
    try:
        found = analyzer.analyze(TraceDB(loaded.con), Thresholds())
    finally:
        loaded.close()
    return sorted((f.id, f.impact_ns) for f in found)


@pytest.mark.parametrize("case", sorted(CASES))
def test_chrome_and_nsys_agree(case: str, tmp_path: Path) -> None:
    build, analyzer = CASES[case]
    sc = build()
    chrome = _summaries(write_chrome_trace(sc, tmp_path / "t.pt.trace.json.gz"), analyzer)
    nsys = _summaries(write_nsys_sqlite(sc, tmp_path / "t.sqlite"), analyzer)
    assert chrome and chrome == nsys
