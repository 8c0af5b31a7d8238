"""``tracelens`` command line: one group, a module per command.

Every command exits with the codes of :mod:`tracelens.cli.options`. A command's module is
imported only when that command runs (:mod:`tracelens.cli.lazy_group`), so each pays for
its own imports alone; ``tracelens --help`` lists them from :data:`SUMMARIES`. Running
out of memory, in any command, is one line and exit 2 (:mod:`tracelens.cli.out_of_memory`).
"""

from __future__ import annotations

import os
from typing import Any

import click

from tracelens import __version__
from tracelens.cli.lazy_group import LazyGroup
from tracelens.cli.out_of_memory import out_of_memory_in_one_line

COMMANDS = {
    "analyze": "tracelens.cli.analyze:analyze",
    "diff": "tracelens.cli.diff:diff",
    "sweep": "tracelens.cli.sweep:sweep",
    "sql": "tracelens.cli.sql:sql",
    "export": "tracelens.cli.export:export",
    "thresholds": "tracelens.cli.thresholds:list_thresholds",
    "schema": "tracelens.cli.schema:list_schema",
    "upload": "tracelens.cli.upload:upload",
    "series": "tracelens.cli.series:series",
}

# The first paragraph of each command's help, so ``tracelens --help`` lists the commands
# without importing them (DuckDB, NumPy and the analyzers cost ~0.3 s there);
# tests/test_cli.py checks these against the commands themselves.
SUMMARIES = {
    "analyze": "Analyze a trace: .json, .json.gz, a profiler output folder, or an nsys .sqlite.",
    "diff": "Compare CANDIDATE against BASELINE: metrics, kernels, operators, findings, verdict.",
    "sweep": "p50/p95 TTFT and TPOT against output tokens/s over runs at rising load, and the "
    "knee.",
    "sql": "Run QUERY over the tables of the trace at PATH (docs/schema.md lists them).",
    "export": "Write a trace's canonical tables (docs/schema.md) as Parquet or CSV files.",
    "thresholds": "List the analyzers' thresholds and their defaults.",
    "schema": "List the canonical and derived tables with their columns.",
    "upload": "Upload TRACE (PyTorch .json/.json.gz or nsys .sqlite) to a tracelens service.",
    "series": "Show series NAME (its runs, trends, change points, alerts), or list every series.",
}


# NumPy's OpenBLAS starts a thread per core when it is imported, ~0.1 CPU-s of a tiny
# trace's analysis; nothing here multiplies matrices large enough to use them (one small
# least-squares fit). A value the user set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


class _Group(LazyGroup):
    def invoke(self, ctx: click.Context) -> Any:
        with out_of_memory_in_one_line():
            return super().invoke(ctx)


@click.group(
    cls=_Group,
    lazy_commands=COMMANDS,
    summaries=SUMMARIES,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="tracelens")
def main() -> None:
    """Where the GPU time went, and what to change: PyTorch profiler and Nsight traces."""
