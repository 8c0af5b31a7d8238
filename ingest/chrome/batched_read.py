"""The event array read in batches, loaded on a thread of their own, checked after the fact.

The splitter cuts each chunk of text speculatively (:mod:`ingest.chrome.event_splitter`):
a cut is only known to fall between two events once the blob before it parses. Waiting
for that before the next chunk is cut keeps each query to one 8 MB chunk, and a query
costs about a millisecond before it touches a row: with a staging query, a census and up
to nine routing queries a chunk, that overhead was a third of the read. So the text is
cut and written to files ahead, and every 64 MB of it is staged, counted and routed as one
batch (:mod:`ingest.chrome.batch_load`) on a cursor, on a thread of its own, while this
thread cuts and writes the next batch. Batches load strictly in order, one at a time, and
a batch is handed over only after the one before it loaded, so the operator and range
ids follow the file's order as before.

A batch that does not parse routes nothing. Every batch before it loaded, so its first
event starts a well-formed stretch: the read falls back to that offset, opens the text
again, and goes on one chunk at a time, each checked before the next is cut (the exact
scan then finds a wrong cut, or the precise error of malformed input). A wrong cut is
rare (a ``}, {`` inside a string or nested value), so the fallback costs time only on
such traces and on malformed ones. Likewise an error the splitter's exact scan raises
while batches are still unchecked may come from starting at a wrong cut: it stands only
once they all loaded.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import duckdb

from ingest.chrome import blob_files
from ingest.chrome.batch_load import BadBatch, LoadedBatch, load_batch
from ingest.chrome.blob_files import BlobFile, write_blob
from ingest.chrome.event_splitter import BlobParseError, EventArraySplitter, EventBlob
from ingest.chrome.read_stats import ChromeReadStats
from ingest.errors import TraceInputError

# Bytes of events a batch closes at. On a 207 MB trace, 64 MB batches read 10 % faster
# than 32 MB ones at the same peak memory; 128 MB ones saved little more and added 60 MB
# (a staged batch is a typed table of its events).
BATCH_BYTES = 64 * 1024 * 1024


class _Fallback(Exception):
    """A batch did not parse: read again from ``offset``, one checked chunk at a time."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


