"""Unusable SQLite input: one clear line naming the file, exit code 2, never a traceback."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ingest import TraceInputError, load_trace
from tracelens.testing import training_steps
from tracelens.testing.nsys_writer import write_nsys_sqlite


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    d = tmp_path_factory.mktemp("good")
    return write_nsys_sqlite(training_steps(steps=3), d / "good.sqlite").read_bytes()


def _sqlite(p: Path, *statements: str) -> Path:
    db = sqlite3.connect(p)
    for sql in statements:
        db.execute(sql)
    db.commit()
    db.close()
    return p


def _not_nsys(p: Path, good: bytes) -> Path:
    return _sqlite(
        p, "CREATE TABLE customers (id INTEGER, name TEXT)", "INSERT INTO customers VALUES (1, 'a')"
    )


def _rocpd(p: Path, good: bytes) -> Path:
    """rocTracer's RPD database: SQLite with rocpd_* tables."""
    return _sqlite(
        p,
        "CREATE TABLE rocpd_string (id INTEGER PRIMARY KEY, string TEXT)",
        "CREATE TABLE rocpd_op (id INTEGER PRIMARY KEY, gpuId INTEGER, start INTEGER)",
    )


def _truncated(p: Path, good: bytes) -> Path:
    p.write_bytes(good[: len(good) // 2])
    return p


def _corrupt_pages(p: Path, good: bytes) -> Path:
    data = bytearray(good)
    rng = random.Random(7)
    page = int.from_bytes(data[16:18], "big")
    for off in range(page, len(data), page):
        data[off : off + 64] = bytes(rng.getrandbits(8) for _ in range(64))
    p.write_bytes(bytes(data))
    return p


def _bad_header(p: Path, good: bytes) -> Path:
    data = bytearray(good)
    data[16:18] = b"\x00\x03"  # page size 3: not a power of two
    p.write_bytes(bytes(data))
    return p


def _header_only(p: Path, good: bytes) -> Path:
    p.write_bytes(b"SQLite format 3\x00")
    return p


def _report(p: Path, good: bytes) -> Path:
    p.write_bytes(b"NSYS\x00 report body")
    return p


def _empty(p: Path, good: bytes) -> Path:
    p.write_bytes(b"")
    return p


CASES = {
    "not_nsys.sqlite": (_not_nsys, "not an Nsight Systems export"),
    "trace.rpd": (_rocpd, "a rocprofiler database (rocpd tables), not an Nsight Systems export"),
    "kernels.ncu-rep": (_report, "this is an Nsight Compute report (metrics of single kernels"),
    "truncated.sqlite": (_truncated, "damaged SQLite file: truncated"),
    "corrupt.sqlite": (_corrupt_pages, "damaged or unreadable SQLite file"),
    "bad_header.sqlite": (_bad_header, "damaged or unreadable SQLite file"),
    "header_only.sqlite": (_header_only, "damaged SQLite file"),
    "profile.nsys-rep": (_report, "nsys export --type sqlite --output profile.sqlite"),
    "old_profile.qdrep": (_report, "nsys export --type sqlite --output old_profile.sqlite"),
    "empty.sqlite": (_empty, "empty file"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_load_trace_refuses_with_one_line(tmp_path: Path, good: bytes, name: str) -> None:
    make, expected = CASES[name]
    path = make(tmp_path / name, good)
    with pytest.raises(TraceInputError) as info:
        load_trace(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expected in message


@pytest.mark.parametrize(
    "name", ["not_nsys.sqlite", "corrupt.sqlite", "profile.nsys-rep", "kernels.ncu-rep"]
)
def test_cli_exits_2_with_one_line_on_stderr(tmp_path: Path, good: bytes, name: str) -> None:
    make, expected = CASES[name]
    path = make(tmp_path / name, good)
    proc = subprocess.run(
        [sys.executable, "-m", "tracelens.cli", "analyze", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert expected in lines[0] and "Traceback" not in proc.stderr


def test_corrupt_file_is_not_modified(tmp_path: Path, good: bytes) -> None:
    path = _corrupt_pages(tmp_path / "corrupt.sqlite", good)
    before = path.read_bytes()
    with pytest.raises(TraceInputError):
        load_trace(path)
    assert path.read_bytes() == before
