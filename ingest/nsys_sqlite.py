"""Nsight Systems SQLite export (``nsys export --type sqlite``) -> the canonical tables.

Every export from nsys 2020.3 on is read the same way: tables are created lazily, so any
may be missing; columns were added over the years, so each is read by name and a missing
one becomes NULL; the enumerations are built in (:mod:`ingest.nsys_enums`) because old
exports have no ENUM_* tables. Integer columns are bulk-copied into staging tables by
:mod:`ingest.sqlite_columns`; names (``StringIds``) and the routing into canonical rows
are done in DuckDB SQL. The user's file is opened read-only and immutable: never written.

What lands where: kernels, memcpys (unified-memory migrations keep their ``UVM_*`` kinds),
memsets, api_calls (runtime and driver, version suffix stripped), syncs (with the host
thread of the API call they belong to), ranges (NVTX push/pop and start/end, with their
domain; PyTorch ``emit_nvtx`` decorations such as ``, seq = 12`` removed from op names),
threads, devices (only GPUs that ran work; the rest are listed in trace_info). Nsight has
no operator records, so ``cpu_ops`` stays empty and attribution falls back to ranges.
"""

from __future__ import annotations

import functools
import sqlite3
import struct
from pathlib import Path
from urllib.parse import quote

import duckdb
import numpy as np

