"""An Nsight Systems run's trace as Chrome-trace events, from its DuckDB database.

A kept Nsight SQLite export is no format Perfetto or chrome://tracing open, so an
enriched download of such a run is written from the canonical tables ingest filled from
it (after redaction, so their text is the kept copy's): kernels, copies and memsets on
``pid`` = device, ``tid`` = stream; runtime and driver calls and NVTX ranges on their
host threads; synchronizations; process and thread names. Events are spelled as Kineto
spells them (categories, ``args`` keys, copy and memset names), so tracelens's own Chrome
reader reads the download back into the same kernels, copies, calls and ranges. NVTX
domains become ``args.domain``: the reader files every host range under the category
``user_annotation``. DuckDB writes each event's JSON and the rows are fetched in batches,
so memory follows the batch, not the trace.
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb

_BATCH = 20_000


def _us(column: str) -> str:
    # Exact: DECIMAL products keep every digit (a DECIMAL division goes through a double).
    return f"(({column})::DECIMAL(38,0) * 0.001::DECIMAL(4,3))::DECIMAL(38,3)"


def _cap(column: str) -> str:
    """``device`` -> ``Device``, as Kineto names copies' and memsets' memory."""
    return f"(upper(left({column}, 1)) || lower(substr({column}, 2)))"


_QUERIES = [
    """
    SELECT json_object('ph', 'M', 'name', 'process_name', 'pid', device_id,
                       'args', json_object('name',
                                           'GPU ' || device_id || coalesce(' ' || name, '')))
    FROM devices
    """,
    """
    SELECT json_object('ph', 'M', 'name', 'process_name', 'pid', pid,
                       'args', json_object('name', any_value(process_name)))
    FROM threads WHERE process_name IS NOT NULL GROUP BY pid
    """,
    """
    SELECT json_object('ph', 'M', 'name', 'thread_name', 'pid', pid, 'tid', tid,
                       'args', json_object('name', thread_name))
    FROM threads WHERE thread_name IS NOT NULL
    """,
    f"""
    SELECT json_object('ph', 'X', 'cat', 'kernel', 'name', name, 'pid', device_id,
                       'tid', stream_id, 'ts', {_us("start_ns")}, 'dur', {_us("end_ns - start_ns")},
                       'args', json_object('device', device_id, 'stream', stream_id,
                                           'correlation', correlation_id,
                                           'grid', [grid_x, grid_y, grid_z],
                                           'block', [block_x, block_y, block_z],
                                           'registers per thread', registers_per_thread,
                                           'shared memory', shared_memory_bytes))
    FROM kernels
    """,
    f"""
    SELECT json_object('ph', 'X', 'cat', 'gpu_memcpy',
                       'name', 'Memcpy ' || kind || ' (' || {_cap("src_mem")} || ' -> '
                               || {_cap("dst_mem")} || ')',
                       'pid', device_id, 'tid', stream_id,
                       'ts', {_us("start_ns")}, 'dur', {_us("end_ns - start_ns")},
                       'args', json_object('device', device_id, 'stream', stream_id,
                                           'correlation', correlation_id, 'bytes', bytes))
    FROM memcpys
    """,
    f"""
    SELECT json_object('ph', 'X', 'cat', 'gpu_memset', 'name', 'Memset (' || {_cap("mem")} || ')',
                       'pid', device_id, 'tid', stream_id,
                       'ts', {_us("start_ns")}, 'dur', {_us("end_ns - start_ns")},
                       'args', json_object('device', device_id, 'stream', stream_id,
                                           'correlation', correlation_id, 'bytes', bytes))
    FROM memsets
    """,
    f"""
    SELECT json_object('ph', 'X',
                       'cat', CASE WHEN kind = 'driver' THEN 'cuda_driver' ELSE 'cuda_runtime' END,
                       'name', name, 'pid', pid, 'tid', tid,
                       'ts', {_us("start_ns")}, 'dur', {_us("end_ns - start_ns")},
                       'args', json_object('correlation', correlation_id, 'kernel', kernel_name))
    FROM api_calls
    """,
    f"""
    SELECT json_object('ph', 'X',
                       'cat', CASE WHEN device_id IS NULL THEN 'user_annotation'
                                   ELSE 'gpu_user_annotation' END,
                       'name', name, 'pid', coalesce(device_id, pid), 'tid', tid,
                       'ts', {_us("start_ns")}, 'dur', {_us("end_ns - start_ns")},
                       'args', json_object('domain', domain, 'device', device_id))
    FROM ranges
    """,
    f"""
    SELECT json_object('ph', 'X', 'cat', 'cuda_sync', 'name', kind,
                       'pid', device_id, 'tid', stream_id,
                       'ts', {_us("start_ns")}, 'dur', {_us("end_ns - start_ns")},
                       'args', json_object('device', device_id, 'stream', stream_id,
                                           'correlation', correlation_id,
                                           'cuda_sync_kind', kind))
    FROM syncs
    """,
]


def nsys_chrome_events(cur: duckdb.DuckDBPyConnection) -> Iterator[bytes]:
    """Every event the database holds as Chrome JSON text: blocks of comma-separated
    events (a block per batch: a generator step per event would cost more than the JSON)."""
    for query in _QUERIES:
        result = cur.execute(query)
        while rows := result.fetchmany(_BATCH):
            yield ",\n".join(str(text) for (text,) in rows).encode()
