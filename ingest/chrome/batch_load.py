"""Loads one batch of blob files into the canonical tables: stage, count, route.

One query stages every file of the batch (DuckDB parses them on parallel threads) into
one typed table, a census counts its categories, and the routing queries copy each event
to its table, skipping categories the batch does not have. A batch is tens of megabytes
of JSON: a query costs about a millisecond before it touches a row, so the fewer and
larger they are, the less of the read is overhead (with an 8 MB chunk a batch, a third of
the read's CPU time went to per-query costs).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from ingest.chrome import blob_files
from ingest.chrome.blob_files import BlobFile
from ingest.chrome.event_sql import CENSUS, MEMORY_SQL, ROUTES, STAGED, stage_sql

UTF8_REPAIRED = "non-UTF-8 bytes in event text were replaced with U+FFFD"


class BadBatch(Exception):
    """The batch's text is not a JSON array of events: a speculative cut fell inside a
    value, or the trace is malformed. The message is the one-line description."""


@dataclass
class LoadedBatch:
    """What loading a batch counted, for the read's statistics."""

    # (category, events, without ts/dur, negative duration, 6-decimal ties, memory rows)
    census: list[tuple]
    warning: str | None  # what reading it had to repair


def load_batch(cur: duckdb.DuckDBPyConnection, files: list[BlobFile]) -> LoadedBatch:
    """Stage, count and route ``files`` on ``cur``. Raises :class:`BadBatch`, having routed
    nothing, when the text does not parse; running out of memory or disk is raised as is."""
    variant = blob_files.variant(files)
    warning = None
    try:
        precise = _stage(cur, files, variant)
    except duckdb.Error as exc:
        if _not_the_traces_fault(exc):
            raise
        if "utf-8" not in str(exc).lower() and "unicode" not in str(exc).lower():
            raise BadBatch(_describe_json_error(exc, files)) from None
        # Tolerant reading: undecodable bytes become U+FFFD, as a browser would show them.
        blob_files.repair_utf8(files)
        try:
            precise = _stage(cur, files, variant)
        except duckdb.Error as exc2:
            if _not_the_traces_fault(exc2):
                raise
            raise BadBatch(_describe_json_error(exc2, files)) from None
        warning = UTF8_REPAIRED
    census = cur.execute(CENSUS).fetchall()
    ties = sum(row[4] for row in census)
    if precise and ties and blob_files.has_overlong_decimals(files):
        # Rounding a 17th or later digit landed on a 6-decimal half: the standard read
        # decides those rows, and reads the rest to the same values.
        cur.execute(stage_sql(STAGED, variant, False, blob_files.time_base(files)), [_paths(files)])
        census = cur.execute(CENSUS).fetchall()
    _route(cur, files, census, variant)
    # Gone before the next batch is staged, so two staged batches never coexist.
    cur.execute(f"DROP TABLE {STAGED}")
    return LoadedBatch(census, warning)


def _paths(files: list[BlobFile]) -> list[str]:
    return [f.path for f in files]


def _stage(cur: duckdb.DuckDBPyConnection, files: list[BlobFile], variant: str) -> bool:
    """Stage the files into the staging table; whether they were read precisely."""
    base = blob_files.time_base(files)
    # Several files in one scan: DuckDB parses them on parallel threads.
    if blob_files.precise(files):
        try:
            cur.execute(stage_sql(STAGED, variant, True, base), [_paths(files)])
            return True
        except duckdb.Error:
            pass  # e.g. an integer part too long for 16 decimals: the standard read decides
    cur.execute(stage_sql(STAGED, variant, False, base), [_paths(files)])
    return False


def _route(
    cur: duckdb.DuckDBPyConnection, files: list[BlobFile], census: list[tuple], variant: str
) -> None:
    """Copy the staged events to their tables, in file order (the ids follow it)."""
    present = {row[0] for row in census}
    # Most batches hold a handful of categories; a query per absent one is pure overhead.
    for cats, sql in ROUTES:
        if cats & present:
            cur.execute(sql)
    # The profiler's allocator events ("[memory]" instants) take a pass of their own (their
    # "Bytes" and the copies' "bytes" cannot share a STRUCT), only where the census counted
    # some. Where ``args`` was staged as JSON rather than a STRUCT, the pass's STRUCT read
    # may fail where staging did not: there the text alone decides, as it always did.
    memory_rows = sum(row[5] for row in census)
    if memory_rows or (variant == "json" and blob_files.mentions(files, b'"[memory]"')):
        cur.execute(MEMORY_SQL, [_paths(files)])


def _not_the_traces_fault(exc: duckdb.Error) -> bool:
    """Out of memory or of disk: the machine's limits, which must not be reported as a
    malformed event (the loader names them and the knob)."""
    if isinstance(exc, duckdb.OutOfMemoryException):
        return True
    return isinstance(exc, duckdb.IOException) and "No space left" in str(exc)


def _describe_json_error(exc: duckdb.Error, files: list[BlobFile]) -> str:
    text = str(exc).splitlines()[0]
    text = text.replace("Invalid Input Error: ", "").replace("Conversion Error: ", "")
    # DuckDB names our temporary file; point at the user's file instead.
    text = text.split(' in file "')[0] if ' in file "' in text else text
    return f"malformed event in traceEvents after byte {files[0].source_offset:,}: {text}"
