"""Events added at the front of a Chrome trace's event array, the rest passed through.

An enriched download is the kept original plus a few thousand events of our own. Parsing
and re-serializing the original would cost memory in proportion to it and could change
its numbers; instead its bytes are streamed as they are and ours are written right after
the ``[`` that opens its event array (``traceEvents``, or a bare top-level array). Only
the head up to that bracket is scanned, with the ingest splitter's structural scanner.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from ingest.chrome.event_splitter import _EVENTS_KEY, _LBRACKET, StructuralScanner
from ingest.errors import TraceInputError

# A '[' is the event array's when "traceEvents": precedes it within this many bytes.
_LOOKBACK = 256
_BLANK = b" \t\r\n"


def _array_open(scanner: StructuralScanner, chunk: bytes, before: bytes) -> int | None:
    """Offset in ``chunk`` just past the event array's ``[``, or None when not in it.

    ``before`` holds the bytes preceding ``chunk`` (up to :data:`_LOOKBACK`)."""
    base = scanner.offset
    first_value = base == 0 or not before.strip(_BLANK + b"\xef\xbb\xbf")
    pos, kind, depth = scanner.scan(chunk)
    if not len(pos):
        return None
    if first_value and chunk.lstrip(_BLANK + b"\xef\xbb\xbf")[:1] == b"[":
        return int(pos[0]) - base + 1  # a bare array of events
    for j in np.flatnonzero((kind == _LBRACKET) & (depth == 2)).tolist():
        at = int(pos[j]) - base
        window = (before + chunk[:at])[-_LOOKBACK:]
        if _EVENTS_KEY.search(window):
            return at + 1
    return None


def splice_events(path: Path, chunks: Iterable[bytes], extra: list[bytes]) -> Iterator[bytes]:
    """The bytes of ``chunks`` (a Chrome trace's text) with ``extra`` (each one JSON
    event) first in its event array; the original's bytes are unchanged."""
    scanner = StructuralScanner()
    before = b""
    it = iter(chunks)
    rest = b""
    for chunk in it:
        at = _array_open(scanner, chunk, before)
        if at is None:
            yield chunk
            before = (before + chunk)[-_LOOKBACK:]
            continue
        yield chunk[:at]
        rest = chunk[at:]
        break
    else:
        raise TraceInputError(path, 'no "traceEvents" array: not a Chrome trace')
    # Whether the original's array is empty decides the comma after ours.
    while not rest.strip(_BLANK):
        nxt = next(it, None)
        if nxt is None:
            raise TraceInputError(path, "truncated: the event array does not close")
        rest += nxt
    empty = rest.lstrip(_BLANK)[:1] == b"]"
    if extra:
        yield b"\n" + b",\n".join(extra) + (b"\n" if empty else b",\n")
    yield rest
    yield from it
