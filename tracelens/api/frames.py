"""The tables of a trace as polars DataFrames: which table each frame is, and its dtypes.

A frame is the table's rows as DuckDB holds them, handed to polars as an Arrow stream (the
C stream interface: no per-row Python, and no pyarrow needed). Each column is cast to its
declared type on the way, so a frame's dtypes follow from the declarations in
``ingest/schema.py`` and ``tracelens/derived/`` by :data:`POLARS_DTYPES`, whatever a reader
or a SELECT happened to produce; sums declared HUGEINT arrive as Int64 (nanoseconds of one
trace fit in 64 bits by far) rather than as polars decimals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ingest.schema import TABLES, Column
from tracelens.derived.llm_annotations import LLM_STEPS, LLM_TOKENS
from tracelens.derived.llm_latency import LLM_ITL, LLM_PER_REQUEST
from tracelens.derived.profiler_steps import PROFILER_STEP_METRICS
from tracelens.derived.table import DerivedTable

if TYPE_CHECKING:
    import duckdb
    import polars as pl

# Declared DuckDB type -> (the type a frame's column is cast to, its polars dtype).
POLARS_DTYPES: dict[str, tuple[str, str]] = {
    "BIGINT": ("BIGINT", "Int64"),
    "HUGEINT": ("BIGINT", "Int64"),
    "INTEGER": ("INTEGER", "Int32"),
    "DOUBLE": ("DOUBLE", "Float64"),
    "VARCHAR": ("VARCHAR", "String"),
    "BOOLEAN": ("BOOLEAN", "Boolean"),
}


@dataclass(frozen=True)
class FrameSource:
    """One frame of :class:`tracelens.api.trace.Trace`: its attribute and its table."""

    attribute: str
    table: str
    description: str
    columns: tuple[Column, ...]
    # The derived table to build first; None for a canonical table.
    derived: DerivedTable | None = None

    def select_sql(self) -> str:
        cols = ", ".join(
            f"CAST({c.name} AS {POLARS_DTYPES[c.type][0]}) AS {c.name}" for c in self.columns
        )
        return f"SELECT {cols} FROM {self.table}"

    def polars_dtypes(self) -> dict[str, str]:
        return {c.name: POLARS_DTYPES[c.type][1] for c in self.columns}


def _canonical(attribute: str, table: str) -> FrameSource:
    t = TABLES[table]
    return FrameSource(attribute, table, t.description, t.columns)


def _derived(attribute: str, table: DerivedTable) -> FrameSource:
    return FrameSource(attribute, table.name, table.description, table.columns, table)


# The frames of a trace, as attributes of Trace.
TRACE_FRAMES: tuple[FrameSource, ...] = (
    _canonical("kernels", "kernels"),
    _canonical("memcpys", "memcpys"),
    _canonical("memsets", "memsets"),
    _canonical("ops", "cpu_ops"),
    _canonical("runtime", "api_calls"),
    _canonical("ranges", "ranges"),
    _canonical("gaps", "gaps"),
    _canonical("syncs", "syncs"),
    _canonical("memory", "memory_events"),
    _canonical("comm", "comm_ops"),
    _canonical("threads", "threads"),
    _canonical("devices", "devices"),
    _derived("steps", PROFILER_STEP_METRICS),
)

# The frames of Trace.llm: per request, per step, per token and between tokens.
LLM_FRAMES: tuple[FrameSource, ...] = (
    _derived("requests", LLM_PER_REQUEST),
    _derived("steps", LLM_STEPS),
    _derived("tokens", LLM_TOKENS),
    _derived("itl", LLM_ITL),
)


def to_frame(relation: duckdb.DuckDBPyRelation) -> pl.DataFrame:
    """A DuckDB result as a polars DataFrame, through the Arrow C stream interface."""
    import polars as pl

    return pl.DataFrame(relation)


def frame_of(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any]) -> pl.DataFrame:
    return to_frame(con.sql(query, params=params or None))
