"""Streams the bytes of a trace file, gunzipping on the fly with a hard decompressed cap.

A gzip bomb (a few kilobytes that inflate to gigabytes) must fail fast with a clear error
instead of filling memory or disk, so decompression is incremental and bounded
(:mod:`ingest.gunzip`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from ingest.errors import TraceInputError
from ingest.gunzip import GZIP_MAGIC, BoundedGunzip, GzipProblem, GzipTooLarge
from ingest.limits import IngestLimits

# Peak memory follows the chunk: each one is held as bytes, framed into blob files and
# parsed by DuckDB while the next is read. 8 MiB halved the peak of a 35 MB legacy trace
# against 32 MiB (390 -> 205 MB) at the same speed, with identical tables
# (benchmarks/bench_ingest.py --chunk-mb 32,16,8).
DEFAULT_CHUNK = 8 * 1024 * 1024
# Compressed bytes read at a time.
_READ_SIZE = 4 * 1024 * 1024


def max_decompressed_bytes() -> int:
    """The decompressed-size cap (``TRACELENS_MAX_DECOMPRESSED_BYTES``, else from the machine)."""
    return IngestLimits.from_env().max_decompressed


def is_gzip(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(2) == GZIP_MAGIC


def gzip_trailer_size(path: Path) -> int | None:
    """The size a gzip file's trailer records (its last member's, modulo 4 GiB); None for
    a file that is not gzip."""
    if path.stat().st_size < 18 or not is_gzip(path):
        return None
    with path.open("rb") as f:
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")


def content_size_estimate(path: Path) -> int:
    """About how many bytes ``path`` holds decompressed, without decompressing it.

    A gzip file ends with its last member's size modulo 4 GiB: taken, plus 4 GiB until it
    is at least the compressed size (JSON compresses, it never grows), and at least 8x the
    compressed size (a trace's JSON compresses 10-30x, so past 4 GiB the trailer alone
    would say too little). Only sizing depends on this (a memory limit), never what is read.
    """
    size = path.stat().st_size
    estimate = gzip_trailer_size(path)
    if estimate is None:
        return size
    while estimate < size:
        estimate += 4 * 1024**3
    return max(estimate, 8 * size)


def iter_bytes(
    path: Path,
    chunk_size: int = DEFAULT_CHUNK,
    max_decompressed: int | None = None,
    on_raw: Callable[[bytes], None] | None = None,
) -> Iterator[bytes]:
    """Yield the (decompressed) content of ``path`` in chunks of about ``chunk_size``.

    ``on_raw`` sees every byte of the file as read (before decompression): the hook for
    hashing the upload and reporting progress in one pass.
    """
    if is_gzip(path):
        cap = max_decompressed if max_decompressed is not None else max_decompressed_bytes()
        yield from _iter_gunzip(path, chunk_size, cap, on_raw)
        return
    with path.open("rb") as f:
        while block := f.read(chunk_size):
            if on_raw is not None:
                on_raw(block)
            yield block


def _iter_gunzip(
    path: Path, chunk_size: int, max_decompressed: int, on_raw: Callable[[bytes], None] | None
) -> Iterator[bytes]:
    gunzip = BoundedGunzip(max_decompressed, step=chunk_size)
    pending = bytearray()
    try:
        with path.open("rb") as f:
            while data := f.read(_READ_SIZE):
                if on_raw is not None:
                    on_raw(data)
                for out in gunzip.feed(data):
                    pending += out
                    if len(pending) >= chunk_size:
                        yield bytes(pending)
                        pending.clear()
        gunzip.finish()
    except GzipTooLarge as exc:
        raise TraceInputError(
            path,
            f"{exc.problem}; refusing (set TRACELENS_MAX_DECOMPRESSED_BYTES to raise the limit)",
        ) from None
    except GzipProblem as exc:
        raise TraceInputError(path, exc.problem) from None
    if pending:
        yield bytes(pending)


def head_bytes(path: Path, n: int = 64 * 1024) -> bytes:
    """The first ``n`` content bytes (decompressed if gzip), for format detection."""
    out = b""
    try:
        for block in iter_bytes(path, chunk_size=n):
            out += block
            if len(out) >= n:
                break
    except TraceInputError:
        if not out:
            raise
    return out[:n]
