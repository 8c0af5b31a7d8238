"""Entry point of ``ingest``: detect a trace's format from its content and load it.

``load_trace`` returns an open DuckDB connection holding the canonical tables. With a
``db_path`` the database is built in a temporary file beside it and moved into place only
when complete, so a failed or interrupted ingest never leaves a half-written database
where a good one (or nothing) was before.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from ingest.byte_source import content_size_estimate, head_bytes, iter_bytes
from ingest.chrome.reader import read_chrome_trace
from ingest.derive_gaps import derive_gaps
from ingest.duckdb_connect import connect
from ingest.errors import TraceInputError
from ingest.graph_captures import find_capture_dir, load_captures
from ingest.limits import IngestLimits, exhausted_hint
from ingest.prefetch import prefetched
from ingest.redact_tables import redact_tables
from ingest.schema import SCHEMA_VERSION, create_schema, set_info, sql_literal

SQLITE_MAGIC = b"SQLite format 3\x00"
NSYS_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
# Nsight Compute's reports: per-kernel metrics, often taken for a timeline by their name
NCU_REPORT_SUFFIXES = (".ncu-rep", ".nsight-cuprof-report")
TRACE_FILE_PATTERN = re.compile(r"\.json(\.gz)?$", re.IGNORECASE)

ProgressFn = Callable[[int, int], None]


@dataclass
class LoadedTrace:
    con: duckdb.DuckDBPyConnection
    path: Path
    format: str
    sha256: str
    size_bytes: int
    notes: list[str] = field(default_factory=list)
    # What the connection was given (None: a connection not opened by load_trace).
    limits: IngestLimits | None = None

    def close(self) -> None:
        self.con.close()


def detect_format(path: Path) -> str:
    """``torch_chrome`` or ``nsys_sqlite``; raises TraceInputError for anything else."""
    if path.suffix.lower() in NSYS_REPORT_SUFFIXES:
        raise TraceInputError(
            path,
            "this is an Nsight Systems report, not its SQLite export; run "
            f"`nsys export --type sqlite --output {path.with_suffix('.sqlite').name} {path.name}` "
            "and analyze the .sqlite file",
        )
    if path.suffix.lower() in NCU_REPORT_SUFFIXES:
        raise TraceInputError(
            path,
            "this is an Nsight Compute report (metrics of single kernels, no timeline), not "
            "an Nsight Systems one; record the run's timeline with `nsys profile "
            "--trace=cuda,nvtx -o run python train.py`, then `nsys export --type sqlite "
            "run.nsys-rep`, and analyze the .sqlite export",
        )
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TraceInputError(path, f"cannot read ({exc.strerror or exc})") from None
    if size == 0:
        raise TraceInputError(path, "empty file")
    with path.open("rb") as f:
        magic = f.read(16)
    if magic == SQLITE_MAGIC:
        return "nsys_sqlite"
    raw_head = head_bytes(path, 4096)
    head = raw_head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if not head:
        raise TraceInputError(
            path,
            "only whitespace in the first 4,096 bytes: not a trace" if raw_head else "empty file",
        )
    if head[:1] in (b"{", b"["):
        return "torch_chrome"
    raise TraceInputError(
        path,
        "unrecognised format: expected a PyTorch profiler Chrome trace (.json/.json.gz) "
        "or an Nsight Systems SQLite export (.sqlite)",
    )


def trace_files_in(folder: Path) -> list[Path]:
    """The trace files directly in ``folder`` (not in sub-folders such as capture_traces/)."""
    return sorted(
        p
        for p in folder.iterdir()
        if p.is_file() and (TRACE_FILE_PATTERN.search(p.name) or p.suffix == ".sqlite")
    )


def rank_files(paths: list[Path]) -> list[tuple[int, Path]]:
    """The ranks of a job given as files and/or profiler output folders, by rank.

    Ranks come from ``distributedInfo.rank`` or the file name (``ranks_of``); files that
    say neither take the positions after the known ranks, in name order. Two files
    claiming one rank are an error naming both.
    """
    files: list[Path] = []
    for p in paths:
        if not p.exists():
            raise TraceInputError(p, "no such file or directory")
        if p.is_dir():
            found = trace_files_in(p)
            if not found:
                raise TraceInputError(
                    p, "folder holds no trace files (*.json, *.json.gz, *.sqlite)"
                )
            files.extend(found)
        else:
            files.append(p)
    ranks = ranks_of(files)
    taken: dict[int, Path] = {}
    for p in files:
        r = ranks[p]
        if r is None:
            continue
        if r in taken:
            raise TraceInputError(p, f"claims rank {r}, as does {taken[r].name}")
        taken[r] = p
    nxt = max(taken, default=-1) + 1
    for p in files:
        if ranks[p] is None:
            taken[nxt] = p
            nxt += 1
    return sorted(taken.items())


def resolve_input(path: Path, rank: int | None = None) -> tuple[Path, list[str]]:
    """A file to read: ``path`` itself, or the chosen trace of a profiler output folder."""
    notes: list[str] = []
    if not path.exists():
        raise TraceInputError(path, "no such file or directory")
    if not path.is_dir():
        return path, notes
    candidates = trace_files_in(path)
    if not candidates:
        raise TraceInputError(path, "folder holds no trace files (*.json, *.json.gz, *.sqlite)")
    if rank is None:
        chosen = candidates[0]
        if len(candidates) > 1:
            notes.append(
                f"folder holds {len(candidates)} traces; analyzing {chosen.name} "
                "(choose another with --rank)"
            )
        return chosen, notes
    ranks = ranks_of(candidates)
    for p, r in ranks.items():
        if r == rank:
            notes.append(f"analyzing rank {rank}: {p.name}")
            return p, notes
    known = sorted(r for r in ranks.values() if r is not None)
    raise TraceInputError(
        path, f"no trace for rank {rank} in this folder (ranks found: {known or 'none'})"
    )


_RANK_IN_JSON = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')
# rank3, rank_3, rank-3, rank[3]; vLLM: ...rank{N}.{id}.pt.trace.json.gz and
# dp{d}_pp{p}_tp{t}_..._rank{N}...
_RANK_IN_NAME = re.compile(r"rank(?:[-_]?(\d+)|\[(\d+)\])", re.IGNORECASE)
# SGLang: {id}-TP-{tp}-DP-{dp}-PP-{pp}-EP-{ep}.trace.json.gz (DP, PP and EP optional)
_SGLANG_PARALLEL = re.compile(r"-TP-(\d+)(?:-DP-(\d+))?(?:-PP-(\d+))?(?:-EP-(\d+))?")


def ranks_of(files: list[Path]) -> dict[Path, int | None]:
    """Each file's rank: ``distributedInfo.rank`` in the trace, else from the file name.

    SGLang names files by their place in the tensor/data/pipeline grid, not by rank; the
    global rank is then ``(dp * pp_size + pp) * tp_size + tp`` (data-parallel replicas
    outermost, tensor parallel innermost, as torch.distributed groups are laid out), with
    the sizes taken from the files present. Expert parallelism shares the tensor-parallel
    ranks.
    """
    out: dict[Path, int | None] = {}
    grid: dict[Path, tuple[int, int, int]] = {}
    for p in files:
        r = _rank_in_trace(p)
        if r is None:
            m = _RANK_IN_NAME.search(p.name)
            if m:
                r = int(m.group(1) or m.group(2))
            elif m2 := _SGLANG_PARALLEL.search(p.name):
                tp, dp, pp = (int(g) if g else 0 for g in m2.groups()[:3])
                grid[p] = (dp, pp, tp)
        out[p] = r
    if grid:
        pp_size = max(pp for _, pp, _ in grid.values()) + 1
        tp_size = max(tp for _, _, tp in grid.values()) + 1
        for p, (dp, pp, tp) in grid.items():
            out[p] = (dp * pp_size + pp) * tp_size + tp
    return out


def _rank_in_trace(p: Path) -> int | None:
    with contextlib.suppress(TraceInputError, OSError):
        m = _RANK_IN_JSON.search(head_bytes(p, 256 * 1024))
        if m:
            return int(m.group(1))
    return None


def load_trace(
    path: str | Path,
    db_path: str | Path | None = None,
    rank: int | None = None,
    on_progress: ProgressFn | None = None,
    limits: IngestLimits | None = None,
    capture_dir: str | Path | None = None,
    find_captures: bool = True,
) -> LoadedTrace:
    """Ingest ``path`` (file or profiler output folder) into a DuckDB database.

    ``limits`` bound its memory, events and decompressed size (default: from the
    environment and the machine, for one ingest at a time). Graph capture traces
    (:mod:`ingest.graph_captures`) are read from ``capture_dir``, else from a
    ``capture_traces/`` folder beside the trace when ``find_captures``.
    """
    src, notes = resolve_input(Path(path), rank)
    fmt = detect_format(src)
    size = src.stat().st_size
    limits = (limits or IngestLimits.from_env()).for_input(content_size_estimate(src))
    digest = hashlib.sha256()
    target = Path(db_path) if db_path is not None else None
    tmp_db = None
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp_db = target.with_name(f".{target.name}.{os.getpid()}.partial")
        _remove_db_files(tmp_db)
    # Every ingest builds in memory (spilling under the limits where it must); a database
    # file is a copy of the finished, redacted database. Built in the file, the names it
    # wrote before redaction stayed in the blocks redaction freed: DuckDB writes large
    # appends and a full WAL's checkpoint straight into the file.
    con = connect()
    try:
        limits.configure(con, target)
        create_schema(con, describe=target is not None)
        if fmt == "torch_chrome":
            chunks = _HashedChunks(src, size, limits, on_progress)
            try:
                stats = read_chrome_trace(con, src, chunks, max_events=limits.max_events)
            finally:
                chunks.close()  # stops the reading thread now when the parse failed
            digest = chunks.digest
            notes.extend(stats.warnings)
        else:
            from ingest.nsys.reader import read_nsys_sqlite

            with src.open("rb") as f:
                for block in iter(lambda: f.read(8 * 1024 * 1024), b""):
                    digest.update(block)
            notes.extend(read_nsys_sqlite(con, src, max_events=limits.max_events))
            if on_progress is not None:
                on_progress(size, size)
        # A checkpoint compresses what is stored (an in-memory database too: a 2 M-row
        # Nsight export's tables held 10x less), so the gap derivation and the analysis
        # work next to compressed tables, and scans of dictionary-coded names are cheaper.
        con.execute("CHECKPOINT")
        captures = Path(capture_dir) if capture_dir is not None else None
        if captures is None and find_captures:
            captures = find_capture_dir(Path(path))
        if captures is not None:
            notes.extend(load_captures(con, captures, limits))
        derive_gaps(con)
        redact_tables(con)
        limits = limits.for_rows(_stored_rows(con))
        limits.set_memory(con)
        limits.set_threads(con)
        set_info(
            con,
            {
                "source_path": str(src),
                "source_sha256": digest.hexdigest(),
                "source_bytes": size,
                "tracelens_schema_version": SCHEMA_VERSION,
            },
        )
        # Once more for what the gaps, captures and redaction added; inside the try, so
        # running out of memory here is worded like any other ingest failure.
        con.execute("CHECKPOINT")
        if tmp_db is not None:
            # Tables, constraints and comments; the temporary tables stay behind.
            built = con.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
            con.execute(f"ATTACH {sql_literal(str(tmp_db))} AS {_OUT_DB}")
            con.execute(f"COPY FROM DATABASE {built} TO {_OUT_DB}")
            con.execute(f"DETACH {_OUT_DB}")
    except TraceInputError:
        con.close()
        if tmp_db is not None:
            _remove_db_files(tmp_db)
        raise
    except (duckdb.Error, MemoryError, OSError) as exc:
        con.close()
        if tmp_db is not None:
            _remove_db_files(tmp_db)
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, (duckdb.OutOfMemoryException, MemoryError)):
            # the machine's limit, not the trace's fault: say which knob raises it
            why = f"{why.rstrip('.')} {exhausted_hint(exc, limits)}"
        raise TraceInputError(src, f"could not be ingested: {why}") from None
    except BaseException:
        con.close()
        if tmp_db is not None:
            _remove_db_files(tmp_db)
        raise
    if target is not None and tmp_db is not None:
        con.close()
        os.replace(tmp_db, target)
        _remove_db_files(Path(str(tmp_db)))
        con = connect(target)
        limits.configure(con, target)
    return LoadedTrace(
        con=con,
        path=src,
        format=fmt,
        sha256=digest.hexdigest(),
        size_bytes=size,
        notes=notes,
        limits=limits,
    )


_OUT_DB = "tracelens_out"


def _stored_rows(con: duckdb.DuckDBPyConnection) -> int:
    """Rows in the canonical tables (DuckDB's own count of each table, no scan)."""
    row = con.execute(
        "SELECT coalesce(sum(estimated_size), 0) FROM duckdb_tables() WHERE NOT temporary"
    ).fetchone()
    return int(row[0]) if row else 0


class _HashedChunks:
    """Opens the decompressed chunks of ``src``, read and hashed ahead of the parser.

    Opened again (rarely: when the Chrome read falls back to an offset it must read
    again), the hash starts over, so it is always that of the whole file, and progress
    holds where it was until the second reading passes it (it never goes back).
    """

    def __init__(
        self, src: Path, size: int, limits: IngestLimits, on_progress: ProgressFn | None
    ) -> None:
        self._reported = 0
        self._on_progress = on_progress
        progress = self._forward if on_progress is not None else None
        self._args = (src, size, limits, progress)
        self._streams: list[Generator[bytes, None, None]] = []
        self.digest = hashlib.sha256()

    def _forward(self, done: int, total: int) -> None:
        if done > self._reported and self._on_progress is not None:
            self._reported = done
            self._on_progress(done, total)

    def __call__(self) -> Generator[bytes, None, None]:
        self.close()
        self.digest = hashlib.sha256()
        src, size, limits, on_progress = self._args
        self._streams.append(_read_ahead(src, self.digest, size, limits, on_progress))
        return self._streams[-1]

    def close(self) -> None:
        for stream in self._streams:
            stream.close()


def _read_ahead(
    src: Path,
    digest: hashlib._Hash,
    size: int,
    limits: IngestLimits,
    on_progress: ProgressFn | None,
) -> Generator[bytes, None, None]:
    """The decompressed chunks of ``src``, read, hashed and gunzipped on a thread ahead of
    the parser. Progress is reported from the caller's thread (callbacks may not be
    thread-safe): the raw bytes read by the time each chunk is handed over."""
    seen = 0

    def on_raw(block: bytes) -> None:
        nonlocal seen
        digest.update(block)
        seen += len(block)

    raw = iter_bytes(src, on_raw=on_raw, max_decompressed=limits.max_decompressed)
    for chunk, done in prefetched((chunk, seen) for chunk in raw):
        if on_progress is not None:
            on_progress(done, size)
        yield chunk


def is_tracelens_database(path: Path) -> bool:
    """Whether ``path`` is a trace database tracelens wrote (safe to replace with --db)."""
    try:
        with path.open("rb") as f:
            if f.read(12)[8:12] != b"DUCK":
                return False
        con = connect(path, read_only=True)
    except (OSError, duckdb.Error):
        return False
    try:
        row = con.execute(
            "SELECT value FROM trace_info WHERE key = 'tracelens_schema_version'"
        ).fetchone()
        return row is not None
    except duckdb.Error:
        return False
    finally:
        con.close()


def _remove_db_files(p: Path) -> None:
    for candidate in (p, Path(str(p) + ".wal")):
        with contextlib.suppress(FileNotFoundError):
            candidate.unlink()
