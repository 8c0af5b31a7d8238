"""The read-ahead thread hands over every item in order, its errors, and stops with its reader."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest import load_trace
from ingest.errors import TraceInputError
from ingest.prefetch import prefetched


def test_items_arrive_in_order_from_another_thread() -> None:
    producers: set[str] = set()

    def items() -> Iterator[int]:
        for i in range(1000):
            producers.add(threading.current_thread().name)
            yield i

    assert list(prefetched(items(), ahead=3)) == list(range(1000))
    assert threading.current_thread().name not in producers


def test_an_error_while_producing_is_raised_after_the_items_before_it() -> None:
    def items() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("bad block")

    got = []
    with pytest.raises(ValueError, match="bad block"):
        for i in prefetched(items()):
            got.append(i)
    assert got == [1, 2]


def test_a_consumer_that_stops_early_stops_and_closes_the_source() -> None:
    closed = threading.Event()

    def items() -> Iterator[int]:
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    it = prefetched(items())
    assert next(it) == 0
    it.close()  # type: ignore[attr-defined]
    assert closed.wait(5)
    assert not any(t.name == "tracelens-prefetch" for t in threading.enumerate())


def test_a_trace_that_fails_mid_read_leaves_no_reading_thread(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    good = ",\n".join(
        f'{{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": {i}, "dur": 1}}'
        for i in range(200_000)
    )
    path.write_text('{"traceEvents": [' + good + ", {oops}]}")
    progress: list[tuple[int, int]] = []
    with pytest.raises(TraceInputError):
        load_trace(path, on_progress=lambda done, total: progress.append((done, total)))
    assert not any(t.name == "tracelens-prefetch" for t in threading.enumerate())
    assert progress and all(total == path.stat().st_size for _, total in progress)
    assert [d for d, _ in progress] == sorted(d for d, _ in progress)
