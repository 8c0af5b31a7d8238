"""Memory stays bounded whatever the input: a small gzip of millions of tiny events.

Before the limits, a 4 MB gzip inflating to 100 MB of tiny events (1 M) took the CLI to 3.5 GB
and a 20 MB one (500 MB, 4.8 M events) to 19.8 GB: DuckDB's buffer pool may grow to 80 %
of the machine per database. Now every connection has a memory limit and spills to disk,
and the event count is capped with a clear error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

from web_helpers import client_for, make_settings, upload, wait_done, write_planted

from ingest.limits import IngestLimits, parse_bytes


def _tiny_event_bomb(path: Path, inflated_bytes: int) -> int:
    """A gzip of ``inflated_bytes`` of tiny kernel/launch/operator events; returns events."""
    events = []
    for i in range(3000):
        events.append(
            f'{{"ph":"X","cat":"kernel","name":"k{i % 7}","pid":0,"tid":7,"ts":{i * 2},'
            f'"dur":1,"args":{{"correlation":{i},"stream":7,"device":0}}}}'
        )
        events.append(
            f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,'
            f'"ts":{i * 2},"dur":1,"args":{{"correlation":{i}}}}}'
        )
        events.append(
            f'{{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":{i * 2},'
            '"dur":1,"args":{}}'
        )
    block = (",\n".join(events) + ",\n").encode()
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    written = 0
    with path.open("wb") as f:
        f.write(comp.compress(b'{"traceEvents":[\n'))
        while written < inflated_bytes:
            f.write(comp.compress(block))
            written += len(block)
        f.write(comp.compress(b'{"ph":"i","name":"end","pid":1,"tid":1,"ts":0}]}'))
        f.write(comp.flush())
    return (written // len(block)) * len(events)


# VmHWM, not getrusage's ru_maxrss: the latter carries over the parent's size from
# before exec (a big test process would make a small child look big).
_MEASURE = """
import sys
from tracelens.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM"))
print("PEAK_RSS_MB", int(hwm.split()[1]) / 1024, file=sys.stderr)
sys.exit(code)
"""


def _analyze(path: Path, env: dict[str, str], *args: str) -> tuple[int, str, float]:
    full = {**os.environ, **env}
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, "analyze", "-q", str(path), *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=600,
    )
    peak = float(proc.stderr.rsplit("PEAK_RSS_MB", 1)[1].split()[0])
    return proc.returncode, proc.stdout + proc.stderr, peak


def test_a_small_gzip_of_millions_of_events_finishes_under_the_memory_limit(
    tmp_path: Path,
) -> None:
    bomb = tmp_path / "tiny-events.json.gz"
    n = _tiny_event_bomb(bomb, 100 * 1024 * 1024)
    assert n > 900_000 and bomb.stat().st_size < 8 * 1024 * 1024
    code, out, peak = _analyze(
        bomb, {"TRACELENS_MEMORY_LIMIT": "256MB"}, "--format", "json", "-o", str(tmp_path / "r")
    )
    assert code == 0, out
    report = json.loads((tmp_path / "r").read_text())
    assert report["metrics"]["kernel_count"] == n // 3
    # Unbounded (TRACELENS_MEMORY_LIMIT=100GB) this input peaks at 3.5 GB; bounded near 410 MB.
    assert peak < 700, f"peak RSS {peak:.0f} MB"


def test_more_events_than_the_limit_is_a_one_line_error(tmp_path: Path) -> None:
    bomb = tmp_path / "tiny-events.json.gz"
    _tiny_event_bomb(bomb, 8 * 1024 * 1024)
    code, out, _ = _analyze(bomb, {"TRACELENS_MAX_EVENTS": "50000"})
    assert code == 2
    lines = [line for line in out.splitlines() if not line.startswith("PEAK_RSS_MB")]
    assert lines == [
        f"tracelens: error: {bomb}: holds more than 50,000 events (the limit; set "
        "TRACELENS_MAX_EVENTS to raise it)"
    ], out


def test_an_upload_past_the_event_limit_fails_cleanly(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TRACELENS_MAX_EVENTS", "100")
    trace = write_planted(tmp_path / "p.pt.trace.json.gz")
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, trace).json()["id"])
    assert run["status"] == "failed"
    assert (
        run["error"] == "p.pt.trace.json.gz: holds more than 100 events (the limit; set "
        "TRACELENS_MAX_EVENTS to raise it)"
    )


def test_limits_are_shared_between_concurrent_ingests_and_configurable(monkeypatch) -> None:
    monkeypatch.delenv("TRACELENS_MEMORY_LIMIT", raising=False)
    one, four = IngestLimits.from_env(1), IngestLimits.from_env(4)
    assert four.memory_bytes * 4 <= one.memory_bytes + 4
    monkeypatch.setenv("TRACELENS_MEMORY_LIMIT", "3GB")
    assert IngestLimits.from_env(4).memory_bytes == 3_000_000_000
    assert parse_bytes("512MiB", "x") == 512 * 1024 * 1024
    monkeypatch.setenv("TRACELENS_MEMORY_LIMIT", "lots")
    try:
        IngestLimits.from_env()
    except ValueError as exc:
        assert "TRACELENS_MEMORY_LIMIT" in str(exc)
    else:
        raise AssertionError("an unparsable limit must be refused")


def test_the_memory_limit_follows_the_input(tmp_path: Path, monkeypatch) -> None:
    """DuckDB keeps what it allocates as buffer pool: a ceiling of 40 % of the machine let a
    1 GB trace peak at 1.6 GB where 512 MiB gave the same report at 0.97 GB. The limit is
    half the decompressed input, at least 512 MiB, at most the machine share; a limit the
    user set stands as given."""
    from ingest import load_trace
    from ingest.byte_source import content_size_estimate

    monkeypatch.delenv("TRACELENS_MEMORY_LIMIT", raising=False)
    share = IngestLimits.from_env()
    mib = 1024 * 1024
    assert share.for_input(10 * mib).memory_bytes == min(share.memory_bytes, 512 * mib)
    assert share.for_input(3000 * mib).memory_bytes == min(share.memory_bytes, 1500 * mib)
    assert share.for_input(10**15).memory_bytes == share.memory_bytes
    monkeypatch.setenv("TRACELENS_MEMORY_LIMIT", "300MB")
    assert IngestLimits.from_env().for_input(10**12).memory_bytes == 300_000_000
    monkeypatch.delenv("TRACELENS_MEMORY_LIMIT")

    bomb = tmp_path / "tiny-events.json.gz"
    _tiny_event_bomb(bomb, 3 * 1024 * 1024)
    inflated = len(zlib.decompress(bomb.read_bytes(), 31))
    assert content_size_estimate(bomb) == inflated
    plain = tmp_path / "plain.json"
    plain.write_bytes(zlib.decompress(bomb.read_bytes(), 31))
    assert content_size_estimate(plain) == inflated
    loaded = load_trace(bomb)
    try:
        limit = loaded.con.execute("SELECT current_setting('memory_limit')").fetchone()
    finally:
        loaded.close()
    assert limit is not None and limit[0] in {"512.0 MiB", "512 MiB"}, limit


def test_a_small_input_runs_on_one_thread_and_a_large_one_on_every_core(tmp_path: Path) -> None:
    """Each DuckDB thread costs memory of its own (5-14 MB of peak RSS on the corpus traces
    under 16 MiB) and saves nothing on ~2 ms queries; past 16 MiB of input, or past
    100,000 stored rows, the second core pays (12-15 % on the 34 MB traces)."""
    import duckdb

    from ingest import load_trace

    every_core = duckdb.connect().execute("SELECT current_setting('threads')").fetchone()
    mib = 1024 * 1024
    share = IngestLimits.from_env()
    assert share.threads == 0
    assert share.for_input(16 * mib).threads == 1
    assert share.for_input(16 * mib + 1).threads == 0
    assert share.for_input(mib).for_rows(100_000).threads == 1
    assert share.for_input(mib).for_rows(100_001).threads == 0
    assert share.for_input(64 * mib).for_rows(10).threads == 0

    def threads_after_ingest(inflated: int) -> tuple[int, int]:
        bomb = tmp_path / f"events-{inflated}.json.gz"
        _tiny_event_bomb(bomb, inflated)
        loaded = load_trace(bomb)
        try:
            row = loaded.con.execute("SELECT current_setting('threads')").fetchone()
            rows = loaded.con.execute(
                "SELECT sum(estimated_size) FROM duckdb_tables() WHERE NOT temporary"
            ).fetchone()
        finally:
            loaded.close()
        assert row is not None and rows is not None
        return int(row[0]), int(rows[0])

    assert threads_after_ingest(2 * mib)[0] == 1
    # Small on disk and under 16 MiB inflated, but more rows than the analysis should run
    # on one thread.
    threads, rows = threads_after_ingest(14 * mib)
    assert rows > 100_000 and (threads,) == every_core
    assert (threads_after_ingest(20 * mib)[0],) == every_core


def test_a_small_gzip_of_millions_of_events_is_bounded_without_any_setting(
    tmp_path: Path,
) -> None:
    """The 100 MB-inflating gzip with no TRACELENS_MEMORY_LIMIT: 3.5 GB before the limits,
    under the machine share alone it still grew with the machine; now the input sizes it."""
    bomb = tmp_path / "tiny-events.json.gz"
    _tiny_event_bomb(bomb, 100 * 1024 * 1024)
    env = {k: v for k, v in os.environ.items() if k != "TRACELENS_MEMORY_LIMIT"}
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, "analyze", "-q", str(bomb), "-o", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    peak = float(proc.stderr.rsplit("PEAK_RSS_MB", 1)[1].split()[0])
    assert peak < 1000, f"peak RSS {peak:.0f} MB"


def test_an_analysis_that_does_not_fit_the_input_sized_limit_gets_the_share(
    tmp_path: Path,
) -> None:
    """The limit follows the input, so a query may need more than it allows: the report is
    then built again under the whole share, and is the report an unlimited run gives."""
    import dataclasses

    import duckdb

    from ingest import load_trace
    from tracelens.report import build_report
    from tracelens.testing.large_trace import write_large_trace

    trace = write_large_trace(tmp_path / "t.json", 30_000)
    plain = load_trace(trace)
    try:
        expected = build_report(plain)
    finally:
        plain.close()
    squeezed = tmp_path / "squeezed.duckdb"
    for retry in (False, True):
        squeezed.unlink(missing_ok=True)
        # a file database, so the tables themselves can leave memory for a tiny limit
        loaded = load_trace(trace, db_path=squeezed)
        assert loaded.limits is not None
        try:
            loaded.con.execute("SET memory_limit = '8MiB'")
            small = dataclasses.replace(loaded.limits, memory_bytes=8 * 1024 * 1024)
            loaded = dataclasses.replace(loaded, limits=small if retry else None)
            if not retry:  # without the retry, 8 MiB does not hold this analysis
                try:
                    build_report(loaded)
                except duckdb.OutOfMemoryException:
                    continue
                raise AssertionError("8 MiB was expected to be too little")
            report = build_report(loaded)
            limit = loaded.con.execute("SELECT current_setting('memory_limit')").fetchone()
        finally:
            loaded.close()
    assert limit is not None and limit[0] != "8.0 MiB"
    assert report["findings"] == expected["findings"]
    assert {k: v for k, v in report.items() if k != "source"} == {
        k: v for k, v in expected.items() if k != "source"
    }


def test_the_limit_can_be_raised_after_the_connection_has_spilled(tmp_path: Path) -> None:
    """Ingest sets the row-sized limit on a connection that may already have spilled, and
    DuckDB refuses to set its spill directory again then (a 4.7 M-event trace failed so):
    only the memory limit is set."""
    import duckdb

    limits = IngestLimits.from_env()
    con = duckdb.connect()
    try:
        con.execute("SET threads = 1")
        con.execute("SET memory_limit = '32MiB'")
        con.execute(f"SET temp_directory = '{tmp_path / 'spill'}'")
        con.execute(
            "CREATE TEMP TABLE x AS SELECT i, random() AS r FROM range(4000000) t(i) ORDER BY r"
        )
        assert any((tmp_path / "spill").iterdir()), "the sort was expected to spill"
        try:
            limits.configure(con, None)
        except duckdb.Error as exc:
            assert "temporary directory" in str(exc)
        else:
            raise AssertionError("DuckDB now allows a new spill directory: simplify set_memory")
        limits.set_memory(con)
        got = con.execute("SELECT current_setting('memory_limit')").fetchone()
        assert got is not None and got[0] != "32.0 MiB"
    finally:
        con.close()


def test_running_out_of_memory_in_ingest_is_not_called_a_malformed_trace(
    tmp_path: Path,
) -> None:
    """An out-of-memory error while staging a blob used to read "malformed event in
    traceEvents after byte 258": the trace blamed for the machine's limit."""
    from ingest import TraceInputError, load_trace
    from ingest.limits import MIB
    from tracelens.testing.large_trace import write_large_trace

    trace = write_large_trace(tmp_path / "t.json", 30_000)
    tiny = IngestLimits(
        memory_bytes=4 * MIB, max_events=10**8, max_decompressed=10**11, memory_given=True
    )
    try:
        load_trace(trace, limits=tiny)
    except TraceInputError as exc:
        message = str(exc)
    else:
        raise AssertionError("4 MiB was expected to be too little to ingest")
    assert "malformed" not in message
    assert "Out of Memory" in message and "TRACELENS_MEMORY_LIMIT" in message, message


