"""PyTorch profiler (Kineto) Chrome-trace JSON -> the canonical tables.

The file is streamed: :mod:`ingest.chrome.event_splitter` cuts the event array into blobs
of whole events, DuckDB's JSON reader parses each blob with an explicit column list (so
unknown keys cost nothing and ``args`` is touched once), and SQL routes each event to its
table; one chunk's staging overlaps the routing of the chunk before it. Timestamps are
read as DECIMAL(38,6) and cast to integer nanoseconds (the cast rounds half away from
zero), exact for the nanosecond decimals newer profilers write. Times written with more
than six decimals take a faster exact route (:func:`_stage_sql`).

Understood categories: ``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``cuda_runtime``,
``cuda_driver``, ``cuda_sync``, ``cpu_op``, ``python_function``, ``user_annotation``,
``gpu_user_annotation``, ``[memory]`` instants, process/thread names, and the 2021
spellings (``Kernel``, ``Memcpy``, ``Memset``, ``Runtime``, ``Operator``, ``tid`` like
``"stream 7"``, lower-case ``"external id"``).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from ingest.chrome.event_splitter import (
    DEFAULT_MAX_EVENT_BYTES,
    BlobParseError,
    EventArraySplitter,
    EventBlob,
)
from ingest.chrome.hip_work_items import grids_in_workgroups
from ingest.errors import TraceInputError
from ingest.gpu_identity import host_model, host_properties, inferred_name
from ingest.nesting import assign_nesting
from ingest.schema import active_device_ids, earliest_ns, set_info

# Args fields we keep, in the order of the ``a`` list the routing SQL indexes (1-based).
# Kineto spells a few keys differently across versions ("External id" / "external id")
# and reuses one key in two cases ("bytes" on copies, "Bytes" on memory events).
_ARGS: list[tuple[str, str, str]] = [
    # (key in args, staging column, type)
    ("External id", "ext1", "BIGINT"),
    ("external id", "ext2", "BIGINT"),
    ("correlation", "corr", "BIGINT"),
    ("device", "device", "INTEGER"),
    ("stream", "stream", "BIGINT"),
    ("bytes", "nbytes", "BIGINT"),
    ("grid", "grid", "INTEGER[]"),
    ("block", "block", "INTEGER[]"),
    ("registers per thread", "regs", "INTEGER"),
    ("shared memory", "smem", "BIGINT"),
    ("est. achieved occupancy %", "occ", "DOUBLE"),
    ("Input Dims", "in_dims", "VARCHAR"),
    ("Input type", "in_types", "VARCHAR"),
    ("name", "arg_name", "VARCHAR"),
    ("Collective name", "coll", "VARCHAR"),
    ("In msg nelems", "in_n", "BIGINT"),
    ("Out msg nelems", "out_n", "BIGINT"),
    ("dtype", "dtype", "VARCHAR"),
    ("Group size", "gsize", "INTEGER"),
    ("cuda_sync_kind", "sync_kind", "VARCHAR"),
    ("kernel", "launched", "VARCHAR"),
]
# Kineto spells a few keys differently across versions ("External id" / "external id")
# and reuses one key in two cases ("bytes" on copies, "Bytes" on memory events).
_ARG_KEYS = [key for key, _, _ in _ARGS]

_MAX_OBJECT = DEFAULT_MAX_EVENT_BYTES + 1024


# What a time is read as: six decimals (the stored meaning: the text rounded half away
# from zero to 1e-6 µs, then to whole nanoseconds), or sixteen, for text with more digits.
_TIME_6 = "DECIMAL(38,6)"
_TIME_16 = "DECIMAL(38,16)"


def _columns(args_type: str, time_type: str = _TIME_6) -> dict[str, str]:
    return {
        "ph": "VARCHAR",
        "cat": "VARCHAR",
        "name": "VARCHAR",
        "pid": "VARCHAR",
        "tid": "VARCHAR",
        "ts": time_type,
        "dur": time_type,
        "args": args_type,
    }


def _struct(keys: list[str]) -> str:
    return "STRUCT(" + ", ".join(f'"{k}" VARCHAR' for k in keys) + ")"


def _nanoseconds(t: str, base: int) -> str:
    """``CAST({t} * 1000 AS BIGINT)`` for a DECIMAL(38,6) time ``t``, the same values and
    errors, mostly computed in 64-bit arithmetic.

    DECIMAL(38,6) is a 128-bit integer, and DuckDB divides those bit by bit: the plain
    cast was a tenth of the staging query. Within about a day of ``base`` (a whole number
    of microseconds, 0 <= base <= 9e15, so ``base * 1000`` cannot overflow) the offset
    ``t - base`` fits DECIMAL(17,6), whose cast to three decimals rounds half away from
    zero exactly as the cast to BIGINT does; times at or after ``base`` keep their sign,
    so the rounding is the same. Other rows (earlier, far later, NULL, too large) get the
    plain cast, which COALESCE evaluates for them alone.
    """
    offset = f"{t} - {base}::BIGINT" if base else t
    fast = f"CAST(CAST(TRY_CAST({offset} AS DECIMAL(17,6)) AS DECIMAL(18,3)) * 1000 AS BIGINT)"
    if base:
        fast = f"CASE WHEN {t} >= {base}::BIGINT THEN {base}::BIGINT * 1000 + {fast} END"
    return f"coalesce({fast}, CAST({t} * 1000 AS BIGINT))"


def _stage_sql(table: str, variant: str, precise: bool = False, base: int = 0) -> str:
    """Staging query for one blob, creating ``table``.

    DuckDB's JSON reader matches STRUCT fields to keys case-sensitively and parses straight
    into them, which is several times faster than keeping ``args`` as JSON text and
    extracting paths. A STRUCT cannot declare two keys that differ only in case, so the
    modern and the 2021 spelling of the external id each get their variant; a blob holding
    both falls back to JSON paths.

    Text with more digits than a DECIMAL's scale is rounded by a slow path of DuckDB's
    parser (4x slower for 16 decimals). ``precise`` reads times with 16 decimals instead
    (exact for up to 16) and rounds to 6 in SQL, which is the same value except where
    rounding a 17th or later digit landed exactly on a 6-decimal half: ``tie6`` marks those
    rows so the blob can be read again the standard way (:func:`_needs_standard_read`).

    ``base`` is a whole microsecond near the blob's times (:func:`_time_base`); only speed
    depends on it.
    """
    if variant == "json":
        paths = [f'$."{k}"' for k in _ARG_KEYS]
        source = f"json_extract_string(args, {paths!r})"
        args_type = "JSON"
        raw = [f"a[{i}]" for i in range(1, len(_ARGS) + 1)]
    else:
        drop = "external id" if variant == "modern" else "External id"
        args_type = _struct([k for k in _ARG_KEYS if k != drop])
        source = "NULL"
        raw = ["NULL" if key == drop else f'args."{key}"' for key in _ARG_KEYS]
    # Each field is cast once here, so the routing queries read typed columns.
    typed = ",\n               ".join(
        f"{r} AS {col}" if typ == "VARCHAR" else f"TRY_CAST({r} AS {typ}) AS {col}"
        for r, (_, col, typ) in zip(raw, _ARGS, strict=True)
    )
    # pid/tid are numbers, or strings like "stream 7" (2021) or "Spans" (profiler rows).
    int_of = (
        "coalesce(TRY_CAST({c} AS BIGINT),"
        " TRY_CAST(regexp_extract({c}, '(-?[0-9]+)\\s*$', 1) AS BIGINT))"
    )
    if precise:
        ts, dur = "round(ts, 6)", "round(dur, 6)"
        tie = "abs(ts - round(ts, 6)) = 0.0000005 OR abs(dur - round(dur, 6)) = 0.0000005"
    else:
        ts, dur, tie = "ts", "dur", "false"
    columns = _columns(args_type, _TIME_16 if precise else _TIME_6)
    # Casting a DECIMAL to BIGINT rounds half away from zero, as round() would.
    return f"""
        CREATE OR REPLACE TABLE {table} AS
        SELECT ph, lower(cat) AS cat, name,
               {int_of.format(c="pid")} AS pid, {int_of.format(c="tid")} AS tid,
               {_nanoseconds(ts, base)} AS ts_ns,
               {_nanoseconds(dur, 0)} AS dur_ns,
               {typed},
               {tie} AS tie6
        FROM (SELECT *, {source} AS a
              FROM read_json(?::VARCHAR[], format = 'array', columns = {columns!r},
                             maximum_object_size = {_MAX_OBJECT}))
    """


# The first whole microseconds of times near the start of a blob, for _time_base.
_TIME_INTEGERS = re.compile(rb'"ts"\s*:\s*([0-9]{1,16})[.,}\s]')
_BASE_MARGIN = 10**10  # µs (under three hours) before the earliest time seen
_MAX_BASE = 9 * 10**15  # base * 1000 must fit BIGINT
# A time with more than six decimals near the start of a blob: read its times the precise
# way. Only speed depends on this guess; both ways store the same values.
_LONG_TIME = re.compile(rb'"(?:ts|dur)"\s*:\s*-?[0-9]+\.[0-9]{7}')
_SAMPLE = 64 * 1024
# A number with 17 or more decimals anywhere (in times or not: being wrong only costs time).
_OVERLONG_DECIMALS = re.compile(rb"\.[0-9]{17}")

# The profiler's allocator events ("[memory]" instants) carry "Bytes", which a STRUCT
# cannot hold beside the copies' "bytes": they get their own pass, only in blobs that
# have them.
_MEMORY_KEYS = ["Device Type", "Device Id", "Bytes", "Total Allocated", "Total Reserved", "Addr"]
_MEMORY_SQL = f"""
    INSERT INTO memory_events
    SELECT TRY_CAST(pid AS BIGINT), TRY_CAST(tid AS BIGINT),
           CASE WHEN TRY_CAST(args."Device Type" AS INTEGER) = 1
                THEN TRY_CAST(args."Device Id" AS INTEGER) ELSE -1 END,
           CAST(ts * 1000 AS BIGINT), TRY_CAST(args."Bytes" AS BIGINT),
           TRY_CAST(args."Total Allocated" AS BIGINT), TRY_CAST(args."Total Reserved" AS BIGINT),
           TRY_CAST(args."Addr" AS BIGINT)
    FROM read_json(?::VARCHAR[], format = 'array', columns = {_columns(_struct(_MEMORY_KEYS))!r},
                   maximum_object_size = {_MAX_OBJECT})
    WHERE ph = 'i' AND name = '[memory]' AND ts IS NOT NULL
