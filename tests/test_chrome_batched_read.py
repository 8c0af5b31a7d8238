"""The Chrome reader loads batches of speculatively cut events after the splitter has moved
on: a cut that fell inside a string or a nested value is found only when its batch fails to
parse. The read must then fall back to the last good offset and store exactly the events
``json.loads`` sees, with nothing of the failed batch routed twice; and an error the exact
scan raises from such a cut must not reach the user."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from test_canonical_table_hashes import table_hashes

from ingest import load_trace
from ingest.chrome.reader import read_chrome_trace
from ingest.duckdb_connect import connect
from ingest.errors import TraceInputError
from ingest.schema import create_schema

CHUNK = 4 * 1024


def _kernel(i: int, name: str) -> dict:
    return {
        "ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
        "ts": 1_000_000 + i * 10, "dur": 5,
        "args": {"device": 0, "stream": 7, "correlation": i, "External id": i},
    }  # fmt: skip


def _op(i: int, name: str) -> dict:
    return {
        "ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
        "ts": 1_000_000 + i * 10, "dur": 8, "args": {"External id": i},
    }  # fmt: skip


def _events(n: int, tricky_every: int) -> list[dict]:
    """Operators and kernels; every ``tricky_every``-th name holds ``}, {`` (what the
    speculative cut looks for) and nested braces."""
    out = []
    for i in range(n):
        name = f"k{i}" if i % tricky_every else f'k{i} {{lambda()#1}}, {{"ph": "X"}}'
        out.append(_op(i, f"aten::op{i % 7}"))
        out.append(_kernel(i, name))
    return out


class _Opener:
    """The text in chunks, counting how often the reader opened it."""

    def __init__(self, data: bytes, chunk: int = CHUNK) -> None:
        self.data = data
        self.chunk = chunk
        self.opened = 0

    def __call__(self) -> list[bytes]:
        self.opened += 1
        return [self.data[i : i + self.chunk] for i in range(0, len(self.data), self.chunk)]


def _read(data: bytes, batch_bytes: int) -> tuple[duckdb.DuckDBPyConnection, _Opener]:
    con = connect()
    create_schema(con, describe=False)
    opener = _Opener(data)
    read_chrome_trace(con, Path("t.json"), opener, batch_bytes=batch_bytes)
    return con, opener


def test_a_cut_inside_a_string_falls_back_and_stores_every_event_once() -> None:
    events = _events(1500, tricky_every=3)
    data = json.dumps({"traceEvents": events}).encode()
    con, opener = _read(data, batch_bytes=16 * 1024)
    # a cut fell inside a name, so the text was opened again for the fallback
    assert opener.opened == 2
    names = [r[0] for r in con.execute("SELECT name FROM kernels ORDER BY start_ns").fetchall()]
    assert names == [e["name"] for e in events if e["cat"] == "kernel"]
    ops = con.execute("SELECT op_id, name FROM cpu_ops ORDER BY op_id").fetchall()
    assert ops == [(i + 1, f"aten::op{i % 7}") for i in range(1500)]


def test_plain_names_are_read_in_batches_without_falling_back() -> None:
    data = json.dumps({"traceEvents": _events(1500, tricky_every=10**9)}).encode()
    batched, opener = _read(data, batch_bytes=16 * 1024)
    assert opener.opened == 1
    one_batch, _ = _read(data, batch_bytes=1 << 40)
    assert table_hashes(batched) == table_hashes(one_batch)


@pytest.mark.parametrize("batch_bytes", [16 * 1024, 1 << 40])
def test_the_fallback_gives_the_tables_of_a_read_without_it(batch_bytes: int) -> None:
    """Tricky names in every third event, against the same events written with the brace
    of each name's ``}, {`` escaped (``\\u007d``), where no cut can fall inside a name."""
    events = _events(1200, tricky_every=3)
    tricky = json.dumps({"traceEvents": events}).encode()
    # in a name the pattern is followed by an escaped quote; between events by a plain one
    plain = tricky.replace(b'}, {\\"', b'\\u007d, {\\"')
    assert plain != tricky and json.loads(plain) == json.loads(tricky)
    got, _ = _read(tricky, batch_bytes)
    want, opener = _read(plain, 1 << 40)
    assert opener.opened == 1
    assert table_hashes(got) == table_hashes(want)


def test_a_false_cut_in_the_last_event_is_not_reported_as_malformed(tmp_path: Path) -> None:
    """The last event's name holds ``}, {``: the final stretch is cut there before its
    exact scan, which then starts inside a string and sees unbalanced brackets. That error
    must wait for the batch before it, which fails, and the fallback reads it right. (The
    first 256 KB are scanned exactly, so the trace is larger.)"""
    events = _events(3000, tricky_every=10**9)
    events.append(_kernel(3001, 'last}, {"]]] [[ {"'))
    path = tmp_path / "last.json"
    path.write_text(json.dumps({"traceEvents": events}))
    loaded = load_trace(path, find_captures=False)
    last = loaded.con.execute("SELECT name FROM kernels ORDER BY start_ns DESC LIMIT 1").fetchone()
    assert last == ('last}, {"]]] [[ {"',)
    assert loaded.con.execute("SELECT count(*) FROM kernels").fetchone() == (3001,)
    # the hash is of the whole file, though the fallback read it twice
    assert loaded.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_malformed_events_after_good_batches_are_still_named_in_one_line() -> None:
    good = json.dumps(_events(2000, tricky_every=10**9))[1:-1]
    cut = good.index('{"ph"', len(good) * 3 // 4)
    bad = '{"ph": "X", "cat": "kernel", "name": "k", "ts": 5, "dur": }'
    text = '{"traceEvents": [' + good[:cut] + bad + ", " + good[cut:] + "]}"
    con = connect()
    create_schema(con, describe=False)
    with pytest.raises(TraceInputError) as err:
        read_chrome_trace(con, Path("bad.json"), _Opener(text.encode()), batch_bytes=16 * 1024)
    message = str(err.value)
    assert "bad.json" in message and "malformed" in message and "\n" not in message


def test_an_error_while_a_batch_loads_ends_the_read_and_leaves_no_staging() -> None:
    """The source fails (a read error, a Ctrl-C) while a batch is loading: the error is the
    one raised, the batch's queries are stopped, and nothing of the read is left behind."""
    data = json.dumps({"traceEvents": _events(3000, tricky_every=10**9)}).encode()
    chunks = _Opener(data)()

    def failing() -> Iterator[bytes]:
        for i, chunk in enumerate(chunks):
            if i == len(chunks) // 2:
                raise RuntimeError("the disk went away")
            yield chunk

    con = connect()
    create_schema(con, describe=False)
    with pytest.raises(RuntimeError, match="disk went away"):
        read_chrome_trace(con, Path("t.json"), failing, batch_bytes=16 * 1024)
    attached = con.execute("SELECT database_name FROM duckdb_databases()").fetchall()
    assert ("tracelens_staging",) not in attached
    sequences = con.execute("SELECT sequence_name FROM duckdb_sequences()").fetchall()
    assert sequences == []
