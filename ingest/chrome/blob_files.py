"""Blobs of whole events written to files for DuckDB's JSON reader, with what their bytes say.

Once a blob is in its file, the read buffer it came from is not needed again: what the
staging chooses its query by is taken from the bytes as the file is written (which
spelling of the external id the blob uses, whether its times look longer than six
decimals, the whole microseconds of its first times).
A batch of such files is then staged by one query (:mod:`ingest.chrome.batch_load`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ingest.chrome.event_splitter import EventBlob
from ingest.chrome.event_sql import (
    BASE_MARGIN,
    LONG_TIME,
    MAX_BASE,
    OVERLONG_DECIMALS,
    SAMPLE,
    TIME_INTEGERS,
)


@dataclass(frozen=True)
class BlobFile:
    """One blob's file: ``[`` + the events + ``]``."""

    path: str
    source_offset: int  # where its first event starts in the decompressed text
    size: int  # bytes of events, the brackets not counted
    modern: bool  # spells the key "External id"
    legacy: bool  # spells it "external id" (2021)
    long_times: bool  # a time with more than six decimals near its start
    first_times: tuple[int, ...]  # whole microseconds of the "ts" values near its start
    call_stacks: bool = False  # an operator's "Call stack" near its start (with_stack=True)

    @property
    def end_offset(self) -> int:
        return self.source_offset + self.size


def write_blob(blob: EventBlob, path: str) -> BlobFile:
    """Write ``blob`` to ``path`` and note what its bytes say."""
    with open(path, "wb") as f:
        blob.write(f)
    head = min(blob.end, blob.start + SAMPLE)
    return BlobFile(
        path=path,
        source_offset=blob.source_offset,
        size=blob.size,
        modern=blob.contains(b'"External id"'),
        legacy=blob.contains(b'"external id"'),
        long_times=LONG_TIME.search(blob.buf, blob.start, head) is not None,
        first_times=tuple(
            int(m.group(1)) for m in TIME_INTEGERS.finditer(blob.buf, blob.start, head)
        ),
        call_stacks=blob.buf.find(b'"Call stack"', blob.start, head) >= 0,
    )


def variant(files: list[BlobFile]) -> str:
    """The staging variant for these files: which spelling of the external id their
    ``args`` STRUCT declares, or ``json`` paths where both spellings occur."""
    modern = any(f.modern for f in files)
    legacy = any(f.legacy for f in files)
    if modern and legacy:
        return "json"
    return "legacy" if legacy else "modern"


def precise(files: list[BlobFile]) -> bool:
    """Whether the files' times look longer than six decimals (judged from their starts)."""
    return any(f.long_times for f in files)


def time_base(files: list[BlobFile]) -> int:
    """A whole microsecond at or before most of the files' times (judged from their starts),
    which lets the staging's time cast take its fast route; 0 when none is seen."""
    positive = [t for f in files for t in f.first_times if t > 0]
    if not positive:
        return 0
    return max(0, min(min(positive) - BASE_MARGIN, MAX_BASE))


def has_overlong_decimals(files: list[BlobFile]) -> bool:
    """Whether any file holds a number with 17 or more decimals (read back from the files:
    asked only when a precise read found a 6-decimal half, which is rare)."""
    return any(OVERLONG_DECIMALS.search(_text(f)) is not None for f in files)


def mentions(files: list[BlobFile], needle: bytes) -> bool:
    """Whether any file's text holds ``needle`` (read back from the files: for the rare
    question a census cannot answer)."""
    return any(needle in _text(f) for f in files)


def _text(f: BlobFile) -> bytes:
    with open(f.path, "rb") as fh:
        return fh.read()


def repair_utf8(files: list[BlobFile]) -> None:
    """Rewrite the files with undecodable bytes replaced by U+FFFD, as a browser shows them
    (valid UTF-8 is left as it is)."""
    for f in files:
        with open(f.path, "rb") as fh:
            data = fh.read()
        fixed = data.decode("utf-8", "replace").encode("utf-8")
        if fixed != data:
            with open(f.path, "wb") as fh:
                fh.write(fixed)
