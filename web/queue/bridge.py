"""The queue's event loop, for the web process's synchronous code.

SAQ is asyncio and its Redis connections belong to the loop that opened them, while the
web's run lifecycle runs in request threads. One daemon thread runs a loop that owns the
queue; any thread hands it a coroutine and waits for the answer.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

# A queue call that takes longer than this is Redis not answering.
CALL_TIMEOUT_S = 10.0


class LoopThread:
    def __init__(self, name: str = "tracelens-queue") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def call(
        self, make: Callable[[], Coroutine[Any, Any, T]], timeout: float = CALL_TIMEOUT_S
    ) -> T:
        """Run the coroutine ``make()`` builds on the loop; its result, or its exception."""

        async def run() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
