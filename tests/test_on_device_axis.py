"""Intervals of several devices on one axis (``interval_sql.on_device``): two of them
overlap there exactly when they share a device and overlap in time, whatever their times
(epoch-scale, negative, touching), so a range join needs no device equality beside it."""

from __future__ import annotations

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from tracelens.core.interval_sql import on_device

_times = st.one_of(
    st.integers(-(2**40), 2**40),
    st.integers(1_700_000_000_000_000_000, 1_700_000_000_000_001_000),
    st.sampled_from([-(2**63) + 1, 2**63 - 2_000]),
)
_intervals = st.lists(
    st.tuples(st.sampled_from([0, 1, 7]), _times, st.integers(0, 500)).map(
        lambda x: (x[0], x[1], min(x[1] + x[2], 2**63 - 1))
    ),
    max_size=25,
)


@settings(max_examples=80, deadline=None)
@given(_intervals, _intervals)
def test_overlaps_on_one_axis_are_same_device_overlaps(
    a: list[tuple[int, int, int]], b: list[tuple[int, int, int]]
) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE a (i INTEGER, device_id INTEGER, s BIGINT, e BIGINT)")
    con.execute("CREATE TABLE b (i INTEGER, device_id INTEGER, s BIGINT, e BIGINT)")
    for name, rows in (("a", a), ("b", b)):
        if rows:
            con.executemany(
                f"INSERT INTO {name} VALUES (?, ?, ?, ?)", [(i, *r) for i, r in enumerate(rows)]
            )
    got = con.execute(
        f"""SELECT x.i, y.i FROM
              (SELECT i, {on_device("device_id", "s")} AS ds,
                      {on_device("device_id", "e")} AS de FROM a) x
            JOIN (SELECT i, {on_device("device_id", "s")} AS ds,
                         {on_device("device_id", "e")} AS de FROM b) y
              ON y.ds < x.de AND y.de > x.ds ORDER BY 1, 2"""
    ).fetchall()
    want = sorted(
        (i, j)
        for i, (da, sa, ea) in enumerate(a)
        for j, (db_, sb, eb) in enumerate(b)
        if da == db_ and sb < ea and eb > sa
    )
    assert got == want
