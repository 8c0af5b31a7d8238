"""Operators aggregated by call path, for a flame graph.

A call path is the names of the operators enclosing a call, outermost first, ending with
the call's own name; every call with the same path is one frame. Python frames are
looked through: an operator called from a Python function is a child of the nearest
enclosing *operator* (or a root), so the paths read as the framework's operators do; so
are step markers (``ProfilerStep#N``), LLM annotations and serving engines' step labels,
which would otherwise make one path per step or request.
Traces without operators (Nsight exports) use their host annotation ranges instead, as
:mod:`tracelens.derived.kernel_ops` does for attribution.

Each frame has two sizes:

- **CPU time**: the inclusive host duration of its calls, summed. A path never contains
  itself, so nothing is counted twice within a path; a root's CPU time is the inclusive
  time of its calls.
- **GPU time**: the kernel time launched from it or anywhere below it. Each kernel goes
  to the operator ``kernel_ops`` says launched it (the innermost one at launch) and is
  rolled up to that operator's ancestors. Kernels without an operator, and graph replays
  whose launching operator is not a recorded call, are roots named as ``kernel_ops`` names
  them (``(no operator)``, ``CUDA graph replay``, ...), so the GPU total is every kernel's
  time, and each leaf matches a row of the report's hot operators.

The paths are found by one recursive query along ``parent_id``, carrying a 64-bit hash of
the path rather than its text: one integer per call, whatever the depth. The whole tree is
returned by :func:`call_path_tree`; :func:`flame_graph` prunes it for one metric. The web
ingest keeps the tree in the run's database (:func:`store_call_path_tree`), since most of
its cost is the kernel attribution, which an answer then never waits for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from ingest.profiler_steps import is_not_step, is_step
from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import ENGINE_STEP_SQL
from tracelens.derived import require
from tracelens.derived.kernel_ops import KERNEL_OPS, UNATTRIBUTED

Metric = Literal["gpu", "cpu"]
METRICS: tuple[Metric, ...] = ("gpu", "cpu")
ROOT_NAME = "all"
OTHER_NAME = "(other)"
# The tree as the web ingest keeps it in a run's database; a new layout takes a new name,
# so a database written by an older version is computed from its tables instead.
STORED_TABLE = "flame_call_paths_v2"
# Frames smaller than this share of the total are folded into their parent's "(other)".
DEFAULT_MIN_FRACTION = 0.001
# At most this many frames come back (the "(other)" frames included).
DEFAULT_MAX_FRAMES = 2000

# The walk: every call gets the hash of its operator path (`key`), its parent frame's key
# and its depth in operators. A call looked through (``through``: a Python frame, a step
# marker, an LLM request/step annotation or a serving engine's step label) passes its
# parent's values on, so what it encloses hangs from the enclosing operator and a kernel
# it launched goes to that operator (key 0, the root, where there is none). Markers are
# looked through as kernel attribution leaves them out: a root per ProfilerStep#N would
# split every path by step and grow the tree with the trace's length.
_WALK = """
WITH RECURSIVE src AS (
    SELECT {id_col} AS oid, parent_id, name, {through} AS through,
           end_ns - start_ns AS dur_ns
    FROM {table} {where}
),
walk(oid, key, parent_key, level, through, dur_ns, name) AS (
    SELECT oid,
           CASE WHEN through THEN 0::UBIGINT ELSE hash(0::UBIGINT, name) END,
           0::UBIGINT,
           CASE WHEN through THEN 0 ELSE 1 END,
           through, dur_ns, name
    FROM src WHERE parent_id IS NULL
  UNION ALL
    SELECT c.oid,
           CASE WHEN c.through THEN w.key ELSE hash(w.key, c.name) END,
           CASE WHEN c.through THEN w.parent_key ELSE w.key END,
           CASE WHEN c.through THEN w.level ELSE w.level + 1 END,
           c.through, c.dur_ns, c.name
    FROM walk w JOIN src c ON c.parent_id = w.oid
)
SELECT * FROM walk
"""

_FRAMES = """
WITH gpu AS (
    SELECT w.key, sum(k.dur_ns) AS gpu_ns
    FROM kernel_ops k JOIN {walk} w ON w.oid = k.op_id
    WHERE w.key <> 0
    GROUP BY w.key
),
frames AS (
    SELECT key, any_value(parent_key) AS parent_key, any_value(level) AS level,
           any_value(name) AS name, count(*) AS calls, sum(dur_ns) AS cpu_ns
    FROM {walk} WHERE NOT through GROUP BY key
)
SELECT f.key, f.parent_key, f.level, f.name, f.calls, f.cpu_ns, coalesce(g.gpu_ns, 0)
FROM frames f LEFT JOIN gpu g USING (key)
"""

# Kernel time no recorded call on a path took: no operator, a replay of a graph, a call
# the walk never reached, or a Python frame outside every operator.
_LOOSE_GPU = """
SELECT CASE WHEN w.oid IS NULL THEN k.op_name ELSE '{unattributed}' END AS name,
       sum(k.dur_ns) AS gpu_ns
