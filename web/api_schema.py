"""The JSON bodies the API answers with, as msgspec Structs.

Handlers return these rather than dicts so that ``/schema/openapi.json`` describes every
answer, errors included. The report and its findings are the core's own Structs
(:mod:`tracelens.report.model`); the diff's tables stay loosely typed here
(:mod:`tracelens.report.diff` describes them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Self

import msgspec
from litestar.openapi.datastructures import ResponseSpec

from tracelens.report.model import Finding
from web.catalog import Run, RunStatus


class ErrorBody(msgspec.Struct):
    """Every refusal, under /api: one line saying what was wrong."""

    error: str


class RunLinks(msgspec.Struct):
    self_: str = msgspec.field(name="self")
    page: str
    findings: str
    report: str
    timeline: str
    source: str

    @classmethod
    def of(cls, run_id: str) -> RunLinks:
        api = f"/api/runs/{run_id}"
        return cls(
            self_=api,
            page=f"/runs/{run_id}",
            findings=f"{api}/findings",
            report=f"{api}/report",
            timeline=f"{api}/timeline",
            source=f"{api}/source",
        )


def _iso(d: datetime | None) -> str | None:
    return d.isoformat() if d is not None else None


class JobState(msgspec.Struct):
    """A run's ingest job as the queue has it, whichever worker runs it.

    A job run of several ranks, once its generation has fanned out, shows the ``run`` job
    whose claim fanned it out with the state of the whole: ``status`` the furthest along
    of its jobs still live (else the last one's), ``progress`` from its jobs' (ranks 90 %,
    the align job the rest), ``worker`` null, and ``parts`` its rank jobs (``rank`` set)
    and align job, each with the worker running or having run it.
    """

    key: str
    kind: str
    status: str  # SAQ's: queued, active, complete, failed, aborted, ...
    attempts: int
    max_attempts: int
    progress: float
    worker: str | None
    error: str | None
    rank: int | None = None
    parts: list[JobState] = msgspec.field(default_factory=list)


class QueueHealth(msgspec.Struct):
    """The ingest queue (scale-out mode): jobs waiting and running, live workers."""

    status: str  # "ok", or why the queue does not answer
    name: str
    waiting: int = 0
    active: int = 0
    workers: int = 0


class RunView(msgspec.Struct):
    """A run as the API and the pages show it: status, progress, facts, links."""

    id: str
    name: str
    tags: list[str]
    status: RunStatus
    error: str | None
    progress: float
    original_filename: str
    size_bytes: int
    sha256: str
    format: str | None
    finding_count: int
    top_severity: str | None
    facts: dict[str, Any]
    # serving objectives the run is analyzed against (``ttft=200ms,tpot=50ms``), or None
    slo: str | None
    created_at: str | None
    updated_at: str | None
    ready_at: str | None
    links: RunLinks
    # "trace" (one file) or "job" (several ranks' traces, read together: its report is
    # ``tracelens.job/1`` and ``facts.job`` lists its ranks)
    kind: str
    # the scale-out mode: an unfinished run's ingest job on the queue (null otherwise);
    # ``progress`` is then the job's
    ingest_job: JobState | None
    # the series it was uploaded into and its label there (a commit, a build), or None
    series: str | None
    label: str | None

    @classmethod
    def of(cls, run: Run) -> Self:
        return cls(
            id=run.id,
            name=run.name,
            tags=run.tag_list,
            status=RunStatus(run.status),
            error=run.error,
            progress=round(run.progress, 4),
            original_filename=run.original_filename,
            size_bytes=run.size_bytes,
            sha256=run.sha256,
            format=run.format,
            finding_count=run.finding_count,
            top_severity=run.top_severity,
            facts=run.facts or {},
            slo=run.slo,
            created_at=_iso(run.created_at),
            updated_at=_iso(run.updated_at),
            ready_at=_iso(run.ready_at),
            links=RunLinks.of(run.id),
            kind=run.kind,
            ingest_job=None,
            series=run.series,
            label=run.label,
        )


class UploadedRun(RunView):
    """The answer to an upload: the run, and whether the same bytes were already a run."""

    duplicate: bool = False

    @classmethod
    def of_upload(cls, run: Run, created: bool) -> Self:
        view = cls.of(run)
        view.duplicate = not created
        return view


class RunDescription(msgspec.Struct, forbid_unknown_fields=True):
    """How a run is named and filed: each field given replaces the run's (a missing one is
    kept); ``tags`` comma-separated, ``series``/``label`` null or empty to leave the series."""

    name: str | msgspec.UnsetType = msgspec.UNSET
    tags: str | msgspec.UnsetType = msgspec.UNSET
    series: str | msgspec.UnsetType | None = msgspec.UNSET
    label: str | msgspec.UnsetType | None = msgspec.UNSET


class SloChange(msgspec.Struct):
    """A run's new serving objectives: ``ttft=200ms,tpot=50ms`` (any subset of ttft, tpot,
    itl, e2e), or null / an empty string for none."""

    slo: str | None = None


class RunList(msgspec.Struct):
    runs: list[RunView]
    total: int
    tags: list[str]


class FindingView(msgspec.Struct, omit_defaults=True):
    """One finding with its permalink and the Markdown a ticket would carry."""

    run_id: str
    permalink: str
    markdown: str
    finding: Finding
    # in a job's run: the rank the finding is of (absent for a single trace's)
    rank: int | None = None


class TimelineWindow(msgspec.Struct, omit_defaults=True):
    """Lanes in a window; see :func:`web.timeline_store.timeline_window` for the items
    (:func:`web.timeline_aligned.aligned_window` for several ranks on one clock)."""

    t0_ns: int
    span_ns: int
    start_ns: int
    end_ns: int
    width_px: int
    ns_per_px: float
    lanes: list[dict[str, Any]]
    names: list[str]
    kinds: list[str]
    counters: list[dict[str, Any]]
    # several ranks on the reference clock: each rank's clock and whether its host lanes came
    ranks: list[dict[str, Any]] | None = None


class TimelineEvent(msgspec.Struct):
    """One event in full; see :func:`web.timeline_event.event_details`."""

    kind: str
    ref: int
    name: str | None
    start_ns: int
    end_ns: int
    dur_ns: int
    lane: int | None
    args: dict[str, Any]
    stack: list[dict[str, Any]]
    flows: list[dict[str, Any]]


class TimelineSearch(msgspec.Struct):
    """Events matching a name; see :func:`web.timeline_search.search_events`."""

    query: str
    regex: bool
    count: int
    matches: list[list[Any]]


class TimelineStretch(msgspec.Struct):
    """Kernel time and busy share of a stretch; see :func:`web.timeline_range.range_summary`."""

    start_ns: int
    end_ns: int
    length_ns: int
    kernels: int
    kernel_ns: int
    devices: list[dict[str, Any]]


class ComparedRuns(msgspec.Struct):
    baseline: str
    candidate: str


class Comparison(msgspec.Struct):
    """``tracelens diff`` JSON (``tracelens.report.diff/1``) plus the two runs' ids."""

    schema: str
    baseline: dict[str, Any]
    candidate: dict[str, Any]
    verdict: dict[str, Any]
    metrics: list[dict[str, Any]]
    kernels: list[dict[str, Any]]
    operators: list[dict[str, Any]]
    findings: dict[str, Any]
    empty: bool
    notes: list[str]
    runs: ComparedRuns


