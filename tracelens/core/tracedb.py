"""Read access to one trace database, with the few facts every analyzer needs."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

import duckdb

from ingest.correlation import correlation_ids_unique

_T = TypeVar("_T")

# One query for each device's window (first to last GPU activity) and busy time. Busy is
# the window minus the derived gaps, i.e. the union of kernel, memcpy and memset intervals
# (unified-memory migrations included, as in ingest.derive_gaps).
_DEVICE_STATS = """
WITH act AS (
    SELECT device_id, start_ns, end_ns FROM kernels
    UNION ALL SELECT device_id, start_ns, end_ns FROM memcpys
    UNION ALL SELECT device_id, start_ns, end_ns FROM memsets
),
w AS (
    SELECT device_id, min(start_ns) AS start_ns, max(end_ns) AS end_ns
    FROM act WHERE device_id IS NOT NULL GROUP BY device_id
),
g AS (SELECT device_id, sum(end_ns - start_ns) AS idle_ns FROM gaps GROUP BY device_id)
SELECT w.device_id, d.name, w.start_ns, w.end_ns, w.end_ns - w.start_ns AS window_ns,
       w.end_ns - w.start_ns - coalesce(g.idle_ns, 0) AS busy_ns
FROM w LEFT JOIN g USING (device_id) LEFT JOIN devices d USING (device_id)
ORDER BY w.device_id
"""


@dataclass(frozen=True)
class DeviceStats:
    device_id: int
    name: str | None
    start_ns: int
    end_ns: int
    window_ns: int
    busy_ns: int

    @property
    def busy_pct(self) -> float:
        return 100.0 * self.busy_ns / self.window_ns if self.window_ns else 0.0

    @property
    def idle_pct(self) -> float:
        return 100.0 - self.busy_pct if self.window_ns else 0.0


class TraceDB:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self._memo: dict[Hashable, Any] = {}

    def memo(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()``, run once per TraceDB and key; later calls return the first result.

        The one cache for what is derived from a trace and shared by analyzers: the derived
        tables (:func:`tracelens.derived.require`), the workload, the cost model, the
        warm-up span, the LLM analysis. Results that depend on thresholds put them in the
        key.
        """
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def rows(self, sql: str, params: list[Any] | None = None) -> list[tuple]:
        return self.con.execute(sql, params or []).fetchall()

    def iter_rows(
        self, sql: str, params: list[Any] | None = None, batch: int = 65_536
    ) -> Iterator[tuple]:
        """The rows of ``sql`` in the order :meth:`rows` gives them, ``batch`` at a time: a
        million-row answer is never held as Python tuples all at once."""
        cur = self.con.execute(sql, params or [])
        while chunk := cur.fetchmany(batch):
            yield from chunk

    def dicts(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        cur = self.con.execute(sql, params or [])
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def scalar(self, sql: str, params: list[Any] | None = None) -> Any:
        # fetched to the end: a result left open blocks the connection's next relation
        # (a frame read after the analysis fails "unfinished result from execute()")
        rows = self.con.execute(sql, params or []).fetchall()
        return rows[0][0] if rows else None

    @cached_property
    def info(self) -> dict[str, str]:
        return dict(self.rows("SELECT key, value FROM trace_info"))

    @cached_property
    def devices(self) -> list[DeviceStats]:
        return [DeviceStats(*r) for r in self.rows(_DEVICE_STATS)]

    @cached_property
    def window(self) -> tuple[int, int]:
        """The analysed window: first to last GPU activity on any device, else the host span."""
        if self.devices:
            return min(d.start_ns for d in self.devices), max(d.end_ns for d in self.devices)
        row = self.rows(
            """SELECT min(s), max(e) FROM (
                   SELECT min(start_ns) s, max(end_ns) e FROM cpu_ops
                   UNION ALL SELECT min(start_ns), max(end_ns) FROM api_calls
                   UNION ALL SELECT min(start_ns), max(end_ns) FROM ranges)"""
        )[0]
        return (row[0] or 0, row[1] or 0)

    @property
    def window_ns(self) -> int:
        start, end = self.window
        return max(0, end - start)

    def pct_of_window(self, ns: float) -> float:
        return 100.0 * ns / self.window_ns if self.window_ns else 0.0

    @cached_property
    def correlation_ids_unique(self) -> bool:
        """No two API calls share a correlation id (:mod:`ingest.correlation`): grouping the
        calls by it can be skipped."""
        return correlation_ids_unique(self.con)

    @cached_property
    def gpu_busy_ns(self) -> int:
        return sum(d.busy_ns for d in self.devices)

    @property
    def t0_ns(self) -> int:
        return self.window[0]
