"""The canonical trace database: one DuckDB database per ingested trace.

Every reader writes these tables and nothing else; every analyzer reads them and never
sees the source format. Times are BIGINT nanoseconds on one clock per trace. Every table
exists in every database, empty where the source had nothing.

Each table and column is declared once here, with a one-line description: the CREATE
statements are generated from the declarations, the descriptions are attached as DuckDB
comments (``duckdb_tables()`` and ``duckdb_columns()`` show them), and ``docs/schema.md``
is generated from them (``tracelens schema --markdown``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import duckdb

# Raised whenever a table or column changes: a database of another version is ingested
# again (the service) or refused with a one-line reason (the Python API), never read by
# queries that expect columns it lacks. 4: cpu_ops.concrete_inputs. 5:
# captured_launches.callee_inputs.
SCHEMA_VERSION = "5"


def stored_schema_version(con: duckdb.DuckDBPyConnection) -> str | None:
    """The table schema a trace database was written with (None: not recorded, or no
    ``trace_info`` table)."""
    try:
        row = con.execute(
            "SELECT value FROM trace_info WHERE key = 'tracelens_schema_version'"
        ).fetchone()
    except duckdb.Error:
        return None
    return str(row[0]) if row else None


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # the DuckDB type
    description: str  # one line: what the column holds


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    columns: tuple[Column, ...]
    primary_key: str | None = None

    def create_sql(self) -> str:
        cols = ", ".join(
            f"{c.name} {c.type}" + (" PRIMARY KEY" if c.name == self.primary_key else "")
            for c in self.columns
        )
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({cols})"

    def comment_sql(self) -> list[str]:
        """``COMMENT ON`` statements attaching the descriptions to the table and its columns."""
        return [f"COMMENT ON TABLE {self.name} IS {sql_literal(self.description)}"] + [
            f"COMMENT ON COLUMN {self.name}.{c.name} IS {sql_literal(c.description)}"
            for c in self.columns
        ]


def sql_literal(text: str) -> str:
    """``text`` as a SQL string literal (single quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def sql_list(names: Iterable[str]) -> str:
    """``names`` as the items of a SQL ``IN (...)`` list of string literals."""
    return ", ".join(sql_literal(n) for n in names)


# Columns several tables share, described once so they read the same everywhere.
_PID = Column("pid", "BIGINT", "Host process id")
_TID = Column("tid", "BIGINT", "Host thread id")
_STREAM = Column("stream_id", "BIGINT", "GPU stream (queue) it ran on")
_CORRELATION = Column(
    "correlation_id",
    "BIGINT",
    "Links GPU work and the runtime/driver call that issued it (api_calls.correlation_id)",
)
_EXTERNAL = Column(
    "external_id",
    "BIGINT",
    "Kineto's link between an operator and the runtime calls it made; NULL in nsys exports",
)
_START = Column("start_ns", "BIGINT", "Start (ns on the trace clock)")
_END = Column("end_ns", "BIGINT", "End (ns on the trace clock)")

CANONICAL_TABLES: tuple[Table, ...] = (
    Table(
        "trace_info",
        "Facts about the trace as key/value text: format, tool, rank, t0_ns, warnings, "
        "source file and its sha256, tracelens_schema_version; from PyTorch traces also the "
        "profiler's options recorded as on (profiler_options; where the metadata lists "
        "none, those its events show: shapes, call stacks, allocator events) and the "
        "PyTorch settings a "
        "harness wrote into the metadata (env.PYTORCH_TUNABLEOP_*) and the installed versions of "
        "the packages advice names from its pip list (package.flash_attn, package.aiter, "
        "package.transformers, package.vllm, package.sglang), no_gpu_recording where no GPU "
        "work was recorded (gpu_untraced, no_gpu_work, cpu_traced, cpu_run or unknown: "
        "ingest/chrome/no_gpu_note.py), and device_ids_renumbered "
        "where the kernels' device ids (ROCm's physical indices) are not those of the "
        "deviceProperties listing (the visible ones); from Nsight exports the "
        "host, host_cpu, host_kernel and host_driver_kept_loaded (what kept the driver loaded: the "
        "persistence daemon, a display server on it)",
        (
            Column("key", "VARCHAR", "Name of the fact"),
            Column("value", "VARCHAR", "Its value, as text"),
        ),
        primary_key="key",
    ),
    Table(
        "devices",
        "GPUs that ran work in the trace (GPUs the host had but did not use are in the "
        "host_gpus_without_work fact)",
        (
            Column("device_id", "INTEGER", "Device index, as the other tables' device_id"),
            Column("name", "VARCHAR", "Model name as the profiler recorded it"),
            Column("sm_count", "INTEGER", "Streaming multiprocessors (compute units on AMD)"),
            Column("total_memory_bytes", "BIGINT", "Device memory"),
            Column(
                "compute_capability",
                "VARCHAR",
                "CUDA compute capability (major.minor); NULL where not recorded",
            ),
        ),
        primary_key="device_id",
    ),
    Table(
        "kernels",
        "GPU kernel executions, one row per launch",
        (
            Column("device_id", "INTEGER", "Device it ran on"),
            _STREAM,
            Column("name", "VARCHAR", "Kernel name (demangled where the source has it)"),
            _START,
            _END,
            _CORRELATION,
            Column("grid_x", "INTEGER", "Grid size in blocks (workgroups on AMD), x"),
            Column("grid_y", "INTEGER", "Grid size in blocks (workgroups on AMD), y"),
            Column("grid_z", "INTEGER", "Grid size in blocks (workgroups on AMD), z"),
            Column("block_x", "INTEGER", "Block size in threads, x"),
            Column("block_y", "INTEGER", "Block size in threads, y"),
            Column("block_z", "INTEGER", "Block size in threads, z"),
            Column("registers_per_thread", "INTEGER", "Registers each thread uses"),
            Column("shared_memory_bytes", "BIGINT", "Shared memory per block (static + dynamic)"),
            Column(
                "est_occupancy_pct",
                "DOUBLE",
                "The profiler's estimated achieved occupancy (%); NULL in nsys exports",
            ),
        ),
    ),
    Table(
        "memcpys",
        "GPU memory copies, unified-memory migrations included (kind UVM_*)",
        (
            Column("device_id", "INTEGER", "Device that ran the copy"),
            _STREAM,
            Column("kind", "VARCHAR", "Direction: HtoD, DtoH, DtoD, ... (MEMCPY_KINDS)"),
            Column(
                "src_mem", "VARCHAR", "Source memory: pageable, pinned, device, ... (MEMORY_KINDS)"
            ),
            Column("dst_mem", "VARCHAR", "Destination memory, as src_mem"),
            Column("bytes", "BIGINT", "Bytes copied"),
            _START,
            _END,
            _CORRELATION,
        ),
    ),
    Table(
        "memsets",
        "GPU memory sets",
        (
            Column("device_id", "INTEGER", "Device that ran the memset"),
            _STREAM,
            Column("bytes", "BIGINT", "Bytes set"),
            Column("mem", "VARCHAR", "Memory set: device, pinned, managed, ... (MEMORY_KINDS)"),
            _START,
            _END,
            _CORRELATION,
        ),
    ),
    Table(
        "api_calls",
        "CUDA/HIP runtime and driver calls on the host (launches, copies, synchronizes, ...)",
        (
            _PID,
            _TID,
            Column("name", "VARCHAR", "API function, version suffix removed (cudaLaunchKernel)"),
            Column("kind", "VARCHAR", "runtime or driver"),
            _START,
            _END,
            _CORRELATION,
            _EXTERNAL,
            Column(
                "kernel_name",
                "VARCHAR",
                "Kernel a launch call launched, where the trace names it on the call (ROCm "
                "runtime events, launches recorded during graph capture); NULL otherwise",
            ),
        ),
    ),
    Table(
        "cpu_ops",
        "Framework operators and Python functions on the host (PyTorch profiler); empty "
        "for nsys exports",
        (
            Column("op_id", "BIGINT", "Row id, unique in the trace"),
            _PID,
            _TID,
            Column("name", "VARCHAR", "Operator or function name (aten::mm, nn.Module: ...)"),
            Column(
                "category", "VARCHAR", "cpu_op for operators, python_function for Python frames"
            ),
            _START,
            _END,
            Column(
                "parent_id",
                "BIGINT",
                "op_id of the enclosing operator on the thread; NULL at top level",
            ),
            Column("depth", "INTEGER", "Nesting depth on the thread, 0 at top level"),
            _EXTERNAL,
            Column(
                "input_shapes",
                "VARCHAR",
                "Recorded input shapes as JSON text ([[M, K], [K, N]]); NULL if not recorded",
            ),
            Column(
                "input_types",
                "VARCHAR",
                'Recorded input dtypes as JSON text (["float", ...]); NULL if not recorded',
            ),
            Column(
                "concrete_inputs",
                "VARCHAR",
                'Recorded scalar arguments as JSON text, one per input, tensors as "" '
                '(["", "", "0.", "True"]: the profiler\'s Concrete Inputs, recorded with the '
                "shapes by PyTorch 2.1 and later); NULL if not recorded",
            ),
        ),
    ),
    Table(
        "ranges",
        "Annotation ranges: record_function / user annotations and NVTX ranges; the host "
        "ranges have no device",
        (
            Column("range_id", "BIGINT", "Row id, unique in the trace"),
            _PID,
            _TID,
            Column(
                "device_id",
                "INTEGER",
                "Device for a range on the GPU timeline (gpu_user_annotation); NULL on the host",
            ),
            Column("name", "VARCHAR", "Range name (ProfilerStep#3, llm.decode[r1,r2], NVTX text)"),
            Column(
                "domain",
                "VARCHAR",
                "NVTX domain, or the Chrome category (user_annotation, gpu_user_annotation)",
            ),
            _START,
            _END,
            Column(
                "parent_id",
                "BIGINT",
                "range_id of the enclosing range on the thread; NULL at top level",
            ),
            Column("depth", "INTEGER", "Nesting depth on the thread, 0 at top level"),
        ),
    ),
    Table(
        "syncs",
        "Synchronization records of the GPU tracer (Kineto cuda_sync, nsys "
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)",
        (
            Column("device_id", "INTEGER", "Device synchronized with"),
            _STREAM,
            Column("pid", "BIGINT", "Host process id of the waiting call; NULL where not recorded"),
            Column("tid", "BIGINT", "Host thread id of the waiting call; NULL where not recorded"),
            Column(
                "kind", "VARCHAR", "Event Sync, Stream Sync, Context Sync, Stream Wait Event, ..."
            ),
            _START,
            _END,
            _CORRELATION,
        ),
    ),
    Table(
        "memory_events",
        "Caching-allocator events of the PyTorch profiler (profile_memory=True); empty for "
        "nsys exports",
        (
            _PID,
            _TID,
            Column("device_id", "INTEGER", "Device of the memory; -1 for host memory"),
            Column("ts_ns", "BIGINT", "When it happened (ns on the trace clock)"),
            Column("bytes", "BIGINT", "Bytes allocated (positive) or freed (negative)"),
            Column("total_allocated", "BIGINT", "Bytes allocated on the device after the event"),
            Column(
                "total_reserved",
                "BIGINT",
                "Bytes the allocator reserved on the device after the event",
            ),
            Column("addr", "BIGINT", "Address of the block"),
        ),
    ),
    Table(
        "comm_ops",
        "Collective communication calls on the host (record_param_comms, nccl:* operators), "
        "with their sizes",
        (
            _PID,
            _TID,
            Column("name", "VARCHAR", "Operator name"),
            Column("collective", "VARCHAR", "Collective: allreduce, all_gather, send, ..."),
            _START,
            _END,
            _EXTERNAL,
            Column("in_nelems", "BIGINT", "Input elements"),
            Column("out_nelems", "BIGINT", "Output elements"),
            Column("dtype", "VARCHAR", "Element type"),
            Column("group_size", "INTEGER", "Ranks in the process group"),
        ),
    ),
    Table(
        "threads",
        "Process and thread names",
        (
            _PID,
            _TID,
            Column("process_name", "VARCHAR", "Name of the process"),
            Column("thread_name", "VARCHAR", "Name of the thread"),
        ),
    ),
    Table(
        "gaps",
        "Idle stretches of each device between its first and last activity, with their "
        "cause, judged at ingest (ingest/derive_gaps.py)",
        (
            Column("device_id", "INTEGER", "Device that was idle"),
            Column(
                "start_ns", "BIGINT", "End of the activity before the gap (ns on the trace clock)"
            ),
            Column(
                "end_ns",
                "BIGINT",
                "Start of the activity that ends the gap (ns on the trace clock)",
            ),
            Column(
                "cause",
                "VARCHAR",
                "Why: gpu_dependency, data_loading, synchronization, launch_overhead, "
                "host_compute or untraced",
            ),
            Column(
                "detail",
                "VARCHAR",
                "The blocking call, loader, code or next work that explains it; NULL if none",
            ),
            Column(
                "launch_start_ns",
                "BIGINT",
                "Start of the call that launched the work ending the gap",
            ),
            Column("launch_end_ns", "BIGINT", "End of that call"),
            Column(
                "blocked_ns",
                "BIGINT",
                "Time the launching thread spent in blocking calls in the gap, until the next "
                "work was issued",
            ),
        ),
    ),
    Table(
        "captured_launches",
        "Kernel launches recorded while a CUDA/HIP graph was captured, from the capture "
        "traces beside the trace (ingest/graph_captures.py); empty without them",
        (
            Column("capture_id", "INTEGER", "Which capture trace (0, 1, ... in listing order)"),
            Column("capture_file", "VARCHAR", "The capture trace's file name"),
            Column(
                "batch_size", "INTEGER", "Batch size the graph was captured for; NULL if unknown"
            ),
            Column(
                "mode",
                "VARCHAR",
                "Capture mode the engine names (FULL, PIECEWISE); NULL if unknown",
            ),
            Column("seq", "INTEGER", "Position of the launch in the graph (1-based, launch order)"),
            Column(
                "kernel_name", "VARCHAR", "Kernel launched; NULL where the call does not name it"
            ),
            Column(
                "op_seq",
                "INTEGER",
                "Which operator call launched it (1-based in the capture); NULL if none",
            ),
            Column("op_name", "VARCHAR", "That operator's name; NULL if none"),
            Column(
                "input_shapes",
                "VARCHAR",
                "That operator's recorded input shapes (cpu_ops.input_shapes of the capture "
                "trace): the shapes every replay of the graph runs; NULL if not recorded",
            ),
            Column(
                "input_types",
                "VARCHAR",
                "That operator's recorded input dtypes; NULL if not recorded",
            ),
            Column(
                "callee_inputs",
                "VARCHAR",
                "The distinct tensors the operators it called took, as JSON "
                "[[shape, dtype], ...] in order of first use: what an operator reads through "
                "its callees (a MoE layer's expert weights, viewed before its kernels run); "
                "NULL if none recorded",
            ),
        ),
    ),
)

