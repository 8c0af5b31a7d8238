"""What a derived table is, and the one way to build one: :func:`require`.

A derived table is an intermediate result the analysis computes from the canonical tables
(:mod:`ingest.schema`) and more than one query reads: which operator launched each kernel,
the blocking calls and the gaps they caused, per-step measures, LLM requests and tokens.
Each is declared once, in a module of this package named for it, with the SELECT that
fills it and a one-line description per column. Analyzers, the LLM metrics and the report
call :func:`require` before reading one; it builds the table's requirements first, then
the table, as a temporary table of the trace's connection, once per
:class:`~tracelens.core.tracedb.TraceDB`.

Thresholds never go into a derived table: it holds facts of the trace, and the analyzers
apply their thresholds when they read it, so one build serves every run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from ingest.schema import Column
from tracelens.core.tracedb import TraceDB


@dataclass(frozen=True)
class DerivedTable:
    name: str
    description: str
    columns: tuple[Column, ...]
    # The SELECT that fills it; a function of the trace where the query depends on what
    # the trace records (operators or only annotation ranges, for instance).
    select: str | Callable[[TraceDB], str]
    requires: tuple[DerivedTable, ...] = ()
    # DuckDB settings the build runs under, (name, value) pairs; each is restored after.
    settings: tuple[tuple[str, str], ...] = ()

    def select_sql(self, db: TraceDB) -> str:
        return self.select if isinstance(self.select, str) else self.select(db)


def require(db: TraceDB, *tables: DerivedTable) -> None:
    """Make sure each of ``tables`` exists in ``db``: built on first use, its requirements
    first, and kept for the life of ``db`` (:meth:`TraceDB.memo`)."""
    for table in tables:
        db.memo(("derived", table.name), partial(_build, db, table))


def _build(db: TraceDB, table: DerivedTable) -> None:
    require(db, *table.requires)
    saved = [(name, db.scalar(f"SELECT current_setting('{name}')")) for name, _ in table.settings]
    try:
        for name, value in table.settings:
            db.con.execute(f"SET {name} = {value}")
        db.con.execute(f"CREATE OR REPLACE TEMP TABLE {table.name} AS {table.select_sql(db)}")
    finally:
        for name, old in saved:
            db.con.execute(f"SET {name} = {old!r}")