from ingest.errors import TraceInputError
from ingest.nesting import assign_nesting
from ingest.nsys_enums import (
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
from ingest.schema import set_info
from ingest.sqlite_columns import ColumnCountMismatch, copy_int_columns

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

_STAGING = {
    "_nsys_kernel": [
        "start",
        "dur",
        "device_id",
        "stream_id",
        "correlation_id",
        "name_id",
        "registers",
        "grid_x",
        "grid_y",
        "grid_z",
        "block_x",
        "block_y",
        "block_z",
        "shared_mem",
    ],
    "_nsys_memcpy": [
        "start",
        "dur",
        "device_id",
        "stream_id",
        "correlation_id",
        "copy_kind",
        "src_kind",
        "dst_kind",
        "bytes",
    ],
    "_nsys_memset": [
        "start",
        "dur",
        "device_id",
        "stream_id",
        "correlation_id",
        "bytes",
        "mem_kind",
    ],
    "_nsys_runtime": ["start", "dur", "event_class", "global_tid", "correlation_id", "name_id"],
    "_nsys_sync": [
        "start",
        "dur",
        "device_id",
        "stream_id",
        "correlation_id",
        "global_pid",
        "sync_type",
    ],
    "_nsys_nvtx": [
        "start",
        "dur",
        "event_type",
        "global_tid",
        "text_id",
        "domain_id",
    ],
}


def read_nsys_sqlite(con: duckdb.DuckDBPyConnection, path: Path) -> list[str]:
    """Load the nsys export at ``path`` into ``con``; returns notes for the user."""
    path = Path(path)
    _check_not_truncated(path)
    connect = functools.partial(_open_read_only, path)
    try:
        return _read(con, path, connect)
    except (sqlite3.DatabaseError, ColumnCountMismatch) as exc:
        raise TraceInputError(
            path, f"damaged or unreadable SQLite file ({str(exc).splitlines()[0]})"
        ) from None


def _open_read_only(path: Path) -> sqlite3.Connection:
    # immutable: no locks, no journal or -wal/-shm files created beside the user's file.
    uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


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


def _read(con: duckdb.DuckDBPyConnection, path: Path, connect) -> list[str]:
    src = connect()
    try:
        tables = _table_columns(src)
        if not _is_nsys_export(tables):
            raise TraceInputError(
                path,
                "SQLite database but not an Nsight Systems export (none of its tables: "
                "StringIds, CUPTI_ACTIVITY_KIND_*, NVTX_EVENTS, TARGET_INFO_*)",
            )
        meta = _export_meta(src, tables)
        _load_strings(src, con, tables)
        notes: list[str] = []
        for staging, columns in _STAGING.items():
            cols = ", ".join(f"{c} BIGINT" for c in ["row_id", *columns])
            con.execute(f"CREATE OR REPLACE TEMP TABLE {staging} ({cols})")
        counts = {
            KERNEL: _stage(src, connect, con, tables, KERNEL, "_nsys_kernel", _kernel_exprs),
            MEMCPY: _stage(src, connect, con, tables, MEMCPY, "_nsys_memcpy", _memcpy_exprs),
            MEMSET: _stage(src, connect, con, tables, MEMSET, "_nsys_memset", _memset_exprs),
            RUNTIME: _stage(src, connect, con, tables, RUNTIME, "_nsys_runtime", _runtime_exprs),
            SYNC: _stage(src, connect, con, tables, SYNC, "_nsys_sync", _sync_exprs),
            NVTX: _stage(src, connect, con, tables, NVTX, "_nsys_nvtx", _nvtx_exprs),
        }
        _load_nvtx_text(src, con, tables)
        _route(con)
        _load_threads(src, con, tables)
        gpus = _target_gpus(src, tables)
        cuda_to_gpu = _cuda_device_map(src, tables)
        host = _hostname(src, tables)
        session_utc = _session_start_utc(src, tables)
    finally:
        src.close()
    _insert_devices(con, gpus, cuda_to_gpu)
    assign_nesting(con, "ranges", "range_id", ["pid", "tid", "device_id"])
    if KERNEL not in tables:
        notes.append("this export has no kernel table: no kernels were recorded")
    dropped = con.execute(
        f"""SELECT count(*) FILTER (WHERE end_ns IS NULL OR dur < 0) FROM (
              SELECT start + dur AS end_ns, dur FROM _nsys_nvtx
              WHERE event_type IN ({NVTX_PUSH_POP}, {NVTX_START_END}))"""
    ).fetchone()[0]  # type: ignore[index]
    if dropped:
        notes.append(f"{dropped:,} NVTX ranges that never ended were skipped")
    if not meta:
        notes.append("export has no version metadata (nsys 2020.x or older)")
    t0 = con.execute(
        """SELECT min(t) FROM (
             SELECT min(start_ns) t FROM kernels
             UNION ALL SELECT min(start_ns) FROM memcpys
             UNION ALL SELECT min(start_ns) FROM memsets
             UNION ALL SELECT min(start_ns) FROM api_calls
             UNION ALL SELECT min(start_ns) FROM ranges)"""
    ).fetchone()[0]  # type: ignore[index]
    set_info(
        con,
        {
            "format": "nsys_sqlite",
            "format_version": meta.get("EXPORT_SCHEMA_VERSION"),
            "tool": "Nsight Systems",
            "tool_version": meta.get("EXPORT_PRODUCT_VERSION"),
            "host": host,
            "session_start_utc": session_utc,
            "t0_ns": t0,
            "event_count": sum(counts.values()),
            "warnings": "\n".join(notes) if notes else None,
        },
    )
    for staging in [*_STAGING, "_nsys_strings", "_nsys_nvtx_text"]:
        con.execute(f"DROP TABLE IF EXISTS {staging}")
    return notes


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


def _export_meta(src: sqlite3.Connection, tables: dict[str, set[str]]) -> dict[str, str]:
    # META_DATA_EXPORT from nsys 2023.3; EXPORT_META_DATA in 2022.1-2023.2; none before.
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if {"name", "value"} <= tables.get(table, set()):
            return {str(k): str(v) for k, v in src.execute(f"SELECT name, value FROM {table}")}
    return {}


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
            "value": np.array([v if isinstance(v, str) else _text(v) for v in values], object),
        }
        con.register("_nsys_string_batch", batch)
        con.execute("INSERT INTO _nsys_strings SELECT * FROM _nsys_string_batch")
        con.unregister("_nsys_string_batch")


