"""``tracelens.load(path)``: one trace for notebooks and scripts.

A :class:`Trace` holds the trace database of one trace and gives its tables as polars
DataFrames (:mod:`tracelens.api.frames`), SQL over them, the report and the findings, and
restricted views of itself (a time window, a span of profiler steps, the instances of a
range), each of which is again a Trace, analysed as if it were the whole capture.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ingest import LoadedTrace, load_trace
from ingest.duckdb_connect import connect
from ingest.errors import TraceInputError
from ingest.loader import is_tracelens_database
from ingest.schema import SCHEMA_VERSION, stored_schema_version
from tracelens.api.export import export_tables
from tracelens.api.frames import LLM_FRAMES, TRACE_FRAMES, FrameSource, frame_of
from tracelens.core.findings import Finding
from tracelens.core.restricted_db import restrict_to
from tracelens.core.restriction import Interval, one_restriction
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.derived import DERIVED_TABLES, require

if TYPE_CHECKING:
    import polars as pl

_T = TypeVar("_T")

# Rows enough for a diff to list every kernel and operator on both sides (as `tracelens
# diff` does), so a name missing on one side is truly absent.
_ALL_ROWS = 1_000_000


class _Frame:
    """A frame attribute: each read queries the table again (keep the frame you use)."""

    def __init__(self, source: FrameSource) -> None:
        self.source = source
        self.__doc__ = f"{source.description} (table ``{source.table}``)."

    def __get__(self, instance: _HasTraceDB | None, _owner: type | None = None) -> pl.DataFrame:
        if instance is None:
            raise AttributeError(self.source.attribute)
        db = instance._trace_db()

        def read() -> pl.DataFrame:
            if self.source.derived is not None:
                require(db, self.source.derived)
            return frame_of(db.con, self.source.select_sql(), {})

        return instance._retried(read)


class _HasTraceDB:
    def _trace_db(self) -> TraceDB:
        raise NotImplementedError

    def _retried(self, read: Callable[[], _T]) -> _T:
        """``read()``; a trace with memory limits retries it under their whole share."""
        return read()


class LlmFrames(_HasTraceDB):
    """The LLM tables of an annotated serving trace (``tracelens.annotate``): empty frames
    when the trace has no LLM annotations."""

    requests = _Frame(LLM_FRAMES[0])
    steps = _Frame(LLM_FRAMES[1])
    tokens = _Frame(LLM_FRAMES[2])
    itl = _Frame(LLM_FRAMES[3])

    def __init__(self, db: TraceDB, retried: Callable[[Callable[[], Any]], Any]) -> None:
        self._db = db
        self._retry = retried

    def _trace_db(self) -> TraceDB:
        return self._db

    def _retried(self, read: Callable[[], _T]) -> _T:
        result: _T = self._retry(read)
        return result


class Trace(_HasTraceDB):
    """One trace: its tables as frames, SQL, its report and findings, restricted views."""

    kernels = _Frame(TRACE_FRAMES[0])
    memcpys = _Frame(TRACE_FRAMES[1])
    memsets = _Frame(TRACE_FRAMES[2])
    ops = _Frame(TRACE_FRAMES[3])
    runtime = _Frame(TRACE_FRAMES[4])
    ranges = _Frame(TRACE_FRAMES[5])
    gaps = _Frame(TRACE_FRAMES[6])
    syncs = _Frame(TRACE_FRAMES[7])
    memory = _Frame(TRACE_FRAMES[8])
    comm = _Frame(TRACE_FRAMES[9])
    threads = _Frame(TRACE_FRAMES[10])
    devices = _Frame(TRACE_FRAMES[11])
    steps = _Frame(TRACE_FRAMES[12])

    def __init__(self, loaded: LoadedTrace) -> None:
        self._loaded = loaded
        self.db = TraceDB(loaded.con)
        self._findings: dict[Thresholds, list[Finding]] = {}

    def _trace_db(self) -> TraceDB:
        return self.db

    def _retried(self, read: Callable[[], _T]) -> _T:
        """``read()``, once more under the whole memory share if it ran out of memory: the
        ingest's limit follows the input, and an ad hoc query may need more than the
        analysis did."""
        from tracelens.report.build import retried_under_share

        return retried_under_share(self._loaded, read)

    # -- what it is ------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The trace file read (a folder's chosen rank, or the source of a database)."""
        return self._loaded.path

    @property
    def format(self) -> str:
        """``torch_chrome`` or ``nsys_sqlite``."""
        return self._loaded.format

    @property
    def notes(self) -> list[str]:
        """What ingest and any restriction said about the trace (the report's notes)."""
        return list(self._loaded.notes)

    @property
    def info(self) -> dict[str, str]:
        """The trace's facts (``trace_info``): format, tool, rank, t0_ns, ..."""
        return dict(self.db.info)

    @property
    def window_ns(self) -> tuple[int, int]:
        """The analysed window: first to last GPU activity (trace clock, ns)."""
        return self.db.window

    # -- tables ----------------------------------------------------------------------

    def sql(self, query: str, **params: Any) -> pl.DataFrame:
        """The result of ``query`` over the trace's tables as a DataFrame.

        Parameters are named: ``trace.sql("SELECT * FROM kernels WHERE dur > $ns", ns=1e6)``.
        Derived tables (``docs/schema.md``) the query names are built first.
        """
        names = set(re.findall(r"[a-z_][a-z0-9_]*", query.lower()))

        def read() -> pl.DataFrame:
            for table in DERIVED_TABLES:
                if table.name in names:
                    require(self.db, table)
            return frame_of(self.db.con, query, params)

        return self._retried(read)

    @property
    def llm(self) -> LlmFrames:
        """Per-request, per-step and per-token frames of an annotated serving trace."""
        return LlmFrames(self.db, self._retried)

    def to_parquet(self, directory: str | Path) -> list[Path]:
        """Every canonical table as ``directory/<table>.parquet``; the files written."""
        return export_tables(self.db.con, directory, "parquet")

    def to_csv(self, directory: str | Path) -> list[Path]:
        """Every canonical table as ``directory/<table>.csv``; the files written."""
        return export_tables(self.db.con, directory, "csv")

    # -- analysis --------------------------------------------------------------------

    def analyze(self, thresholds: Thresholds | None = None) -> list[Finding]:
        """The ranked findings with these thresholds (computed once per thresholds)."""
        from tracelens.analyzers import run_all

        t = thresholds or Thresholds()
        if t not in self._findings:
            self._findings[t] = run_all(self.db, t)
        return list(self._findings[t])

    @property
    def findings(self) -> list[Finding]:
        """The ranked findings with the default thresholds (``docs/json-schema.md``)."""
        return self.analyze()

    def report(self, thresholds: Thresholds | None = None, top: int = 10) -> dict[str, Any]:
        """The report dict, as ``tracelens analyze --format json`` writes it."""
        from tracelens.report import build_report_from_db
        from tracelens.report.build import retried_under_share

        source = {
            "path": str(self._loaded.path),
            "format": self._loaded.format,
            "sha256": self._loaded.sha256,
            "size_bytes": self._loaded.size_bytes,
        }
        return retried_under_share(
            self._loaded,
            lambda: build_report_from_db(self.db, source, thresholds, top, self.notes),
        )

    # -- restricted views ------------------------------------------------------------

    def window(self, start_ns: int, end_ns: int) -> Trace:
        """The trace between two times on its clock (``[start_ns, end_ns)``, as the frames'
        ``start_ns`` columns), analysed on its own."""
        if end_ns <= start_ns:
            raise ValueError("end_ns must be after start_ns")
        note = (
            f"analysed only {fmt_ns(end_ns - start_ns)} from {fmt_ns(start_ns - self.db.t0_ns)}"
            " after the start: work issued outside it is left out"
        )
        return self._restricted([(start_ns, end_ns)], note)

    def restrict(
        self, *, window: str | None = None, steps: str | None = None, range: str | None = None
    ) -> Trace:
        """The trace restricted as ``tracelens analyze`` restricts it: ``window="2s:5s"``
        (offsets from the analysed window's start), ``steps="5:15"`` (profiler steps 5 to
        14) or ``range="NAME[@DOMAIN]"`` (the instances of an annotation range)."""
        restriction = one_restriction(window, steps, range)
        if restriction is None:
            raise ValueError("give one of window=, steps=, range=")
        intervals = restriction.intervals(self.db)
        return self._restricted(intervals, restriction.describe(intervals))

    def _restricted(self, intervals: list[Interval], note: str) -> Trace:
        return Trace(restrict_to(self._loaded, intervals, note))

    # -- lifetime --------------------------------------------------------------------

    def close(self) -> None:
        self._loaded.close()

    def __enter__(self) -> Trace:
        return self

    def __exit__(
        self,
        _exc_type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        start, end = self.db.window
        return f"<Trace {self.path.name} {self.format}, window {fmt_ns(end - start)}>"


def load(
    path: str | Path,
    *,
    rank: int | None = None,
    db: str | Path | None = None,
    capture_dir: str | Path | None = None,
) -> Trace:
    """Load a trace: a PyTorch profiler ``.json``/``.json.gz``, a profiler output folder
    (``rank`` picks its rank), an Nsight Systems ``.sqlite`` export, or a trace database
    tracelens wrote (``tracelens analyze --db``, ``load(..., db=...)``), opened read-only.

    With ``db`` the database is kept in that file, so the next ``load(db)`` is instant.
    ``capture_dir``: graph capture traces naming the operators behind replayed CUDA/HIP graph
    kernels (default: a ``capture_traces/`` folder beside the trace). Raises
    :class:`ingest.TraceInputError` for what cannot be read.
    """
    return Trace(open_trace(path, rank=rank, db=db, capture_dir=capture_dir))


def open_trace(
    path: str | Path,
    *,
    rank: int | None = None,
    db: str | Path | None = None,
    capture_dir: str | Path | None = None,
) -> LoadedTrace:
    """What :func:`load` opens: a trace database as it is, anything else ingested."""
    p = Path(path)
    if db is None and p.is_file() and is_tracelens_database(p):
        return open_database(p)
    return load_trace(p, db_path=db, rank=rank, capture_dir=capture_dir)


def open_database(path: Path) -> LoadedTrace:
    """A trace database file tracelens wrote, read-only, described by its own facts.

    A database of another table schema is refused in one line (its analysis would read
    columns it lacks): the trace is to be analyzed again."""
    con = connect(path, read_only=True)
    schema = stored_schema_version(con)
    if schema != SCHEMA_VERSION:
        con.close()
        raise TraceInputError(
            path,
            f"written by another tracelens (table schema {schema or 'unknown'}; this one "
            f"reads {SCHEMA_VERSION}): analyze the original trace again, with db= to keep "
            "a new database",
        )
    info = dict(con.execute("SELECT key, value FROM trace_info").fetchall())
    source = Path(info.get("source_path", str(path)))
    return LoadedTrace(
        con=con,
        path=source,
        format=info.get("format", "unknown"),
        sha256=info.get("source_sha256", ""),
        size_bytes=int(info.get("source_bytes", 0)),
    )


def diff(
    baseline: Trace,
    candidate: Trace,
    *,
    thresholds: Thresholds | None = None,
    max_regression_pct: float | None = None,
    top: int = 15,
) -> dict[str, Any]:
    """What changed from ``baseline`` to ``candidate``, as ``tracelens diff --format json``."""
    from tracelens.report.diff import build_diff

    a = baseline.report(thresholds, top=_ALL_ROWS)
    b = candidate.report(thresholds, top=_ALL_ROWS)
    return build_diff(a, b, max_regression_pct, top)
