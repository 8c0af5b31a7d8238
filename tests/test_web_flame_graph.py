"""The flame graph endpoint: operators by call path, against sums taken from the planted
scenario itself (its operators' nesting by time, its launches' operators), and on a real
trace against the canonical tables."""

from __future__ import annotations

import gzip
from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb
import msgspec
import pytest
from web_helpers import client_for, make_settings, upload, wait_done

from tracelens.core.tracedb import TraceDB
from tracelens.derived.kernel_ops import UNATTRIBUTED
from tracelens.flame_graph import OTHER_NAME, ROOT_NAME, flame_graph, store_call_path_tree
from tracelens.testing.chrome_writer import header_for, iter_events, write_events
from tracelens.testing.scenario import CpuOp, Kernel, Scenario

PY = "python_function"


def _scenario() -> tuple[Scenario, dict[int, CpuOp | None]]:
    """Nested operators, a Python frame between operators, the same path twice, and a
    kernel launched inside a Python frame but no operator; each kernel's operator."""
    sc = Scenario("flame")
    launched_by: dict[int, CpuOp | None] = {}

    def launch(op: CpuOp | None, api_ns: int, gpu_ns: int, dur_ns: int) -> Kernel:
        k = sc.launch(op, f"kernel_{len(sc.kernels)}", api_ns, gpu_ns, dur_ns)
        launched_by[k.correlation_id] = op
        return k

    lin = sc.op("aten::linear", 0, 1_000_000)
    sc.op("aten::t", 10_000, 40_000)
    mm = sc.op("aten::addmm", 100_000, 800_000)
    launch(mm, 200_000, 250_000, 300_000)
    sc.op("train.py(10): step", 1_100_000, 1_900_000, category=PY)
    relu = sc.op("aten::relu", 1_200_000, 300_000)
    launch(relu, 1_250_000, 1_300_000, 50_000)
    sc.op("aten::linear", 1_600_000, 1_300_000)
    sc.op("torch/nn/functional.py(100): linear", 1_650_000, 1_200_000, category=PY)
    mm2 = sc.op("aten::addmm", 1_700_000, 1_100_000)
    launch(mm2, 1_800_000, 1_900_000, 200_000)
    mul = sc.op("aten::mul", 3_100_000, 200_000)
    launch(mul, 3_150_000, 3_400_000, 70_000)
    launch(mul, 3_200_000, 3_500_000, 30_000)
    sc.op("train.py(20): loop", 3_600_000, 400_000, category=PY)
    launch(None, 3_700_000, 3_800_000, 90_000)
    assert lin.dur_ns  # the first root, kept for reading
    return sc, launched_by


def _paths(ops: list[CpuOp]) -> dict[int, tuple[str, ...]]:
    """Each operator's path by containment in time on its thread, Python frames skipped."""
    real = sorted((o for o in ops if o.category != PY), key=lambda o: (o.start_ns, -o.dur_ns))
    out: dict[int, tuple[str, ...]] = {}
    stack: list[CpuOp] = []
    for o in real:
        while stack and stack[-1].start_ns + stack[-1].dur_ns < o.start_ns + o.dur_ns:
            stack.pop()
        out[o.external_id] = (*(s.name for s in stack), o.name)
        stack.append(o)
    return out


def _expected(sc: Scenario, launched_by: dict[int, CpuOp | None]) -> dict[tuple, tuple]:
    paths = _paths(sc.cpu_ops)
    cpu: dict[tuple, int] = defaultdict(int)
    gpu: dict[tuple, int] = defaultdict(int)
    for o in sc.cpu_ops:
        if o.category != PY:
            cpu[paths[o.external_id]] += o.dur_ns
    for k in sc.kernels:
        op = launched_by[k.correlation_id]
        path = paths[op.external_id] if op is not None else (UNATTRIBUTED,)
        for i in range(1, len(path) + 1):
            gpu[path[:i]] += k.dur_ns
    return {p: (gpu.get(p, 0), cpu.get(p, 0)) for p in set(cpu) | set(gpu)}


def _by_path(answer: dict[str, Any]) -> dict[tuple, tuple]:
    frames = answer["frames"]
    paths: list[tuple[str, ...]] = []
    out = {}
    for f in frames:
        path = () if f["parent"] < 0 else (*paths[f["parent"]], f["name"])
        paths.append(path)
        if path:
            assert path not in out, f"two frames for {path}"
            out[path] = (f["gpu_ns"], f["cpu_ns"])
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("flame")
    sc, launched_by = _scenario()
    trace = tmp / "flame.pt.trace.json.gz"
    with gzip.open(trace, "wt", encoding="utf-8") as out:
        write_events(out, iter_events(sc), header_for(sc))
    with client_for(make_settings(tmp / "data")) as client:
        run = wait_done(client, upload(client, trace).json()["id"])
        assert run["status"] == "ready", run["error"]
        yield client, run["id"], _expected(sc, launched_by), sc