def test_the_spill_quota_follows_the_input(tmp_path: Path, monkeypatch) -> None:
    """DuckDB lets a database spill up to 90 % of the free disk, so one runaway query could
    fill the disk for every run on the machine: the quota is four times the decompressed
    input, at least 4 GiB, unless TRACELENS_MAX_SPILL_BYTES gives it."""
    from ingest import load_trace
    from ingest.limits import GIB, MIB
    from tracelens.testing.large_trace import write_large_trace

    monkeypatch.delenv("TRACELENS_MAX_SPILL_BYTES", raising=False)
    share = IngestLimits.from_env()
    assert share.for_input(10 * MIB).spill_bytes == 4 * GIB
    assert share.for_input(3 * GIB).spill_bytes == 12 * GIB
    monkeypatch.setenv("TRACELENS_MAX_SPILL_BYTES", "2GiB")
    assert IngestLimits.from_env().for_input(10**12).spill_bytes == 2 * GIB
    monkeypatch.setenv("TRACELENS_MAX_SPILL_BYTES", "plenty")
    try:
        IngestLimits.from_env()
    except ValueError as exc:
        assert "TRACELENS_MAX_SPILL_BYTES" in str(exc)
    else:
        raise AssertionError("an unparsable quota must be refused")
    monkeypatch.delenv("TRACELENS_MAX_SPILL_BYTES")
    # both the ingest connection and the one reopened on the finished file get it
    loaded = load_trace(write_large_trace(tmp_path / "t.json", 2_000), db_path=tmp_path / "t.db")
    try:
        got = loaded.con.execute("SELECT current_setting('max_temp_directory_size')").fetchone()
    finally:
        loaded.close()
    assert got is not None and got[0] in {"4.0 GiB", "4 GiB"}, got