FROM kernel_ops k LEFT JOIN {walk} w ON w.oid = k.op_id
WHERE w.oid IS NULL OR w.key = 0
GROUP BY 1
"""
_WALK_TABLE = "flame_graph_walk"


@dataclass
class CallPath:
    """One frame of the whole tree: GPU time is its own launches until rolled up."""

    key: int
    parent_key: int
    level: int
    name: str
    calls: int
    cpu_ns: int
    gpu_ns: int


class FlameFrame(msgspec.Struct):
    """One frame: ``parent`` is the index of its parent in ``frames`` (-1 for the root)."""

    id: int
    parent: int
    name: str
    value_ns: int
    gpu_ns: int
    cpu_ns: int
    # Operator calls on this path; 0 for the root, "(other)" and the pseudo-operators.
    calls: int


class FlameGraph(msgspec.Struct):
    """Frames in depth-first order, each parent before its children, children by name."""

    metric: str
    total_ns: int
    gpu_total_ns: int
    cpu_total_ns: int
    min_fraction: float
    # Frames of the whole tree with any time of this metric, and how many came back.
    frames_total: int
    frames_shown: int
    frames: list[FlameFrame]


def call_path_tree(db: TraceDB) -> list[CallPath]:
    """Every call path of the trace with its calls, CPU time and inclusive GPU time: read
    from :data:`STORED_TABLE` where the database has it, computed otherwise."""

    def tree() -> list[CallPath]:
        stored = _stored(db)
        return stored if stored is not None else _tree(db)

    return db.memo(("call_path_tree",), tree)


def store_call_path_tree(db: TraceDB) -> None:
    """Keep the tree in the trace's database (:data:`STORED_TABLE`), so that reading it
    later costs a small table's scan instead of the kernel attribution and the walk."""
    nodes = _tree(db)
    # dense ids in place of the hashes; 0 is still the root
    ids = {n.key: i for i, n in enumerate(nodes, start=1)}
    cols = (
        [ids[n.key] for n in nodes],
        [ids.get(n.parent_key, 0) for n in nodes],
        [n.level for n in nodes],
        [n.name for n in nodes],
        [n.calls for n in nodes],
        [n.cpu_ns for n in nodes],
        [n.gpu_ns for n in nodes],
    )
    db.con.execute(
        f"""CREATE OR REPLACE TABLE {STORED_TABLE} (key BIGINT, parent_key BIGINT,
            level INTEGER, name VARCHAR, calls BIGINT, cpu_ns BIGINT, gpu_ns BIGINT)"""
    )
    db.con.execute(
        f"INSERT INTO {STORED_TABLE} SELECT unnest(?), unnest(?), unnest(?), unnest(?), "
        "unnest(?), unnest(?), unnest(?)",
        list(cols),
    )


def _stored(db: TraceDB) -> list[CallPath] | None:
    found = db.scalar(
        "SELECT count(*) > 0 FROM duckdb_tables() WHERE table_name = ? AND NOT temporary",
        [STORED_TABLE],
    )
    if not found:
        return None
    return _paths(db.con.execute(f"SELECT * FROM {STORED_TABLE}").fetchall())


def _paths(rows: list[tuple[Any, ...]]) -> list[CallPath]:
    """Rows of (key, parent key, level, name, calls, CPU ns, GPU ns) as call paths."""
    return [
        CallPath(int(k), int(p), int(lv), str(n), int(c), int(cpu), int(g))
        for k, p, lv, n, c, cpu, g in rows
    ]


def _walk_sql(db: TraceDB) -> str:
    if db.scalar("SELECT count(*) > 0 FROM cpu_ops"):
        fmt = {
            "id_col": "op_id",
            "through": f"(category = 'python_function' OR {is_step()})",
            "table": "cpu_ops",
            "where": "",
        }
    else:
        fmt = {
            "id_col": "range_id",
            "through": f"(NOT {is_not_step()} OR name LIKE 'llm.%' OR {ENGINE_STEP_SQL})",
            "table": "ranges",
            "where": "WHERE device_id IS NULL",
        }
    return _WALK.format(**fmt)


