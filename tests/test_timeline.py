"""Timeline tables and window queries on a real trace, against the canonical tables."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from ingest import load_trace
from web import timeline_store as timeline
from web.timeline_event import NoSuchEventError, event_details
from web.timeline_range import range_summary
from web.timeline_search import BadSearchError, search_events
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
    # Every operator has its flame-chart row (this trace nests five deep), and every
    # runtime call its thread's runtime row.
    ops = con.execute("SELECT count(*) FROM cpu_ops WHERE category = 'cpu_op'").fetchone()[0]
    in_op_rows = sum(lane["event_count"] for lane in meta["lanes"] if lane["row"] == "op")
    assert in_op_rows == ops
    assert {lane["depth"] for lane in meta["lanes"] if lane["row"] == "op"} == {0, 1, 2, 3, 4}
    calls = con.execute("SELECT count(*) FROM api_calls").fetchone()[0]
    assert sum(lane["event_count"] for lane in meta["lanes"] if lane["row"] == "api") == calls
    # A thread's lanes share its label: the page draws them as one group.
    for lane in meta["lanes"]:
        if lane["thread"]:
            assert lane["thread_label"].startswith("thread " + lane["thread"].split(":")[1])
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
            # The same events; names are indices into each answer's own name list.
            def named(w: dict, lane: dict) -> list:
                return [[s, e, w["names"][n], w["kinds"][k], r] for s, e, n, k, r in lane["events"]]

            assert a["buckets"] is None and named(in_memory, a) == named(exact, b)
            continue
        assert sum(x[1] for x in a["buckets"]) == sum(x[1] for x in b["buckets"])
        busy_a = sum(x[2] for x in a["buckets"])
        busy_b = sum(x[2] for x in b["buckets"])
        assert busy_a == pytest.approx(busy_b, rel=0.05), a["key"]


def test_middle_windows_read_the_finer_buckets_alike(
    con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    meta = timeline_meta(con)
    start, end, width = meta["span_ns"] // 3, meta["span_ns"] // 3 + meta["span_ns"] // 50, 100
    npp = (end - start) / width
    # This window is too narrow for tl_agg and wide enough for tl_agg_fine.
    assert meta["agg_fine_ns"] * 4 <= npp < meta["agg_ns"] * 4
    fine = timeline_window(con, start, end, width, meta)
    monkeypatch.setattr(timeline, "AGG_MIN_BUCKETS_PER_PX", 10**12)  # force the exact path
    exact = timeline_window(con, start, end, width, meta)
    assert any(lane["buckets"] is not None for lane in fine["lanes"])
    # Equal but at the window's two edges, where a bucket straddles the edge.
    for a, b in zip(fine["lanes"], exact["lanes"], strict=True):
        assert a["count"] == pytest.approx(b["count"], abs=max(2, 0.02 * b["count"])), a["key"]
        if b["buckets"] is not None:
            assert a["count"] == sum(x[1] for x in a["buckets"])
            busy_a = sum(x[2] for x in a["buckets"])
            assert busy_a == pytest.approx(sum(x[2] for x in b["buckets"]), rel=0.05), a["key"]


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


def test_a_kernel_leads_to_its_launch_call_and_operator(con: duckdb.DuckDBPyConnection) -> None:
    meta = timeline_meta(con)
    ref, corr, k_start = con.execute(
        "SELECT rowid, correlation_id, start_ns FROM kernels WHERE correlation_id IS NOT NULL "
        "ORDER BY start_ns LIMIT 1 OFFSET 1000"
    ).fetchone()
    d = event_details(con, meta, "kernel", ref)
    assert d["args"]["correlation_id"] == corr and len(d["args"]["grid"]) == 3
    assert d["start_ns"] == k_start - meta["t0_ns"]
    call = next(f for f in d["flows"] if f["relation"] == "launch call")
    name, call_corr, pid, tid, cs, ce = con.execute(
        "SELECT name, correlation_id, pid, tid, start_ns, end_ns FROM api_calls WHERE rowid = ?",
        [call["ref"]],
    ).fetchone()
    assert call_corr == corr and call["name"] == name
    lanes = {lane["id"]: lane for lane in meta["lanes"]}
    assert lanes[call["lane"]]["key"] == f"api:{pid}:{tid}"
    op = next(f for f in d["flows"] if f["relation"] == "launching operator")
    assert op["start_ns"] <= cs - meta["t0_ns"] and ce - meta["t0_ns"] <= op["end_ns"]
    assert lanes[op["lane"]]["thread"] == f"{pid}:{tid}"
    # And back: the call's details list the kernel it launched.
    back = event_details(con, meta, "api", call["ref"])
    assert any(f["kind"] == "kernel" and f["ref"] == ref for f in back["flows"])
    # The operator's stack is its enclosing operators, each one row above the next.
    od = event_details(con, meta, "op", op["ref"])
    depths = [lanes[s["lane"]]["depth"] for s in od["stack"] if s["kind"] == "op"]
    assert depths == list(range(len(depths))) and lanes[od["lane"]]["depth"] == len(depths)
    with pytest.raises(NoSuchEventError):
        event_details(con, meta, "kernel", 10**9)


def test_search_counts_every_match(con: duckdb.DuckDBPyConnection) -> None:
    calls = con.execute(
        "SELECT count(*) FROM api_calls WHERE name = 'cudaLaunchKernel'"
    ).fetchone()[0]
    found = search_events(con, "cudalaunchkernel")
    assert found["count"] == calls > 0
    assert [m[0] for m in found["matches"]] == sorted(m[0] for m in found["matches"])
    mm = con.execute(
        "SELECT count(*) FROM cpu_ops WHERE name IN ('aten::mm', 'aten::addmm')"
    ).fetchone()[0]
    assert search_events(con, "^aten::(add)?mm$", regex=True)["count"] == mm > 0
    with pytest.raises(BadSearchError):
        search_events(con, "(unclosed", regex=True)


def test_a_stretch_counts_concurrent_kernels_once(con: duckdb.DuckDBPyConnection) -> None:
    meta = timeline_meta(con)
    t0 = meta["t0_ns"]
    s, e = meta["span_ns"] // 4, meta["span_ns"] // 2
    got = range_summary(con, meta, s, e)
    spans = con.execute(
        "SELECT greatest(start_ns, ?) , least(end_ns, ?) FROM kernels "
        "WHERE start_ns < ? AND end_ns > ? ORDER BY 1",
        [t0 + s, t0 + e, t0 + e, t0 + s],
    ).fetchall()
    union, reach = 0, 0
    for a, b in spans:
        union += max(0, b - max(a, reach))
        reach = max(reach, b)
    assert got["kernels"] == len(spans) > 0
    assert got["kernel_ns"] == sum(b - a for a, b in spans)
    assert got["devices"][0]["busy_ns"] == union
    assert got["devices"][0]["busy_pct"] == round(100 * union / (e - s), 2)
