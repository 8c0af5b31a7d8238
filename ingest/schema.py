"""The canonical trace database: one DuckDB database per ingested trace.

Every reader writes these tables and nothing else; every analyzer reads them and never
sees the source format. Times are BIGINT nanoseconds on one clock per trace. Every table
exists in every database, empty where the source had nothing.
"""

from __future__ import annotations

import duckdb

SCHEMA_VERSION = "2"

TABLES: dict[str, str] = {
    "trace_info": """
        key VARCHAR PRIMARY KEY,
        value VARCHAR
    """,
    "devices": """
        device_id INTEGER PRIMARY KEY,
        name VARCHAR,
        sm_count INTEGER,
        total_memory_bytes BIGINT,
        compute_capability VARCHAR
    """,
    "kernels": """
        device_id INTEGER,
        stream_id BIGINT,
        name VARCHAR,
        start_ns BIGINT,
        end_ns BIGINT,
        correlation_id BIGINT,
        grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
        block_x INTEGER, block_y INTEGER, block_z INTEGER,
        registers_per_thread INTEGER,
        shared_memory_bytes BIGINT,
        est_occupancy_pct DOUBLE
    """,
    "memcpys": """
        device_id INTEGER,
        stream_id BIGINT,
        kind VARCHAR,
        src_mem VARCHAR,
        dst_mem VARCHAR,
        bytes BIGINT,
        start_ns BIGINT,
        end_ns BIGINT,
        correlation_id BIGINT
    """,
    "memsets": """
        device_id INTEGER,
        stream_id BIGINT,
        bytes BIGINT,
        mem VARCHAR,
        start_ns BIGINT,
        end_ns BIGINT,
        correlation_id BIGINT
    """,
    "api_calls": """
        pid BIGINT,
        tid BIGINT,
        name VARCHAR,
        kind VARCHAR,
        start_ns BIGINT,
        end_ns BIGINT,
        correlation_id BIGINT,
        external_id BIGINT
    """,
    "cpu_ops": """
        op_id BIGINT,
        pid BIGINT,
        tid BIGINT,
        name VARCHAR,
        category VARCHAR,
        start_ns BIGINT,
        end_ns BIGINT,
        parent_id BIGINT,
        depth INTEGER,
        external_id BIGINT,
        input_shapes VARCHAR,
        input_types VARCHAR
    """,
    "ranges": """
        range_id BIGINT,
        pid BIGINT,
        tid BIGINT,
        device_id INTEGER,
        name VARCHAR,
        domain VARCHAR,
        start_ns BIGINT,
        end_ns BIGINT,
        parent_id BIGINT,
        depth INTEGER
    """,
    "syncs": """
        device_id INTEGER,
        stream_id BIGINT,
        pid BIGINT,
        tid BIGINT,
        kind VARCHAR,
        start_ns BIGINT,
        end_ns BIGINT,
        correlation_id BIGINT
    """,
    "memory_events": """
        pid BIGINT,
        tid BIGINT,
        device_id INTEGER,
        ts_ns BIGINT,
        bytes BIGINT,
        total_allocated BIGINT,
        total_reserved BIGINT,
        addr BIGINT
    """,
    "comm_ops": """
        pid BIGINT,
        tid BIGINT,
        name VARCHAR,
        collective VARCHAR,
        start_ns BIGINT,
        end_ns BIGINT,
        external_id BIGINT,
        in_nelems BIGINT,
        out_nelems BIGINT,
        dtype VARCHAR,
        group_size INTEGER
    """,
    "threads": """
        pid BIGINT,
        tid BIGINT,
        process_name VARCHAR,
        thread_name VARCHAR
    """,
    "gaps": """
        device_id INTEGER,
        start_ns BIGINT,
        end_ns BIGINT,
        cause VARCHAR,
        detail VARCHAR,
        launch_start_ns BIGINT,
        launch_end_ns BIGINT,
        blocked_ns BIGINT
    """,
}

# Values a reader may put in memcpys.kind, and in src_mem/dst_mem/mem.
MEMCPY_KINDS = (
    "HtoD",
    "DtoH",
    "DtoD",
    "HtoH",
    "PtoP",
    "HtoA",
    "AtoH",
    "AtoA",
    "AtoD",
    "DtoA",
    "UVM_HtoD",
    "UVM_DtoH",
    "UVM_DtoD",
    "Unknown",
)
MEMORY_KINDS = ("pageable", "pinned", "device", "array", "managed", "unknown")


def create_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create every canonical table (empty) in ``con``."""
    for name, columns in TABLES.items():
        con.execute(f"CREATE TABLE IF NOT EXISTS {name} ({columns})")


def set_info(con: duckdb.DuckDBPyConnection, values: dict[str, object]) -> None:
    """Insert or replace trace_info facts; ``None`` values are skipped."""
    rows = [(k, str(v)) for k, v in values.items() if v is not None]
    if rows:
        con.executemany("INSERT OR REPLACE INTO trace_info VALUES (?, ?)", rows)


def active_device_ids(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Devices that ran GPU work: the only ones a reader lists in ``devices``."""
    rows = con.execute(
        """SELECT DISTINCT device_id FROM (
             SELECT device_id FROM kernels UNION ALL SELECT device_id FROM memcpys
             UNION ALL SELECT device_id FROM memsets) WHERE device_id IS NOT NULL
           ORDER BY 1"""
    ).fetchall()
    return [r[0] for r in rows]


def earliest_ns(con: duckdb.DuckDBPyConnection) -> int | None:
    """The first timestamp of any activity, host or device: the trace's ``t0_ns`` fact."""
    row = con.execute(
        """SELECT min(t) FROM (
             SELECT min(start_ns) t FROM kernels
             UNION ALL SELECT min(start_ns) FROM memcpys
             UNION ALL SELECT min(start_ns) FROM memsets
             UNION ALL SELECT min(start_ns) FROM cpu_ops
             UNION ALL SELECT min(start_ns) FROM api_calls
             UNION ALL SELECT min(start_ns) FROM ranges)"""
    ).fetchone()
    return row[0] if row else None
