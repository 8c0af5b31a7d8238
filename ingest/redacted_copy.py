"""A copy of a trace with every secret rewritten, still readable as the same trace.

The service keeps each upload's original so it can be re-ingested and downloaded. Public
profiler traces carry their recording environment (environment dumps with access tokens,
command lines with ``--api-key``), and names can hold them too, so the kept copy is the
redacted one: the rules of :mod:`ingest.redaction`, applied to every string of the file.

Chrome JSON is rewritten string by string, byte-exact elsewhere, so the copy parses to the
same events:

1. A scan of the (decompressed) text with one RE2 expression in DuckDB (hundreds of MB/s)
   looks for anything that *could* be a secret. Most traces have none anywhere: the
   original is kept as it is, and no byte is rewritten.
2. Otherwise the event array is cut into blobs of whole events by the ingest splitter.
   Only blobs (and the metadata around the array) that contain a candidate are tokenized
   into string literals; each literal is decoded, redacted (a value under a secret-looking
   key is replaced whole) and re-encoded if it changed. A blob rewritten this way is
   parsed first, which also validates the splitter's speculative cut.
3. The stream is copied once more with the (few, small) literal replacements applied.

Nsight Systems exports are SQLite: the copy's text columns are rewritten with UPDATEs
(values in ``name``/``value`` tables under a secret-looking name replaced whole) with
``secure_delete`` on, so the old text does not survive in free pages.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
import shutil
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ingest.byte_source import is_gzip, iter_bytes
from ingest.chrome.event_splitter import BlobParseError, EventArraySplitter, EventBlob
from ingest.duckdb_connect import connect
from ingest.errors import TraceInputError
from ingest.redaction import REDACTED, is_secret_key, redact_text

# Bumped whenever the rules change: kept originals redacted under an older version are
# redacted again (and re-ingested) when the service starts.
REDACTION_VERSION = 1

_NAMES = (
    r"token|secret|passw|passphrase|api[_\-. ]?key|access[_\-. ]?key|private[_\-. ]?key"
    r"|credential|authorization|cookie|session[_\-. ]?id|signature"
)
# Anything redaction could change, as RE2 (DuckDB) and Python regular expressions. A
# superset is fine (it only costs a closer look); missing a case is not.
_CANDIDATE_PARTS = (
    rf"(?i:(?:{_NAMES})[A-Za-z0-9_.\- ]*[\"']?\s*[=:])",
    r"(?i:[\"'](?:auth|pwd)[\"']\s*:)",
    rf"(?i:--[A-Za-z0-9_.\-]*(?:{_NAMES})[A-Za-z0-9_.\-]*\s)",
    r"(?i:://[^/\s:@\"]+:[^/\s@\"]+@)",
    r"(?i:(?:bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8})",
    r"(?:gh[pousr]_|github_pat_|hf_|sk-|glpat-)[A-Za-z0-9_\-]{20}",
    r"AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9\-]{10}",
    # an escaped printable ASCII character could spell any of the above
    r"\\u00[2-7][0-9A-Fa-f]",
)
CANDIDATE_RE2 = "|".join(_CANDIDATE_PARTS)
_CANDIDATE = re.compile("|".join(_CANDIDATE_PARTS).encode())
_LITERAL = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_AFTER_SPACE = re.compile(rb"\s*")
_SCAN_CHUNK = 32 * 1024 * 1024
# A candidate can straddle two chunks: each scan also sees this much of the previous one.
_SCAN_OVERLAP = 4096


@dataclass
class RedactionResult:
    """What :func:`write_redacted_copy` did: how many strings it rewrote."""

    replaced: int
    path: Path


class _CandidateScanner:
    """The RE2 scan (DuckDB's regexp functions): does this text hold a possible secret?"""

    def __init__(self) -> None:
        self._con = connect(threads=1)

    def __call__(self, data: bytes) -> bool:
        row = self._con.execute(
            "SELECT regexp_matches(?, ?)", [data.decode("utf-8", "replace"), CANDIDATE_RE2]
        ).fetchone()
        return bool(row and row[0])

    def close(self) -> None:
        self._con.close()


def _overlapping(chunks: Iterable[bytes]) -> Iterator[bytes]:
    tail = b""
    for chunk in chunks:
        yield tail + chunk
        tail = chunk[-_SCAN_OVERLAP:]


def json_has_candidates(path: Path, scanner: _CandidateScanner, max_decompressed: int) -> bool:
    chunks = iter_bytes(path, chunk_size=_SCAN_CHUNK, max_decompressed=max_decompressed)
    return any(scanner(chunk) for chunk in _overlapping(chunks))


def _redacted_value(text: str, key: str | None) -> str:
    if key is not None and text and is_secret_key(key):
        return REDACTED
    return redact_text(text)


def _decode(literal: bytes) -> str:
    decoded = json.loads(literal.decode("utf-8", "replace"))
    return decoded if isinstance(decoded, str) else ""


def _literal_replacements(
    buf: bytes, start: int, end: int, base: int
) -> list[tuple[int, int, bytes]]:
    """(absolute offset, length, new bytes) for each string literal of ``buf[start:end]``
    that redaction changes; ``buf[start]`` lies outside any string."""
    out: list[tuple[int, int, bytes]] = []
    key: str | None = None
    pos = start
    for m in _LITERAL.finditer(buf, start, end):
        raw = m.group()
        after = _AFTER_SPACE.match(buf, m.end(), end)
        is_key = after is not None and buf[after.end() : after.end() + 1] == b":"
        # the key of this value: the literal just before it, when only ':' lies between
        owner = key if buf[pos : m.start()].strip(b" \t\r\n:") == b"" else None
        pos = m.end()
        key = _decode(raw) if is_key else None
        if (not is_key and owner is not None and is_secret_key(owner)) or _CANDIDATE.search(raw):
            text = _decode(raw)
        else:
            continue
        new = _redacted_value(text, None if is_key else owner)
        if new != text:
            encoded = json.dumps(new, ensure_ascii=False).encode()
            out.append((base + m.start() - start, len(raw), encoded))
    return out


class _JsonPlanner:
    """Pass 2: the literal replacements for the whole stream, via the ingest splitter."""

    def __init__(self, path: Path, scanner: _CandidateScanner) -> None:
        self.path = path
        self.scanner = scanner
        self.replacements: list[tuple[int, int, bytes]] = []

    def parse(self, blobs: list[EventBlob]) -> None:
        found: list[tuple[int, int, bytes]] = []
        for blob in blobs:
            body = blob.buf[blob.start : blob.end]
            if not self.scanner(body):
                continue
            try:
                json.loads(b"[" + body + b"]")
            except ValueError as exc:  # a speculative cut inside a string: rescan exactly
                raise BlobParseError(str(exc)) from None
            found += _literal_replacements(blob.buf, blob.start, blob.end, blob.source_offset)
        # only a parse that raised nothing commits: the splitter may re-feed this stretch
        self.replacements += found

    def plan(self, chunks: Iterable[bytes]) -> list[tuple[int, int, bytes]]:
        splitter = EventArraySplitter(self.path, parts=1)
        try:
            splitter.split(chunks, self.parse)
        except BlobParseError as exc:
            raise TraceInputError(self.path, str(exc)) from None
        head = splitter.head
        if head and self.scanner(head):
            self.replacements += _literal_replacements(head, 0, len(head), 0)
        tail = splitter.tail
        if tail is None:
            raise TraceInputError(
                self.path, "metadata after the event array is too large to check for secrets"
            )
        offset, data = tail
        if data and self.scanner(data):
            self.replacements += _literal_replacements(data, 0, len(data), offset)
        return sorted(self.replacements)


def _apply(chunks: Iterable[bytes], replacements: list[tuple[int, int, bytes]]) -> Iterator[bytes]:
    """The stream with ``replacements`` (sorted, non-overlapping) applied."""
    pending = iter(replacements)
    nxt = next(pending, None)
    offset = 0  # absolute offset of the first byte of `buf`
    buf = b""
    for chunk in chunks:
        buf += chunk
        out = bytearray()
        cursor = 0
        while nxt is not None and nxt[0] + nxt[1] <= offset + len(buf):
            at = nxt[0] - offset
            out += buf[cursor:at]
            out += nxt[2]
            cursor = at + nxt[1]
            nxt = next(pending, None)
        # keep back what a replacement starting in this chunk still needs
        keep = nxt[0] - offset if nxt is not None and nxt[0] < offset + len(buf) else len(buf)
        out += buf[cursor:keep]
        offset += keep
        buf = buf[keep:]
        yield bytes(out)
    if buf:
        yield buf


def _write_json_copy(src: Path, dst: Path, max_decompressed: int) -> int:
    scanner = _CandidateScanner()
    try:
        if not json_has_candidates(src, scanner, max_decompressed):
            return 0
        chunks = iter_bytes(src, chunk_size=_SCAN_CHUNK, max_decompressed=max_decompressed)
        replacements = _JsonPlanner(src, scanner).plan(chunks)
    finally:
        scanner.close()
    if not replacements:
        return 0
    partial = dst.with_name(dst.name + ".partial")
    try:
        with partial.open("wb") as raw:
            # a gzip original stays gzip (mtime 0: the same input gives the same bytes)
            out: io.BufferedIOBase = (
                gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0)
                if is_gzip(src)
                else raw
            )
            chunks = iter_bytes(src, chunk_size=_SCAN_CHUNK, max_decompressed=max_decompressed)
            for block in _apply(chunks, replacements):
                out.write(block)
            if out is not raw:
                out.close()
        os.replace(partial, dst)
    finally:
        partial.unlink(missing_ok=True)
    return len(replacements)


