"""Nsight Systems SQLite export (``nsys export --type sqlite``) -> the canonical tables.

Every export from nsys 2020.3 on is read the same way: tables are created lazily, so any
may be missing; columns were added over the years, so each is read by name and a missing
one becomes NULL; the enumerations are built in (:mod:`ingest.nsys.enums`) because old
exports have no ENUM_* tables. Integer columns are bulk-copied by
:mod:`ingest.nsys.sqlite_columns` and each batch goes straight into its canonical table
(synchronization and NVTX rows through a staging table: they need a second pass); names
(``StringIds``) and codes are resolved in DuckDB SQL. The user's file is opened read-only
(and immutable unless a pending WAL file holds rows): it is never written.

What lands where: kernels, memcpys (unified-memory migrations keep their ``UVM_*`` kinds),
memsets, api_calls (runtime and driver, version suffix stripped), syncs (with the host
thread of the API call they belong to), ranges (NVTX push/pop and start/end, with their
domain; PyTorch ``emit_nvtx`` decorations such as ``, seq = 12`` removed from op names),
threads, devices (only GPUs that ran work; the rest are listed in trace_info). Nsight has
no operator records, so ``cpu_ops`` stays empty and attribution falls back to ranges.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import struct
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import duckdb
import numpy as np

from ingest.derive_gaps import LAUNCH_CALLS
from ingest.errors import TraceInputError
from ingest.nesting import assign_nesting
from ingest.nsys.enums import (
    API_CLASSES,
    COPY_KINDS,
    INVALID_ID,
    MEMORY_KINDS,
    NVTX_DOMAIN_CREATE,
    NVTX_PUSH_POP,
    NVTX_START_END,
    SYNC_KINDS,
    sql_case,
)
from ingest.nsys.sqlite_columns import ColumnCountMismatch, Connect, copy_int_columns, rowid_range
from ingest.nsys.sqlite_names import as_text, first_column
from ingest.nsys.target_info import (
    cuda_device_map,
    driver_kept_loaded,
    export_meta,
    host_cpu,
    host_kernel,
    hostname,
    insert_devices,
    load_threads,
    session_start_utc,
    target_gpus,
)
from ingest.schema import earliest_ns, set_info, sql_list

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
NVTX = "NVTX_EVENTS"

# Tables whose presence marks a file as an nsys export (with StringIds, or on their own).
_NSYS_MARKERS = ("StringIds", KERNEL, MEMCPY, MEMSET, RUNTIME, SYNC, NVTX, "TARGET_INFO_GPU")
_NSYS_PREFIXES = ("CUPTI_ACTIVITY_KIND_", "TARGET_INFO_", "NVTX_")

# globalTid = <HW:8><VM:8><PID:24><TID:24>
_PID = "(({g} >> 24) & 16777215)"
_TID = "({g} & 16777215)"

# PyTorch's emit_nvtx appends ", seq = N", ", op_id = N", ", sizes = [...]" to op names.
_EMIT_NVTX_SUFFIX = r"^(.*?), (?:seq = -?[0-9]+|op_id = [0-9]+|sizes = \[|input_op_ids = ).*$"

_STREAM = f"nullif(b.stream_id, {INVALID_ID})"

# Each source table: the canonical table it fills (or a staging table for those that need
# a second pass), the integer columns read, and the SQL turning a batch (``b``) into rows.
_KERNEL_SELECT = """
    SELECT b.device_id, b.stream_id, s.value, b.start, b.start + b.dur, b.correlation_id,
           b.grid_x, b.grid_y, b.grid_z, b.block_x, b.block_y, b.block_z, b.registers,
           b.shared_mem, NULL
    FROM _sqlite_batch b LEFT JOIN _nsys_strings s ON s.id = b.name_id
    WHERE b.dur >= 0
