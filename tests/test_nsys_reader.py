"""Hand-built tiny nsys exports, read row by row against hand-computed canonical rows."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from ingest import load_trace
from ingest.nsys.sqlite_columns import copy_int_columns, rowid_range
from tracelens.cli import main
from tracelens.testing.nsys_writer import create_tables, global_pid, global_tid, insert_rows

PID, TID = 100, 101
G = global_tid(PID, TID)
STRINGS = {
    1: "cudaLaunchKernel_v7000",
    2: "cudaMemcpyAsync_ptsz_v7000",
    3: "my_kernel(float*)",
    4: "my_kernel",
    5: "aten::mm, seq = 4, op_id = 9, sizes = [[2, 2], [2, 2]]",
    6: "cuLaunchKernel",
    7: "cudaStreamSynchronize_v3020",
    8: "worker-thread",
    9: "MyDomain",
    10: "cudaMemsetAsync_v3020",
}


def _build(path: Path, schema: str) -> Path:
    db = sqlite3.connect(path)
    create_tables(db, schema)
    ins = lambda table, rows: insert_rows(db, schema, table, rows)  # noqa: E731
    ins("StringIds", [{"id": i, "value": v} for i, v in STRINGS.items()])
    # Times in ns: kernel A, then an HtoD copy, then the host blocks in a stream synchronize
    # until the GPU drains; kernel B is launched 100 us later (a synchronization gap). A
    # unified-memory migration with no launching call follows a hole (an untraced gap).
    ins(
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        [
            {
                "start": 900_000,
                "end": 950_000,
                "eventClass": 0,
                "globalTid": G,
                "correlationId": 5,
                "nameId": 1,
            },
            {
                "start": 960_000,
                "end": 990_000,
                "eventClass": 0,
                "globalTid": G,
                "correlationId": 6,
                "nameId": 2,
            },
            {
                "start": 995_000,
                "end": 1_601_000,
                "eventClass": 0,
                "globalTid": G,
                "correlationId": 8,
                "nameId": 7,
            },
            {
                "start": 1_700_000,
                "end": 1_705_000,
                "eventClass": 1,
                "globalTid": G,
                "correlationId": 7,
                "nameId": 6,
            },
            {
                "start": 1_950_000,
                "end": 1_960_000,
                "eventClass": 0,
                "globalTid": G,
                "correlationId": 9,
                "nameId": 2,
            },
            {
                "start": 1_960_000,
                "end": 1_970_000,
                "eventClass": 0,
                "globalTid": G,
                "correlationId": 10,
                "nameId": 10,
            },
        ],
    )
    ins(
        "CUPTI_ACTIVITY_KIND_KERNEL",
        [
            {
                "start": 1_000_000,
                "end": 1_500_000,
                "deviceId": 1,
                "streamId": 13,
                "correlationId": 5,
                "demangledName": 3,
                "shortName": 4,
                "registersPerThread": 40,
                "gridX": 2,
                "gridY": 3,
                "gridZ": 4,
                "blockX": 32,
                "blockY": 2,
                "blockZ": 1,
                "staticSharedMemory": 16,
                "dynamicSharedMemory": 48,
            },
            {
                "start": 1_710_000,
                "end": 1_800_000,
                "deviceId": 1,
                "streamId": 13,
                "correlationId": 7,
                "demangledName": 3,
                "shortName": 4,
            },
        ],
    )
    ins(
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        [
            {
                "start": 1_500_000,
                "end": 1_600_000,
                "deviceId": 1,
                "streamId": 14,
                "correlationId": 6,
                "bytes": 4096,
                "copyKind": 1,
                "srcKind": 1,
                "dstKind": 2,
            },
            {
                "start": 1_900_000,
                "end": 2_000_000,
                "deviceId": 1,
                "streamId": 0,
                "correlationId": 0,
                "bytes": 65536,
                "copyKind": 11,
                "srcKind": 7,
                "dstKind": 7,
            },
            {
                "start": 2_000_000,
                "end": 2_100_000,
                "deviceId": 1,
                "streamId": 14,
                "correlationId": 9,
                "bytes": 8,
                "copyKind": 2,
                "srcKind": 5,
                "dstKind": 0,
            },
        ],
    )
    ins(
        "CUPTI_ACTIVITY_KIND_MEMSET",
        [
            {
                "start": 2_100_000,
                "end": 2_150_000,
                "deviceId": 1,
                "streamId": 14,
                "correlationId": 10,
                "bytes": 512,
                "memKind": 4,
            }
        ],
    )
    ins(
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        [
            {"start": 1_000_000, "end": 1_600_500, "deviceId": 1, "streamId": 13,
             "correlationId": 8, "globalPid": global_pid(PID), "syncType": 3},
            {"start": 2_150_000, "end": 2_160_000, "deviceId": 1, "streamId": 0xFFFFFFFF,
             "correlationId": 99, "globalPid": global_pid(PID), "syncType": 2},
        ],
    )  # fmt: skip
    text_col = "textId" if schema == "current" else "text"
    mm = 5 if schema == "current" else STRINGS[5]
    ins(
        "NVTX_EVENTS",
        [
            {"start": -5, "eventType": 75, "text": "MyDomain", "globalTid": G, "domainId": 1},
            {"start": 850_000, "end": 990_000, "eventType": 59, text_col: mm,
             "globalTid": G, "domainId": 0},
            {"start": 800_000, "end": 3_200_000, "eventType": 60, "text": "step",
             "globalTid": G, "domainId": 1},
            {"start": 870_000, "eventType": 34, "text": "a mark", "globalTid": G},
            {"start": 880_000, "end": None, "eventType": 59, "text": "never popped",
             "globalTid": G},
        ],
    )  # fmt: skip
    ins("ThreadNames", [{"nameId": 8, "priority": 10, "globalTid": G}])
    ins("PROCESSES", [{"globalPid": global_pid(PID), "pid": PID, "name": "trainer"}])
    if schema == "current":
        ins(
            "TARGET_INFO_GPU",
            [
                {"vmId": 0, "id": 0, "name": "GPU-A", "smCount": 10, "totalMemory": 1 << 30,
                 "computeMajor": 9, "computeMinor": 0},
                {"vmId": 0, "id": 1, "name": "GPU-B", "smCount": 20, "totalMemory": 2 << 30,
                 "computeMajor": 8, "computeMinor": 6},
            ],
        )  # fmt: skip
        ins("META_DATA_EXPORT", [{"name": "EXPORT_SCHEMA_VERSION", "value": "3.24.18"}])
    else:
        ins(
            "TARGET_INFO_CUDA_GPU",
            [
                {"deviceId": 0, "name": "GPU-A", "numMultiprocessors": 10},
                {"deviceId": 1, "name": "GPU-B", "numMultiprocessors": 20,
                 "totalGlobalMemory": 2 << 30, "computeCapabilityMajor": 8,
                 "computeCapabilityMinor": 6},
            ],
        )  # fmt: skip
    db.commit()
    db.close()
    return path


@pytest.fixture(params=["current", "legacy"])
def tiny(request: pytest.FixtureRequest, tmp_path: Path) -> duckdb.DuckDBPyConnection:
    loaded = load_trace(_build(tmp_path / f"tiny_{request.param}.sqlite", request.param))
    yield loaded.con
    loaded.close()


def rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


def test_kernels(tiny: duckdb.DuckDBPyConnection) -> None:
    assert rows(tiny, "SELECT * FROM kernels ORDER BY start_ns")[0] == (
        1, 13, "my_kernel(float*)", 1_000_000, 1_500_000, 5, 2, 3, 4, 32, 2, 1, 40, 64, None
    )  # fmt: skip
    assert rows(tiny, "SELECT count(*) FROM kernels") == [(2,)]


def test_memcpys_and_memsets(tiny: duckdb.DuckDBPyConnection) -> None:
    assert rows(tiny, "SELECT * FROM memcpys ORDER BY start_ns") == [
        (1, 14, "HtoD", "pinned", "device", 4096, 1_500_000, 1_600_000, 6),
        (1, 0, "UVM_HtoD", "unknown", "unknown", 65536, 1_900_000, 2_000_000, 0),
        (1, 14, "DtoH", "device", "pageable", 8, 2_000_000, 2_100_000, 9),
    ]
    assert rows(tiny, "SELECT * FROM memsets") == [
        (1, 14, 512, "managed", 2_100_000, 2_150_000, 10)
    ]


def test_api_calls_decode_thread_and_strip_suffixes(tiny: duckdb.DuckDBPyConnection) -> None:
    assert rows(tiny, "SELECT * FROM api_calls ORDER BY start_ns") == [
        (PID, TID, "cudaLaunchKernel", "runtime", 900_000, 950_000, 5, None, None),
        (PID, TID, "cudaMemcpyAsync", "runtime", 960_000, 990_000, 6, None, None),
        (PID, TID, "cudaStreamSynchronize", "runtime", 995_000, 1_601_000, 8, None, None),
        (PID, TID, "cuLaunchKernel", "driver", 1_700_000, 1_705_000, 7, None, None),
        (PID, TID, "cudaMemcpyAsync", "runtime", 1_950_000, 1_960_000, 9, None, None),
        (PID, TID, "cudaMemsetAsync", "runtime", 1_960_000, 1_970_000, 10, None, None),
    ]


def test_syncs_take_the_thread_of_their_api_call(tiny: duckdb.DuckDBPyConnection) -> None:
    assert rows(tiny, "SELECT * FROM syncs ORDER BY start_ns") == [
        (1, 13, PID, TID, "Stream Sync", 1_000_000, 1_600_500, 8),
        # No runtime row with correlation 99: the process is known, the thread is not.
        (1, None, PID, None, "Stream Wait Event", 2_150_000, 2_160_000, 99),
    ]


def test_nvtx_ranges(tiny: duckdb.DuckDBPyConnection) -> None:
    assert rows(
        tiny,
        "SELECT pid, tid, device_id, name, domain, start_ns, end_ns, depth FROM ranges "
        "ORDER BY start_ns",
    ) == [
        (PID, TID, None, "step", "MyDomain", 800_000, 3_200_000, 0),
        (PID, TID, None, "aten::mm", None, 850_000, 990_000, 1),
    ]
    parent = rows(tiny, "SELECT parent_id FROM ranges WHERE name = 'aten::mm'")[0][0]
    assert rows(tiny, f"SELECT name FROM ranges WHERE range_id = {parent}") == [("step",)]


def test_threads_devices_and_info(tiny: duckdb.DuckDBPyConnection) -> None:
    assert rows(tiny, "SELECT * FROM threads") == [(PID, TID, "trainer", "worker-thread")]
    dev = rows(tiny, "SELECT * FROM devices")
    assert dev[0][:3] == (1, "GPU-B", 20) and len(dev) == 1
    info = dict(rows(tiny, "SELECT key, value FROM trace_info"))
    assert info["host_gpus_without_work"] == "0: GPU-A"
    assert info["format"] == "nsys_sqlite"
    assert info["t0_ns"] == "800000"
    assert "1 NVTX ranges that never ended were skipped" in info["warnings"]
    assert dev[0][3:] == (2 << 30, "8.6")


def test_gaps_and_their_causes(tiny: duckdb.DuckDBPyConnection) -> None:
    # Busy includes the unified-memory migration; its hole has no launching call behind it.
    # The stream synchronize returns 1 us into the first gap; kernel B is launched 100 us
    # later from inside the "step" range: host code, not the sync (it blocked 1 us of 110).
    gaps = rows(
        tiny, "SELECT start_ns, end_ns, cause, detail, blocked_ns FROM gaps ORDER BY start_ns"
    )
    assert gaps == [
        (1_600_000, 1_710_000, "host_compute", "step", 1_000),
        (1_800_000, 1_900_000, "untraced", None, 0),
    ]


def test_synchronization_record_alone_marks_a_blocking_call(tmp_path: Path) -> None:
    """A CUPTI synchronization record on a host thread counts even where the API's name is
    not one of the known blocking calls; a stream-wait record never does."""
    path = _build(tmp_path / "sync.sqlite", "current")
    db = sqlite3.connect(path)
    db.execute("UPDATE StringIds SET value = 'cudaGraphUpload_v11010' WHERE id = 7")
    # the call now blocks 90 us of the 110 us gap before kernel B is launched
    db.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET end = 1690000 WHERE correlationId = 8")
    db.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION SET end = 1690000 WHERE correlationId = 8"
    )
    db.commit()
    db.close()
    loaded = load_trace(path)
    try:
        gaps = rows(loaded.con, "SELECT cause, detail FROM gaps ORDER BY start_ns")
        assert gaps[0] == ("synchronization", "cudaGraphUpload")
    finally:
        loaded.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION SET syncType = 2")
    db.commit()
    db.close()
    loaded = load_trace(path)
    try:
        gaps = rows(loaded.con, "SELECT cause FROM gaps ORDER BY start_ns")
        assert gaps[0] != ("synchronization",)
    finally:
        loaded.close()


def test_users_file_is_left_untouched(tmp_path: Path) -> None:
    path = _build(tmp_path / "keep.sqlite", "current")
    before = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
    load_trace(path).close()
    assert (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.sqlite"]


def test_column_copier_matches_a_plain_cursor_across_batches(tmp_path: Path) -> None:
    path = tmp_path / "cols.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
    db.executemany(
        "INSERT INTO t VALUES (?, ?)",
        [(i * 10**15, None if i % 3 == 0 else -i) for i in range(1, 11)],
    )
    db.execute("DELETE FROM t WHERE a = 4000000000000000")  # a hole in the rowids
    db.commit()
    expected = db.execute("SELECT rowid, a + 7, b FROM t ORDER BY rowid").fetchall()
    db.close()
    con = duckdb.connect()
    con.execute("CREATE TABLE out (row_id BIGINT, a BIGINT, b BIGINT)")
    n = copy_int_columns(
        lambda: sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False),
        "t",
        {"a": "a - :base", "b": "b"},
        con,
        "out",
        params={"base": 10**15},
        offsets={"a": 10**15 + 7},
        with_rowid=True,
        batch_rows=3,
    )
    assert n == 9
    assert con.execute("SELECT * FROM out ORDER BY row_id").fetchall() == expected


def test_rowid_range_reads_the_bounds_off_the_btree(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "r.sqlite")
    db.execute('CREATE TABLE "T x" (a INTEGER)')
    assert db.execute(rowid_range("T x")).fetchone() == (None, None)
    db.executemany('INSERT INTO "T x" (rowid, a) VALUES (?, ?)', [(5, 1), (9, 2), (70, 3)])
    assert db.execute(rowid_range("T x")).fetchone() == (5, 70)
    # min() and max() in one SELECT scan every row; each alone is a B-tree search
    plan = [r[3] for r in db.execute("EXPLAIN QUERY PLAN " + rowid_range("T x"))]
    assert not any(step.startswith("SCAN T x") for step in plan), plan
    db.close()


def test_rows_held_only_in_a_wal_file_are_read(tmp_path: Path) -> None:
    path = _build(tmp_path / "wal.sqlite", "current")
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId = 7")
    writer.commit()
    try:
        # The writer still holds the database open, so the deletion lives only in -wal.
        assert (tmp_path / "wal.sqlite-wal").stat().st_size > 0
        loaded = load_trace(path)
        try:
            assert rows(loaded.con, "SELECT correlation_id FROM kernels") == [(5,)]
        finally:
            loaded.close()
    finally:
        writer.close()


def test_tables_created_but_empty_give_a_no_gpu_work_report(tmp_path: Path) -> None:
    path = tmp_path / "idle.sqlite"
    db = sqlite3.connect(path)
    create_tables(db, "legacy")
    insert_rows(db, "legacy", "StringIds", [{"id": 1, "value": "cudaGetDeviceCount_v3020"}])
    insert_rows(
        db,
        "legacy",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        [{"start": 10, "end": 20, "eventClass": 0, "globalTid": G, "correlationId": 1,
          "nameId": 1}],
    )  # fmt: skip
    db.commit()
    db.close()
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert "no kernels recorded (the kernel table is empty)" in report["notes"]
    assert "no GPU work recorded in this trace" in report["notes"]
    assert "export has no version metadata (nsys 2020.x or older)" in report["notes"]
    assert report["findings"] == [] and report["devices"] == []


def test_nvtx_text_with_bad_utf8_or_nul_is_read_not_refused(tmp_path: Path) -> None:
    path = _build(tmp_path / "text.sqlite", "current")
    db = sqlite3.connect(path)
    db.execute("DELETE FROM NVTX_EVENTS")
    rows = [
        (100, 200, "CAST(x'6361666520e9' AS TEXT)"),  # "cafe" + a Latin-1 byte
        (300, 400, "'a' || char(0) || 'b'"),  # a NUL inside: the batch is read row by row
        (500, 600, "'aten::relu, seq = 3'"),
    ]
    for start, end, text in rows:
        db.execute(
            f"INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
            f"VALUES ({start}, {end}, 59, {text}, {G}, 0)"
        )
    db.commit()
    db.close()
    loaded = load_trace(path)
    try:
        names = loaded.con.execute("SELECT name FROM ranges ORDER BY start_ns").fetchall()
        assert names == [("cafe \ufffd",), ("a\x00b",), ("aten::relu",)]
    finally:
        loaded.close()


def test_rows_ending_before_they_start_are_skipped_and_counted(tmp_path: Path) -> None:
    path = _build(tmp_path / "neg.sqlite", "current")
    db = sqlite3.connect(path)
    db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1 WHERE correlationId = 7")
    db.commit()
    db.close()
    loaded = load_trace(path)
    try:
        assert rows(loaded.con, "SELECT correlation_id FROM kernels") == [(5,)]
        assert "1 GPU activity or API rows without a valid end time were skipped" in loaded.notes
    finally:
        loaded.close()


def test_diagnostic_warnings_and_errors_become_report_notes(tmp_path: Path) -> None:
    """nsys says in DIAGNOSTIC_EVENT when tracing went wrong (CUDA profiling not started,
    unified memory untraceable): that explains missing data, so the report says it. Info
    rows and messages about collectors tracelens never reads (OpenGL, CPU sampling) stay
    out; an export without the table (before nsys 2023.3) has no such notes."""
    from tracelens.report import build_report
    from tracelens.testing.nsys_writer import add_diagnostic_events, write_nsys_sqlite
    from tracelens.testing.planted import training_steps

    path = write_nsys_sqlite(training_steps(3), tmp_path / "diag.sqlite")
    plain = load_trace(path)
    assert not any("Nsight Systems" in n for n in plain.notes)
    add_diagnostic_events(
        path,
        [
            (0, 1, "Profiling has started."),
            (10, 3, "CUDA profiling might have not been started correctly."),
            (20, 2, "No OpenGL events collected. Does the process use OpenGL?"),
            (30, 2, "CUPTI   buffers\nwere  dropped."),
        ],
    )
    loaded = load_trace(path)
    assert loaded.notes[-2:] == [
        "Nsight Systems error: CUDA profiling might have not been started correctly.",
        "Nsight Systems warning: CUPTI buffers were dropped.",
    ]
    report = build_report(loaded)
    assert (
        "Nsight Systems error: CUDA profiling might have not been started correctly."
        in (report["notes"])
    )


def test_launches_without_kernels_point_at_diagnostics_only_where_there_are_some(
    tmp_path: Path,
) -> None:
    """Kernel launch calls but no kernel rows: GPU activity was not collected. The note
    sends the reader to the export's diagnostics where it holds some, and says it holds
    none otherwise (an older export, or nsys recorded nothing about the failure)."""
    from tracelens.testing.nsys_writer import add_diagnostic_events, write_nsys_sqlite
    from tracelens.testing.scenario import Scenario

    sc = Scenario(name="launches_only")
    for i in range(3):
        sc.api("cudaLaunchKernel", i * 1_000_000, 5_000)

    def note(path: Path) -> str:
        loaded = load_trace(path)
        try:
            (n,) = [n for n in loaded.notes if n.startswith("no kernels recorded")]
        finally:
            loaded.close()
        return n

    path = write_nsys_sqlite(sc, tmp_path / "bare.sqlite")
    assert "yet CUDA tracing recorded 3 kernel launch calls" in note(path)
    assert "holds no Nsight Systems diagnostic that says why" in note(path)
    add_diagnostic_events(path, [(10, 3, "CUDA profiling might have not been started correctly.")])
    assert "the Nsight Systems diagnostics noted here say why" in note(path)
