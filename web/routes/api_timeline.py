"""Timeline data at the zoom the browser asks for, aggregated server-side when dense."""

from __future__ import annotations

from typing import Any, Literal

from litestar import Controller
from litestar.di import NamedDependency
from litestar.exceptions import ClientException, NotFoundException, ValidationException
from litestar.params import FromPath, FromQuery, Parameter

from web.api_schema import (
    TimelineEvent,
    TimelineSearch,
    TimelineStretch,
    TimelineWindow,
    error_responses,
)
from web.job_timeline import chosen_ranks, job_clock, rank_opener
from web.routes.blocking import blocking_get
from web.run_lookup import load_ready_run, open_run_database
from web.services import Services
from web.timeline_aligned import (
    MAX_ALIGNED_RANKS,
    MAX_HOST_RANKS,
    BadRanksError,
    aligned_range,
    aligned_search,
    aligned_window,
)
from web.timeline_event import NoSuchEventError, event_details
from web.timeline_range import range_summary
from web.timeline_search import MAX_QUERY_CHARS, BadSearchError, search_events
from web.timeline_store import MAX_WIDTH_PX, timeline_window

EventKind = Literal["kernel", "memcpy", "memset", "op", "py", "api", "range"]

_RANKS = (
    f"For a job's run: `all` (its first {MAX_ALIGNED_RANKS}) or a comma-separated list of "
    "ranks, shown together on the reference rank's clock (instead of `rank`)"
)
_HOST_RANKS = (
    f"With `ranks`: the ranks (at most {MAX_HOST_RANKS} of those shown) whose host lanes come "
    "too (default: GPU lanes only)"
)


def _aligned_ranks(run: Any, rank: int | None, ranks: str | None) -> list[int]:
    """The ranks of an aligned request (none: a plain one); ``rank`` and ``ranks`` clash."""
    if ranks is None or not ranks.strip():
        return []
    if rank is not None:
        raise ValidationException("give `rank` (one rank's own clock) or `ranks`, not both")
    return chosen_ranks(run, ranks)


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
            "timeline endpoint takes it. `ranks` instead shows several ranks at once on the "
            "reference rank's clock (`t0_ns` is then the earliest event of any of the job's "
            "ranks on it; a rank no method aligned starts with the reference rank): "
            "each lane carries its `rank` and its `local_id` in that rank's timeline (its "
            "id is `rank * 1000000 + local_id`), `ranks` lists each rank's clock "
            "(`offset_ns`, `shift_ns`: its own timeline's time is the aligned one plus "
            "`shift_ns`) and whether its host lanes came (`host_ranks`); the search and "
            "range endpoints take `ranks` too, the event endpoint one `rank`."
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
        ranks: str | None = Parameter(default=None, max_length=20_000, description=_RANKS),
        host_ranks: str | None = Parameter(
            default=None, max_length=20_000, description=_HOST_RANKS
        ),
    ) -> TimelineWindow:
        run = load_ready_run(svc, run_id)
        aligned = _aligned_ranks(run, rank, ranks)
        if aligned:
            host = set(chosen_ranks(run, host_ranks)) if host_ranks else set()
            try:
                window = aligned_window(
                    rank_opener(svc, run),
                    job_clock(svc, run),
                    aligned,
                    host,
                    start_ns,
                    end_ns,
                    width_px,
                )
            except BadRanksError as e:
                raise ClientException(f"run {run_id}: {e}") from None
            return TimelineWindow(**window)
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
            "[start_ns, end_ns, lane, kind, ref]; with `ranks`, on the aligned clock, with "
            "the rank as a 6th item."
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
        ranks: str | None = Parameter(default=None, max_length=20_000, description=_RANKS),
    ) -> TimelineSearch:
        run = load_ready_run(svc, run_id)
        aligned = _aligned_ranks(run, rank, ranks)
        if aligned:
            try:
                return TimelineSearch(
                    **aligned_search(rank_opener(svc, run), job_clock(svc, run), aligned, q, regex)
                )
            except BadSearchError as e:
                raise ValidationException(str(e)) from None
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
        description=(
            "Per device: kernels overlapping it, their clipped time and its union; with "
            "`ranks`, per rank and device on the aligned clock (each device names its `rank`)."
        ),
        responses=error_responses(404, 409),
    )
    def stretch(
        self,
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        start_ns: int = Parameter(ge=0, le=2**62),
        end_ns: int = Parameter(ge=0, le=2**62),
        rank: int | None = Parameter(default=None, ge=0, le=1_000_000),
        ranks: str | None = Parameter(default=None, max_length=20_000, description=_RANKS),
    ) -> TimelineStretch:
        run = load_ready_run(svc, run_id)
        aligned = _aligned_ranks(run, rank, ranks)
        if aligned:
            return TimelineStretch(
                **aligned_range(
                    rank_opener(svc, run), job_clock(svc, run), aligned, start_ns, end_ns
                )
            )
        cur, meta = open_run_database(svc, run, rank)
        try:
            return TimelineStretch(**range_summary(cur, meta, start_ns, end_ns))
        finally:
            cur.close()
