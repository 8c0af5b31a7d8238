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


def test_a_jobs_bar_moves_as_its_ranks_are_read_not_as_each_finishes(tmp_path: Path) -> None:
    """A job's bar was the count of finished ranks: a two-rank job sat at 0 through both
    reads and analyses, then jumped to 47.5 %. It is now the mean of its ranks' own bars."""
    from tracelens.ranks.job import analyze_job
    from tracelens.testing.planted_ranks import write_job
    from web.ingest_progress import JobProgress

    job = write_job(tmp_path / "job", ranks=2, steps=6, slow_rank=1)
    sent: list[float] = []
    bar = JobProgress(sent.append, [0, 1], end=0.95, every_s=0.0)
    finished: list[float] = []

    def on_rank(rank: int, *_: object) -> None:
        bar.finished(rank)
        finished.append(sent[-1])

    analyze_job(list(enumerate(job.files)), in_flight=1, on_rank=on_rank, progress_of=bar.rank)
    assert sent == sorted(sent) and len(set(sent)) == len(sent)
    assert finished == [0.475, 0.95] and sent[-1] == 0.95
    before_first = [f for f in sent if f < finished[0]]
    # the first rank's read, load and every analyzer moved the bar before it finished
    assert len(before_first) >= len(ANALYZERS) and before_first[0] > 0
    assert any(finished[0] < f < finished[1] for f in sent), "the second rank's own steps"