"""

_GPU_DEVICE = "coalesce(device, CAST(pid AS INTEGER))"
_GPU_STREAM = "coalesce(stream, tid)"
_EXTERNAL_ID = "coalesce(ext1, ext2)"
_VALID_X = "ph = 'X' AND ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND dur_ns >= 0"

_ROUTE_SQL = [
    f"""
    INSERT INTO kernels
    SELECT {_GPU_DEVICE}, {_GPU_STREAM}, name, ts_ns, ts_ns + dur_ns, corr,
           grid[1], grid[2], grid[3], block[1], block[2], block[3],
           regs, smem, occ
    FROM blob
    WHERE {_VALID_X} AND cat = 'kernel'
    """,
    f"""
    INSERT INTO memcpys
    SELECT {_GPU_DEVICE}, {_GPU_STREAM},
           coalesce(nullif(regexp_extract(name, 'Memcpy ([A-Za-z_]+)', 1), ''), 'Unknown'),
           coalesce(nullif(lower(regexp_extract(name, '\\(([A-Za-z]+) *->', 1)), ''), 'unknown'),
           coalesce(nullif(lower(regexp_extract(name, '-> *([A-Za-z]+)\\)', 1)), ''), 'unknown'),
           nbytes, ts_ns, ts_ns + dur_ns, corr
    FROM blob WHERE {_VALID_X} AND cat IN ('gpu_memcpy', 'memcpy')
    """,
    f"""
    INSERT INTO memsets
    SELECT {_GPU_DEVICE}, {_GPU_STREAM}, nbytes,
           coalesce(nullif(lower(regexp_extract(name, '\\(([A-Za-z]+)\\)', 1)), ''), 'unknown'),
           ts_ns, ts_ns + dur_ns, corr
    FROM blob WHERE {_VALID_X} AND cat IN ('gpu_memset', 'memset')
    """,
    f"""
    INSERT INTO api_calls
    SELECT pid, tid, regexp_replace(name, '_v[0-9]+$', ''),
           CASE WHEN cat = 'cuda_driver' THEN 'driver' ELSE 'runtime' END,
           ts_ns, ts_ns + dur_ns, corr, {_EXTERNAL_ID}, launched
    FROM blob WHERE {_VALID_X} AND cat IN ('cuda_runtime', 'runtime', 'cuda_driver')
    """,
    f"""
    INSERT INTO cpu_ops
    SELECT nextval('op_seq'), pid, tid, name,
           CASE WHEN cat = 'operator' THEN 'cpu_op' ELSE cat END,
           ts_ns, ts_ns + dur_ns, NULL, NULL, {_EXTERNAL_ID}, in_dims, in_types
    FROM blob WHERE {_VALID_X} AND cat IN ('cpu_op', 'operator', 'python_function')
    """,
    f"""
    INSERT INTO ranges
    SELECT nextval('range_seq'), pid, tid,
           CASE WHEN cat = 'gpu_user_annotation' THEN {_GPU_DEVICE} END,
           name, cat, ts_ns, ts_ns + dur_ns, NULL, NULL
    FROM blob WHERE {_VALID_X} AND cat IN ('user_annotation', 'gpu_user_annotation')
    """,
    f"""
    INSERT INTO syncs
    SELECT {_GPU_DEVICE}, {_GPU_STREAM}, NULL, NULL, coalesce(sync_kind, name),
           ts_ns, ts_ns + dur_ns, corr
    FROM blob WHERE {_VALID_X} AND cat = 'cuda_sync'
    """,
    f"""
    INSERT INTO comm_ops
    SELECT pid, tid, name,
           coalesce(coll, CASE WHEN name LIKE 'nccl:%' THEN substr(name, 6) END),
           ts_ns, ts_ns + dur_ns, {_EXTERNAL_ID},
           coalesce(in_n,
                    TRY_CAST(list_reduce(TRY_CAST(in_dims AS BIGINT[][])[1], lambda x, y: x * y)
                             AS BIGINT)),
           out_n,
           coalesce(dtype, TRY_CAST(in_types AS VARCHAR[])[1]),
           gsize
    FROM blob
    WHERE {_VALID_X} AND (coll IS NOT NULL OR name LIKE 'nccl:%')
      AND cat IN ('cpu_op', 'operator', 'user_annotation')
    """,
    """
    INSERT INTO meta_names
    SELECT pid, tid, name, arg_name FROM blob
    WHERE ph = 'M' AND name IN ('process_name', 'thread_name') AND arg_name IS NOT NULL
    """,
    """
    INSERT INTO profiler_spans
    SELECT ts_ns, ts_ns + dur_ns FROM blob WHERE cat = 'trace' AND ph = 'X' AND ts_ns IS NOT NULL
    """,
]

# Per category (the phase for metadata rows, which have none): counts, what is skipped,
# and the rows _MEMORY_SQL would take.
_CENSUS = """
SELECT coalesce(cat, 'ph:' || ph), count(*),
       count(*) FILTER (WHERE ph = 'X' AND (ts_ns IS NULL OR dur_ns IS NULL)),
       count(*) FILTER (WHERE ph = 'X' AND dur_ns < 0),
       count(*) FILTER (WHERE tie6),
       count(*) FILTER (WHERE ph = 'i' AND name = '[memory]')
