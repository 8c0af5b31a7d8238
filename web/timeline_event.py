"""One timeline event in full, for the run page's details panel.

An event is named as the timeline serves it: its ``kind`` (kernel, memcpy, memset, op,
py, api, range) and ``ref``, its rowid in that kind's canonical table. The answer holds
its name, times (ns since the timeline's ``t0_ns``), its arguments, the operators and
annotation ranges enclosing it on its thread, and its flows: for GPU work the runtime
call that launched it (same ``correlation_id``) and that call's operator; for a runtime
call the GPU work it issued; for an operator the GPU work of the calls made inside it.
Each related event carries its lane id, so the page can draw an arrow to it.

Every lookup is a filtered scan of one canonical table (DuckDB has no index on them):
a few milliseconds on a run of millions of events.
"""

from __future__ import annotations

from typing import Any

import duckdb

KINDS = ("kernel", "memcpy", "memset", "op", "py", "api", "range")
# An operator launching more work than this lists only the first ones.
MAX_FLOWS = 50
_GPU_TABLES = {"kernel": "kernels", "memcpy": "memcpys", "memset": "memsets"}


class NoSuchEventError(LookupError):
    """No event of that kind and ref in this trace."""


def _row(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> dict[str, Any] | None:
    cur = con.execute(sql, params)
    row = cur.fetchone()
    if row is None:
        return None
    return dict(zip([d[0] for d in cur.description], row, strict=True))


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cur = con.execute(sql, params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _tid(v: Any) -> int:
    return -1 if v is None else int(v)


class _Lanes:
    """Lane ids by the keys :mod:`web.timeline_store` gives them."""

    def __init__(self, meta: dict[str, Any]) -> None:
        self.by_key = {lane["key"]: lane["id"] for lane in meta["lanes"]}

    def gpu(self, r: dict[str, Any]) -> int | None:
        return self.by_key.get(f"gpu:{r['device_id']}:{_tid(r['stream_id'])}")

    def api(self, r: dict[str, Any]) -> int | None:
        return self.by_key.get(f"api:{_tid(r['pid'])}:{_tid(r['tid'])}")

    def range(self, r: dict[str, Any]) -> int | None:
        if r.get("device_id") is not None:
            return self.by_key.get(f"range:{r['device_id']}:{r['depth']}")
        return self.by_key.get(f"range:{_tid(r['pid'])}:{_tid(r['tid'])}:{r['depth']}")

    def op(self, r: dict[str, Any], row: int) -> int | None:
        prefix = "py" if r["category"] == "python_function" else "op"
        return self.by_key.get(f"{prefix}:{_tid(r['pid'])}:{_tid(r['tid'])}:{row}")


def _brief(kind: str, r: dict[str, Any], t0: int, lane: int | None) -> dict[str, Any]:
    return {
        "kind": kind,
        "ref": int(r["ref"]),
        "name": r["name"],
        "start_ns": int(r["start_ns"]) - t0,
        "end_ns": int(r["end_ns"]) - t0,
        "lane": lane,
    }


def _enclosing(
    con: duckdb.DuckDBPyConnection,
    lanes: _Lanes,
    t0: int,
    pid: Any,
    tid: Any,
    start: int,
    end: int,
    exclude: tuple[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Annotation ranges, then operators and Python frames, enclosing [start, end] on a
    thread, outermost first; each operator on the flame-chart row its lane has."""
    where = (
        "pid IS NOT DISTINCT FROM ? AND tid IS NOT DISTINCT FROM ? "
        "AND start_ns <= ? AND end_ns >= ?"
    )
    params = [pid, tid, start, end]
    ranges = _rows(
        con,
        "SELECT rowid AS ref, name, start_ns, end_ns, pid, tid, device_id, depth FROM ranges "
        f"WHERE device_id IS NULL AND {where} ORDER BY depth, start_ns",
        params,
    )
    ops = _rows(
        con,
        "SELECT rowid AS ref, name, start_ns, end_ns, pid, tid, category, depth FROM cpu_ops "
        f"WHERE {where} ORDER BY start_ns, end_ns DESC, depth",
        params,
    )
    stack = [
        _brief("range", r, t0, lanes.range(r)) for r in ranges if ("range", r["ref"]) != exclude
    ]
    n_op = n_py = 0
    for r in ops:
        py = r["category"] == "python_function"
        row = n_py if py else n_op
        if py:
            n_py += 1
        else:
            n_op += 1
        kind = "py" if py else "op"
        if (kind, r["ref"]) == exclude:
            continue
        stack.append(_brief(kind, r, t0, lanes.op(r, row)))
    return stack


def _gpu_work_of(
    con: duckdb.DuckDBPyConnection, lanes: _Lanes, t0: int, correlation_ids: list[int]
) -> list[dict[str, Any]]:
    """Kernels, copies and memsets issued by the calls with these correlation ids."""
    if not correlation_ids:
        return []
    out: list[dict[str, Any]] = []
    for kind, table in _GPU_TABLES.items():
        name = {"kernel": "name", "memcpy": "'Memcpy ' || kind", "memset": "'Memset'"}[kind]
        for r in _rows(
            con,
            f"SELECT rowid AS ref, {name} AS name, start_ns, end_ns, device_id, stream_id "
            # The BETWEEN lets DuckDB skip row groups by their min/max (ids grow with
            # time); list_contains alone would read the whole table.
            f"FROM {table} WHERE correlation_id BETWEEN ? AND ? "
            "AND list_contains(?, correlation_id) AND device_id IS NOT NULL "
            f"ORDER BY start_ns LIMIT {MAX_FLOWS}",
            [min(correlation_ids), max(correlation_ids), correlation_ids],
        ):
            out.append({**_brief(kind, r, t0, lanes.gpu(r)), "relation": "launched"})
    out.sort(key=lambda f: f["start_ns"])
    return out[:MAX_FLOWS]


def _clean(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if v is not None and v != ""}


def event_details(
    con: duckdb.DuckDBPyConnection, meta: dict[str, Any], kind: str, ref: int
) -> dict[str, Any]:
    """The details of event ``ref`` of ``kind``; :class:`NoSuchEventError` if none."""
    if kind not in KINDS:
        raise NoSuchEventError(f"unknown event kind {kind!r}; one of {', '.join(KINDS)}")
    t0 = int(meta["t0_ns"])
    lanes = _Lanes(meta)
    stack: list[dict[str, Any]] = []
    flows: list[dict[str, Any]] = []
    r: dict[str, Any] | None
    if kind in _GPU_TABLES:
        table = _GPU_TABLES[kind]
        r = _row(con, f"SELECT rowid AS ref, * FROM {table} WHERE rowid = ?", [ref])
        if r is None:
            raise NoSuchEventError(f"no {kind} {ref}")
        if kind == "kernel":
            args = {
                "grid": [r["grid_x"], r["grid_y"], r["grid_z"]],
                "block": [r["block_x"], r["block_y"], r["block_z"]],
                "registers_per_thread": r["registers_per_thread"],
                "shared_memory_bytes": r["shared_memory_bytes"],
                "est_occupancy_pct": r["est_occupancy_pct"],
            }
            if all(v is None for v in args["grid"]):
                args["grid"] = None
            if all(v is None for v in args["block"]):
                args["block"] = None
        elif kind == "memcpy":
            r["name"] = f"Memcpy {r['kind']}"
            args = {
                "kind": r["kind"],
                "bytes": r["bytes"],
                "src_mem": r["src_mem"],
                "dst_mem": r["dst_mem"],
            }
        else:
            r["name"] = "Memset"
            args = {"bytes": r["bytes"], "mem": r["mem"]}
        args.update(
            device=r["device_id"], stream=r["stream_id"], correlation_id=r["correlation_id"]
        )
        lane = lanes.gpu(r)
        launch = None
        if r["correlation_id"] is not None:
            # Correlation ids are unique per process; the launch is the latest call with
            # this id that began before the work did.
            launch = _row(
                con,
                "SELECT rowid AS ref, * FROM api_calls WHERE correlation_id = ? "
                "ORDER BY (start_ns <= ?) DESC, start_ns DESC LIMIT 1",
                [r["correlation_id"], r["start_ns"]],
            )
        if launch is not None:
            stack = _enclosing(
                con,
                lanes,
                t0,
                launch["pid"],
                launch["tid"],
                launch["start_ns"],
                launch["end_ns"],
            )
            flows.append(
                {**_brief("api", launch, t0, lanes.api(launch)), "relation": "launch call"}
            )
            ops = [s for s in stack if s["kind"] == "op"]
            if ops:
                flows.append({**ops[-1], "relation": "launching operator"})
    elif kind == "api":
        r = _row(con, "SELECT rowid AS ref, * FROM api_calls WHERE rowid = ?", [ref])
        if r is None:
            raise NoSuchEventError(f"no api call {ref}")
        args = {
            "kind": r["kind"],
            "correlation_id": r["correlation_id"],
            "external_id": r["external_id"],
            "kernel_name": r["kernel_name"],
            "pid": r["pid"],
            "tid": r["tid"],
        }
        lane = lanes.api(r)
        stack = _enclosing(con, lanes, t0, r["pid"], r["tid"], r["start_ns"], r["end_ns"])
        ids = [int(r["correlation_id"])] if r["correlation_id"] is not None else []
        flows = _gpu_work_of(con, lanes, t0, ids)
    elif kind in ("op", "py"):
        r = _row(con, "SELECT rowid AS ref, * FROM cpu_ops WHERE rowid = ?", [ref])
        if r is None:
            raise NoSuchEventError(f"no operator {ref}")
        args = {
            "category": r["category"],
            "input_shapes": r["input_shapes"],
            "input_types": r["input_types"],
            "external_id": r["external_id"],
            "pid": r["pid"],
            "tid": r["tid"],
        }
        full = _enclosing(con, lanes, t0, r["pid"], r["tid"], r["start_ns"], r["end_ns"])
        me = next((s for s in full if s["kind"] == kind and s["ref"] == ref), None)
        lane = me["lane"] if me else None
        stack = [s for s in full if s is not me]
        calls = con.execute(
            "SELECT correlation_id FROM api_calls WHERE pid IS NOT DISTINCT FROM ? AND "
            "tid IS NOT DISTINCT FROM ? AND start_ns >= ? AND end_ns <= ? AND "
            f"correlation_id IS NOT NULL ORDER BY start_ns LIMIT {MAX_FLOWS}",
            [r["pid"], r["tid"], r["start_ns"], r["end_ns"]],
        ).fetchall()
        flows = _gpu_work_of(con, lanes, t0, [int(c[0]) for c in calls])
    else:
        r = _row(con, "SELECT rowid AS ref, * FROM ranges WHERE rowid = ?", [ref])
        if r is None:
            raise NoSuchEventError(f"no range {ref}")
        args = {"domain": r["domain"], "device": r["device_id"], "pid": r["pid"], "tid": r["tid"]}
        lane = lanes.range(r)
        if r["device_id"] is None:
            stack = _enclosing(
                con,
                lanes,
                t0,
                r["pid"],
                r["tid"],
                r["start_ns"],
                r["end_ns"],
                exclude=("range", ref),
            )
            stack = [s for s in stack if s["kind"] == "range"]
    return {
        "kind": kind,
        "ref": ref,
        "name": r["name"],
        "start_ns": int(r["start_ns"]) - t0,
        "end_ns": int(r["end_ns"]) - t0,
        "dur_ns": int(r["end_ns"]) - int(r["start_ns"]),
        "lane": lane,
        "args": _clean(args),
        "stack": stack,
        "flows": flows,
    }