def _text(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def _stage(src, connect, con, tables, table: str, staging: str, exprs_for) -> int:
    columns = tables.get(table)
    if not columns or "start" not in columns:
        return 0
    base = src.execute(f"SELECT start FROM {table} ORDER BY rowid LIMIT 1").fetchone()
    if base is None:
        return 0
    exprs = exprs_for(columns)
    return copy_int_columns(
        connect,
        table,
        dict(zip(_STAGING[staging], exprs, strict=True)),
        con,
        staging,
        params={"base": int(base[0] or 0)},
        offsets={"start": int(base[0] or 0)},
    )


def _col(columns: set[str], *names: str) -> str:
    """The first of ``names`` that the table has, else NULL."""
    for n in names:
        if n in columns:
            return n
    return "NULL"


def _times(columns: set[str]) -> list[str]:
    # Offsets from the table's first start keep the text short, which is most of the cost.
    end = "end" if "end" in columns else "NULL"
    return ["start - :base", f"{end} - start"]


def _kernel_exprs(c: set[str]) -> list[str]:
    static, dynamic = _col(c, "staticSharedMemory"), _col(c, "dynamicSharedMemory")
    if static == "NULL" or dynamic == "NULL":
        shared = static if dynamic == "NULL" else dynamic
    else:
        shared = f"{static} + {dynamic}"
    return [
        *_times(c),
        _col(c, "deviceId"),
        _col(c, "streamId"),
        _col(c, "correlationId"),
        # The demangled full name is what the PyTorch profiler shows for a kernel.
        f"coalesce({_col(c, 'demangledName')}, {_col(c, 'shortName')}, {_col(c, 'mangledName')})",
        _col(c, "registersPerThread"),
        _col(c, "gridX"),
        _col(c, "gridY"),
        _col(c, "gridZ"),
        _col(c, "blockX"),
        _col(c, "blockY"),
        _col(c, "blockZ"),
        shared,
    ]


def _memcpy_exprs(c: set[str]) -> list[str]:
    return [
        *_times(c),
        _col(c, "deviceId"),
        _col(c, "streamId"),
        _col(c, "correlationId"),
        _col(c, "copyKind"),
        _col(c, "srcKind"),
        _col(c, "dstKind"),
        _col(c, "bytes"),
    ]


def _memset_exprs(c: set[str]) -> list[str]:
    return [
        *_times(c),
        _col(c, "deviceId"),
        _col(c, "streamId"),
        _col(c, "correlationId"),
        _col(c, "bytes"),
        _col(c, "memKind"),
    ]


def _runtime_exprs(c: set[str]) -> list[str]:
    return [
        *_times(c),
        _col(c, "eventClass"),
        _col(c, "globalTid"),
        _col(c, "correlationId"),
        _col(c, "nameId"),
    ]


def _sync_exprs(c: set[str]) -> list[str]:
    return [
        *_times(c),
        _col(c, "deviceId"),
        _col(c, "streamId"),
        _col(c, "correlationId"),
        _col(c, "globalPid"),
        f"coalesce({_col(c, 'syncType')}, {_col(c, 'deprecatedSyncType')})",
    ]


def _nvtx_exprs(c: set[str]) -> list[str]:
    return [
        *_times(c),
        _col(c, "eventType"),
        _col(c, "globalTid"),
        _col(c, "textId"),
        _col(c, "domainId"),
    ]


def _load_nvtx_text(
    src: sqlite3.Connection, con: duckdb.DuckDBPyConnection, tables: dict[str, set[str]]
) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE _nsys_nvtx_text (row_id BIGINT, text VARCHAR)")
    if "text" not in tables.get(NVTX, set()):
        return
    cur = src.execute(f"SELECT rowid, text FROM {NVTX} WHERE text IS NOT NULL")
    while rows := cur.fetchmany(200_000):
        ids, texts = zip(*rows, strict=True)
        batch = {
            "row_id": np.fromiter(ids, dtype=np.int64, count=len(ids)),
            "text": np.array([t if isinstance(t, str) else _text(t) for t in texts], object),
        }
        con.register("_nsys_text_batch", batch)
        con.execute("INSERT INTO _nsys_nvtx_text SELECT * FROM _nsys_text_batch")
        con.unregister("_nsys_text_batch")


def _route(con: duckdb.DuckDBPyConnection) -> None:
    """Staging rows -> canonical rows, names resolved through StringIds."""
    stream = f"nullif(stream_id, {INVALID_ID})"
    con.execute(
        """
        INSERT INTO kernels
        SELECT k.device_id, k.stream_id, s.value, k.start, k.start + k.dur,
               k.correlation_id, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z,
               k.registers, k.shared_mem, NULL
        FROM _nsys_kernel k LEFT JOIN _nsys_strings s ON s.id = k.name_id
        WHERE k.dur >= 0
        """
    )
    con.execute(
        f"""
        INSERT INTO memcpys
        SELECT device_id, {stream}, {sql_case("copy_kind", COPY_KINDS, "Unknown")},
               {sql_case("src_kind", MEMORY_KINDS, "unknown")},
               {sql_case("dst_kind", MEMORY_KINDS, "unknown")},
               bytes, start, start + dur, correlation_id
        FROM _nsys_memcpy WHERE dur >= 0
        """
    )
    con.execute(
        f"""
        INSERT INTO memsets
        SELECT device_id, {stream}, bytes, {sql_case("mem_kind", MEMORY_KINDS, "unknown")},
               start, start + dur, correlation_id
        FROM _nsys_memset WHERE dur >= 0
        """
    )
    con.execute(
        f"""
        INSERT INTO api_calls
        SELECT {_PID.format(g="r.global_tid")}, {_TID.format(g="r.global_tid")},
               regexp_replace(regexp_replace(s.value, '_v[0-9]+$', ''), '_pt(sz|ds)$', ''),
               {sql_case("r.event_class", API_CLASSES, "runtime")},
               r.start, r.start + r.dur, r.correlation_id, NULL
        FROM _nsys_runtime r LEFT JOIN _nsys_strings s ON s.id = r.name_id
        WHERE r.dur >= 0
        """
    )
    # The host thread of a synchronization is that of the API call it belongs to.
    con.execute(
        f"""
        INSERT INTO syncs
        SELECT y.device_id, nullif(y.stream_id, {INVALID_ID}),
               coalesce({_PID.format(g="r.g")}, {_PID.format(g="y.global_pid")}),
               {_TID.format(g="r.g")}, {sql_case("y.sync_type", SYNC_KINDS, "Unknown")},
               y.start, y.start + y.dur, y.correlation_id
        FROM _nsys_sync y
        LEFT JOIN (SELECT correlation_id, any_value(global_tid) AS g FROM _nsys_runtime
                   WHERE correlation_id > 0 GROUP BY correlation_id) r USING (correlation_id)
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


def _load_threads(
    src: sqlite3.Connection, con: duckdb.DuckDBPyConnection, tables: dict[str, set[str]]
) -> None:
    threads: dict[tuple[int, int], str | None] = {}
    if {"nameId", "globalTid"} <= tables.get("ThreadNames", set()):
        strings = dict(
            con.execute(
                "SELECT id, value FROM _nsys_strings WHERE id IN (SELECT UNNEST(?::BIGINT[]))",
                [[r[0] for r in src.execute("SELECT DISTINCT nameId FROM ThreadNames")]],
            ).fetchall()
        )
        for name_id, g in src.execute("SELECT nameId, globalTid FROM ThreadNames"):
            if g is not None:
                threads[((g >> 24) & 0xFFFFFF, g & 0xFFFFFF)] = strings.get(name_id)
    processes: dict[int, str] = {}
    if {"pid", "name"} <= tables.get("PROCESSES", set()):
        for pid, name in src.execute("SELECT pid, name FROM PROCESSES"):
            if pid is not None and name is not None:
                processes[int(pid)] = _text(name) or ""
    # Only threads and processes that did something the analysis sees: a system-wide
    # capture lists every process on the host.
    active = {
        (r[0], r[1])
        for r in con.execute(
            """SELECT DISTINCT pid, tid FROM (
                 SELECT pid, tid FROM api_calls UNION ALL SELECT pid, tid FROM ranges
                 UNION ALL SELECT pid, tid FROM syncs)
               WHERE pid IS NOT NULL AND tid IS NOT NULL"""
        ).fetchall()
    }
    rows = []
    for pid, tid in sorted(active):
        rows.append((pid, tid, processes.get(pid), threads.get((pid, tid))))
    if rows:
        con.executemany("INSERT INTO threads VALUES (?, ?, ?, ?)", rows)


def _target_gpus(src: sqlite3.Connection, tables: dict[str, set[str]]) -> dict[int, tuple]:
    """GPU id -> (name, sm_count, total_memory_bytes, compute_capability)."""
    for table in ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU"):
        cols = tables.get(table) or set()
        # 2020.x keyed TARGET_INFO_CUDA_GPU by deviceId and spelled its columns differently.
        key = _col(cols, "id", "deviceId")
        if key == "NULL":
            continue
        name = _col(cols, "name")
        sms = _col(cols, "smCount", "numMultiprocessors")
        mem = _col(cols, "totalMemory", "totalGlobalMemory", "globalMemorySize")
        major = _col(cols, "computeMajor", "computeCapabilityMajor", "smMajor")
        minor = _col(cols, "computeMinor", "computeCapabilityMinor", "smMinor")
        out = {}
        for gid, n, s, m, ma, mi in src.execute(
            f"SELECT {key}, {name}, {sms}, {mem}, {major}, {minor} FROM {table}"
        ):
            if gid is None:
                continue
            cc = f"{ma}.{mi}" if ma is not None and mi is not None else None
            out[int(gid)] = (_text(n), s, m, cc)
        return out
    return {}


def _cuda_device_map(src: sqlite3.Connection, tables: dict[str, set[str]]) -> dict[int, int]:
    """CUDA device ordinal -> TARGET_INFO_GPU id, where the export says so unambiguously."""
    if not {"gpuId", "cudaId"} <= tables.get("TARGET_INFO_CUDA_DEVICE", set()):
        return {}
    pairs = set(src.execute("SELECT DISTINCT cudaId, gpuId FROM TARGET_INFO_CUDA_DEVICE"))
    by_cuda: dict[int, set[int]] = {}
    for cuda_id, gpu_id in pairs:
        if cuda_id is not None and gpu_id is not None:
            by_cuda.setdefault(int(cuda_id), set()).add(int(gpu_id))
    return {c: next(iter(g)) for c, g in by_cuda.items() if len(g) == 1}


def _hostname(src: sqlite3.Connection, tables: dict[str, set[str]]) -> str | None:
    if not {"name", "value"} <= tables.get("TARGET_INFO_SYSTEM_ENV", set()):
        return None
    row = src.execute(
        "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' LIMIT 1"
    ).fetchone()
    return _text(row[0]) if row else None


def _session_start_utc(src: sqlite3.Connection, tables: dict[str, set[str]]) -> str | None:
    if "utcTime" not in tables.get("TARGET_INFO_SESSION_START_TIME", set()):
        return None
    row = src.execute("SELECT utcTime FROM TARGET_INFO_SESSION_START_TIME LIMIT 1").fetchone()
    return _text(row[0]) if row else None


def _insert_devices(
    con: duckdb.DuckDBPyConnection, gpus: dict[int, tuple], cuda_to_gpu: dict[int, int]
) -> None:
    active = [
        r[0]
        for r in con.execute(
            """SELECT DISTINCT device_id FROM (
                 SELECT device_id FROM kernels UNION ALL SELECT device_id FROM memcpys
                 UNION ALL SELECT device_id FROM memsets) WHERE device_id IS NOT NULL
               ORDER BY 1"""
        ).fetchall()
    ]
    used: set[int] = set()
    rows = []
    for dev in active:
        gid = cuda_to_gpu.get(dev, dev)
        info = gpus.get(gid)
        if info is None:
            rows.append((dev, None, None, None, None))
            continue
        used.add(gid)
        rows.append((dev, *info))
    if rows:
        con.executemany("INSERT INTO devices VALUES (?, ?, ?, ?, ?)", rows)
    idle = sorted(set(gpus) - used)
    if idle:
        set_info(con, {"host_gpus_without_work": ", ".join(f"{i}: {gpus[i][0]}" for i in idle)})
