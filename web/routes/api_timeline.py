"""Timeline data at the zoom the browser asks for, aggregated server-side when dense."""

from __future__ import annotations

from typing import Any, Literal

from litestar import Controller
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException, ValidationException
from litestar.params import FromPath, FromQuery, Parameter

from web.api_schema import (
    TimelineEvent,
    TimelineSearch,
    TimelineStretch,
    TimelineWindow,
    error_responses,
)
from web.routes.blocking import blocking_get
from web.run_lookup import load_ready_run, open_run_database
from web.services import Services
from web.timeline_event import NoSuchEventError, event_details
from web.timeline_range import range_summary
from web.timeline_search import MAX_QUERY_CHARS, BadSearchError, search_events
from web.timeline_store import MAX_WIDTH_PX, timeline_window

EventKind = Literal["kernel", "memcpy", "memset", "op", "py", "api", "range"]


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
            "([start_ns, end_ns, name index, kind index]). For a job's run, `rank` picks "
            "the rank (default: the reference rank), on that rank's own clock; every "
            "timeline endpoint takes it."
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
        rank: int | None = Parameter(default=None, ge=0, le=1_000_000),
    ) -> TimelineWindow:
        run = load_ready_run(svc, run_id)
        cur, meta = open_run_database(svc, run, rank)
        try:
            return TimelineWindow(**timeline_window(cur, start_ns, end_ns, width_px, meta))
        finally:
            cur.close()

    @blocking_get(
        "/event",
        summary="One timeline event in full: arguments, enclosing operators, flows",
        description=(
            "`kind` and `ref` as the timeline's events carry them (the 4th and 5th item). "
            "Times are ns since `t0_ns`. `stack` lists the annotation ranges and operators "
            "enclosing the event (for GPU work: enclosing its launch call), outermost "
            "first; `flows` the events linked by correlation id (a kernel's launch call "
            "and launching operator; a call's or an operator's GPU work), each with the "
            "lane it is drawn in."
        ),
        responses=error_responses(404, 409),
    )
    def get_event(
        self,
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        kind: FromQuery[EventKind],
        ref: int = Parameter(ge=0, le=2**62),
        rank: int | None = Parameter(default=None, ge=0, le=1_000_000),
    ) -> TimelineEvent:
        run = load_ready_run(svc, run_id)
        cur, meta = open_run_database(svc, run, rank)
        try:
            found: dict[str, Any] = event_details(cur, meta, kind, ref)
        except NoSuchEventError as e:
            raise NotFoundException(f"run {run_id}: {e}") from None
        finally:
            cur.close()
        return TimelineEvent(**found)

    @blocking_get(
        "/search",
        summary="Timeline events whose name holds a substring or matches a regex",
        description=(
            "Substring match is case-insensitive; `regex=true` takes an RE2 expression. "
            "`count` is every match; `matches` the first 10,000 in time order as "
            "[start_ns, end_ns, lane, kind, ref]."
        ),
        responses=error_responses(404, 409),
    )
    def search(
        self,
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        q: str = Parameter(min_length=1, max_length=MAX_QUERY_CHARS),
        regex: FromQuery[bool] = False,
        rank: int | None = Parameter(default=None, ge=0, le=1_000_000),
    ) -> TimelineSearch:
        run = load_ready_run(svc, run_id)
        cur, _ = open_run_database(svc, run, rank)
        try:
            return TimelineSearch(**search_events(cur, q, regex))
        except BadSearchError as e:
            raise ValidationException(str(e)) from None
        finally:
            cur.close()

    @blocking_get(
        "/range",
        summary="Kernel time and GPU busy share inside a stretch of the timeline",
        description="Per device: kernels overlapping it, their clipped time and its union.",
        responses=error_responses(404, 409),
    )
    def stretch(
        self,
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        start_ns: int = Parameter(ge=0, le=2**62),
        end_ns: int = Parameter(ge=0, le=2**62),
        rank: int | None = Parameter(default=None, ge=0, le=1_000_000),
    ) -> TimelineStretch:
        run = load_ready_run(svc, run_id)
        cur, meta = open_run_database(svc, run, rank)
        try:
            return TimelineStretch(**range_summary(cur, meta, start_ns, end_ns))
        finally:
            cur.close()