FROM blob GROUP BY ALL
"""


def _route_for(sql: str) -> frozenset[str]:
    """The categories a routing query reads (from its ``cat`` filter), to skip idle ones."""
    if "ph = 'M'" in sql:
        return frozenset({"ph:M"})
    found = re.findall(r"'([a-z_:]+)'", sql.split("WHERE", 1)[1]) if "WHERE" in sql else []
    return frozenset(found)


# Chunks are staged into two tables of an in-memory database attached for the read, so
# one chunk's routing (on the caller's connection) overlaps the next one's staging (on a
# cursor, a second connection to the same database: temporary tables are private to a
# connection, an attached database is not). A chunk is staged while the one before it is
# routed, never while it is still read, so two tables are enough.
_STAGE_DB = "tracelens_staging"
_SLOTS = (0, 1)


def _slot_table(slot: int) -> str:
    return f"{_STAGE_DB}.blob{slot}"


def _for_slot(sql: str, slot: int) -> str:
    return re.sub(r"\bFROM blob\b", f"FROM {_slot_table(slot)}", sql)


_ROUTES = [[(_route_for(sql), _for_slot(sql, slot)) for sql in _ROUTE_SQL] for slot in _SLOTS]
_CENSUS_OF = [_for_slot(_CENSUS, slot) for slot in _SLOTS]


@dataclass
class ChromeReadStats:
    events: int = 0
    dropped_missing: int = 0
    dropped_negative: int = 0
    warnings: list[str] = field(default_factory=list)


def read_chrome_trace(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    chunks: Iterable[bytes],
    on_progress: Callable[[int], None] | None = None,
    max_events: int | None = None,
) -> ChromeReadStats:
    """Load the Chrome trace whose decompressed bytes are ``chunks`` into ``con``.

    More than ``max_events`` events stop the read with an error (a small gzip of tiny
    events must not become an unbounded database).
    """
    con.execute("CREATE TEMP SEQUENCE op_seq START 1")
    con.execute("CREATE TEMP SEQUENCE range_seq START 1")
    con.execute(
        "CREATE TEMP TABLE meta_names (pid BIGINT, tid BIGINT, kind VARCHAR, value VARCHAR)"
    )
    con.execute("CREATE TEMP TABLE profiler_spans (start_ns BIGINT, end_ns BIGINT)")
    stats = ChromeReadStats()
    threads = int(con.execute("SELECT current_setting('threads')").fetchone()[0])  # type: ignore[index]
    splitter = EventArraySplitter(path, parts=max(1, threads))
    con.execute(f"ATTACH ':memory:' AS {_STAGE_DB}")
    stager = con.cursor()
    # The staged chunk waiting for its routing: staging the next one overlaps it.
    pending: list[_Staged] = []

    def route_pending() -> None:
        staged = pending.pop()
        _route(con, staged, stats)
        if max_events is not None and stats.events > max_events:
            raise TraceInputError(
                path,
                f"holds more than {max_events:,} events (the limit; set "
                "TRACELENS_MAX_EVENTS to raise it)",
            )
        if on_progress is not None:
            on_progress(staged.end_offset)

    try:
        with (
            tempfile.TemporaryDirectory(prefix="tracelens-") as tmp,
            ThreadPoolExecutor(1, thread_name_prefix="tracelens-stage") as pool,
        ):

            def parse(blobs: list[EventBlob]) -> None:
                slot = 1 - pending[0].slot if pending else 0
                if pending and threads == 1:  # one thread asked for: no overlap
                    route_pending()
                staging = pool.submit(_stage_blobs, stager, blobs, tmp, slot)
                try:
                    if pending:
                        route_pending()
                except BaseException:
                    wait([staging])  # the cursor is the stager's until it is done
                    raise
                # A malformed blob raises here, for the splitter to rescan its stretch.
                pending.append(staging.result())

            try:
                splitter.split(chunks, parse)
            except BlobParseError as exc:
                raise TraceInputError(path, str(exc)) from None
            if pending:
                route_pending()
    except BaseException:
        stager.close()
        # A connection the error invalidated cannot detach: that error is the one to report.
        with contextlib.suppress(duckdb.Error):
            con.execute(f"DETACH DATABASE IF EXISTS {_STAGE_DB}")
        raise
    stager.close()
    con.execute(f"DETACH DATABASE {_STAGE_DB}")
    meta = splitter.result.metadata
    _finish(con, path, meta, stats)
    return stats


def _variant(blobs: list[EventBlob]) -> str:
    modern = any(b.contains(b'"External id"') for b in blobs)
    legacy = any(b.contains(b'"external id"') for b in blobs)
    if modern and legacy:
        return "json"
    return "legacy" if legacy else "modern"


def _precise(blobs: list[EventBlob]) -> bool:
    """Whether the blobs' times look longer than six decimals (judged from their start)."""
    return any(_LONG_TIME.search(b.buf, b.start, min(b.end, b.start + _SAMPLE)) for b in blobs)


