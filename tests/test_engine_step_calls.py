"""Launch calls matched to engine steps: where a thread's steps never overlap, the last
step starting at or before a call (an ASOF lookup) is the one whose range holds it, the
same pairs the range join finds; where they overlap, the range join is used."""

from __future__ import annotations

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from tracelens.llm.engine_steps import _STEP_CALLS_ASOF, _STEP_CALLS_JOIN, _STEPS_OVERLAP

_steps = st.lists(
    st.tuples(st.sampled_from([1, 2]), st.integers(0, 60), st.integers(0, 8)), max_size=12
)
_calls = st.lists(st.tuples(st.sampled_from([1, 2]), st.integers(0, 600)), max_size=40)


def _con(
    steps: list[tuple[int, int, int]], calls: list[tuple[int, int]]
) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE engine_step_labels (step_id BIGINT, pid BIGINT, tid BIGINT, "
        "range_start_ns BIGINT, range_end_ns BIGINT)"
    )
    con.execute(
        "CREATE TABLE api_calls (pid BIGINT, tid BIGINT, start_ns BIGINT, correlation_id BIGINT)"
    )
    for i, (tid, start, length) in enumerate(steps):
        con.execute(
            "INSERT INTO engine_step_labels VALUES (?, 7, ?, ?, ?)",
            [i + 1, tid, start * 10, start * 10 + length * 10],
        )
    for i, (tid, at) in enumerate(calls):
        con.execute("INSERT INTO api_calls VALUES (7, ?, ?, ?)", [tid, at, i])
    return con


@settings(max_examples=300, deadline=None)
@given(_steps, _calls)
def test_asof_matches_the_range_join_where_steps_do_not_overlap(
    steps: list[tuple[int, int, int]], calls: list[tuple[int, int]]
) -> None:
    con = _con(steps, calls)
    joined = sorted(con.execute(_STEP_CALLS_JOIN).fetchall())
    by_thread: dict[int, list[tuple[int, int]]] = {}
    for tid, start, length in steps:
        by_thread.setdefault(tid, []).append((start * 10, start * 10 + length * 10))
    # starting before an earlier step ends, or with it (either could be the ASOF's pick)
    overlap = any(
        b[0] < max(e for _, e in spans[:i]) or b[0] == spans[i - 1][0]
        for spans in (sorted(v) for v in by_thread.values())
        for i, b in enumerate(spans)
        if i
    )
    assert bool(con.execute(_STEPS_OVERLAP).fetchone()[0]) is overlap
    if not overlap:
        assert sorted(con.execute(_STEP_CALLS_ASOF).fetchall()) == joined