def _sqlite_text_columns(con: sqlite3.Connection) -> Iterator[tuple[str, list[str]]]:
    tables = [
        r[0]
        for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    for table in tables:
        cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
        yield table, cols


def _write_sqlite_copy(src: Path, dst: Path) -> int:
    partial = dst.with_name(dst.name + ".partial")
    shutil.copyfile(src, partial)
    changed = 0
    try:
        con = sqlite3.connect(partial)
        try:
            con.execute("PRAGMA secure_delete = ON")
            con.execute("PRAGMA journal_mode = MEMORY")
            pattern = re.compile(CANDIDATE_RE2)
            con.create_function(
                "tl_redact",
                1,
                lambda v: redact_text(v) if isinstance(v, str) else v,
                deterministic=True,
            )
            con.create_function(
                "tl_secret_key",
                1,
                lambda v: isinstance(v, str) and is_secret_key(v),
                deterministic=True,
            )
            con.create_function(
                "tl_candidate",
                1,
                lambda v: isinstance(v, str) and bool(pattern.search(v)),
                deterministic=True,
            )
            for table, cols in _sqlite_text_columns(con):
                lowered = {c.lower(): c for c in cols}
                if "name" in lowered and "value" in lowered:
                    # environment and metadata tables: a secret-looking name hides its value
                    cur = con.execute(
                        f'UPDATE "{table}" SET "{lowered["value"]}" = ? '
                        f"WHERE typeof(\"{lowered['value']}\") = 'text' "
                        f'AND "{lowered["value"]}" != \'\' AND "{lowered["value"]}" != ? '
                        f'AND tl_secret_key("{lowered["name"]}")',
                        [REDACTED, REDACTED],
                    )
                    changed += max(cur.rowcount, 0)
                for col in cols:
                    cur = con.execute(
                        f'UPDATE "{table}" SET "{col}" = tl_redact("{col}") '
                        f'WHERE typeof("{col}") = \'text\' AND tl_candidate("{col}") '
                        f'AND tl_redact("{col}") != "{col}"'
                    )
                    changed += max(cur.rowcount, 0)
            con.commit()
        finally:
            con.close()
        if not changed:
            return 0
        os.replace(partial, dst)
    except sqlite3.DatabaseError as exc:
        raise TraceInputError(src, f"cannot rewrite the SQLite export ({exc})") from None
    finally:
        partial.unlink(missing_ok=True)
    return changed


def write_redacted_copy(src: Path, dst: Path, fmt: str, max_decompressed: int) -> int:
    """Write ``src`` with its secrets redacted to ``dst``; the number of values rewritten.

    When nothing needs redacting, nothing is written (0) and ``src`` is the copy to keep.
    """
    if fmt == "nsys_sqlite":
        return _write_sqlite_copy(src, dst)
    return _write_json_copy(src, dst, max_decompressed)


def redact_in_place(path: Path, fmt: str, max_decompressed: int) -> int:
    """Redact the file at ``path`` itself (replaced atomically when something changed)."""
    tmp = path.with_name(path.name + ".redacted")
    try:
        count = write_redacted_copy(path, tmp, fmt, max_decompressed)
        if count:
            os.replace(tmp, path)
        return count
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
