"""The lane-ordered ASOF key orders exactly as its (lane, time, low) tuple, at the extremes."""

from __future__ import annotations

import itertools

import duckdb

from ingest.asof_lanes import lane_key

_TIMES = [-(2**63), -(2**63) + 1, -1, 0, 1, 2**62, 2**63 - 2, 2**63 - 1]


def _keys(with_low: bool) -> list[tuple[tuple[int, ...], int]]:
    lanes, lows = [1, 2, 2**31 - 1], [0, 1, 2**31, 2**32 - 1]
    tuples = [
        (lane, t, low) if with_low else (lane, t)
        for lane, t, low in itertools.product(lanes, _TIMES, lows if with_low else [0])
    ]
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t (lane BIGINT, time BIGINT, low BIGINT)",
    )
    con.executemany(
        "INSERT INTO t VALUES (?, ?, ?)",
        [(tp[0], tp[1], tp[2] if with_low else 0) for tp in tuples],
    )
    key = lane_key("lane", "time", "low" if with_low else None)
    rows = con.execute(f"SELECT lane, time, low, {key} AS k FROM t").fetchall()
    return [((lane, t, low) if with_low else (lane, t), int(k)) for lane, t, low, k in rows]


def test_key_orders_as_lane_then_time() -> None:
    rows = _keys(with_low=False)
    assert [tp for tp, _ in sorted(rows, key=lambda r: r[1])] == sorted(tp for tp, _ in rows)
    assert len({k for _, k in rows}) == len(rows)


def test_key_with_low_orders_as_lane_then_time_then_low_and_fits_hugeint() -> None:
    rows = _keys(with_low=True)
    assert [tp for tp, _ in sorted(rows, key=lambda r: r[1])] == sorted(tp for tp, _ in rows)
    assert len({k for _, k in rows}) == len(rows)
    assert max(k for _, k in rows) < 2**127
