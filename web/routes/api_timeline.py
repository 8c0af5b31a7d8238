"""Timeline data at the zoom the browser asks for, aggregated server-side when dense."""

from __future__ import annotations

from litestar import Controller
from litestar.di import NamedDependency
from litestar.params import FromPath, Parameter

from web.api_schema import TimelineWindow, error_responses
from web.routes.blocking import blocking_get
from web.run_lookup import load_ready_run, open_run_database
from web.services import Services
from web.timeline_store import MAX_WIDTH_PX, timeline_window


class TimelineController(Controller):
    path = "/api/runs/{run_id:str}/timeline"
    tags = ("timeline",)

    @blocking_get(
        "/",
        summary="Lanes (GPU streams, host threads, annotation ranges) in a window",
        description=(
            "Times are nanoseconds since the trace's first event (`t0_ns` in the answer). A "
            "lane with more events in the window than `width_px` comes back as per-pixel "
            "`buckets` ([pixel, count, busy fraction, name index]); other lanes as `events` "
            "([start_ns, end_ns, name index, kind index])."
        ),
        responses=error_responses(404, 409),
    )
    def get_timeline(
        self,
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        start_ns: int | None = Parameter(default=None, ge=0, le=2**62),
        end_ns: int | None = Parameter(default=None, ge=0, le=2**62),
        width_px: int = Parameter(default=1000, ge=1, le=MAX_WIDTH_PX),
    ) -> TimelineWindow:
        run = load_ready_run(svc, run_id)
        cur, meta = open_run_database(svc, run)
        try:
            return TimelineWindow(**timeline_window(cur, start_ns, end_ns, width_px, meta))
        finally:
            cur.close()
