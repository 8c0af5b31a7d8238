"""The Python API: frames equal the tables, documented dtypes, SQL, Parquet, a cheap import."""

from __future__ import annotations

import runpy
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest

import tracelens
from ingest.duckdb_connect import connect
from ingest.errors import TraceInputError
from ingest.schema import CANONICAL_TABLES, create_schema, set_info
from tracelens.api.frames import FRAMES_BEGIN, FRAMES_END, LLM_FRAMES, TRACE_FRAMES, frames_markdown
from tracelens.api.trace import Trace
from tracelens.testing import training_steps, write_chrome_trace
from tracelens.testing.planted_llm import kv_growth_decode

REPO = Path(__file__).resolve().parent.parent


def test_every_frame_holds_its_tables_rows(trace: Trace) -> None:
    for source in TRACE_FRAMES:
        frame = getattr(trace, source.attribute)
        if source.derived is not None:
            from tracelens.derived import require

            require(trace.db, source.derived)
        rows = trace.db.rows(f"SELECT * FROM {source.table}")
        assert frame.rows() == [tuple(r) for r in rows], source.attribute
        assert frame.columns == [c.name for c in source.columns]
    assert trace.kernels.height == 220
    assert trace.steps.height == 10


def test_frame_dtypes_are_the_documented_ones(trace: Trace, tmp_path: Path) -> None:
    sc = kv_growth_decode()
    path = tmp_path / "serving.pt.trace.json.gz"
    write_chrome_trace(sc, path)
    with tracelens.load(path) as serving:
        assert serving.llm.requests.height > 0
        for source in LLM_FRAMES:
            frame = getattr(serving.llm, source.attribute)
            assert {k: str(v) for k, v in frame.schema.items()} == source.polars_dtypes()
    for source in TRACE_FRAMES:
        frame = getattr(trace, source.attribute)
        assert {k: str(v) for k, v in frame.schema.items()} == source.polars_dtypes()


def test_docs_api_lists_the_frames_as_generated() -> None:
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    start, end = text.index(FRAMES_BEGIN), text.index(FRAMES_END) + len(FRAMES_END)
    assert text[start:end] + "\n" == frames_markdown(), (
        "docs/api.md is out of date: replace its frame reference with `tracelens schema --frames`"
    )


def test_sql_takes_named_parameters_and_builds_derived_tables(trace: Trace) -> None:
    long = trace.sql(
        "SELECT name, count(*) AS n FROM kernels WHERE end_ns - start_ns >= $ns GROUP BY name",
        ns=100_000,
    )
    assert dict(long.rows()) == {
        "ampere_sgemm_128x64_tn": 10,
        # the two slow elementwise kernels of each step, and the optimizer's
        trace.kernels.filter(pl.col("name").str.contains("vectorized"))["name"][0]: 20,
        "void at::native::sgd_update_kernel<float>(float*, float const*, float)": 10,
    }
    by_op = trace.sql("SELECT op_name, sum(dur_ns) AS ns FROM kernel_ops GROUP BY op_name")
    assert by_op.schema["ns"] == pl.Int64  # a HUGEINT sum arrives as an integer
    assert dict(by_op.rows())["aten::mm"] == 10 * 5_000_000


def test_findings_are_typed_and_the_report_is_the_cli_s(trace: Trace) -> None:
    from tracelens.core.findings import Finding, Severity

    findings = trace.findings
    assert findings and all(isinstance(f, Finding) for f in findings)
    assert isinstance(findings[0].severity, Severity)
    report = trace.report()
    assert [f["id"] for f in report["findings"]] == [f.id for f in findings]
    assert report["metrics"]["kernel_count"] == 220


def test_parquet_round_trip_keeps_every_table(trace: Trace, tmp_path: Path) -> None:
    written = trace.to_parquet(tmp_path / "pq")
    assert [p.stem for p in written] == [t.name for t in CANONICAL_TABLES]
    for source in TRACE_FRAMES:
        if source.derived is not None:
            continue
        back = pl.read_parquet(tmp_path / "pq" / f"{source.table}.parquet")
        assert back.equals(getattr(trace, source.attribute)), source.table
    csv = trace.to_csv(tmp_path / "csv")
    assert pl.read_csv(csv[2]).height == trace.kernels.height


