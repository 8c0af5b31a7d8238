"""Splits a Chrome-trace JSON stream into blobs of whole events, without parsing the events.

A profiler trace is one JSON object whose ``traceEvents`` array holds millions of events
(or, for some writers, a bare top-level array). Parsing it whole costs several times its
size in memory. Instead we find the structure with a vectorised scan (structural bytes
and quote parity with NumPy, the simdjson idea), cut the event array at event
boundaries, and hand each blob of complete events to a real JSON parser (DuckDB's).
Everything outside the event array (device properties, distributed info, ...) is
collected and parsed separately as the trace's metadata.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from ingest.errors import TraceInputError

_QUOTE, _LBRACE, _RBRACE, _LBRACKET, _RBRACKET = 1, 2, 3, 4, 5
_TABLE = bytearray(256)
_TABLE[ord('"')] = _QUOTE
_TABLE[ord("{")] = _LBRACE
_TABLE[ord("}")] = _RBRACE
_TABLE[ord("[")] = _LBRACKET
_TABLE[ord("]")] = _RBRACKET
_TRANSLATE = bytes(_TABLE)
_BACKSLASH = 92

_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*$')
# Candidate cut between two events; only looked for near the end of each chunk.
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_CUT_WINDOW = 1024 * 1024
_HEAD_PIECE = 256 * 1024
# Metadata outside the event array is small; past this much we stop keeping it.
MAX_METADATA_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_EVENT_BYTES = 64 * 1024 * 1024
# A file of nothing but whitespace is refused after this much, not after gigabytes.
MAX_LEADING_BLANK_BYTES = 16 * 1024 * 1024


@dataclass
class StructuralScanner:
    """Incremental scan of JSON text: positions and nesting depth of structural brackets."""

    in_string: bool = False
    depth: int = 0
    offset: int = 0
    trailing_backslashes: int = 0

    def scan(self, chunk: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return absolute positions, bracket codes and depth after each structural bracket."""
        codes = np.frombuffer(chunk.translate(_TRANSLATE), dtype=np.uint8)
        idx = np.flatnonzero(codes)
        kinds = codes[idx]
        is_quote = kinds == _QUOTE
        if is_quote.any():
            keep = self._unescaped(chunk, idx, is_quote)
            if keep is not None:
                idx, kinds = idx[keep], kinds[keep]
                is_quote = kinds == _QUOTE
        quotes_through = np.cumsum(is_quote, dtype=np.int64)
        quotes_before = quotes_through - is_quote
        outside = ((quotes_before + int(self.in_string)) & 1) == 0
        is_bracket = ~is_quote & outside
        pos = idx[is_bracket]
        kind = kinds[is_bracket]
        delta = np.where((kind == _LBRACE) | (kind == _LBRACKET), 1, -1).astype(np.int64)
        depth_after = self.depth + np.cumsum(delta)
        if len(depth_after):
            self.depth = int(depth_after[-1])
        if len(quotes_through):
            self.in_string = bool((int(self.in_string) + int(quotes_through[-1])) & 1)
        run = len(chunk) - len(chunk.rstrip(b"\\"))
        self.trailing_backslashes = self.trailing_backslashes + run if run == len(chunk) else run
        abs_pos = pos.astype(np.int64) + self.offset
        self.offset += len(chunk)
        return abs_pos, kind, depth_after

    def _unescaped(self, chunk: bytes, idx: np.ndarray, is_quote: np.ndarray) -> np.ndarray | None:
        """Mask of tokens to keep after dropping escaped quotes, or None when none are."""
        qsel = np.flatnonzero(is_quote)
        qpos = idx[qsel]
        arr = np.frombuffer(chunk, dtype=np.uint8)
        preceded = np.zeros(len(qpos), dtype=bool)
        inner = qpos > 0
        preceded[inner] = arr[qpos[inner] - 1] == _BACKSLASH
        if len(qpos) and qpos[0] == 0 and self.trailing_backslashes:
            preceded[0] = True
        candidates = np.flatnonzero(preceded)
        if not len(candidates):
            return None
        escaped = []
        for j in candidates.tolist():
            k = int(qpos[j]) - 1
            n = 0
            while k >= 0 and chunk[k] == _BACKSLASH:
                n += 1
                k -= 1
            if k < 0:
                n += self.trailing_backslashes
            if n & 1:
                escaped.append(qsel[j])
        if not escaped:
            return None
        keep = np.ones(len(idx), dtype=bool)
        keep[np.asarray(escaped)] = False
        return keep


class BlobParseError(Exception):
    """Raised by a parse callback when a blob is not a valid JSON array of objects."""


