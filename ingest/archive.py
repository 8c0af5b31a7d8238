"""Traces inside a ``.zip``, ``.tar`` or ``.tar.gz``: extracted to a folder, bounded and safe.

A job's ranks often travel as one archive. Members are streamed to disk one at a time (an
archive is never read whole into memory), and what an archive may hold is capped before
anything is trusted: the total of its members' uncompressed sizes (the decompressed-size
limit every ingest has, :class:`ingest.limits.IngestLimits`), counted on the bytes actually
written as well as on what the archive declares; the number of members; names that would
leave the folder (absolute, ``..``), and links, devices or pipes, which a trace never needs.
Only trace files (``*.json``, ``*.json.gz``, ``*.sqlite``) are written; macOS resource forks
(``__MACOSX/``, ``._*``) and graph capture folders (``capture_traces/``) are left out.

The archive's kind comes from its content, not its name (an upload's name is only a label).
"""

from __future__ import annotations

import hashlib
import stat
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import IO

from ingest.errors import TraceInputError
from ingest.gunzip import GZIP_MAGIC, BoundedGunzip, GzipProblem
from ingest.loader import TRACE_FILE_PATTERN

# Far beyond the ranks of any job (thousands), far below what would exhaust inodes.
MAX_MEMBERS = 20_000
_COPY_BLOCK = 1024 * 1024
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_TAR_MAGIC_OFFSET = 257
_SKIPPED_DIRS = {"__MACOSX", "capture_traces"}


class ArchiveTooLarge(TraceInputError):
    """The archive's members inflate to more than the limit."""


@dataclass(frozen=True)
class ArchiveMember:
    """A trace extracted from an archive: where it is now, its name inside, its bytes."""

    path: Path
    name: str
    sha256: str
    size_bytes: int


def archive_kind(path: Path) -> str | None:
    """``zip`` or ``tar`` (plain or gzip-compressed) from the first bytes; None otherwise."""
    try:
        with path.open("rb") as f:
            head = f.read(_TAR_MAGIC_OFFSET + 8)
    except OSError:
        return None
    if head[:4] in _ZIP_MAGICS:
        return "zip"
    if _is_tar_header(head):
        return "tar"
    if head[:2] == GZIP_MAGIC:
        inflated = _inflated_head(path, _TAR_MAGIC_OFFSET + 8)
        if inflated is not None and _is_tar_header(inflated):
            return "tar"
    return None


def _is_tar_header(block: bytes) -> bool:
    return block[_TAR_MAGIC_OFFSET : _TAR_MAGIC_OFFSET + 5] == b"ustar"


def _inflated_head(path: Path, size: int) -> bytes | None:
    gz = BoundedGunzip(limit=1 << 30, step=size)
    try:
        with path.open("rb") as f:
            out = b""
            while len(out) < size:
                block = f.read(64 * 1024)
                if not block:
                    break
                for piece in gz.feed(block):
                    out += piece
                    if len(out) >= size:
                        break
            return out
    except (GzipProblem, OSError):
        return None


def extract_traces(
    archive: Path, dest: Path, max_bytes: int, max_members: int = MAX_MEMBERS
) -> list[ArchiveMember]:
    """Write the trace files of ``archive`` under ``dest``; the members written, by name.

    Raises :class:`TraceInputError` naming the archive (and the member) for an archive
    that cannot be read, is larger than ``max_bytes`` uncompressed, holds more than
    ``max_members`` entries, or holds a member that is a link or leaves the folder.
    """
    kind = archive_kind(archive)
    if kind is None:
        raise TraceInputError(archive, "not a .zip, .tar or .tar.gz archive")
    dest.mkdir(parents=True, exist_ok=True)
    budget = _Budget(archive, max_bytes)
    out: list[ArchiveMember] = []
    seen: set[str] = set()
    try:
        entries = _zip_entries(archive) if kind == "zip" else _tar_entries(archive)
        for count, (name, declared, is_file, open_member) in enumerate(entries, start=1):
            if count > max_members:
                raise TraceInputError(archive, f"holds more than {max_members:,} members")
            rel = _safe_name(archive, name)
            if not is_file:
                continue
            budget.declare(declared, name)
            if not _is_trace(rel):
                continue
            key = rel.as_posix()
            if key in seen:
                raise TraceInputError(archive, f"member {name!r} appears twice")
            seen.add(key)
            target = dest.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with open_member() as src:
                digest, size = _copy(src, target, budget, name)
            out.append(ArchiveMember(target, key, digest, size))
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise TraceInputError(archive, f"damaged archive ({str(exc).splitlines()[0]})") from None
    except (NotImplementedError, RuntimeError) as exc:  # encrypted or unknown compression
        raise TraceInputError(archive, f"cannot read a member ({exc})") from None
    return sorted(out, key=lambda m: m.name)