def test_a_saved_database_reopens_without_ingest(planted_path: Path, tmp_path: Path) -> None:
    db = tmp_path / "planted.duckdb"
    with tracelens.load(planted_path, db=db) as first:
        expected = first.kernels
    with tracelens.load(db) as again:
        assert again.path == planted_path
        assert again.format == "torch_chrome"
        assert again.kernels.equals(expected)
        # Read-only: restrictions copy it, they never write to it.
        assert again.restrict(steps="3").kernels.height == 22


def test_a_database_of_an_older_table_schema_is_refused_in_one_line(
    planted_path: Path, tmp_path: Path
) -> None:
    """Its analysis would read columns it lacks (schema 3 had no cpu_ops.concrete_inputs):
    the reason, not a binder error from deep inside a report."""
    db = tmp_path / "old.duckdb"
    tracelens.load(planted_path, db=db).close()
    con = duckdb.connect(str(db))
    con.execute("ALTER TABLE cpu_ops DROP COLUMN concrete_inputs")
    con.execute("UPDATE trace_info SET value = '3' WHERE key = 'tracelens_schema_version'")
    con.close()
    with pytest.raises(TraceInputError) as err:
        tracelens.load(db)
    message = str(err.value)
    assert "old.duckdb" in message and "table schema 3" in message and "\n" not in message


def test_diff_compares_two_traces(trace: Trace, tmp_path: Path) -> None:
    slower = tmp_path / "slower.pt.trace.json.gz"
    write_chrome_trace(training_steps(steps=12), slower)
    with tracelens.load(slower) as other:
        d = tracelens.diff(trace, other)
    assert d["schema"] == "tracelens.report.diff/1"
    kernels = next(m for m in d["metrics"] if m["key"] == "kernel_count")
    assert (kernels["baseline"], kernels["candidate"]) == (220, 264)


def test_importing_tracelens_loads_neither_duckdb_nor_polars() -> None:
    code = (
        "import sys, tracelens; "
        "print('duckdb' in sys.modules, 'polars' in sys.modules); "
        "tracelens.load; print('duckdb' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout.split() == ["False", "False", "True"]


def _large_database(kernels: int) -> Trace:
    from ingest.loader import LoadedTrace

    con = connect()
    create_schema(con, describe=False)
    con.execute(
        f"""INSERT INTO kernels
            SELECT 0, 7, 'kernel_' || (i % 97), i * 2000, i * 2000 + 1500, i,
                   128, 1, 1, 256, 1, 1, 32, 0, NULL
            FROM range({kernels}) t(i)"""
    )
    set_info(con, {"format": "torch_chrome"})
    return Trace(LoadedTrace(con, Path("large"), "torch_chrome", "", 0))


def test_two_million_kernels_reach_polars_without_a_python_loop() -> None:
    n = 2_000_000
    trace = _large_database(n)
    calls = 0

    def count(_frame: object, event: str, _arg: object) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    t = time.perf_counter()
    sys.setprofile(count)
    try:
        kernels = trace.kernels
    finally:
        sys.setprofile(None)
    elapsed = time.perf_counter() - t
    trace.close()
    assert kernels.height == n
    assert kernels["end_ns"][n - 1] == (n - 1) * 2000 + 1500
    # A loop over rows would make millions of Python calls; Arrow makes a few hundred.
    assert calls < 5_000, calls
    print(f"2M-kernel frame: {elapsed:.2f} s")


def test_example_notebook_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["explore_trace.py", "", str(tmp_path)])
    runpy.run_path(str(REPO / "docs" / "examples" / "explore_trace.py"), run_name="__main__")
    assert (tmp_path / "gpu_time_by_kind.png").stat().st_size > 0
