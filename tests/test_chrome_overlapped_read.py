"""The Chrome reader loads batches of chunks on a thread of its own while the next batch is
cut: the tables must be exactly those of a read on one DuckDB thread, and a bad chunk must
stop the read with the usual one-line error, leaving nothing of the staging behind."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from test_canonical_table_hashes import table_hashes

from ingest.chrome.event_sql import STAGE_DB
from ingest.chrome.reader import read_chrome_trace
from ingest.duckdb_connect import connect
from ingest.errors import TraceInputError
from ingest.schema import create_schema

CHUNK = 64 * 1024  # bytes per chunk handed to the reader: dozens of chunks below


def _events(n: int) -> list[dict]:
    """Operators, launches, kernels, copies and annotations, in file order, with the
    allocator events that take the reader's second pass."""
    out: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}
    ]
    for i in range(n):
        ts = 1_000_000 + i * 50
        out.append(
            {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", "pid": 1, "tid": 1,
             "ts": ts, "dur": 20, "args": {"External id": i, "Input Dims": [[4, i % 9 + 1]],
                                           "Input type": ["float"]}}
        )  # fmt: skip
        out.append(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": ts + 2, "dur": 5, "args": {"External id": i, "correlation": i}}
        )  # fmt: skip
        out.append(
            {"ph": "X", "cat": "kernel", "name": f"kernel_{i % 5}", "pid": 0, "tid": 7,
             "ts": ts + 10, "dur": 30,
             "args": {"External id": i, "correlation": i, "device": 0, "stream": 7,
                      "grid": [i % 80 + 1, 1, 1], "block": [128, 1, 1]}}
        )  # fmt: skip
        if i % 10 == 0:
            out.append(
                {"ph": "X", "cat": "user_annotation", "name": f"step {i}", "pid": 1, "tid": 1,
                 "ts": ts, "dur": 45, "args": {}}
            )  # fmt: skip
            out.append(
                {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)",
                 "pid": 0, "tid": 7, "ts": ts + 41, "dur": 3,
                 "args": {"device": 0, "stream": 7, "bytes": 4096, "correlation": i}}
            )  # fmt: skip
            out.append(
                {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1,
                 "ts": ts + 1, "s": "t", "args": {"Device Type": 1, "Device Id": 0,
                                                  "Bytes": 4096, "Total Allocated": 4096 * i,
                                                  "Total Reserved": 1 << 20, "Addr": i}}
            )  # fmt: skip
    return out


def _chunks(data: bytes) -> list[bytes]:
    return [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]


def _read(path: Path, data: bytes, threads: int) -> duckdb.DuckDBPyConnection:
    con = connect()
    con.execute(f"SET threads = {threads}")
    create_schema(con, describe=False)
    # batches of a few chunks: dozens of them, each loaded while the next is cut
    read_chrome_trace(con, path, lambda: _chunks(data), batch_bytes=4 * CHUNK)
    return con


def test_overlapped_read_matches_one_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    data = json.dumps({"traceEvents": _events(3000)}).encode()
    assert len(data) > 20 * CHUNK  # many batches
    one = _read(path, data, threads=1)
    two = _read(path, data, threads=2)
    assert table_hashes(two) == table_hashes(one)
    # ids follow the file's order, as the one-at-a-time read numbers them
    assert two.execute("SELECT count(*) FROM cpu_ops").fetchone() == (3000,)
    first = two.execute("SELECT name FROM cpu_ops ORDER BY op_id LIMIT 3").fetchall()
    assert first == [("aten::op0",), ("aten::op1",), ("aten::op2",)]
    assert two.execute("SELECT count(*) FROM memory_events").fetchone() == (300,)
    staging = two.execute(
        "SELECT count(*) FROM duckdb_databases() WHERE database_name = ?", [STAGE_DB]
    ).fetchone()
    assert staging == (0,)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_bad_chunk_stops_the_read_with_its_offset(tmp_path: Path, threads: int) -> None:
    path = tmp_path / "bad.json"
    good = json.dumps(_events(2000))[1:-1]
    # a truncated object well past the first chunks: the chunks before it were routed
    bad = '{"ph": "X", "cat": "kernel", "name": "k", "ts": 5, "dur": }'
    cut = good.index('{"ph"', len(good) // 2)
    text = '{"traceEvents": [' + good[:cut] + bad + ", " + good[cut:] + "]}"
    con = connect()
    con.execute(f"SET threads = {threads}")
    create_schema(con, describe=False)
    with pytest.raises(TraceInputError) as err:
        read_chrome_trace(con, path, lambda: _chunks(text.encode()), batch_bytes=4 * CHUNK)
    message = str(err.value)
    assert "bad.json" in message and "malformed" in message and "\n" not in message
    staging = con.execute(
        "SELECT count(*) FROM duckdb_databases() WHERE database_name = ?", [STAGE_DB]
    ).fetchone()
    assert staging == (0,)
