"""The run page's progress bar moves through each phase of an ingest, not 0 → 85 % at once."""

from __future__ import annotations

from pathlib import Path

from ingest import load_trace
from tracelens.analyzers import ANALYZERS
from tracelens.report import build_report
from tracelens.testing.large_trace import write_large_trace
from web.ingest_progress import ANALYSED, LOADED, READ_END, TIMELINE_BUILT, IngestProgress
from web.timeline_store import build_timeline_tables


def test_progress_moves_through_reading_analysis_and_timeline(tmp_path: Path) -> None:
    # about 10 MB of JSON: two of the reader's 8 MB chunks
    trace = write_large_trace(tmp_path / "t.json", target_events=30_000)
    sent: list[float] = []
    progress = IngestProgress(sent.append, every_s=0.0)
    loaded = load_trace(trace, on_progress=progress.reading)
    try:
        reading = list(sent)
        progress.loaded()
        build_report(loaded, on_progress=progress.analysing)
        progress.analysed()
        build_timeline_tables(loaded.con)
        progress.timeline_built()
    finally:
        loaded.close()

    assert sent == sorted(sent) and len(set(sent)) == len(sent), "never backwards, no repeats"
    # the read reports each chunk inside its share of the bar, the first well below its end
    assert len(reading) >= 2 and reading[0] < READ_END and reading[-1] <= READ_END
    # every analyzer moves the bar between the loaded and analysed marks
    analysis = [f for f in sent if LOADED < f < ANALYSED]
    assert len(analysis) == len(ANALYZERS) - 1
    assert sent[-2:] == [ANALYSED, TIMELINE_BUILT]


def test_progress_is_throttled_but_phase_ends_always_arrive() -> None:
    sent: list[float] = []
    progress = IngestProgress(sent.append, every_s=3600.0)
    progress.reading(1, 10)  # the first report goes out, later ones wait out the interval
    progress.reading(5, 10)
    progress.loaded()
    progress.analysing(3, 20)
    progress.analysed()
    progress.timeline_built()
    assert sent == [READ_END * 0.1, LOADED, ANALYSED, TIMELINE_BUILT]