class BatchedRead:
    """One trace's event array, split by ``splitter`` and loaded through ``con``."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        path: Path,
        tmp: str,
        stats: ChromeReadStats,
        max_events: int | None = None,
        on_progress: Callable[[int], None] | None = None,
        batch_bytes: int = BATCH_BYTES,
    ) -> None:
        self.path = path
        self.batch_bytes = batch_bytes
        self.tmp = tmp
        self.stats = stats
        self.max_events = max_events
        self.on_progress = on_progress
        self._cur = con.cursor()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="tracelens-load")
        self._written = 0
        self._batch: list[BlobFile] = []
        self._batch_bytes = 0
        self._batch_key: tuple[str, bool] | None = None
        self._inflight: tuple[Future[LoadedBatch], list[BlobFile]] | None = None
        self._limit_error: TraceInputError | None = None

    def read(self, splitter: EventArraySplitter, chunks: Callable[[], Iterable[bytes]]) -> None:
        """Split and load the text ``chunks()`` yields (opened again only to fall back)."""
        stream = chunks()
        try:
            try:
                splitter.split(stream, self._add)
                self._flush()
            except TraceInputError as exc:
                if exc is self._limit_error:
                    raise
                # The exact scan may have started at a cut not yet checked: the error
                # stands only if every batch before it loads.
                self._flush()
                raise
        except _Fallback as fallback:
            _close(stream)
            stream = _from_offset(chunks(), fallback.offset)
            splitter.resume_at(fallback.offset)
            splitter.split(stream, self._load_now)
        finally:
            _close(stream)

    def close(self, interrupt: bool = False) -> None:
        """Wait for a batch still loading, then let go of the cursor. ``interrupt``: an
        error elsewhere ended the read, so the batch's queries are stopped rather than
        waited for (a Ctrl-C does not wait for 64 MB to load)."""
        if interrupt and self._inflight is not None:
            self._cur.interrupt()
        self._pool.shutdown(wait=True)
        self._cur.close()

    # -- the batched way ------------------------------------------------------------------

    def _add(self, blobs: list[EventBlob]) -> None:
        """One chunk's blobs: written out, and batched with chunks read the same way."""
        files = self._write(blobs)
        key = (blob_files.variant(files), blob_files.precise(files))
        if self._batch and (key != self._batch_key or self._batch_bytes >= self.batch_bytes):
            try:
                self._submit()
            except _Fallback:
                _remove(files)
                raise
        self._batch.extend(files)
        self._batch_bytes += sum(f.size for f in files)
        self._batch_key = key

    def _submit(self) -> None:
        files = self._batch
        self._batch, self._batch_bytes, self._batch_key = [], 0, None
        if not files:
            return
        self._collect()
        self._inflight = (self._pool.submit(load_batch, self._cur, files), files)

    def _collect(self) -> None:
        """Wait for the batch loading; :class:`_Fallback` when it did not parse."""
        if self._inflight is None:
            return
        future, files = self._inflight
        self._inflight = None
        try:
            loaded = future.result()
        except BadBatch:
            _remove(self._batch)  # cut after the bad one: read again
            self._batch, self._batch_bytes, self._batch_key = [], 0, None
            raise _Fallback(files[0].source_offset) from None
        finally:
            _remove(files)
        self._account(loaded, files)

    def _flush(self) -> None:
        self._submit()
        self._collect()

    # -- the checked way, after a fallback --------------------------------------------------

    def _load_now(self, blobs: list[EventBlob]) -> None:
        """One chunk's blobs loaded before the next chunk is cut: a blob that does not parse
        is the splitter's to scan exactly."""
        files = self._write(blobs)
        try:
            loaded = load_batch(self._cur, files)
        except BadBatch as exc:
            raise BlobParseError(str(exc)) from None
        finally:
            _remove(files)
        self._account(loaded, files)

    # -- both ------------------------------------------------------------------------------

    def _write(self, blobs: list[EventBlob]) -> list[BlobFile]:
        files = []
        for blob in blobs:
            self._written += 1
            name = os.path.join(self.tmp, f"events-{self._written}.json")
            files.append(write_blob(blob, name))
        return files

    def _account(self, loaded: LoadedBatch, files: list[BlobFile]) -> None:
        stats = self.stats
        if loaded.warning is not None and loaded.warning not in stats.warnings:
            stats.warnings.append(loaded.warning)
        stats.call_stacks = stats.call_stacks or any(f.call_stacks for f in files)
        for cat, total, missing, negative, _, _ in loaded.census:
            stats.categories[cat] = stats.categories.get(cat, 0) + total
            stats.events += total
            stats.dropped_missing += missing
            stats.dropped_negative += negative
        if self.max_events is not None and stats.events > self.max_events:
            self._limit_error = TraceInputError(
                self.path,
                f"holds more than {self.max_events:,} events (the limit; set "
                "TRACELENS_MAX_EVENTS to raise it)",
            )
            raise self._limit_error
        if self.on_progress is not None:
            self.on_progress(files[-1].end_offset)


def _from_offset(chunks: Iterable[bytes], offset: int) -> Iterator[bytes]:
    """``chunks`` from byte ``offset`` on (the source is closed with the result)."""
    seen = 0
    source = iter(chunks)
    try:
        for chunk in source:
            if seen + len(chunk) > offset:
                yield chunk[offset - seen :] if seen < offset else chunk
            seen += len(chunk)
    finally:
        _close(source)


def _close(stream: object) -> None:
    close = getattr(stream, "close", None)
    if close is not None:
        close()


def _remove(files: list[BlobFile]) -> None:
    for f in files:
        with contextlib.suppress(FileNotFoundError):
            os.remove(f.path)