def _tree(db: TraceDB) -> list[CallPath]:
    require(db, KERNEL_OPS)
    # the walk is read twice; a temporary table of one connection, dropped at the end
    db.con.execute(f"CREATE OR REPLACE TEMP TABLE {_WALK_TABLE} AS {_walk_sql(db)}")
    try:
        rows = db.con.execute(_FRAMES.format(walk=_WALK_TABLE)).fetchall()
        loose = db.con.execute(
            _LOOSE_GPU.format(unattributed=UNATTRIBUTED, walk=_WALK_TABLE)
        ).fetchall()
    finally:
        db.con.execute(f"DROP TABLE IF EXISTS {_WALK_TABLE}")
    nodes = _paths(rows)
    taken = {n.key for n in nodes}
    for name, gpu_ns in loose:
        key = _pseudo_key(str(name), taken)
        taken.add(key)
        nodes.append(CallPath(key, 0, 1, str(name), 0, 0, int(gpu_ns)))
    by_key = {n.key: n for n in nodes}
    # own launches up to every ancestor, deepest first
    for n in sorted(nodes, key=lambda n: -n.level):
        parent = by_key.get(n.parent_key)
        if parent is not None:
            parent.gpu_ns += n.gpu_ns
    return nodes


def _pseudo_key(name: str, taken: set[int]) -> int:
    # an integer no path has: the root is 0 and paths are unsigned hashes
    key = -1
    while key in taken:
        key -= 1
    return key


def flame_graph(
    db: TraceDB,
    metric: Metric = "gpu",
    min_fraction: float = DEFAULT_MIN_FRACTION,
    max_frames: int = DEFAULT_MAX_FRAMES,
) -> FlameGraph:
    """The call-path tree sized by ``metric``, its small frames folded into "(other)"."""
    return prune(call_path_tree(db), metric, min_fraction, max_frames)


def prune(
    nodes: list[CallPath], metric: Metric, min_fraction: float, max_frames: int
) -> FlameGraph:
    """The frames of ``nodes`` at least ``min_fraction`` of the total (fewer if more than
    ``max_frames`` would come back), each parent's smaller children summed into one
    "(other)" child."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")

    def value(n: CallPath) -> int:
        return n.gpu_ns if metric == "gpu" else n.cpu_ns

    roots = [n for n in nodes if n.parent_key == 0]
    gpu_total = sum(n.gpu_ns for n in roots)
    cpu_total = sum(n.cpu_ns for n in roots)
    total = gpu_total if metric == "gpu" else cpu_total
    sized = [n for n in nodes if value(n) > 0]
    floor = max(1, int(total * min_fraction))
    # A frame is never bigger than its parent, so a floor keeps the tree connected. With
    # the root and up to one "(other)" per kept frame and one under the root, `budget`
    # real frames fit; the floor above the next frame's size keeps at most that many.
    values = sorted((value(n) for n in sized), reverse=True)
    budget = max(0, (max_frames - 2) // 2)
    if len(values) > budget:
        floor = max(floor, values[budget] + 1)
    kept = {n.key for n in sized if value(n) >= floor}
    children: dict[int, list[CallPath]] = {}
    for n in sized:
        children.setdefault(n.parent_key, []).append(n)

    frames: list[FlameFrame] = [FlameFrame(0, -1, ROOT_NAME, total, gpu_total, cpu_total, 0)]

    def add(parent_key: int, parent_id: int) -> None:
        rest = rest_gpu = rest_cpu = 0
        for c in sorted(children.get(parent_key, []), key=lambda c: c.name):
            if c.key not in kept:
                rest += value(c)
                rest_gpu += c.gpu_ns
                rest_cpu += c.cpu_ns
                continue
            fid = len(frames)
            frames.append(FlameFrame(fid, parent_id, c.name, value(c), c.gpu_ns, c.cpu_ns, c.calls))
            add(c.key, fid)
        if rest:
            frames.append(
                FlameFrame(len(frames), parent_id, OTHER_NAME, rest, rest_gpu, rest_cpu, 0)
            )

    if total > 0:
        add(0, 0)
    return FlameGraph(
        metric=metric,
        total_ns=total,
        gpu_total_ns=gpu_total,
        cpu_total_ns=cpu_total,
        min_fraction=min_fraction,
        frames_total=len(sized),
        frames_shown=len(frames),
        frames=frames,
    )