TABLES: dict[str, Table] = {t.name: t for t in CANONICAL_TABLES}

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


def create_schema(con: duckdb.DuckDBPyConnection, describe: bool = True) -> None:
    """Create every canonical table (empty) in ``con``; ``describe`` attaches the
    descriptions as comments.

    The comments are about a hundred statements, some 30 ms on a small machine: worth it
    for a database file someone opens later, not for an in-memory database read once by
    the analysis that made it. One transaction, so a file writes its catalog once rather
    than once per statement.
    """
    con.begin()
    try:
        for table in CANONICAL_TABLES:
            con.execute(table.create_sql())
            if describe:
                for statement in table.comment_sql():
                    con.execute(statement)
        con.commit()
    except BaseException:
        con.rollback()
        raise


def set_info(con: duckdb.DuckDBPyConnection, values: dict[str, object]) -> None:
    """Insert or replace trace_info facts; ``None`` values are skipped."""
    rows = [(k, str(v)) for k, v in values.items() if v is not None]
    if rows:
        # One statement: executemany runs one per row, each costing a full query's set-up.
        values_sql = ", ".join(["(?, ?)"] * len(rows))
        marks = ", ".join(["?"] * len(rows))
        # Replacing costs DuckDB several times a plain insert (~4 ms against ~1 ms with
        # this look-up, a few times per ingest); most facts are new, and for new keys the
        # two are the same statement.
        taken = con.execute(
            f"SELECT count(*) FROM trace_info WHERE key IN ({marks})", [k for k, _ in rows]
        ).fetchone()
        verb = "INSERT OR REPLACE" if taken and taken[0] else "INSERT"
        con.execute(
            f"{verb} INTO trace_info VALUES {values_sql}",
            [item for row in rows for item in row],
        )


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
