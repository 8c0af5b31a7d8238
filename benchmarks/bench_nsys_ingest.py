"""Ingest + analysis speed on a large synthetic Nsight Systems export.

Writes an nsys export (current layout) with ``--kernels`` kernels, one ``cudaLaunchKernel``
runtime row per kernel, a blocking stream synchronize every 1,000 launches (with its CUPTI
synchronization record) and an NVTX step range around each of those stretches; with
``--op-ranges``, also one emit_nvtx-style operator range around each launch. Rows are
generated inside SQLite with recursive CTEs, so writing 2 million rows takes seconds.
Then it ingests and analyzes the file and prints seconds per phase, rows/s and peak RSS.

    python benchmarks/bench_nsys_ingest.py --kernels 1000000 [--keep out.sqlite]

Figures depend on the machine and on what else it is running; nothing here asserts them.
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ingest.derive_gaps import derive_gaps
from ingest.duckdb_connect import connect
from ingest.limits import IngestLimits
from ingest.nsys.reader import read_nsys_sqlite
from ingest.redact_tables import redact_tables
from ingest.schema import create_schema
from tracelens.core.tracedb import TraceDB
from tracelens.report import build_report_from_db
from tracelens.testing.nsys_writer import create_tables, global_pid, global_tid

PID = TID = 4242
LAUNCH_EVERY_NS = 2_000
KERNEL_DUR_NS = 1_500
SYNC_EVERY = 1_000
KERNEL_NAMES = 64


def write_export(path: Path, kernels: int, op_ranges: bool = False) -> dict[str, int]:
    """A realistic-shaped export: launch, kernel 5 us later, periodic synchronizes."""
    if path.exists():
        path.unlink()
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    create_tables(db, "current")
    names = [
        (i + 1, f"void gemm_kernel_{i}<float, 128, 64>(float const*, float*, int)")
        for i in range(KERNEL_NAMES)
    ]
    names += [(1000, "cudaLaunchKernel_v7000"), (1001, "cudaStreamSynchronize_v3020")]
    names += [(1002, "python"), (1003, "ProfilerStep")]
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", names)
    g, gp = global_tid(PID, TID), global_pid(PID)
    # Launch i at i*2us (every 1000th stretch shifted by a 200 us synchronize); kernel 5 us
    # later on the GPU for 1.5 us.
    series = f"""WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s
                                         WHERE i < {kernels - 1})"""
    host = f"(300000000 + i * {LAUNCH_EVERY_NS} + (i / {SYNC_EVERY}) * 200000)"
    db.execute(
        f"""INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME
            (start, end, eventClass, globalTid, correlationId, nameId, returnValue)
            {series} SELECT {host}, {host} + 1200, 0, {g}, i + 1, 1000, 0 FROM s"""
    )
    db.execute(
        f"""INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL
            (start, end, deviceId, contextId, greenContextId, streamId, correlationId,
             globalPid, demangledName, shortName, mangledName, registersPerThread,
             gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory,
             dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId,
             tensorSizeMinusOneElements)
            {series}
            SELECT {host} + 5000, {host} + 5000 + {KERNEL_DUR_NS} + (i % 7) * 100, 0, 1, 0,
                   7 + (i % 4), i + 1, {gp}, 1 + i % {KERNEL_NAMES}, 1 + i % {KERNEL_NAMES},
                   NULL, 64, 1024, 1, 1, 256, 1, 1, 8192, 0, 0, 0, i + 1, '[]'
            FROM s"""
    )
    syncs = kernels // SYNC_EVERY
    sync_series = f"""WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s
                                              WHERE i < {syncs})"""
    sync_start = f"(300000000 + (i * {SYNC_EVERY} - 1) * {LAUNCH_EVERY_NS} + (i - 1) * 200000)"
    db.execute(
        f"""INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME
            (start, end, eventClass, globalTid, correlationId, nameId, returnValue)
            {sync_series}
            SELECT {sync_start} + 1300, {sync_start} + 200000, 0, {g}, {kernels} + i, 1001, 0
            FROM s"""
    )
    db.execute(
        f"""INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION
            (start, end, deviceId, contextId, streamId, correlationId, globalPid, syncType,
             eventId)
            {sync_series}
            SELECT {sync_start} + 1400, {sync_start} + 199000, 0, 1, 7, {kernels} + i, {gp},
                   3, 4294967295 FROM s"""
    )
    db.execute(
        f"""INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId, domainId)
            {sync_series}
            SELECT 300000000 + (i - 1) * ({SYNC_EVERY} * {LAUNCH_EVERY_NS} + 200000),
                   300000000 + i * ({SYNC_EVERY} * {LAUNCH_EVERY_NS} + 200000) - 1,
                   59, {g}, 1003, 0 FROM s"""
    )
    ops = 0
    if op_ranges:
        # PyTorch's emit_nvtx: one push/pop range per operator, its text in `text`.
        db.execute(
            f"""INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId)
                {series}
                SELECT {host} - 300, {host} + 1300, 59,
                       'aten::add_, seq = ' || i || ', op_id = ' || (i + 7), {g}, 0
                FROM s"""
        )
        ops = kernels
    db.execute(f"INSERT INTO ThreadNames VALUES (1002, 20, {g})")
    db.execute(f"INSERT INTO PROCESSES VALUES ({gp}, {PID}, 'python')")
    db.execute(
        "INSERT INTO TARGET_INFO_GPU (vmId, id, name, smCount, totalMemory, computeMajor, "
        "computeMinor) VALUES (0, 0, 'NVIDIA H100 80GB HBM3', 132, 85899345920, 9, 0)"
    )
    db.execute(
        "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.24.18'), "
        "('EXPORT_PRODUCT_VERSION', '2026.1.3.425')"
    )
    db.commit()
    db.close()
    return {"kernels": kernels, "runtime": kernels + syncs, "syncs": syncs, "nvtx": syncs + ops}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, default=None, help="write the export here and keep it")
    ap.add_argument(
        "--op-ranges", action="store_true", help="add one emit_nvtx operator range per kernel"
    )
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="nsys-bench-")
    path = args.keep or Path(tmp.name) / "bench.sqlite"

    t = time.perf_counter()
    counts = write_export(path, args.kernels, args.op_ranges)
    write_s = time.perf_counter() - t
    rows = sum(counts.values())
    size_mb = path.stat().st_size / 1e6
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load = os.getloadavg()[0]

    # The connection load_trace opens: bounded memory, spilling allowed.
    con = connect()
    IngestLimits.from_env().configure(con, None)
    create_schema(con)
    phases: dict[str, tuple[float, float, float]] = {}

    def timed(name: str, fn: Callable[..., Any], *args: Any) -> Any:
        w, c = time.perf_counter(), time.process_time()
        out = fn(*args)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        phases[name] = (time.perf_counter() - w, time.process_time() - c, rss)
        return out

    def checkpoint() -> None:  # load_trace's: compresses what is stored so far
        con.execute("CHECKPOINT")

    timed("read + route into DuckDB", read_nsys_sqlite, con, path)
    timed("compress (checkpoint)", checkpoint)
    timed("derive gaps", derive_gaps, con)
    timed("redact names", redact_tables, con)
    timed("compress again", checkpoint)
    source = {"path": str(path), "format": "nsys_sqlite", "sha256": "", "size_bytes": 0}
    report = timed("analyze (all analyzers)", build_report_from_db, TraceDB(con), source)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(f"export: {size_mb:,.0f} MB, {rows:,} rows ({counts}); written in {write_s:.1f} s")
    print(f"cores: {os.cpu_count()}, load average before ingest {load:.2f}")
    print(f"{'phase':<26} {'wall s':>7} {'cpu s':>7} {'M rows/s (wall)':>16} {'peak MB':>8}")
    for name, (w, c, r) in phases.items():
        print(f"{name:<26} {w:7.2f} {c:7.2f} {rows / w / 1e6:16.2f} {r:8,.0f}")
    wall = sum(p[0] for p in phases.values())
    cpu = sum(p[1] for p in phases.values())
    print(f"{'ingest + analysis':<26} {wall:7.2f} {cpu:7.2f} {rows / wall / 1e6:16.2f}")
    print(f"peak RSS: {peak:,.0f} MB (before ingest {rss_before:,.0f} MB)")
    kernels = con.execute("SELECT count(*) FROM kernels").fetchone()[0]  # type: ignore[index]
    print(f"check: {kernels:,} kernels ingested, {len(report['findings'])} findings")
    tmp.cleanup()


if __name__ == "__main__":
    main()