def _write_files(blobs: list[EventBlob], tmp: str, slot: int, repair_utf8: bool) -> list[str]:
    files = []
    for i, blob in enumerate(blobs):
        name = os.path.join(tmp, f"events-{slot}-{i}.json")
        with open(name, "wb") as f:
            if repair_utf8:
                f.write(blob.data.decode("utf-8", "replace").encode("utf-8"))
            else:
                blob.write(f)
        files.append(name)
    return files


def _stage(
    con: duckdb.DuckDBPyConnection,
    blobs: list[EventBlob],
    tmp: str,
    variant: str,
    slot: int,
    repair_utf8: bool = False,
) -> tuple[list[str], bool]:
    """Write the blobs to files and stage them; the files and whether read precisely."""
    files = _write_files(blobs, tmp, slot, repair_utf8)
    base = _time_base(blobs)
    table = _slot_table(slot)
    # Several files in one scan: DuckDB parses them on parallel threads.
    if _precise(blobs):
        try:
            con.execute(_stage_sql(table, variant, True, base), [files])
            return files, True
        except duckdb.Error:
            pass  # e.g. an integer part too long for 16 decimals: the standard read decides
    con.execute(_stage_sql(table, variant, False, base), [files])
    return files, False


def _time_base(blobs: list[EventBlob]) -> int:
    """A whole microsecond at or before most of the blobs' times (judged from their start),
    which lets :func:`_nanoseconds` take its fast route; 0 when none is seen."""
    seen = [
        int(m.group(1))
        for b in blobs
        for m in _TIME_INTEGERS.finditer(b.buf, b.start, min(b.end, b.start + _SAMPLE))
    ]
    positive = [t for t in seen if t > 0]
    if not positive:
        return 0
    return max(0, min(min(positive) - _BASE_MARGIN, _MAX_BASE))


