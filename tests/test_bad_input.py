"""Unusable input gets one clear line naming the file (exit 2), never a traceback; odd but
readable input gets a documented tolerant reading."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from ingest import TraceInputError, load_trace
from tracelens.report import build_report
from tracelens.testing import training_steps, write_chrome_trace
from tracelens.testing.reports import report_of_file


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "tracelens.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def _assert_clean_failure(proc: subprocess.CompletedProcess[str], path: Path, words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert str(path) in lines[0]
    assert words in lines[0]


def _event(**kw: object) -> dict:
    base = {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": 0,
        "tid": 7,
        "ts": 10,
        "dur": 5,
        "args": {"device": 0, "stream": 7, "correlation": 1},
    }
    base.update(kw)
    return base


CASES = {
    "empty.json": (b"", "empty file"),
    "blank.json": (b"  \n\n ", "only whitespace"),
    "text.json": (b"this is not a trace\n", "unrecognised format"),
    "binary.bin": (bytes(range(256)) * 4, "unrecognised format"),
    "string.json": (b'"just a string"', "unrecognised format"),
    "shape.json": (b'{"foo": [1, 2]}', 'no "traceEvents" array'),
    "scalars.json": (b'{"traceEvents": [1, 2, 3]}', "non-object value"),
    "truncated.json": (b'{"traceEvents": [{"ph": "X", "name": "a"}, {"ph": "X", "na', "truncated"),
    "unclosed.json": (b'{"traceEvents": [{"ph": "X"}]', "truncated"),
    "nan.json": (b'{"traceEvents": [{"ph": "X", "ts": NaN, "dur": 1}]}', "malformed event"),
    "report.nsys-rep": (b"\x00\x01binary", "nsys export --type sqlite"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_unusable_input_cli(tmp_path: Path, name: str) -> None:
    content, words = CASES[name]
    p = tmp_path / name
    p.write_bytes(content)
    _assert_clean_failure(_cli("analyze", str(p)), p, words)


def test_missing_path(tmp_path: Path) -> None:
    p = tmp_path / "nope.json"
    _assert_clean_failure(_cli("analyze", str(p)), p, "no such file")


def test_folder_without_traces(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    _assert_clean_failure(_cli("analyze", str(tmp_path)), tmp_path, "no trace files")


def test_truncated_gzip(tmp_path: Path) -> None:
    full = gzip.compress(json.dumps({"traceEvents": [_event()] * 2000}).encode())
    p = tmp_path / "cut.json.gz"
    p.write_bytes(full[: len(full) // 2])
    _assert_clean_failure(_cli("analyze", str(p)), p, "truncated gzip")


def test_damaged_gzip(tmp_path: Path) -> None:
    full = bytearray(gzip.compress(json.dumps({"traceEvents": [_event()] * 500}).encode()))
    full[len(full) // 2 : len(full) // 2 + 40] = b"\xff" * 40
    p = tmp_path / "damaged.json.gz"
    p.write_bytes(bytes(full))
    proc = _cli("analyze", str(p))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert str(p) in proc.stderr


def test_gzip_bomb_is_refused_quickly(tmp_path: Path) -> None:
    # 64 MiB of whitespace inside a valid-looking trace compresses to ~64 KiB
    p = tmp_path / "bomb.json.gz"
    with gzip.open(p, "wb", compresslevel=9) as f:
        f.write(b'{"traceEvents": [')
        block = b" " * (1 << 20)
        for _ in range(64):
            f.write(block)
        f.write(b"]}")
    assert p.stat().st_size < 200_000
    proc = _cli("analyze", str(p), env={"TRACELENS_MAX_DECOMPRESSED_BYTES": str(8 << 20)})
    _assert_clean_failure(proc, p, "decompresses to more than 8,388,608 bytes")


def test_existing_database_survives_a_failed_ingest(tmp_path: Path) -> None:
    good = write_chrome_trace(training_steps(steps=2), tmp_path / "good.json")
    db = tmp_path / "run.duckdb"
    assert _cli("analyze", str(good), "--db", str(db), "--format", "json").returncode == 0
    before = db.read_bytes()
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "a"}, {"ph"')
    _assert_clean_failure(_cli("analyze", str(bad), "--db", str(db)), bad, "truncated")
    assert db.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


# -- tolerant readings (documented in docs/input-formats.md) -----------------------------


def _load_events(tmp_path: Path, events: list, name: str = "t.json") -> dict:
    p = tmp_path / name
    p.write_text(json.dumps({"traceEvents": events}))
    return report_of_file(p)


def test_missing_fields_and_negative_durations_are_skipped_with_a_warning(tmp_path: Path) -> None:
    events = [
        _event(ts=0, dur=10),
        {"ph": "X", "cat": "kernel", "name": "no ts", "dur": 5, "args": {"device": 0}},
        {"ph": "X", "cat": "kernel", "name": "no dur", "ts": 3, "args": {"device": 0}},
        _event(ts=20, dur=-4, name="negative"),
        {"cat": "kernel", "name": "no phase"},
        {"ph": "X"},
        _event(ts=30, dur=10),
    ]
    r = _load_events(tmp_path, events)
    assert r["metrics"]["kernel_count"] == 2
    warnings = r["trace"]["warnings"]
    assert "3 complete (X) events without ts or dur skipped" in warnings
    assert "1 event with a negative duration skipped" in warnings
    assert r["devices"][0]["window_ns"] == 40_000
    assert r["devices"][0]["busy_ns"] == 20_000


def test_unsorted_events_give_the_same_report(tmp_path: Path) -> None:
    sc = training_steps(steps=3)
    ordered = write_chrome_trace(sc, tmp_path / "ordered.json")
    doc = json.loads(ordered.read_text())
    random.Random(3).shuffle(doc["traceEvents"])
    shuffled = tmp_path / "shuffled.json"
    shuffled.write_text(json.dumps(doc))
    reports = []
    for p in (ordered, shuffled):
        loaded = load_trace(p)
        try:
            reports.append(build_report(loaded))
        finally:
            loaded.close()
    a, b = reports
    assert [(f["id"], f["impact_ns"]) for f in a["findings"]] == [
        (f["id"], f["impact_ns"]) for f in b["findings"]
    ]
    assert a["metrics"] == b["metrics"]


def test_overlapping_kernels_are_not_double_counted(tmp_path: Path) -> None:
    events = [
        _event(ts=0, dur=10, tid=7, args={"device": 0, "stream": 7}),
        _event(ts=5, dur=10, tid=8, args={"device": 0, "stream": 8}),  # overlaps on stream 8
        _event(ts=30, dur=10, tid=7, args={"device": 0, "stream": 7}),
    ]
    r = _load_events(tmp_path, events)
    d = r["devices"][0]
    assert d["window_ns"] == 40_000
    assert d["busy_ns"] == 25_000


def test_non_utf8_names_are_replaced(tmp_path: Path) -> None:
    p = tmp_path / "latin1.json"
    p.write_bytes(
        b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "caf\xe9_kernel", "pid": 0, '
        b'"tid": 7, "ts": 1, "dur": 2, "args": {"device": 0}}]}'
    )
    loaded = load_trace(p)
    try:
        r = build_report(loaded)
    finally:
        loaded.close()
    assert r["top_kernels"][0]["name"] == "caf\ufffd_kernel"
    assert "U+FFFD" in r["trace"]["warnings"]


def test_string_timestamps_and_integer_microseconds(tmp_path: Path) -> None:
    events = [_event(ts="1000.5", dur="2"), _event(ts=2000, dur=1.25)]
    r = _load_events(tmp_path, events)
    assert r["devices"][0]["window_ns"] == 2_001_250 - 1_000_500


def test_load_trace_raises_trace_input_error(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text("[1")
    with pytest.raises(TraceInputError) as exc:
        load_trace(p)
    assert str(exc.value).startswith(str(p))