"""
_MEMCPY_SELECT = f"""
    SELECT b.device_id, {_STREAM}, {sql_case("b.copy_kind", COPY_KINDS, "Unknown")},
           {sql_case("b.src_kind", MEMORY_KINDS, "unknown")},
           {sql_case("b.dst_kind", MEMORY_KINDS, "unknown")},
           b.bytes, b.start, b.start + b.dur, b.correlation_id
    FROM _sqlite_batch b WHERE b.dur >= 0
"""
_MEMSET_SELECT = f"""
    SELECT b.device_id, {_STREAM}, b.bytes, {sql_case("b.mem_kind", MEMORY_KINDS, "unknown")},
           b.start, b.start + b.dur, b.correlation_id
    FROM _sqlite_batch b WHERE b.dur >= 0
"""
_RUNTIME_SELECT = f"""
    SELECT {_PID.format(g="b.global_tid")}, {_TID.format(g="b.global_tid")}, n.name,
           {sql_case("b.event_class", API_CLASSES, "runtime")},
           b.start, b.start + b.dur, b.correlation_id, NULL, NULL
    FROM _sqlite_batch b LEFT JOIN _nsys_api_names n ON n.id = b.name_id
    WHERE b.dur >= 0
"""
_TEXT_BATCH_ROWS = 262_144
_SYNC_STAGING = "_nsys_sync"
_NVTX_STAGING = "_nsys_nvtx"
_STAGING_COLUMNS = {
    _SYNC_STAGING: ["start", "dur", "device_id", "stream_id", "correlation_id", "global_pid",
                    "sync_type"],
    _NVTX_STAGING: ["row_id", "start", "dur", "event_type", "global_tid", "text_id",
                    "domain_id"],
}  # fmt: skip


def read_nsys_sqlite(
    con: duckdb.DuckDBPyConnection, path: Path, max_events: int | None = None
) -> list[str]:
    """Load the nsys export at ``path`` into ``con``; returns notes for the user."""
    path = Path(path)
    _check_not_truncated(path)
    connect = functools.partial(_open_read_only, path)
    try:
        return _read(con, path, connect, max_events)
    except (sqlite3.DatabaseError, ColumnCountMismatch) as exc:
        raise TraceInputError(
            path, f"damaged or unreadable SQLite file ({str(exc).splitlines()[0]})"
        ) from None


def _open_read_only(path: Path) -> sqlite3.Connection:
    # immutable: no locks, no -shm file created beside the user's file. A database left in
    # WAL mode with a non-empty -wal file has rows only that file holds: read it normally.
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    if not _has_pending_wal(path):
        uri += "&immutable=1"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    # NVTX text and names are whatever bytes the application passed: never fail on them.
    conn.text_factory = _decode_text
    return conn


def _decode_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _has_pending_wal(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    return wal.is_file() and wal.stat().st_size > 0


def _check_not_truncated(path: Path) -> None:
    with path.open("rb") as f:
        header = f.read(100)
    if len(header) < 100:
        raise TraceInputError(path, "damaged SQLite file (truncated header)")
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    change_counter, page_count = struct.unpack(">II", header[24:32])
    valid_for = struct.unpack(">I", header[92:96])[0]
    size = path.stat().st_size
    # The in-header page count is trustworthy only when written by the same change.
    if valid_for == change_counter and page_count and size < page_count * page_size:
        raise TraceInputError(
            path,
            f"damaged SQLite file: truncated to {size:,} bytes of {page_count * page_size:,}",
        )


def _check_event_count(
    src: sqlite3.Connection, tables: dict[str, set[str]], path: Path, max_events: int
) -> None:
    """Refuse an export with more activity rows than the limit before reading any."""
    total = 0
    for table in (KERNEL, MEMCPY, MEMSET, RUNTIME, SYNC, NVTX):
        if table in tables:
            total += src.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    if total > max_events:
        raise TraceInputError(
            path,
            f"holds {total:,} events, more than the limit of {max_events:,} "
            "(set TRACELENS_MAX_EVENTS to raise it)",
        )


def _read(
    con: duckdb.DuckDBPyConnection, path: Path, connect: Connect, max_events: int | None
) -> list[str]:
    src = connect()
    try:
        tables = _table_columns(src)
        if not _is_nsys_export(tables) and any(t.lower().startswith("rocpd_") for t in tables):
            # rocprofiler's databases (rocTracer's RPD and rocprofv3's rocpd) are SQLite too
            raise TraceInputError(
                path,
                "a rocprofiler database (rocpd tables), not an Nsight Systems export; for "
                "AMD GPUs tracelens reads the PyTorch profiler's traces: a ROCm build of "
                "PyTorch records HIP kernels and runtime calls under "
                "`ProfilerActivity.CUDA`",
            )
        if not _is_nsys_export(tables):
            raise TraceInputError(
                path,
                "SQLite database but not an Nsight Systems export (none of its tables: "
                "StringIds, CUPTI_ACTIVITY_KIND_*, NVTX_EVENTS, TARGET_INFO_*)",
            )
        if max_events is not None:
            _check_event_count(src, tables, path, max_events)
        meta = export_meta(src, tables)
        _load_strings(src, con, tables)
        con.execute(
            """CREATE OR REPLACE TEMP TABLE _nsys_api_names AS
               SELECT id, regexp_replace(regexp_replace(value, '_v[0-9]+$', ''),
                                         '_pt(sz|ds)$', '') AS name
               FROM _nsys_strings"""
        )
        notes: list[str] = []
        for staging, columns in _STAGING_COLUMNS.items():
            cols = ", ".join(f"{c} BIGINT" for c in columns)
            con.execute(f"CREATE OR REPLACE TEMP TABLE {staging} ({cols})")
        copy = functools.partial(_copy, src, connect, con, tables)
        counts = {
            KERNEL: copy(KERNEL, _kernel_exprs, "kernels", _KERNEL_SELECT),
            MEMCPY: copy(MEMCPY, _memcpy_exprs, "memcpys", _MEMCPY_SELECT),
            MEMSET: copy(MEMSET, _memset_exprs, "memsets", _MEMSET_SELECT),
            RUNTIME: copy(RUNTIME, _runtime_exprs, "api_calls", _RUNTIME_SELECT),
            SYNC: copy(SYNC, _sync_exprs, _SYNC_STAGING),
            NVTX: copy(NVTX, _nvtx_exprs, _NVTX_STAGING, with_rowid=True),
        }
        _load_nvtx_text(src, con, tables)
        _route(con)
        load_threads(src, con, tables)
        gpus = target_gpus(src, tables)
        cuda_to_gpu = cuda_device_map(src, tables)
        host = hostname(src, tables)
        kernel_release = host_kernel(src, tables)
        kept_loaded = driver_kept_loaded(src, tables)
        cpu = host_cpu(src, tables)
        session_utc = session_start_utc(src, tables)
        diagnostics = _diagnostic_notes(src, tables)
    finally:
        src.close()
    insert_devices(con, gpus, cuda_to_gpu)
    assign_nesting(con, "ranges", "range_id", ["pid", "tid", "device_id"])
    if not counts[KERNEL]:
        notes.append(_no_kernels_note(con, KERNEL in tables, bool(diagnostics)))
    dropped = con.execute(
        f"""SELECT count(*) FILTER (WHERE end_ns IS NULL OR dur < 0) FROM (
              SELECT start + dur AS end_ns, dur FROM _nsys_nvtx
              WHERE event_type IN ({NVTX_PUSH_POP}, {NVTX_START_END}))"""
    ).fetchone()[0]  # type: ignore[index]
    if dropped:
        notes.append(f"{dropped:,} NVTX ranges that never ended were skipped")
    kept = con.execute(
        """SELECT (SELECT count(*) FROM kernels) + (SELECT count(*) FROM memcpys)
                  + (SELECT count(*) FROM memsets) + (SELECT count(*) FROM api_calls)"""
    ).fetchone()[0]  # type: ignore[index]
    bad = counts[KERNEL] + counts[MEMCPY] + counts[MEMSET] + counts[RUNTIME] - kept
    if bad:
        notes.append(f"{bad:,} GPU activity or API rows without a valid end time were skipped")
    if not meta:
        notes.append("export has no version metadata (nsys 2020.x or older)")
    notes.extend(diagnostics)
    t0 = earliest_ns(con)
    set_info(
        con,
        {
            "format": "nsys_sqlite",
            "format_version": meta.get("EXPORT_SCHEMA_VERSION"),
            "tool": "Nsight Systems",
            "tool_version": meta.get("EXPORT_PRODUCT_VERSION"),
            "host": host,
            "session_start_utc": session_utc,
            "host_kernel": kernel_release,
            "host_driver_kept_loaded": kept_loaded,
            "host_cpu": cpu,
            "t0_ns": t0,
            "event_count": sum(counts.values()),
            "warnings": "\n".join(notes) if notes else None,
        },
    )
    for staging in [*_STAGING_COLUMNS, "_nsys_strings", "_nsys_api_names", "_nsys_nvtx_text"]:
        con.execute(f"DROP TABLE IF EXISTS {staging}")
    return notes


# DIAGNOSTIC_EVENT.severity (ENUM_DIAGNOSTIC_SEVERITY_LEVEL): 1 Info, 2 Warning, 3 Error.
_DIAG_WARNING, _DIAG_ERROR = 2, 3
# Messages about collectors tracelens never reads (graphics APIs, CPU sampling) explain no
# missing data in a report about GPU compute.
_DIAG_IRRELEVANT = re.compile(
    r"(?i)OpenGL|Vulkan|DirectX|\bDX1[12]\b|WDDM|CPU kernel IP|backtrace|paranoid|OS runtime"
    r"|Scheduling information|NVTX events? (might have not|might not)|No NVTX events"
)
_DIAG_MAX_NOTES = 10


def _diagnostic_notes(src: sqlite3.Connection, tables: dict[str, set[str]]) -> list[str]:
    """Nsight Systems' own warnings and errors, e.g. that CUDA tracing did not start.

    They explain data missing from the export (no kernels, no unified-memory rows), so
    they are passed on as notes; the table is absent in older exports.
    """
    columns = tables.get("DIAGNOSTIC_EVENT")
    if not columns or not {"severity", "text"} <= columns:
        return []
    order = "timestamp, " if "timestamp" in columns else ""
    rows = src.execute(
        f"SELECT severity, text FROM DIAGNOSTIC_EVENT WHERE severity IN (?, ?) "
        f"ORDER BY {order}severity, text",
        [_DIAG_WARNING, _DIAG_ERROR],
    ).fetchall()
    notes: list[str] = []
    for severity, raw in rows:
        text = " ".join(str(raw or "").split())
        if not text or _DIAG_IRRELEVANT.search(text):
            continue
        if len(text) > 300:
            text = text[:299] + "…"
        label = "error" if severity == _DIAG_ERROR else "warning"
        note = f"Nsight Systems {label}: {text}"
        if note not in notes:
            notes.append(note)
    if len(notes) > _DIAG_MAX_NOTES:
        notes = [*notes[:_DIAG_MAX_NOTES], f"… and {len(notes) - _DIAG_MAX_NOTES} more"]
    return notes


def _no_kernels_note(
    con: duckdb.DuckDBPyConnection, has_table: bool, has_diagnostics: bool = False
) -> str:
    where = "this export has no kernel table" if not has_table else "the kernel table is empty"
    copies, memsets, launches, calls = con.execute(
        f"""SELECT (SELECT count(*) FROM memcpys), (SELECT count(*) FROM memsets),
                   (SELECT count(*) FROM api_calls
                    WHERE name IN ({sql_list(LAUNCH_CALLS)})),
                   (SELECT count(*) FROM api_calls)"""
    ).fetchone()  # type: ignore[misc]
    if calls and not launches and not has_table:
        # CUDA tracing recorded the program's runtime calls and not one launch among them:
        # the program launched no kernel in the recorded span (Nsight then writes no kernel
        # table), nothing was lost in the export
        where = (
            f"the program launched none: its {calls:,} runtime "
            f"call{' holds' if calls == 1 else 's hold'} no launch"
        )
    note = f"no kernels recorded ({where})"
    ran = [
        f"{n:,} {one if n == 1 else many}"
        for n, one, many in (
            (copies, "memory copy", "memory copies"),
            (memsets, "memset", "memsets"),
        )
        if n
    ]
    if ran:
        note += "; the GPU ran only " + " and ".join(ran)
    if launches:
        # The host launched kernels the export does not hold. The calls are CUDA tracing's
        # own records, so it was on: the GPU side was what failed, and re-recording with
        # the same options gives the same file.
        note += (
            f"; yet CUDA tracing recorded {launches:,} kernel launch calls, so GPU activity "
            "was not collected and the GPU's time is unknown: "
            + (
                "the Nsight Systems diagnostics noted here say why"
                if has_diagnostics
                else "the export holds no Nsight Systems diagnostic that says why (the "
                "report file's Diagnostics Summary, in the Nsight Systems GUI, may)"
            )
            + "; record again where GPU activity tracing works"
        )
    return note


def _table_columns(src: sqlite3.Connection) -> dict[str, set[str]]:
    names = [r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    out: dict[str, set[str]] = {}
    for name in names:
        quoted = name.replace('"', '""')
        out[name] = {r[1] for r in src.execute(f'PRAGMA table_info("{quoted}")')}
    return out


def _is_nsys_export(tables: dict[str, set[str]]) -> bool:
    if any(t in tables for t in _NSYS_MARKERS):
        return True
    return any(t.startswith(_NSYS_PREFIXES) for t in tables)


def _load_strings(
    src: sqlite3.Connection, con: duckdb.DuckDBPyConnection, tables: dict[str, set[str]]
) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE _nsys_strings (id BIGINT, value VARCHAR)")
    if not {"id", "value"} <= tables.get("StringIds", set()):
        return
    cur = src.execute("SELECT id, value FROM StringIds")
    while rows := cur.fetchmany(200_000):
        ids, values = zip(*rows, strict=True)
        batch = {
            "id": np.fromiter(ids, dtype=np.int64, count=len(ids)),
            "value": np.array([v if isinstance(v, str) else as_text(v) for v in values], object),
        }
        con.register("_nsys_string_batch", batch)
        con.execute("INSERT INTO _nsys_strings SELECT * FROM _nsys_string_batch")
        con.unregister("_nsys_string_batch")


def _copy(
    src: sqlite3.Connection,
    connect: Connect,
    con: duckdb.DuckDBPyConnection,
    tables: dict[str, set[str]],
    table: str,
    exprs_for: Callable[[set[str]], dict[str, str]],
    target: str,
    select: str = "SELECT * FROM _sqlite_batch",
    with_rowid: bool = False,
) -> int:
    columns = tables.get(table)
    if not columns or "start" not in columns:
        return 0
    # Values are printed relative to the first row's: shorter text is cheaper to move.
    based = [c for c in ("start", "globalTid", "globalPid") if c in columns]
    first = src.execute(f"SELECT {', '.join(based)} FROM {table} ORDER BY rowid LIMIT 1").fetchone()
    if first is None:
        return 0
    bases = {c: int(v or 0) for c, v in zip(based, first, strict=True)}
    exprs = exprs_for(columns)
    offsets = {
        name: bases[col]
        for name, col in (
            ("start", "start"),
            ("global_tid", "globalTid"),
            ("global_pid", "globalPid"),
        )
        if col in bases and name in exprs
    }
    return copy_int_columns(
        connect,
        table,
        exprs,
        con,
        target,
        select=select,
        params={f"base_{c}": v for c, v in bases.items()},
        offsets=offsets,
        with_rowid=with_rowid,
    )


def _times(columns: set[str]) -> dict[str, str]:
    end = "end" if "end" in columns else "NULL"
    return {"start": "start - :base_start", "dur": f"{end} - start"}


def _based(columns: set[str], column: str) -> str:
    return f"{column} - :base_{column}" if column in columns else "NULL"


def _kernel_exprs(c: set[str]) -> dict[str, str]:
    static, dynamic = first_column(c, "staticSharedMemory"), first_column(c, "dynamicSharedMemory")
    if static == "NULL" or dynamic == "NULL":
        shared = static if dynamic == "NULL" else dynamic
    else:
        shared = f"{static} + {dynamic}"
    return {
        **_times(c),
        "device_id": first_column(c, "deviceId"),
        "stream_id": first_column(c, "streamId"),
        "correlation_id": first_column(c, "correlationId"),
        # The demangled full name is what the PyTorch profiler shows for a kernel.
        "name_id": (
            f"coalesce({first_column(c, 'demangledName')}, {first_column(c, 'shortName')}, "
            f"{first_column(c, 'mangledName')})"
        ),
        "registers": first_column(c, "registersPerThread"),
        "grid_x": first_column(c, "gridX"),
        "grid_y": first_column(c, "gridY"),
        "grid_z": first_column(c, "gridZ"),
        "block_x": first_column(c, "blockX"),
        "block_y": first_column(c, "blockY"),
        "block_z": first_column(c, "blockZ"),
        "shared_mem": shared,
    }


def _memcpy_exprs(c: set[str]) -> dict[str, str]:
    return {
        **_times(c),
        "device_id": first_column(c, "deviceId"),
        "stream_id": first_column(c, "streamId"),
        "correlation_id": first_column(c, "correlationId"),
        "copy_kind": first_column(c, "copyKind"),
        "src_kind": first_column(c, "srcKind"),
        "dst_kind": first_column(c, "dstKind"),
        "bytes": first_column(c, "bytes"),
    }


def _memset_exprs(c: set[str]) -> dict[str, str]:
    return {
        **_times(c),
        "device_id": first_column(c, "deviceId"),
        "stream_id": first_column(c, "streamId"),
        "correlation_id": first_column(c, "correlationId"),
        "bytes": first_column(c, "bytes"),
        "mem_kind": first_column(c, "memKind"),
    }


def _runtime_exprs(c: set[str]) -> dict[str, str]:
    return {
        **_times(c),
        "event_class": first_column(c, "eventClass"),
        "global_tid": _based(c, "globalTid"),
        "correlation_id": first_column(c, "correlationId"),
        "name_id": first_column(c, "nameId"),
    }


def _sync_exprs(c: set[str]) -> dict[str, str]:
    return {
        **_times(c),
        "device_id": first_column(c, "deviceId"),
        "stream_id": first_column(c, "streamId"),
        "correlation_id": first_column(c, "correlationId"),
        "global_pid": _based(c, "globalPid"),
        "sync_type": (
            f"coalesce({first_column(c, 'syncType')}, {first_column(c, 'deprecatedSyncType')})"
        ),
    }


def _nvtx_exprs(c: set[str]) -> dict[str, str]:
    return {
        **_times(c),
        "event_type": first_column(c, "eventType"),
        "global_tid": _based(c, "globalTid"),
        "text_id": first_column(c, "textId"),
        "domain_id": first_column(c, "domainId"),
    }


def _load_nvtx_text(
    src: sqlite3.Connection, con: duckdb.DuckDBPyConnection, tables: dict[str, set[str]]
) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE _nsys_nvtx_text (row_id BIGINT, text VARCHAR)")
    if "text" not in tables.get(NVTX, set()):
        return
    lo, hi = src.execute(rowid_range(NVTX)).fetchone()
    if lo is None:
        return
    # NVTX text is a C string, so it never holds NUL: one NUL-joined string per batch moves
    # it without a Python object per value inside sqlite3. A batch that splits wrong (a NUL
    # after all) is read row by row.
    joined = f"""SELECT count(*), group_concat(rowid), group_concat(text, char(0))
                 FROM {NVTX} WHERE text IS NOT NULL AND rowid BETWEEN ? AND ?"""
    for start in range(lo, hi + 1, _TEXT_BATCH_ROWS):
        end = start + _TEXT_BATCH_ROWS - 1
        n, ids, texts = src.execute(joined, (start, end)).fetchone()
        if not n:
            continue
        row_ids = np.fromstring(ids, dtype=np.int64, sep=",")
        values = texts.split("\0")
        if len(values) != n or len(row_ids) != n:
            rows = src.execute(
                f"SELECT rowid, text FROM {NVTX} WHERE text IS NOT NULL AND rowid BETWEEN ? AND ?",
                (start, end),
            ).fetchall()
            row_ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            values = [as_text(r[1]) for r in rows]
        batch = {"row_id": row_ids, "text": np.array(values, dtype=object)}
        con.register("_nsys_text_batch", batch)
        con.execute("INSERT INTO _nsys_nvtx_text SELECT * FROM _nsys_text_batch")
        con.unregister("_nsys_text_batch")


def _route(con: duckdb.DuckDBPyConnection) -> None:
    """Staged synchronization and NVTX rows -> canonical rows."""
    # The host thread of a synchronization is that of the API call it belongs to.
    con.execute(
        f"""
        INSERT INTO syncs
        SELECT y.device_id, nullif(y.stream_id, {INVALID_ID}),
               coalesce(a.pid, {_PID.format(g="y.global_pid")}), a.tid,
               {sql_case("y.sync_type", SYNC_KINDS, "Unknown")},
               y.start, y.start + y.dur, y.correlation_id
        FROM _nsys_sync y
        LEFT JOIN (SELECT correlation_id, any_value(pid) AS pid, any_value(tid) AS tid
                   FROM api_calls
                   WHERE correlation_id IN (SELECT correlation_id FROM _nsys_sync)
                     AND correlation_id > 0
                   GROUP BY correlation_id) a USING (correlation_id)
        WHERE y.dur >= 0
        """
    )
    con.execute(
        f"""
        INSERT INTO ranges
        WITH domains AS (
            SELECT n.domain_id, any_value(coalesce(t.text, s.value)) AS name
            FROM _nsys_nvtx n
            LEFT JOIN _nsys_nvtx_text t USING (row_id)
            LEFT JOIN _nsys_strings s ON s.id = n.text_id
            WHERE n.event_type = {NVTX_DOMAIN_CREATE}
            GROUP BY n.domain_id
        )
        SELECT row_number() OVER (ORDER BY n.start, n.row_id),
               {_PID.format(g="n.global_tid")}, {_TID.format(g="n.global_tid")}, NULL,
               regexp_replace(coalesce(t.text, s.value, ''), '{_EMIT_NVTX_SUFFIX}', '\\1'),
               d.name, n.start, n.start + n.dur, NULL, NULL
        FROM _nsys_nvtx n
        LEFT JOIN _nsys_nvtx_text t USING (row_id)
        LEFT JOIN _nsys_strings s ON s.id = n.text_id
        LEFT JOIN domains d ON d.domain_id = n.domain_id AND n.domain_id <> 0
        WHERE n.event_type IN ({NVTX_PUSH_POP}, {NVTX_START_END}) AND n.dur >= 0
        """
    )