def test_a_full_spill_quota_names_its_own_setting(tmp_path: Path) -> None:
    """Filling the spill quota is DuckDB's OutOfMemoryException too; the CLI's line, the
    web run's message and the ingest error all name TRACELENS_MAX_SPILL_BYTES, not the
    memory limit that would not help."""
    import duckdb

    from ingest.limits import MIB, exhausted_hint
    from tracelens.core.out_of_memory import is_out_of_memory, out_of_memory_message
    from web.ingest_worker import internal_error_message

    limits = IngestLimits(
        memory_bytes=32 * MIB,
        max_events=10**8,
        max_decompressed=10**11,
        temp_dir=tmp_path / "spill",
        spill_bytes=8 * MIB,
        spill_given=True,
    )
    con = duckdb.connect()
    try:
        con.execute("SET threads = 1")
        limits.configure(con, None)
        try:
            con.execute(
                "CREATE TEMP TABLE x AS SELECT i, md5(i::VARCHAR) AS h FROM range(4000000) t(i)"
                " ORDER BY h"
            )
        except duckdb.OutOfMemoryException as exc:
            error: Exception = exc
        else:
            raise AssertionError("an 8 MiB spill quota was expected to fill")
    finally:
        con.close()
    assert is_out_of_memory(error)
    assert exhausted_hint(error, limits).startswith("with the 8 MiB spill quota full;")
    for said in (out_of_memory_message(error), internal_error_message("t.json", error)):
        assert "TRACELENS_MAX_SPILL_BYTES" in said and "TRACELENS_MEMORY_LIMIT" not in said
        assert "\n" not in said
    assert internal_error_message("t.json", error).startswith("t.json: the analysis filled")
    memory = duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data")
    assert "TRACELENS_MEMORY_LIMIT" in internal_error_message("t.json", memory)
    assert "internal error" not in internal_error_message("t.json", memory)