class Health(msgspec.Struct, omit_defaults=True):
    status: str
    version: str
    # only when a Redis URL is configured: "ok", or why it does not answer
    redis: str | None = None
    # only in the scale-out mode (TRACELENS_QUEUE_URL)
    queue: QueueHealth | None = None


_ERROR_MEANINGS = {
    400: "Invalid request: a parameter or form field is missing or unusable",
    401: "The service has API tokens and the request carries no valid one",
    403: "A cross-origin or opaque-origin write, refused",
    404: "No such run or finding",
    409: "The run is not ready (queued, ingesting, failed) or is already being ingested",
    413: "The upload is larger than the service accepts",
    415: "The upload is not a trace format tracelens reads",
    429: "Too many uploads from this client; retry after the Retry-After seconds",
    503: "Redis (rate-limit store or ingest queue) does not answer, or the ingest queue is "
    "full; retry after the Retry-After seconds",
}


def error_responses(*status_codes: int) -> dict[int, ResponseSpec]:
    """The OpenAPI entries for the refusals a handler can answer with (``ErrorBody``).

    400 is always among them: any request can be refused as invalid (a NUL byte in its path,
    a parameter out of range), and the body is ours, not Litestar's default error shape that
    it would otherwise document for handlers with parameters.
    """
    return {
        code: ResponseSpec(
            data_container=ErrorBody, description=_ERROR_MEANINGS[code], generate_examples=False
        )
        for code in sorted({400, *status_codes})
    }
