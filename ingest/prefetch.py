"""Runs an iterator ahead of its consumer on a thread, so producing overlaps consuming.

Reading, hashing and gunzipping a trace's next chunk release the GIL, as do DuckDB's
queries on the current one: with the reading on its own thread, neither waits for the other.
Memory grows by the ``ahead`` items in flight, no more.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

_DONE = object()
# How often a blocked producer looks whether the consumer has gone.
_POLL_S = 0.1


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def prefetched(items: Iterable[T], ahead: int = 1) -> Iterator[T]:
    """Yield ``items`` in order, produced by a thread up to ``ahead`` items early.

    An exception raised while producing is raised here, at the item it replaced. When the
    consumer stops early (an error, or it breaks off), the producer stops at its next item
    and the source is closed.
    """
    slots: queue.Queue[object] = queue.Queue(maxsize=max(1, ahead))
    stop = threading.Event()

    def put(value: object) -> bool:
        while not stop.is_set():
            try:
                slots.put(value, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        source = iter(items)
        try:
            for item in source:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as exc:  # handed to the consumer, which raises it
            put(_Failed(exc))
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="tracelens-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            got = slots.get()
            if got is _DONE:
                return
            if isinstance(got, _Failed):
                raise got.exc
            yield got  # type: ignore[misc]
    finally:
        stop.set()
        thread.join()
