"""Kernel attribution against its definition, on random and degenerate nestings.

Without external ids a kernel goes to the deepest host interval enclosing its launch call,
where at each nesting depth only the latest interval started at or before the call is
considered (ingest/nesting.py: depth is the number of intervals open when one starts).
kernel_ops settles most calls with one lookup of the latest interval and the rest depth by
depth; both must give what the definition gives, here computed in Python, including
partial overlaps, zero-length intervals, zero-length calls and shared instants.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ingest import load_trace
from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.kernel_ops import KERNEL_OPS
from tracelens.testing import Scenario, write_chrome_trace

US = 1_000


def _expected(intervals: list[tuple[int, int, int, int]], a: int, b: int) -> int | None:
    """(id, start, end, depth) rows; the call [a, b]."""
    best: tuple[int, int] | None = None
    for depth in {d for *_, d in intervals if d is not None}:
        at = [r for r in intervals if r[3] == depth and r[1] <= a]
        if not at:
            continue
        latest = max(at, key=lambda r: r[1])
        if latest[2] >= b and (best is None or depth > best[1]):
            best = (latest[0], depth)
    return None if best is None else best[0]


@pytest.mark.parametrize("seed", range(12))
def test_attribution_matches_its_definition(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    sc = Scenario(name=f"nesting-{seed}")
    for i in range(rng.randint(5, 40)):
        start = rng.randrange(0, 60) * US
        dur = rng.choice([0, 0, rng.randrange(1, 40)]) * US  # zero-length ones included
        sc.range(f"r{i}", start, dur)
    calls = []
    for j in range(30):
        start = rng.randrange(0, 70) * US
        dur = rng.choice([0, 1, 2]) * US
        sc.launch(None, f"k{j}", start, 200 * US + j * 10 * US, US, api_dur_ns=dur)
        calls.append((f"k{j}", start, start + dur))
    loaded = load_trace(write_chrome_trace(sc, tmp_path / "t.json"))
    try:
        db = TraceDB(loaded.con)
        require(db, KERNEL_OPS)
        intervals = db.rows(
            "SELECT range_id, start_ns, end_ns, depth FROM ranges WHERE device_id IS NULL"
        )
        t0 = db.scalar("SELECT min(start_ns) FROM api_calls")
        got = dict(db.rows("SELECT kernel_name, op_id FROM kernel_ops"))
        first_call = min(s for _, s, _ in calls)
        for name, a, b in calls:
            # the trace's clock: ns as stored, offset like every other event
            shift = t0 - first_call
            assert got[name] == _expected(intervals, a + shift, b + shift), name
    finally:
        loaded.close()
