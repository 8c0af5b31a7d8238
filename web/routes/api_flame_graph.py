"""A run's operators by call path, sized by GPU or CPU time, for the flame graph view."""

from __future__ import annotations

from litestar import Controller
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, Parameter

from tracelens.core.tracedb import TraceDB
from tracelens.flame_graph import (
    DEFAULT_MAX_FRAMES,
    DEFAULT_MIN_FRACTION,
    CallPath,
    FlameGraph,
    Metric,
    call_path_tree,
    prune,
)
from web.api_schema import error_responses
from web.routes.blocking import blocking_get
from web.run_lookup import job_rank, load_ready_run, open_run_database
from web.services import Services

MAX_FRAMES = 10_000


class FlameGraphController(Controller):
    path = "/api/runs/{run_id:str}/flamegraph"
    tags = ("flame graph",)

    @blocking_get(
        "/",
        summary="Operators aggregated by call path (a flame graph), by GPU or CPU time",
        description=(
            "A frame is a call path: the operators enclosing a call, outermost first (Python "
            "frames looked through), down to the call's own name. `metric=gpu` sizes each "
            "frame by the kernel time launched from it or below it (each kernel attributed to "
            "the innermost operator that launched it, as the report's hot operators are; "
            "kernels without one are roots such as `(no operator)`), `metric=cpu` by the "
            "inclusive host time of its calls, summed. Both sizes are in every frame "
            "(`gpu_ns`, `cpu_ns`; `value_ns` is the chosen one). Frames under `min_fraction` "
            "of the total are summed into an `(other)` child of their parent, and the "
            "floor rises until at most `max_frames` come back. `frames` are depth-first, "
            "each parent (`parent`, an index into `frames`) before its children, children by "
            "name; the first is the root, `all`. For a job's run, `rank` picks the rank "
            "(default: the reference rank)."
        ),
        responses=error_responses(404, 409),
    )
    def get_flame_graph(
        self,
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        metric: FromQuery[Metric] = "gpu",
        min_fraction: float = Parameter(default=DEFAULT_MIN_FRACTION, ge=0.0, le=1.0),
        max_frames: int = Parameter(default=DEFAULT_MAX_FRAMES, ge=2, le=MAX_FRAMES),
        rank: int | None = Parameter(default=None, ge=0, le=1_000_000),
    ) -> FlameGraph:
        run = load_ready_run(svc, run_id)
        db_rank = job_rank(run, rank)  # 400 or 404 before anything is computed

        def tree() -> list[CallPath]:
            cur, _ = open_run_database(svc, run, rank)
            try:
                return call_path_tree(TraceDB(cur))
            finally:
                cur.close()

        # the whole tree once per ingest generation and rank; each answer prunes it
        nodes = svc.run_data.memo((run.id, run.generation, "flame_graph", db_rank), tree)
        return prune(nodes, metric, min_fraction, max_frames)
