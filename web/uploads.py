"""Receiving an upload: the multipart body streamed to a temporary file, never held whole.

While the bytes arrive they are hashed (sha256, to recognise a file uploaded twice),
counted against the size cap and, for gzip, inflated and counted against the decompressed
cap (:mod:`ingest.gunzip`, the guard ingest reads with), so a too-big file or a gzip bomb
is refused mid-stream. The client's file name is kept as a label only; the file on disk
is named by a random token. Several ``file`` fields (a job's ranks, dropped at once) are
received one after another, the size cap counting them all.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import unicodedata
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import anyio.to_thread
from multipart import MultipartSegment, ParserError, ParserLimitReached, PushMultipartParser

from ingest import TraceInputError, detect_format
from ingest.archive import archive_kind
from ingest.gunzip import GZIP_MAGIC, BoundedGunzip, GzipProblem, GzipTooLarge
from ingest.loader import NSYS_REPORT_SUFFIXES
from ingest.redaction import redact_text

FIELD_LIMIT = 4096
# Files in one upload: a job's ranks (larger jobs come as one archive).
MAX_FILES = 1024
# Written to disk in blocks this size, off the event loop.
FLUSH_BYTES = 1024 * 1024
_INFLATE_STEP = 16 * 1024 * 1024
_MAX_BLANK_PREFIX = 16 * 1024 * 1024


class UploadError(Exception):
    """A refused upload: an HTTP status and a one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(message)


@dataclass
class ReceivedFile:
    path: Path
    filename: str
    sha256: str
    size_bytes: int
    extension: str
    # torch_chrome, nsys_sqlite, or archive (a .zip/.tar/.tar.gz of traces)
    format: str


@dataclass
class ReceivedUpload:
    """The files of an upload (one, or a job's several) and its other form fields."""

    files: list[ReceivedFile]
    fields: dict[str, str] = field(default_factory=dict)

    # A single-file upload's file, as the code for one trace reads it.
    @property
    def path(self) -> Path:
        return self.files[0].path

    @property
    def filename(self) -> str:
        return self.files[0].filename

    @property
    def sha256(self) -> str:
        return self.files[0].sha256

    @property
    def size_bytes(self) -> int:
        return self.files[0].size_bytes

    @property
    def extension(self) -> str:
        return self.files[0].extension

    @property
    def format(self) -> str:
        return self.files[0].format

    def discard(self) -> None:
        for f in self.files:
            f.path.unlink(missing_ok=True)


