"""Timeline data at the zoom the browser asks for, aggregated server-side when dense."""

from __future__ import annotations

from typing import Any

from litestar import get
from litestar.di import NamedDependency
from litestar.params import FromPath, Parameter

from web.routes.api_runs import load_ready_run, open_run_database
from web.services import Services
from web.timeline_store import MAX_WIDTH_PX, timeline_window


@get(
    "/api/runs/{run_id:str}/timeline",
    summary="Lanes (GPU streams, host threads, annotation ranges) in a window",
    description=(
        "Times are nanoseconds since the trace's first event (`t0_ns` in the answer). A lane "
        "with more events in the window than `width_px` comes back as per-pixel `buckets` "
        "([pixel, count, busy fraction, name index]); other lanes as `events` "
        "([start_ns, end_ns, name index, kind index])."
    ),
    sync_to_thread=True,
)
def get_timeline(
    svc: NamedDependency[Services],
    run_id: FromPath[str],
    start_ns: int | None = Parameter(default=None, ge=0, le=2**62),
    end_ns: int | None = Parameter(default=None, ge=0, le=2**62),
    width_px: int = Parameter(default=1000, ge=1, le=MAX_WIDTH_PX),
) -> dict[str, Any]:
    run = load_ready_run(svc, run_id)
    cur, meta = open_run_database(svc, run)
    try:
        return timeline_window(cur, start_ns, end_ns, width_px, meta)
    finally:
        cur.close()


ROUTES = [get_timeline]