def _needs_standard_read(blobs: list[EventBlob], ties: int) -> bool:
    """Whether a precise read may differ from the standard one.

    Only where rounding to 16 decimals carried into a 6-decimal half (``ties`` rows) and the
    text had more than 16 decimals to round.
    """
    return ties > 0 and any(
        _OVERLONG_DECIMALS.search(b.buf, b.start, b.end) is not None for b in blobs
    )


def _census(con: duckdb.DuckDBPyConnection, slot: int) -> tuple[list[tuple], int]:
    rows = con.execute(_CENSUS_OF[slot]).fetchall()
    return rows, sum(r[4] for r in rows)


@dataclass
class _Staged:
    """One chunk staged in its slot's table, ready to be routed."""

    slot: int
    files: list[str]
    census: list[tuple]
    memory_pass: bool  # whether the chunk holds allocator events (_MEMORY_SQL)
    warning: str | None  # what reading it had to repair
    end_offset: int  # the input bytes read once it is routed


def _stage_blobs(
    con: duckdb.DuckDBPyConnection, blobs: list[EventBlob], tmp: str, slot: int
) -> _Staged:
    """Parse blobs into the slot's table and count them; BlobParseError when one is not
    valid JSON. Everything that reads the blobs' bytes happens here: the splitter reuses
    them once the chunk is handed back."""
    variant = _variant(blobs)
    warning = None
    try:
        files, precise = _stage(con, blobs, tmp, variant, slot)
    except duckdb.Error as exc:
        if _not_the_traces_fault(exc):
            raise
        if "utf-8" not in str(exc).lower() and "unicode" not in str(exc).lower():
            raise BlobParseError(_describe_json_error(exc, blobs)) from None
        # Tolerant reading: undecodable bytes become U+FFFD, as a browser would show them.
        try:
            files, precise = _stage(con, blobs, tmp, variant, slot, repair_utf8=True)
        except duckdb.Error as exc2:
            if _not_the_traces_fault(exc2):
                raise
            raise BlobParseError(_describe_json_error(exc2, blobs)) from None
        warning = "non-UTF-8 bytes in event text were replaced with U+FFFD"
    census, ties = _census(con, slot)
    if precise and _needs_standard_read(blobs, ties):
        con.execute(_stage_sql(_slot_table(slot), variant, False, _time_base(blobs)), [files])
        census, _ = _census(con, slot)
    # The memory pass reads the same files with the same top-level columns, so without
    # memory rows in the staged chunk it would insert nothing; skipping it then also skips
    # the byte search (a full pass over the blobs). Where ``args`` was staged as JSON rather
    # than a STRUCT, the pass's STRUCT read may fail where staging did not: that variant
    # keeps the search alone deciding, as always.
    memory_rows = sum(row[5] for row in census)
    memory_pass = bool(memory_rows or variant == "json") and any(
        b.contains(b'"[memory]"') for b in blobs
    )
    end = blobs[-1].source_offset + blobs[-1].size
    return _Staged(slot, files, census, memory_pass, warning, end)