# (name in the archive, declared size, whether a file, how to open it)
_Entry = tuple[str, int, bool, Callable[[], AbstractContextManager[IO[bytes]]]]


class _Budget:
    """The uncompressed bytes an archive may still use, declared and written."""

    def __init__(self, archive: Path, limit: int) -> None:
        self.archive = archive
        self.limit = limit
        self.declared = 0
        self.written = 0

    def declare(self, size: int, name: str) -> None:
        self.declared += max(0, size)
        if self.declared > self.limit:
            raise self._too_large(name)

    def spend(self, n: int, name: str) -> None:
        self.written += n
        if self.written > self.limit:
            raise self._too_large(name)

    def _too_large(self, name: str) -> TraceInputError:
        return ArchiveTooLarge(
            self.archive,
            f"uncompressed members exceed the limit of {self.limit:,} bytes (at {name!r}; "
            "raise TRACELENS_MAX_DECOMPRESSED_BYTES to read it)",
        )


def _zip_entries(archive: Path) -> Iterator[_Entry]:
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise TraceInputError(archive, f"member {info.filename!r} is a link")
            if info.flag_bits & 0x1:
                raise TraceInputError(archive, f"member {info.filename!r} is encrypted")
            yield info.filename, info.file_size, not info.is_dir(), partial(zf.open, info)


def _tar_entries(archive: Path) -> Iterator[_Entry]:
    # Stream mode ("r|*"): members are read in order, never seeked, so a .tar.gz is
    # inflated once, front to back.
    with tarfile.open(archive, mode="r|*") as tf:
        for m in tf:
            if not (m.isfile() or m.isdir()):
                what = "a link" if m.issym() or m.islnk() else "not a regular file"
                raise TraceInputError(archive, f"member {m.name!r} is {what}")
            fobj = tf.extractfile(m) if m.isfile() else None
            yield m.name, m.size, m.isfile(), partial(_Closing, fobj)


class _Closing:
    """A tar member's reader as a context manager (``extractfile`` gives a bare one)."""

    def __init__(self, fobj: IO[bytes] | None) -> None:
        self.fobj = fobj

    def __enter__(self) -> IO[bytes]:
        if self.fobj is None:
            raise tarfile.ReadError("member has no data")
        return self.fobj

    def __exit__(self, *exc: object) -> None:
        if self.fobj is not None:
            self.fobj.close()


def _safe_name(archive: Path, name: str) -> PurePosixPath:
    """The member's path relative to the folder; refused when it would leave it."""
    raw = name.replace("\\", "/")
    rel = PurePosixPath(raw)
    if raw.startswith("/") or rel.is_absolute() or (rel.parts and ":" in rel.parts[0]):
        raise TraceInputError(archive, f"member {name!r} has an absolute path")
    if any(part == ".." for part in rel.parts):
        raise TraceInputError(archive, f"member {name!r} leaves the archive's folder (..)")
    if "\x00" in raw:
        raise TraceInputError(archive, f"member {name!r} has a NUL byte in its name")
    return PurePosixPath(*[p for p in rel.parts if p not in ("", ".")])


def _is_trace(rel: PurePosixPath) -> bool:
    if not rel.parts or any(p in _SKIPPED_DIRS for p in rel.parts[:-1]):
        return False
    name = rel.name
    if name.startswith("._"):
        return False
    return bool(TRACE_FILE_PATTERN.search(name)) or name.lower().endswith(".sqlite")


def _copy(src: IO[bytes], target: Path, budget: _Budget, name: str) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with target.open("wb") as out:
        while block := src.read(_COPY_BLOCK):
            budget.spend(len(block), name)
            digest.update(block)
            out.write(block)
            size += len(block)
    return digest.hexdigest(), size