def clean_filename(raw: str | None) -> str:
    """A display label from the client's file name: last path part, printable, short."""
    name = (raw or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C").strip()
    return redact_text(name[:200]) or "upload"


class _GzipMeter:
    """Inflates gzip members as they arrive and counts the output (never kept)."""

    def __init__(self, limit: int) -> None:
        self.gunzip = BoundedGunzip(limit, step=_INFLATE_STEP)
        self.seen_content = False

    def feed(self, data: bytes, label: str) -> None:
        try:
            for out in self.gunzip.feed(data):
                if not self.seen_content:
                    self.seen_content = bool(out.strip(b" \t\r\n"))
                    if not self.seen_content and self.gunzip.total > _MAX_BLANK_PREFIX:
                        # a whitespace bomb would keep a core inflating for a minute
                        raise UploadError(
                            400,
                            f"{label}: no JSON in the first {_MAX_BLANK_PREFIX:,} decompressed "
                            "bytes (only whitespace)",
                        )
        except GzipTooLarge as exc:
            raise UploadError(413, f"{label}: {exc.problem} (the limit)") from None
        except GzipProblem as exc:
            raise UploadError(400, f"{label}: {exc.problem}") from None

    def finish(self, label: str) -> None:
        try:
            self.gunzip.finish()
        except GzipProblem as exc:
            raise UploadError(400, f"{label}: {exc.problem}") from None


class _Total:
    """Bytes received over all of an upload's files."""

    def __init__(self) -> None:
        self.size = 0


class _FileSink:
    def __init__(
        self, path: Path, filename: str, max_bytes: int, max_inflated: int, total: _Total
    ) -> None:
        self.path = path
        self.filename = filename
        self.max_bytes = max_bytes
        self.max_inflated = max_inflated
        self.total = total
        self.digest = hashlib.sha256()
        self.size = 0
        self.head = b""
        self.gzip: _GzipMeter | None = None
        self.pending = bytearray()
        self.fh: IO[bytes] = path.open("wb")

    async def write(self, data: bytes) -> None:
        self.size += len(data)
        self.total.size += len(data)
        if self.size > self.max_bytes:
            raise UploadError(
                413, f"{self.filename}: larger than the upload limit of {self.max_bytes:,} bytes"
            )
        if self.total.size > self.max_bytes:
            raise UploadError(
                413,
                f"the upload's files together are larger than the limit of "
                f"{self.max_bytes:,} bytes (at {self.filename})",
            )
        if len(self.head) < 2:
            self.head += data[: 2 - len(self.head)]
            if len(self.head) >= 2 and self.head == GZIP_MAGIC:
                self.gzip = _GzipMeter(self.max_inflated)
        self.pending += data
        if len(self.pending) >= FLUSH_BYTES:
            await self.flush()

    def _consume(self, block: bytes) -> None:
        self.digest.update(block)
        self.fh.write(block)
        if self.gzip is not None:
            self.gzip.feed(block, self.filename)

    async def flush(self) -> None:
        if self.pending:
            block = bytes(self.pending)
            self.pending.clear()
            await anyio.to_thread.run_sync(self._consume, block)

    async def close(self) -> None:
        await self.flush()
        self.fh.close()
        if self.gzip is not None:
            self.gzip.finish(self.filename)


def _refuse_nsys_report(label: str) -> None:
    """An Nsight Systems report is not readable as is: say how to export it, before upload."""
    if label.lower().endswith(NSYS_REPORT_SUFFIXES):
        stem = label.rsplit(".", 1)[0]
        raise UploadError(
            400,
            f"{label}: this is an Nsight Systems report, not its SQLite export; run "
            f"`nsys export --type sqlite --output {stem}.sqlite {label}` and upload the .sqlite",
        )


def _boundary(content_type: str) -> str:
    media, _, params = content_type.partition(";")
    if media.strip().lower() != "multipart/form-data":
        raise UploadError(
            415, "expected a multipart/form-data body with the trace in a field named 'file'"
        )
    m = re.search(r'boundary="?([^";]+)"?', params)
    if not m:
        raise UploadError(400, "multipart/form-data body without a boundary")
    return m.group(1)


async def receive_upload(
    stream: AsyncIterator[bytes],
    content_type: str,
    tmp_dir: Path,
    max_bytes: int,
    max_inflated: int,
) -> ReceivedUpload:
    """Stream the ``file`` fields of a multipart body into ``tmp_dir``; other fields as text."""
    boundary = _boundary(content_type)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    sinks: list[_FileSink] = []
    total = _Total()
    fields: dict[str, str] = {}
    text: bytearray | None = None
    segment: MultipartSegment | None = None
    sink: _FileSink | None = None
    try:
        with PushMultipartParser(
            boundary, max_header_count=8, max_segment_count=MAX_FILES + 16
        ) as parser:
            async for chunk in stream:
                for part in parser.parse(chunk):
                    if isinstance(part, MultipartSegment):
                        segment = part
                        if part.name == "file" and part.filename is None:
                            raise UploadError(
                                400,
                                "the 'file' field has no filename: send the trace as a file "
                                "(curl -F file=@trace.json.gz)",
                            )
                        if part.name == "file" and part.filename is not None:
                            if len(sinks) >= MAX_FILES:
                                raise UploadError(
                                    400,
                                    f"more than {MAX_FILES} files in one upload: send a job "
                                    "this large as one .zip or .tar.gz",
                                )
                            if sink is not None:
                                await sink.close()
                            label = clean_filename(part.filename)
                            _refuse_nsys_report(label)
                            tmp_path = tmp_dir / f"{secrets.token_hex(16)}.part"
                            sink = _FileSink(tmp_path, label, max_bytes, max_inflated, total)
                            sinks.append(sink)
                            text = None
                        else:
                            text = bytearray()
                    elif part:
                        if text is not None and segment is not None:
                            text += part
                            if len(text) > FIELD_LIMIT:
                                raise UploadError(400, f"form field {segment.name!r} too long")
                        elif sink is not None and segment is not None and segment.name == "file":
                            await sink.write(part)
                    else:
                        if text is not None and segment is not None:
                            fields[segment.name] = text.decode("utf-8", "replace")
                        text = None
                        segment = None
                        if sink is not None:
                            await sink.close()
                            sink = None
                if parser.closed:
                    break
            if not parser.closed:
                parser.close()
        if sink is not None:
            await sink.close()
    except (ParserError, ParserLimitReached) as exc:
        await _discard(sinks)
        raise UploadError(400, f"malformed multipart/form-data body ({exc})") from None
    except BaseException:
        await _discard(sinks)
        raise
    if not sinks:
        raise UploadError(400, "no file in the upload: send the trace in a field named 'file'")
    try:
        received = [_received(s, several=len(sinks) > 1) for s in sinks]
    except BaseException:
        await _discard(sinks)
        raise
    return ReceivedUpload(files=received, fields=fields)


def _received(sink: _FileSink, several: bool) -> ReceivedFile:
    """What a received file is: a trace (its format) or an archive of traces."""
    if sink.size == 0:
        raise UploadError(400, f"{sink.filename}: empty file")
    kind = archive_kind(sink.path)
    if kind is not None:
        if several:
            raise UploadError(
                400, f"{sink.filename}: an archive is uploaded alone, not among other files"
            )
        fmt = "archive"
        ext = ".zip" if kind == "zip" else ".tar" + (".gz" if sink.gzip is not None else "")
    else:
        try:
            fmt = detect_format(sink.path)
        except TraceInputError as exc:
            raise UploadError(400, f"{sink.filename}: {exc.problem}") from None
        extensions = {"nsys_sqlite": ".sqlite", "torch_chrome": ".json"}
        ext = extensions.get(fmt, ".bin") + (".gz" if sink.gzip is not None else "")
    return ReceivedFile(
        path=sink.path,
        filename=sink.filename,
        sha256=sink.digest.hexdigest(),
        size_bytes=sink.size,
        extension=ext,
        format=fmt,
    )


async def _discard(sinks: list[_FileSink]) -> None:
    for sink in sinks:
        if not sink.fh.closed:
            sink.fh.close()
        if sink.path.exists():
            os.unlink(sink.path)