def test_an_ad_hoc_query_that_does_not_fit_the_input_sized_limit_gets_the_share(
    tmp_path: Path,
) -> None:
    """`tracelens sql` and the frames run under the ingest's input-sized limit; a query
    that needs more (a list aggregate cannot spill) is run once more under the share."""
    import dataclasses

    import duckdb

    from ingest import load_trace
    from ingest.limits import MIB
    from tracelens.api.trace import Trace
    from tracelens.testing.large_trace import write_large_trace

    loaded = load_trace(write_large_trace(tmp_path / "t.json", 2_000), db_path=tmp_path / "t.db")
    assert loaded.limits is not None
    heavy = "SELECT len(list(i)) AS n FROM range(3000000) t(i)"
    small = dataclasses.replace(loaded.limits, memory_bytes=8 * MIB)
    for retry in (False, True):
        loaded.con.execute("SET memory_limit = '8MiB'")
        trace = Trace(dataclasses.replace(loaded, limits=small if retry else None))
        if not retry:
            try:
                trace.sql(heavy)
            except duckdb.OutOfMemoryException:
                continue
            raise AssertionError("8 MiB was expected to be too little for the list")
        assert trace.sql(heavy)["n"].to_list() == [3_000_000]
        assert len(trace.kernels) > 0  # the frames read through the same retry
    loaded.close()
