"""The SQL that turns blobs of Chrome-trace events into the canonical tables.

Staging (:func:`stage_sql`) parses a set of blob files with DuckDB's JSON reader into one
typed table, each field cast once; the routing queries (:data:`ROUTE_SQL`) then copy each
event to its table by category, and the census (:data:`CENSUS`) counts what a staged set
holds. Times are read as DECIMAL(38,6) and cast to integer nanoseconds (the cast rounds
half away from zero), exact for the nanosecond decimals newer profilers write; times
written with more than six decimals take a faster exact route (:func:`stage_sql`).
"""

from __future__ import annotations

import re

from ingest.chrome.event_splitter import DEFAULT_MAX_EVENT_BYTES

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
    ("Concrete Inputs", "concrete", "VARCHAR"),
    ("name", "arg_name", "VARCHAR"),
    ("Collective name", "coll", "VARCHAR"),
    ("In msg nelems", "in_n", "BIGINT"),
    ("Out msg nelems", "out_n", "BIGINT"),
    ("dtype", "dtype", "VARCHAR"),
    ("Group size", "gsize", "INTEGER"),
    ("cuda_sync_kind", "sync_kind", "VARCHAR"),
    ("kernel", "launched", "VARCHAR"),
]
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


def stage_sql(table: str, variant: str, precise: bool = False, base: int = 0) -> str:
    """Staging query for a set of blob files (the list parameter), creating ``table``.

    DuckDB's JSON reader matches STRUCT fields to keys case-sensitively and parses straight
    into them, which is several times faster than keeping ``args`` as JSON text and
    extracting paths. A STRUCT cannot declare two keys that differ only in case, so the
    modern and the 2021 spelling of the external id each get their variant; files holding
    both fall back to JSON paths.

    Text with more digits than a DECIMAL's scale is rounded by a slow path of DuckDB's
    parser (4x slower for 16 decimals). ``precise`` reads times with 16 decimals instead
    (exact for up to 16) and rounds to 6 in SQL, which is the same value except where
    rounding a 17th or later digit landed exactly on a 6-decimal half: ``tie6`` marks those
    rows so the files can be read again the standard way (``ingest.chrome.batch_load``).

    ``base`` is a whole microsecond near the files' times
    (:func:`ingest.chrome.blob_files.time_base`); only speed depends on it.
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


# The first whole microseconds of times near the start of a blob, for blob_files.time_base.
TIME_INTEGERS = re.compile(rb'"ts"\s*:\s*([0-9]{1,16})[.,}\s]')
BASE_MARGIN = 10**10  # µs (under three hours) before the earliest time seen
MAX_BASE = 9 * 10**15  # base * 1000 must fit BIGINT
# A time with more than six decimals near the start of a blob: read its times the precise
# way. Only speed depends on this guess; both ways store the same values.
LONG_TIME = re.compile(rb'"(?:ts|dur)"\s*:\s*-?[0-9]+\.[0-9]{7}')
SAMPLE = 64 * 1024
# A number with 17 or more decimals anywhere (in times or not: being wrong only costs time).
OVERLONG_DECIMALS = re.compile(rb"\.[0-9]{17}")

# The profiler's allocator events ("[memory]" instants) carry "Bytes", which a STRUCT
# cannot hold beside the copies' "bytes": they get their own pass, only over batches whose
# census counted them.
_MEMORY_KEYS = ["Device Type", "Device Id", "Bytes", "Total Allocated", "Total Reserved", "Addr"]
MEMORY_SQL = f"""
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

ROUTE_SQL = [
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
    SELECT nextval('tracelens_op_seq'), pid, tid, name,
           CASE WHEN cat = 'operator' THEN 'cpu_op' ELSE cat END,
           ts_ns, ts_ns + dur_ns, NULL, NULL, {_EXTERNAL_ID}, in_dims, in_types, concrete
    FROM blob WHERE {_VALID_X} AND cat IN ('cpu_op', 'operator', 'python_function')
    """,
    f"""
    INSERT INTO ranges
    SELECT nextval('tracelens_range_seq'), pid, tid,
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
]

# Per category (the phase for metadata rows, which have none): counts, what is skipped,
# and the rows MEMORY_SQL would take.
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


# A batch of blobs is staged into one table of an in-memory database attached for the read,
# and routed from there, on a cursor (a second connection to the same database) while the
# caller's connection goes on splitting: temporary tables are private to a connection, an
# attached database is not. The process and thread names wait there for the end of the
# read. The operator and range ids come from sequences of the trace's own database, since
# one statement may write to one database only; they are dropped after the read.
STAGE_DB = "tracelens_staging"
STAGED = f"{STAGE_DB}.blob"
META_NAMES = f"{STAGE_DB}.meta_names"
SEQUENCES = ("tracelens_op_seq", "tracelens_range_seq")


def _staged(sql: str) -> str:
    sql = re.sub(r"\bFROM blob\b", f"FROM {STAGED}", sql)
    return sql.replace("INTO meta_names", f"INTO {META_NAMES}")


ROUTES = [(_route_for(sql), _staged(sql)) for sql in ROUTE_SQL]
CENSUS = _staged(_CENSUS)
