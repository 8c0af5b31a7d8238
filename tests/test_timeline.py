"""Timeline tables and window queries on a real trace, against the canonical tables."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from ingest import load_trace
from web import timeline_store as timeline
from web.timeline_store import build_timeline_tables, timeline_meta, timeline_window


@pytest.fixture(scope="module")
def con(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    trace = corpus / "torch" / "v100_train_single_rank_ns.pt.trace.json.gz"
    loaded = load_trace(trace, db_path=tmp_path_factory.mktemp("tl") / "t.duckdb")
    build_timeline_tables(loaded.con)
    return loaded.con


def test_lanes_hold_every_event_of_their_sources(con: duckdb.DuckDBPyConnection) -> None:
    meta = timeline_meta(con)
    by_key = {lane["key"]: lane for lane in meta["lanes"]}
    gpu = con.execute(
        """SELECT (SELECT count(*) FROM kernels WHERE stream_id = 7)
                + (SELECT count(*) FROM memcpys WHERE stream_id = 7 AND kind NOT LIKE 'UVM%')
                + (SELECT count(*) FROM memsets WHERE stream_id = 7)"""
    ).fetchone()[0]
    assert by_key["gpu:0:7"]["event_count"] == gpu
    top_ops = con.execute("SELECT count(*) FROM cpu_ops WHERE depth = 0").fetchone()[0]
    api_only = con.execute(
        """SELECT count(*) FROM api_calls a WHERE NOT EXISTS (SELECT 1 FROM cpu_ops o
             WHERE o.pid = a.pid AND o.tid = a.tid)"""
    ).fetchone()[0]
    threads = sum(lane["event_count"] for lane in meta["lanes"] if lane["group"] == "thread")
    assert threads == top_ops + api_only
    stored = con.execute("SELECT (SELECT count(*) FROM tl_events) + (SELECT count(*) FROM tl_long)")
    assert stored.fetchone()[0] == sum(lane["event_count"] for lane in meta["lanes"])
    # Time order is what lets DuckDB skip row groups outside a window.
    unordered = con.execute(
        "SELECT count(*) FROM (SELECT start_ns < lag(start_ns) OVER () AS back FROM tl_events) "
        "WHERE back"
    ).fetchone()[0]
    assert unordered == 0


def test_pre_aggregated_answer_matches_the_exact_one(
    con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    meta = timeline_meta(con)
    assert meta["agg"] is not None
    in_memory = timeline_window(con, None, None, 300, meta)
    in_sql = timeline_window(con, None, None, 300, {**meta, "agg": None})
    assert in_memory["lanes"] == in_sql["lanes"]  # numpy and DuckDB aggregate alike
    monkeypatch.setattr(timeline, "AGG_MIN_BUCKETS_PER_PX", 10**12)  # force the exact path
    exact = timeline_window(con, None, None, 300, meta)
    for a, b in zip(in_memory["lanes"], exact["lanes"], strict=True):
        assert a["count"] == b["count"], a["key"]
        if b["buckets"] is None:
            assert a["buckets"] is None and a["events"] == b["events"]
            continue
        assert sum(x[1] for x in a["buckets"]) == sum(x[1] for x in b["buckets"])
        busy_a = sum(x[2] for x in a["buckets"])
        busy_b = sum(x[2] for x in b["buckets"])
        assert busy_a == pytest.approx(busy_b, rel=0.05), a["key"]


def test_windows_are_clamped_and_answers_bounded_by_pixels(con: duckdb.DuckDBPyConnection) -> None:
    meta = timeline_meta(con)
    w = timeline_window(con, meta["span_ns"] + 10, meta["span_ns"] + 5, 50)
    assert 0 <= w["start_ns"] < w["end_ns"] <= meta["span_ns"]
    full = timeline_window(con, None, None, 50)
    for lane in full["lanes"]:
        if lane["buckets"] is not None:
            assert len(lane["buckets"]) <= 50
        else:
            assert lane["count"] <= 50