def _route(con: duckdb.DuckDBPyConnection, staged: _Staged, stats: ChromeReadStats) -> None:
    """Route a staged chunk's events to their tables, in the order chunks were read (the
    operator and range ids follow it)."""
    if staged.warning is not None and staged.warning not in stats.warnings:
        stats.warnings.append(staged.warning)
    present = set()
    for cat, total, missing, negative, _, _ in staged.census:
        present.add(cat)
        stats.events += total
        stats.dropped_missing += missing
        stats.dropped_negative += negative
    # Most blobs hold a handful of categories; a query per absent one is pure overhead.
    for cats, sql in _ROUTES[staged.slot]:
        if cats & present:
            con.execute(sql)
    if staged.memory_pass:
        con.execute(_MEMORY_SQL, [staged.files])


def _not_the_traces_fault(exc: duckdb.Error) -> bool:
    """Out of memory or of disk: the machine's limits, which must not be reported as a
    malformed event (the loader names them and the knob)."""
    if isinstance(exc, duckdb.OutOfMemoryException):
        return True
    return isinstance(exc, duckdb.IOException) and "No space left" in str(exc)


def _describe_json_error(exc: duckdb.Error, blobs: list[EventBlob]) -> str:
    text = str(exc).splitlines()[0]
    text = text.replace("Invalid Input Error: ", "").replace("Conversion Error: ", "")
    # DuckDB names our temporary file; point at the user's file instead.
    text = text.split(' in file "')[0] if ' in file "' in text else text
    return f"malformed event in traceEvents after byte {blobs[0].source_offset:,}: {text}"