@dataclass
class EventBlob:
    """Whole, comma-separated events: ``buf[start:end]``, at ``source_offset`` in the file.

    The bytes are not copied out of the read buffer; :meth:`write` frames them as a JSON
    array (``[`` ... ``]``) straight into a file for the parser.
    """

    buf: bytes
    start: int
    end: int
    source_offset: int

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def data(self) -> bytes:
        return b"[" + self.buf[self.start : self.end] + b"]"

    def contains(self, needle: bytes) -> bool:
        return self.buf.find(needle, self.start, self.end) >= 0

    def write(self, f: IO[bytes]) -> None:
        f.write(b"[")
        f.write(memoryview(self.buf)[self.start : self.end])
        f.write(b"]")


@dataclass
class SplitResult:
    metadata: dict = field(default_factory=dict)
    bare_array: bool = False
    total_bytes: int = 0


ParseFn = Callable[[list[EventBlob]], None]


class EventArraySplitter:
    """Cuts the event array of a Chrome-trace byte stream into blobs of whole events."""

    def __init__(
        self,
        path: Path,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        speculative: bool = True,
        parts: int = 2,
    ) -> None:
        self.path = path
        self.speculative = speculative
        self.parts = max(1, parts)
        self.max_event_bytes = max_event_bytes
        self.result = SplitResult()
        self._scanner = StructuralScanner()
        self._phase = "start"  # start -> head -> events -> tail
        self._events_depth = 0
        self._head = bytearray()
        self._tail = bytearray()
        self._carry = bytearray()
        self._carry_offset = 0
        self._tail_truncated = False
        self._blank = 0  # whitespace before the first JSON value

    def split(self, chunks: Iterable[bytes], parse: ParseFn) -> None:
        """Feed every blob of whole events to ``parse``; fill :attr:`result` at the end.

        The head is scanned exactly until the event array starts. After that, blobs are
        cut speculatively at the last ``}, {`` of each chunk, without scanning: ``parse``
        validates the cut for free, because ``[`` + prefix + ``]`` is valid JSON only when
        the prefix ends exactly between two events (a cut inside a string leaves it
        unterminated; one inside a nested value leaves brackets unbalanced). Only when
        ``parse`` rejects a speculative blob is that stretch scanned exactly, which also
        yields the precise error for genuinely malformed input. The remainder at the end
        of the file is scanned exactly to find where the array closes.
        """
        for chunk in chunks:
            pos = 0
            # The head is scanned exactly in small pieces, so the first chunk's events after
            # it still go the speculative way.
            while pos < len(chunk) and self._phase in ("start", "head"):
                self._feed(chunk[pos : pos + _HEAD_PIECE], parse)
                pos += _HEAD_PIECE
            if pos >= len(chunk):
                continue
            rest = chunk[pos:] if pos else chunk
            if self._phase == "events" and self.speculative:
                self._speculative_feed(rest, parse)
            else:
                self._feed(rest, parse)
        if self._phase == "events" and self._carry:
            rest = bytes(self._carry)
            base = self._carry_offset
            if self.speculative:
                # Parse up to the last '}, {' speculatively so only the final event and the
                # tail need the exact scan.
                cut = self._last_boundary(rest, 0, len(rest))
                if cut is not None:
                    try:
                        blob = self._blob(rest, 0, cut[0], base)
                        if blob is not None:
                            parse([blob])
                        rest, base = rest[cut[1] :], base + cut[1]
                    except BlobParseError:
                        pass
            self._restart_exact(base)
            self._feed(rest, parse)
        self._finish()

    def resume_at(self, offset: int) -> None:
        """Split again from ``offset``, where an event of the array starts (or the
        whitespace and comma before it): the chunks given to the next :meth:`split` begin
        there. What came before (the head, where the array is) is kept; what follows (the
        tail) is read again. For a reader that checks blobs after the fact and found one
        that does not parse: it falls back to the last offset known to be good."""
        self._phase = "events"
        self._tail = bytearray()
        self._tail_truncated = False
        self._restart_exact(offset)

    def _restart_exact(self, offset: int) -> None:
        """Exact scanning from ``offset``, known to lie between events of the array."""
        self._scanner = StructuralScanner(depth=self._events_depth, offset=offset)
        self._carry = bytearray()
        self._carry_offset = offset

    def _speculative_feed(self, chunk: bytes, parse: ParseFn) -> None:
        buf = bytes(self._carry) + chunk if self._carry else chunk
        base = self._carry_offset
        # One blob per parser thread, so the blobs of one chunk are parsed in parallel.
        blobs: list[EventBlob] = []
        start = 0
        try:
            for i in range(1, self.parts + 1):
                target = len(buf) * i // self.parts
                cut = self._last_boundary(buf, max(start, target - _CUT_WINDOW), target)
                if cut is None:
                    continue
                blob = self._blob(buf, start, cut[0], base)
                if blob is not None:
                    blobs.append(blob)
                start = cut[1]
        except BlobParseError:
            self._restart_exact(base)
            self._feed(buf, parse)
            return
        if not blobs:
            if len(buf) > self.max_event_bytes:
                # no cut found in a long stretch: let the exact scanner judge it
                self._restart_exact(base)
                self._feed(buf, parse)
                return
            self._carry = bytearray(buf)
            return
        try:
            parse(blobs)
        except BlobParseError:
            self._restart_exact(base)
            self._feed(buf, parse)
            return
        self._carry = bytearray(buf[start:])
        self._carry_offset = base + start

    @staticmethod
    def _last_boundary(buf: bytes, lo: int, hi: int) -> tuple[int, int] | None:
        """(end of an event, start of the next) for the last ``}, {`` in ``buf[lo:hi]``."""
        last = None
        for last in _BOUNDARY.finditer(buf, lo, hi):  # noqa: B007 - the last match is wanted
            pass
        return None if last is None else (last.start() + 1, last.end() - 1)

    def _feed(self, chunk: bytes, parse: ParseFn) -> None:
        base = self._scanner.offset
        pos, kind, depth = self._scanner.scan(chunk)
        if len(depth) and int(depth.min()) < 0:
            bad = int(pos[np.flatnonzero(depth < 0)[0]])
            raise TraceInputError(self.path, f"malformed JSON: unbalanced bracket at byte {bad:,}")
        i = 0  # index into this chunk's tokens
        cursor = 0  # bytes of this chunk already assigned to a phase
        if self._phase in ("start", "head"):
            i, cursor = self._find_events_start(chunk, base, pos, kind, depth)
            if self._phase in ("start", "head"):
                self._keep_head(chunk)
                return
        if self._phase == "events":
            tok = slice(i, None)
            p, k, d = pos[tok], kind[tok], depth[tok]
            closes = np.flatnonzero((k == _RBRACKET) & (d == self._events_depth - 1))
            stop = len(p) if not len(closes) else int(closes[0])
            ends = np.flatnonzero((k[:stop] == _RBRACE) & (d[:stop] == self._events_depth))
            inner_arrays = np.flatnonzero(
                (k[:stop] == _LBRACKET) & (d[:stop] == self._events_depth + 1)
            )
            if len(inner_arrays):
                at = int(p[inner_arrays[0]])
                raise TraceInputError(
                    self.path,
                    f"traceEvents holds an array where an event object belongs (byte {at:,})",
                )
            if len(closes):
                array_end = int(p[closes[0]]) - base
                if len(ends):
                    last_end = int(p[ends[-1]]) - base + 1
                    blob = self._take(chunk, cursor, last_end)
                    if blob is not None:
                        parse([blob])
                last = int(p[ends[-1]]) - base + 1 if len(ends) else cursor
                between = bytes(self._carry) if not len(ends) else b""
                between += chunk[max(last, cursor) : array_end]
                if between.strip(b" \t\r\n,"):
                    at = self._carry_offset if not len(ends) else base + last
                    raise TraceInputError(
                        self.path, f"traceEvents holds a non-object value after byte {at:,}"
                    )
                self._carry.clear()
                self._phase = "tail"
                cursor = array_end + 1
            else:
                if len(ends):
                    last_end = int(p[ends[-1]]) - base + 1
                    blob = self._take(chunk, cursor, last_end)
                    if blob is not None:
                        parse([blob])
                    cursor = last_end
                self._carry_more(chunk, cursor, base)
                return
        if self._phase == "tail":
            self._keep_tail(chunk[cursor:])

    def _find_events_start(
        self, chunk: bytes, base: int, pos: np.ndarray, kind: np.ndarray, depth: np.ndarray
    ) -> tuple[int, int]:
        if self._phase == "start":
            stripped = chunk.lstrip(b" \t\r\n\xef\xbb\xbf")
            if not stripped:
                self._blank += len(chunk)
                if self._blank > MAX_LEADING_BLANK_BYTES:
                    raise TraceInputError(
                        self.path,
                        f"no JSON value in the first {MAX_LEADING_BLANK_BYTES:,} bytes "
                        "(only whitespace)",
                    )
                return len(pos), len(chunk)
            first = stripped[:1]
            if first not in (b"{", b"["):
                raise TraceInputError(
                    self.path, "not JSON (expected a Chrome trace object or event array)"
                )
            self._phase = "head"
            if first == b"[":
                self.result.bare_array = True
                self._events_depth = 1
                self._phase = "events"
                start = int(pos[0]) - base + 1
                self._carry_offset = base + start
                return 1, start
        # An object: find the '[' opening a top-level array keyed "traceEvents".
        opens = np.flatnonzero((kind == _LBRACKET) & (depth == 2))
        for j in opens.tolist():
            at = int(pos[j]) - base
            if at >= 256:
                before = chunk[at - 256 : at]
            else:
                before = bytes(self._head[len(self._head) - (256 - at) :]) + chunk[:at]
            if _EVENTS_KEY.search(before):
                self._keep_head(chunk[:at])
                self._events_depth = 2
                self._phase = "events"
                self._carry_offset = base + at + 1
                return j + 1, at + 1
        if len(depth) and self._scanner.depth == 0:
            # the top-level object closed without a traceEvents array
            raise TraceInputError(
                self.path, 'JSON object has no "traceEvents" array: not a Chrome trace'
            )
        return len(pos), len(chunk)

    # -- buffers ----------------------------------------------------------------------------

    def _take(self, chunk: bytes, start: int, end: int) -> EventBlob | None:
        """Blob of the carried bytes plus ``chunk[start:end]``; resets the carry."""
        body = bytes(self._carry) + chunk[start:end] if self._carry else chunk[start:end]
        offset = self._carry_offset
        self._carry.clear()
        self._carry_offset = offset + len(body)
        try:
            return self._blob(body, 0, len(body), offset)
        except BlobParseError as exc:
            raise TraceInputError(self.path, str(exc)) from None

    def _blob(self, buf: bytes, start: int, end: int, offset: int) -> EventBlob | None:
        """``buf[start:end]`` (whole events, comma separated) as a JSON array blob."""
        lead = start
        while lead < end and buf[lead] in b" \t\r\n,":
            lead += 1
        if lead == end:
            return None
        if buf[lead] != ord("{"):
            # speculatively, this usually means the cut passed the end of the array
            raise BlobParseError(f"traceEvents holds a non-object value at byte {offset + lead:,}")
        return EventBlob(buf, lead, end, offset + lead)

    def _carry_more(self, chunk: bytes, start: int, base: int) -> None:
        if not self._carry:
            self._carry_offset = base + start
        self._carry += chunk[start:]
        if len(self._carry) > self.max_event_bytes:
            raise TraceInputError(
                self.path,
                f"an event starting near byte {self._carry_offset:,} is larger than "
                f"{self.max_event_bytes:,} bytes (or the file is not well-formed JSON)",
            )

    @property
    def head(self) -> bytes:
        """The bytes before the event array (from offset 0): the top of the metadata."""
        return bytes(self._head)

    @property
    def tail(self) -> tuple[int, bytes] | None:
        """(offset, bytes) after the event array closes; None when too long to keep."""
        if self._tail_truncated:
            return None
        return self.result.total_bytes - len(self._tail), bytes(self._tail)

    def _keep_head(self, data: bytes) -> None:
        if len(self._head) + len(data) > MAX_METADATA_BYTES:
            raise TraceInputError(
                self.path, f"no traceEvents array in the first {MAX_METADATA_BYTES:,} bytes"
            )
        self._head += data

    def _keep_tail(self, data: bytes) -> None:
        if self._tail_truncated:
            return
        if len(self._tail) + len(data) > MAX_METADATA_BYTES:
            self._tail_truncated = True
            return
        self._tail += data

    def _finish(self) -> None:
        self.result.total_bytes = self._scanner.offset
        if self._phase == "start":
            raise TraceInputError(self.path, "empty file")
        if self._phase == "head":
            raise TraceInputError(
                self.path, 'truncated or not a Chrome trace: no "traceEvents" array found'
            )
        if self._phase == "events":
            raise TraceInputError(
                self.path,
                f"truncated JSON: the event array is not closed (file ends at byte "
                f"{self._scanner.offset:,})",
            )
        if self._scanner.depth != 0 or self._scanner.in_string:
            raise TraceInputError(
                self.path,
                f"truncated JSON: file ends at byte {self._scanner.offset:,} inside a value",
            )
        if self.result.bare_array:
            if self._tail.strip():
                raise TraceInputError(self.path, "unexpected data after the top-level event array")
            return
        if self._tail_truncated:
            return
        # A UTF-8 byte-order mark (some editors and Windows tools write one) is not data.
        text = (bytes(self._head) + b"[]" + bytes(self._tail)).removeprefix(b"\xef\xbb\xbf")
        try:
            meta = json.loads(text.decode("utf-8", "replace"))
        except ValueError as exc:
            raise TraceInputError(
                self.path, f"malformed JSON outside the event array ({exc})"
            ) from None
        except RecursionError:
            raise TraceInputError(
                self.path, "JSON outside the event array is nested too deeply to read"
            ) from None
        if not isinstance(meta, dict):
            raise TraceInputError(self.path, "top-level JSON value is not an object")
        meta.pop("traceEvents", None)
        self.result.metadata = meta
