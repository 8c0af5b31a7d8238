"""An ingest's progress as one fraction, moving through each phase in turn.

Reading the file was once 85 % of the bar, measured in bytes handed to the parser: a
trace of a chunk or two jumped 0 → 85 % at once and then sat there through the rest of
the ingest (routing, gap causes, every analyzer, the timeline tables), which on large
runs is as long as the read. Each phase now owns the share of the bar it takes of an
ingest (measured on corpus traces and the 600 k-event benchmark: the read ~55 %, the
analyzers ~25 %, the timeline tables ~15 %), and reports its own steps inside it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# Where each phase ends on the bar: reading the file (bytes handed to the parser),
# then the rest of ingest (routing, gap causes), then each analyzer, then the timeline.
READ_END = 0.55
LOADED = 0.6
ANALYSED = 0.85
TIMELINE_BUILT = 0.97
# The catalog (or the job state) takes each write: at most this often.
EVERY_S = 0.5


class IngestProgress:
    """Maps each phase's own steps onto one fraction, sent at most every ``every_s``
    (the catalog or the job state takes each write) and never backwards."""

    def __init__(self, report: Callable[[float], None], every_s: float = EVERY_S) -> None:
        self._report = report
        self._every_s = every_s
        self._last_sent = float("-inf")  # the first report always goes out
        self._at = 0.0

    def _send(self, fraction: float, force: bool = False) -> None:
        if fraction <= self._at:
            return
        self._at = fraction
        now = time.monotonic()
        if force or now - self._last_sent >= self._every_s:
            self._last_sent = now
            self._report(fraction)

    def reading(self, done: int, total: int) -> None:
        """``done`` of ``total`` bytes of the file handed to the parser."""
        if total:
            self._send(READ_END * min(done, total) / total)

    def loaded(self) -> None:
        self._send(LOADED, force=True)

    def analysing(self, done: int, total: int) -> None:
        """``done`` of ``total`` analyzers finished."""
        if total:
            self._send(LOADED + (ANALYSED - LOADED) * done / total)

    def analysed(self) -> None:
        self._send(ANALYSED, force=True)

    def timeline_built(self) -> None:
        self._send(TIMELINE_BUILT, force=True)

    def at(self, fraction: float) -> None:
        """A fraction its caller worked out (a job's, from its ranks')."""
        self._send(fraction)


class JobProgress:
    """A job's bar from its ranks': each rank moves through the phases of its own
    :class:`IngestProgress`, and the job's fraction is their mean (scaled to ``end``),
    so a two-rank job moves as its ranks are read instead of jumping as each finishes.
    Ranks report from their own threads."""

    def __init__(
        self,
        report: Callable[[float], None],
        ranks: list[int],
        end: float = 0.95,
        every_s: float = EVERY_S,
    ) -> None:
        self._bar = IngestProgress(report, every_s)
        self._end = end
        self._at = dict.fromkeys(ranks, 0.0)
        self._lock = threading.Lock()

    def rank(self, rank: int) -> IngestProgress:
        """Where ``rank`` reports (unthrottled: the job's bar throttles)."""
        return IngestProgress(lambda f: self._moved(rank, f), every_s=0.0)

    def finished(self, rank: int) -> None:
        self._moved(rank, 1.0)

    def _moved(self, rank: int, fraction: float) -> None:
        with self._lock:
            self._at[rank] = max(self._at[rank], fraction)
            self._bar.at(self._end * sum(self._at.values()) / len(self._at))