def test_frames_are_the_scenario_call_paths_with_their_times(served: Any) -> None:
    client, rid, expected, sc = served
    for metric in ("gpu", "cpu"):
        r = client.get(f"/api/runs/{rid}/flamegraph", params={"metric": metric, "min_fraction": 0})
        assert r.status_code == 200, r.text
        answer = r.json()
        got = _by_path(answer)
        # every path with time of this metric, and no other
        want = {p: v for p, v in expected.items() if v[0 if metric == "gpu" else 1] > 0}
        assert got == want
        root = answer["frames"][0]
        assert root["name"] == ROOT_NAME and root["parent"] == -1
        assert answer["gpu_total_ns"] == sum(k.dur_ns for k in sc.kernels)
        roots = [
            o
            for o in sc.cpu_ops
            if o.category != PY and len(_paths(sc.cpu_ops)[o.external_id]) == 1
        ]
        assert answer["cpu_total_ns"] == sum(o.dur_ns for o in roots)
        assert answer["total_ns"] == root["value_ns"] == answer[f"{metric}_total_ns"]
        # each frame's size is its chosen metric, and its children never exceed it
        for f in answer["frames"]:
            assert f["value_ns"] == f[f"{metric}_ns"]
        kids: dict[int, int] = defaultdict(int)
        for f in answer["frames"][1:]:
            kids[f["parent"]] += f["value_ns"]
        for fid, total in kids.items():
            assert total <= answer["frames"][fid]["value_ns"]


def test_small_frames_fold_into_other_and_the_count_is_bounded(served: Any) -> None:
    client, rid, expected, _ = served
    answer = client.get(
        f"/api/runs/{rid}/flamegraph", params={"metric": "cpu", "min_fraction": 0.05}
    ).json()
    total = answer["total_ns"]
    frames = answer["frames"]
    # aten::t (40 µs of 3.4 ms) is under 5 %: summed into (other) below aten::linear
    names = [f["name"] for f in frames]
    assert "aten::t" not in names and OTHER_NAME in names
    other = next(f for f in frames if f["name"] == OTHER_NAME)
    assert frames[other["parent"]]["name"] == "aten::linear"
    assert other["cpu_ns"] == expected[("aten::linear", "aten::t")][1]
    assert all(f["value_ns"] >= 0.05 * total for f in frames if f["name"] != OTHER_NAME)
    # a frame's children still add up to at most the frame, "(other)" included
    capped = client.get(
        f"/api/runs/{rid}/flamegraph", params={"metric": "cpu", "min_fraction": 0, "max_frames": 4}
    ).json()
    assert capped["frames_shown"] == len(capped["frames"]) <= 4
    # the one real frame that fits is the largest (this scenario's sizes are distinct)
    largest = max((p for p, v in expected.items() if v[1]), key=lambda p: expected[p][1])
    assert [f["name"] for f in capped["frames"]][:2] == [ROOT_NAME, largest[-1]]
    for n in range(2, 30):
        got = client.get(
            f"/api/runs/{rid}/flamegraph",
            params={"metric": "gpu", "min_fraction": 0, "max_frames": n},
        ).json()
        assert len(got["frames"]) <= n
        assert got["frames"][0]["value_ns"] == got["gpu_total_ns"]
    assert capped["frames_total"] == sum(1 for v in expected.values() if v[1] > 0)


def test_refusals(served: Any) -> None:
    client, rid, _, _ = served
    assert client.get(f"/api/runs/{rid}/flamegraph", params={"metric": "wall"}).status_code == 400
    assert client.get(f"/api/runs/{rid}/flamegraph", params={"rank": 1}).status_code == 400
    assert client.get("/api/runs/nosuchrun/flamegraph").status_code == 404


def test_real_trace_totals_match_the_canonical_tables(corpus: Path, tmp_path: Path) -> None:
    from ingest import load_trace

    trace = corpus / "torch" / "v100_resnet50_legacy2021.pt.trace.json.gz"
    con = load_trace(trace, db_path=tmp_path / "t.duckdb").con
    try:
        db = TraceDB(con)
        gpu = flame_graph(db, "gpu", min_fraction=0, max_frames=10**6)
        cpu = flame_graph(db, "cpu", min_fraction=0, max_frames=10**6)
        kernel_ns = con.execute("SELECT sum(end_ns - start_ns) FROM kernels").fetchone()[0]
        # the roots: outermost operators, the step markers (roots here) looked through
        root_ns = con.execute(
            "SELECT sum(end_ns - start_ns) FROM cpu_ops "
            "WHERE category = 'cpu_op' AND name NOT LIKE 'ProfilerStep#%' AND (parent_id IS NULL"
            " OR parent_id IN (SELECT op_id FROM cpu_ops WHERE name LIKE 'ProfilerStep#%'"
            " AND parent_id IS NULL))"
        ).fetchone()[0]
        assert (
            root_ns
            < con.execute(
                "SELECT sum(end_ns - start_ns) FROM cpu_ops WHERE parent_id IS NULL"
            ).fetchone()[0]
        ), "the trace has step markers at its roots"
        assert gpu.total_ns == kernel_ns
        assert cpu.total_ns == root_ns
        assert gpu.frames_shown == gpu.frames_total + 1  # nothing folded, plus the root
        # the leaves' own GPU time is the report's per-operator GPU time, name by name
        own: dict[str, int] = defaultdict(int)
        kids: dict[int, int] = defaultdict(int)
        for f in gpu.frames[1:]:
            kids[f.parent] += f.gpu_ns
        for f in gpu.frames[1:]:
            own[f.name] += f.gpu_ns - kids.get(f.id, 0)
        by_op = dict(
            con.execute("SELECT op_name, sum(dur_ns) FROM kernel_ops GROUP BY 1").fetchall()
        )
        assert {n: v for n, v in own.items() if v} == {n: int(v) for n, v in by_op.items()}
        # What the web ingest keeps in the database answers as the computation does.
        store_call_path_tree(TraceDB(con))
        kept = TraceDB(con)
        con.execute("DROP TABLE kernel_ops")  # the kept tree needs no kernel attribution
        for metric, computed in (("gpu", gpu), ("cpu", cpu)):
            assert flame_graph(kept, metric, min_fraction=0, max_frames=10**6) == computed
    finally:
        con.close()


