"""The table declarations: canonical and derived tables are what they say they are."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from ingest import load_trace
from ingest.schema import CANONICAL_TABLES
from tracelens.cli.schema import schema_markdown
from tracelens.core.tracedb import TraceDB
from tracelens.derived import DERIVED_MODULES, DERIVED_TABLES, DerivedTable, require
from tracelens.derived.blocking_calls import BLOCKING_CALLS, SYNC_GAPS
from tracelens.derived.kernel_ops import KERNEL_OPS
from tracelens.testing import training_steps, write_chrome_trace
from tracelens.testing.nsys_writer import write_nsys_sqlite
from tracelens.testing.planted_host import sync_stalls
from tracelens.testing.planted_llm import static_launch_bound

_COLUMNS_SQL = """SELECT column_name, data_type, comment FROM duckdb_columns()
                  WHERE table_name = ? AND database_name = ? ORDER BY column_index"""


def test_schema_doc_is_generated_and_current() -> None:
    """docs/schema.md shows every declared table: regenerate it with
    `tracelens schema --markdown > docs/schema.md` when a declaration changes."""
    doc = Path(__file__).resolve().parent.parent / "docs" / "schema.md"
    assert doc.read_text() == schema_markdown()


def test_every_table_and_column_has_a_one_line_description() -> None:
    for t in (*CANONICAL_TABLES, *DERIVED_TABLES):
        texts = [t.description, *(c.description for c in t.columns)]
        assert all(x.strip() and "\n" not in x for x in texts), t.name
        names = [c.name for c in t.columns]
        assert len(names) == len(set(names)), t.name


def test_database_file_carries_the_declared_schema_and_descriptions(tmp_path: Path) -> None:
    """Through the atomic write (built in a .partial file, renamed into place)."""
    src = write_chrome_trace(training_steps(steps=2), tmp_path / "t.json")
    target = tmp_path / "t.duckdb"
    load_trace(src, db_path=target).close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.duckdb", "t.json"]
    con = duckdb.connect(str(target), read_only=True)
    try:
        for t in CANONICAL_TABLES:
            row = con.execute(
                "SELECT comment FROM duckdb_tables() WHERE table_name = ?", [t.name]
            ).fetchone()
            assert row == (t.description,)
            got = con.execute(_COLUMNS_SQL, [t.name, "t"]).fetchall()
            assert got == [(c.name, c.type, c.description) for c in t.columns]
    finally:
        con.close()


def test_in_memory_ingest_has_the_same_tables_without_comments(tmp_path: Path) -> None:
    loaded = load_trace(write_chrome_trace(training_steps(steps=2), tmp_path / "t.json"))
    try:
        for t in CANONICAL_TABLES:
            got = loaded.con.execute(_COLUMNS_SQL, [t.name, "memory"]).fetchall()
            assert got == [(c.name, c.type, None) for c in t.columns]
    finally:
        loaded.close()


def test_registry_lists_every_declared_table_after_what_it_requires() -> None:
    names = [t.name for t in DERIVED_TABLES]
    assert len(names) == len(set(names))
    assert not set(names) & {t.name for t in CANONICAL_TABLES}
    for i, t in enumerate(DERIVED_TABLES):
        assert all(r in DERIVED_TABLES[:i] for r in t.requires), t.name
    declared = {
        id(v): v for m in DERIVED_MODULES for v in vars(m).values() if isinstance(v, DerivedTable)
    }
    assert {id(t) for t in DERIVED_TABLES} == set(declared)


@pytest.mark.parametrize(
    "scenario, writer",
    [
        (training_steps, "chrome"),
        (sync_stalls, "chrome"),
        (static_launch_bound, "chrome"),
        # nsys exports have no operators: kernel_ops and blocking_calls read ranges instead
        (sync_stalls, "nsys"),
        (static_launch_bound, "nsys"),
    ],
)
def test_derived_tables_have_the_declared_columns(scenario, writer, tmp_path: Path) -> None:
    sc = scenario()
    path = (
        write_chrome_trace(sc, tmp_path / "t.json")
        if writer == "chrome"
        else write_nsys_sqlite(sc, tmp_path / "t.sqlite")
    )
    loaded = load_trace(path)
    try:
        db = TraceDB(loaded.con)
        require(db, *DERIVED_TABLES)
        for t in DERIVED_TABLES:
            got = db.rows(_COLUMNS_SQL, [t.name, "temp"])
            assert [(n, ty) for n, ty, _ in got] == [(c.name, c.type) for c in t.columns], t.name
    finally:
        loaded.close()


def test_require_builds_requirements_first_and_each_table_once_per_tracedb(
    tmp_path: Path,
) -> None:
    loaded = load_trace(write_chrome_trace(sync_stalls(), tmp_path / "t.json"))
    try:
        db = TraceDB(loaded.con)
        require(db, SYNC_GAPS)
        calls = db.scalar("SELECT count(*) FROM blocking_calls")
        assert calls and db.scalar("SELECT count(*) FROM sync_gaps")
        require(db, KERNEL_OPS)
        kernels = db.scalar("SELECT count(*) FROM kernel_ops")
        assert kernels == db.scalar("SELECT count(*) FROM kernels")
        # Built once: emptied by hand, asking again leaves it empty.
        db.con.execute("DELETE FROM kernel_ops")
        db.con.execute("DELETE FROM blocking_calls")
        require(db, KERNEL_OPS, BLOCKING_CALLS, SYNC_GAPS)
        assert db.scalar("SELECT count(*) FROM kernel_ops") == 0
        assert db.scalar("SELECT count(*) FROM blocking_calls") == 0
        # A new TraceDB builds its own.
        fresh = TraceDB(loaded.con)
        require(fresh, KERNEL_OPS, BLOCKING_CALLS)
        assert fresh.scalar("SELECT count(*) FROM kernel_ops") == kernels
        assert fresh.scalar("SELECT count(*) FROM blocking_calls") == calls
    finally:
        loaded.close()


def test_a_derived_table_builds_under_its_settings_and_restores_them(tmp_path: Path) -> None:
    probe = DerivedTable(
        "_settings_probe",
        "the setting its build saw",
        (),
        "SELECT current_setting('asof_loop_join_threshold') AS v",
        settings=(("asof_loop_join_threshold", "0"),),
    )
    failing = DerivedTable(
        "_settings_failing",
        "a build that fails",
        (),
        "SELECT error('no table')",
        settings=(("asof_loop_join_threshold", "0"),),
    )
    loaded = load_trace(write_chrome_trace(sync_stalls(), tmp_path / "t.json"))
    try:
        db = TraceDB(loaded.con)
        db.con.execute("SET asof_loop_join_threshold = 17")
        require(db, probe)
        assert db.scalar("SELECT v FROM _settings_probe") == 0
        assert db.scalar("SELECT current_setting('asof_loop_join_threshold')") == 17
        with pytest.raises(duckdb.Error):
            require(db, failing)
        assert db.scalar("SELECT current_setting('asof_loop_join_threshold')") == 17
    finally:
        loaded.close()