def _finish(con: duckdb.DuckDBPyConnection, path: Path, meta: dict, stats: ChromeReadStats) -> None:
    con.execute(
        """
        INSERT INTO threads
        SELECT pid, tid,
               max(value) FILTER (WHERE kind = 'process_name'),
               max(value) FILTER (WHERE kind = 'thread_name')
        FROM meta_names GROUP BY pid, tid
        """
    )
    _insert_devices(con, meta)
    grids_in_workgroups(con)
    assign_nesting(con, "cpu_ops", "op_id", ["pid", "tid"])
    assign_nesting(con, "ranges", "range_id", ["pid", "tid", "device_id"])
    info = meta.get("distributedInfo")
    dist: dict[str, Any] = info if isinstance(info, dict) else {}
    t0 = earliest_ns(con)
    if stats.dropped_missing:
        stats.warnings.append(
            f"{_n(stats.dropped_missing, 'complete (X) event')} without ts or dur skipped"
        )
    if stats.dropped_negative:
        stats.warnings.append(
            f"{_n(stats.dropped_negative, 'event')} with a negative duration skipped"
        )
    set_info(
        con,
        {
            "format": "torch_chrome",
            "format_version": meta.get("schemaVersion"),
            "tool": "PyTorch profiler (Kineto)",
            "rank": dist.get("rank"),
            "world_size": dist.get("world_size"),
            "distributed_backend": dist.get("backend"),
            "host": meta.get("host_name") or meta.get("hostname"),
            "trace_name": meta.get("traceName"),
            "base_time_ns": meta.get("baseTimeNanoseconds"),
            "t0_ns": t0,
            "event_count": stats.events,
            "warnings": "\n".join(stats.warnings) if stats.warnings else None,
        },
    )
    con.execute("DROP TABLE meta_names")


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _insert_devices(con: duckdb.DuckDBPyConnection, meta: dict) -> None:
    props = meta.get("deviceProperties")
    by_id: dict[int, dict] = {}
    if isinstance(props, list):
        for p in props:
            if isinstance(p, dict) and isinstance(p.get("id"), int):
                by_id[p["id"]] = p
    active = active_device_ids(con)
    rows = []
    named_after_host: list[int] = []
    inferred: list[str] = []
    shared = host_properties(by_id) if by_id else None
    for dev in active:
        p = by_id.get(dev, {})
        if not p and shared is not None:
            p = shared
            named_after_host.append(dev)
        cc = (
            f"{p['computeMajor']}.{p['computeMinor']}"
            if "computeMajor" in p and "computeMinor" in p
            else None
        )
        name = inferred_name(p) if p else None
        if name and not str(p.get("name") or "").strip() and dev not in named_after_host:
            inferred.append(
                f"GPU {dev} ({name}) from gfx {cc}, {p.get('numSms')} compute units, "
                f"{p.get('warpSize')}-wide wavefronts"
            )
        if name is None and not p and by_id:
            name = host_model(by_id)
            if name is not None:
                named_after_host.append(dev)
        rows.append((dev, name, p.get("numSms"), p.get("totalGlobalMem"), cc))
    gfx = {str(p.get("gcnArchName")) for p in by_id.values() if p.get("gcnArchName")}
    if len(gfx) == 1:
        set_info(con, {"gcn_arch": gfx.pop()})
    if named_after_host:
        inferred.append(
            "GPU "
            + ", ".join(str(d) for d in named_after_host)
            + " has no device properties: named and sized after the host's other GPUs (all "
            "one model)"
        )
    if inferred:
        set_info(con, {"device_names_inferred": "; ".join(inferred)})
    if rows:
        con.executemany("INSERT INTO devices VALUES (?, ?, ?, ?, ?)", rows)
    idle = sorted(set(by_id) - set(active))
    if idle:
        names = ", ".join(f"{i}: {by_id[i].get('name')}" for i in idle)
        set_info(con, {"host_gpus_without_work": names})
