"""How long the Python API takes to hand a large trace's tables to polars.

    python benchmarks/bench_frames.py [--events 2000000] [--keep DIR]

Writes a synthetic Kineto trace of about ``--events`` events
(``tracelens.testing.large_trace``), ingests it once into a database file, then times,
on the reopened database: the kernel and operator frames (DuckDB -> Arrow stream ->
polars), a grouped SQL query, a steps restriction, and the Parquet export. The transfer
is the Arrow C stream: its time is DuckDB producing the columns, not Python.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tracelens
from tracelens.testing.large_trace import write_large_trace


def _timed(label: str, fn: Callable[[], Any]) -> Any:
    t = time.perf_counter()
    result = fn()
    print(f"{label:<34} {time.perf_counter() - t:7.2f} s")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--keep", type=Path, default=None, help="Keep the files in this folder.")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="tracelens-frames-"))
    folder.mkdir(parents=True, exist_ok=True)
    trace_path = folder / f"large-{args.events}.pt.trace.json"
    if not trace_path.exists():
        _timed("write the trace", lambda: write_large_trace(trace_path, args.events))
    db = folder / f"large-{args.events}.duckdb"
    if not db.exists():
        _timed("ingest (once)", lambda: tracelens.load(trace_path, db=db).close())
    with tracelens.load(db) as trace:
        kernels = _timed("kernels frame", lambda: trace.kernels)
        ops = _timed("ops frame", lambda: trace.ops)
        print(f"  {kernels.height:,} kernels, {ops.height:,} operators")
        _timed(
            "SQL: time per kernel name",
            lambda: trace.sql(
                "SELECT name, sum(end_ns - start_ns) AS ns FROM kernels GROUP BY name"
            ),
        )
        _timed("restrict to steps 2:4", lambda: trace.restrict(steps="2:4").close())
        _timed("Parquet export", lambda: trace.to_parquet(folder / "parquet"))


if __name__ == "__main__":
    main()
