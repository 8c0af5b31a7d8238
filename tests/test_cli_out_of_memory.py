"""Out of memory in any command is one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys

_SCRIPT = """
import click, duckdb
from tracelens.cli import main

@main.command("oom-probe")
def probe() -> None:
    con = duckdb.connect()
    con.execute("SET memory_limit = '16MiB'")
    # a list aggregate cannot spill: DuckDB's real OutOfMemoryException
    con.execute("SELECT list(i) FROM range(50000000) t(i)").fetchall()

main(["oom-probe"])
"""


def test_duckdb_out_of_memory_is_one_line_and_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("tracelens: error: the analysis ran out of memory (")
    assert "TRACELENS_MEMORY_LIMIT" in lines[0]


def test_other_errors_are_not_taken_for_out_of_memory() -> None:
    from tracelens.core.out_of_memory import is_out_of_memory

    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(ValueError("out of memory"))