def test_trace_without_operators_uses_host_ranges(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "empty.duckdb"))
    from ingest.schema import create_schema

    create_schema(con)
    con.execute(
        "INSERT INTO ranges (range_id, pid, tid, name, start_ns, end_ns, parent_id, depth) "
        "VALUES (1, 1, 1, 'outer', 0, 100, NULL, 0), (2, 1, 1, 'inner', 10, 50, 1, 1)"
    )
    fg = flame_graph(TraceDB(con), "cpu", min_fraction=0)
    assert [(f.name, f.cpu_ns) for f in fg.frames] == [("all", 100), ("outer", 100), ("inner", 40)]
    assert flame_graph(TraceDB(con), "gpu").frames_shown == 1
    con.execute("DELETE FROM ranges")
    store_call_path_tree(TraceDB(con))  # an empty tree is kept as an empty table
    assert flame_graph(TraceDB(con), "cpu").frames == flame_graph(TraceDB(con), "gpu").frames
    assert con.execute("SELECT count(*) FROM flame_call_paths_v2").fetchone() == (0,)


def test_step_markers_and_llm_annotations_are_looked_through(tmp_path: Path) -> None:
    """A root per ProfilerStep#N (or per request) would split every path by step: the
    markers are looked through, as kernel attribution leaves them out."""
    con = duckdb.connect(str(tmp_path / "steps.duckdb"))
    from ingest.schema import create_schema

    create_schema(con)
    rows = []
    for step in range(3):
        base, sid = step * 1000, 10 * step + 1
        rows += [
            (sid, f"ProfilerStep#{step}", base, base + 900, None, 0),
            (sid + 1, "llm.request", base + 10, base + 800, sid, 1),
            (sid + 2, "forward", base + 20, base + 520, sid + 1, 2),
            (sid + 3, "attention", base + 30, base + 130, sid + 2, 3),
        ]
    con.executemany(
        "INSERT INTO ranges (range_id, pid, tid, name, start_ns, end_ns, parent_id, depth) "
        "VALUES (?, 1, 1, ?, ?, ?, ?, ?)",
        rows,
    )
    fg = flame_graph(TraceDB(con), "cpu", min_fraction=0)
    assert [(f.name, f.calls, f.cpu_ns) for f in fg.frames] == [
        ("all", 0, 1500),
        ("forward", 3, 1500),
        ("attention", 3, 300),
    ]


def test_a_run_without_the_kept_tree_computes_it_and_the_api_is_documented(
    tmp_path: Path,
) -> None:
    sc, _ = _scenario()
    trace = tmp_path / "flame.pt.trace.json.gz"
    with gzip.open(trace, "wt", encoding="utf-8") as out:
        write_events(out, iter_events(sc), header_for(sc))
    settings = make_settings(tmp_path / "data")
    with client_for(settings) as client:
        rid = wait_done(client, upload(client, trace).json()["id"])["id"]
        spec = client.get("/schema/openapi.json").json()
    op = spec["paths"]["/api/runs/{run_id}/flamegraph"]["get"]
    assert {p["name"] for p in op["parameters"]} >= {"metric", "min_fraction", "max_frames", "rank"}
    schema = op["responses"]["200"]["content"]["application/json"]["schema"]
    props = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]["properties"]
    # the ingest kept the tree; then the database is made what an older version left
    db_path = next((settings.runs_dir / rid).glob("trace.*.duckdb"))
    con = duckdb.connect(str(db_path))
    assert con.execute("SELECT count(*) FROM flame_call_paths_v2").fetchone()[0] > 0
    kept = msgspec.to_builtins(flame_graph(TraceDB(con), "gpu", min_fraction=0))
    con.execute("DROP TABLE flame_call_paths_v2")
    con.close()
    assert set(kept) == set(props)
    with client_for(settings) as client:
        computed = client.get(f"/api/runs/{rid}/flamegraph", params={"min_fraction": 0})
        assert computed.status_code == 200 and computed.json() == kept
