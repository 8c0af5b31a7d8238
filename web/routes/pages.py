"""HTML pages: run list with upload, run page, finding permalink page."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from litestar import Controller, Request, Response
from litestar.di import NamedDependency
from litestar.enums import MediaType, RequestEncodingType
from litestar.exceptions import NotFoundException, ValidationException
from litestar.params import Body, FromPath, FromQuery, Parameter
from litestar.response import Redirect, Template
from litestar.utils.scope.state import ScopeState

from tracelens.core.restriction import Restriction
from tracelens.report.render.markdown import finding_markdown
from web.api_schema import RunView
from web.catalog import Run, RunKind, RunStatus
from web.catalog import runs as catalog_runs
from web.conditional import entity_tag, stored_response
from web.errors import ConflictException
from web.finding_history import finding_history
from web.perfetto_link import perfetto_context
from web.permalinks import finding_permalink
from web.routes.blocking import blocking_get, blocking_post
from web.run_lifecycle import change_slo, describe_run, remove_run
from web.run_lookup import live_view, load_run, open_run_database, ready_report
from web.run_restriction import (
    RESTRICTION_DEPENDENCY,
    RESTRICTION_PARAMS,
    BadRestrictionError,
    RangeQuery,
    RestrictedAnalysis,
    StepsQuery,
    WindowQuery,
    analysis_of,
    cached,
    find_finding,
    finding_rank,
    finding_ranks_label,
    finding_scope,
    parse_restriction,
    query_string,
    restriction_choices,
    restriction_query,
)
from web.run_series import all_series, series_summary
from web.series_chart import history_chart
from web.services import Services
from web.timeline_aligned import MAX_ALIGNED_RANKS, MAX_HOST_RANKS, compact_ranks

# Stands in for the visitor's CSRF token in cached pages; replaced on every response.
CSRF_PLACEHOLDER = "__tracelens_csrf_token__"
_PLACEHOLDER = CSRF_PLACEHOLDER.encode()


def _ranks_line(svc: Services, run: Run, finding_id: str) -> str | None:
    """What the permalink page says a job's finding is of."""
    label = finding_ranks_label(svc, run, finding_id)
    if label is not None:
        return f"{label}, in this job"
    rank = finding_rank(svc, run, finding_id)
    return None if rank is None else f"across this job, naming rank {rank}"


@dataclass(frozen=True)
class StoredPage:
    """A rendered page as the bytes between its CSRF token slots, and their digest."""

    pieces: tuple[bytes, ...]
    digest: bytes

    @classmethod
    def of(cls, html: str) -> StoredPage:
        data = html.encode()
        return cls(tuple(data.split(_PLACEHOLDER)), hashlib.sha256(data).digest())

    def body(self, token: bytes) -> bytes:
        return token.join(self.pieces)


def _highlights(findings: list[dict[str, Any]], t0: int) -> dict[str, list[list[int]]]:
    """Each finding's time ranges relative to the timeline's origin (what the JS draws)."""
    return {
        f["id"]: [
            [int(r["start_ns"]) - t0, int(r["end_ns"]) - t0]
            for r in f.get("time_ranges") or []
            if r.get("start_ns") is not None and r.get("end_ns") is not None
        ]
        for f in findings
    }


def _subject_names(finding: dict[str, Any]) -> list[str]:
    """What a finding without time ranges is about, as event names the timeline can find:
    a hot operator's name, or the kernels its evidence lists. Its instances are then what
    the page highlights and steps through."""
    if finding.get("time_ranges"):
        return []
    evidence = finding.get("evidence") or {}
    if isinstance(evidence.get("operator"), str):
        return [evidence["operator"]]
    kernels = evidence.get("kernels")
    if isinstance(kernels, list):
        return [k["kernel"] for k in kernels[:10] if isinstance(k, dict) and k.get("kernel")]
    return []


def _finding_info(findings: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What the timeline shows of each finding it highlights: its title, severity and
    (without time ranges) the names of its subject's events."""
    return {
        f["id"]: {"title": f["title"], "severity": f["severity"], "subject": _subject_names(f)}
        for f in findings
    }


@dataclass(frozen=True)
class RestrictionForm:
    """What the run page says of its restriction: the form's fields as sent, the
    restriction in force (or None) and why one given was refused."""

    fields: dict[str, str]
    active: RestrictedAnalysis | None = None
    error: str | None = None

    @classmethod
    def showing(cls, analysis: RestrictedAnalysis | None) -> RestrictionForm:
        fields = {k: "" for k in RESTRICTION_PARAMS}
        if analysis is not None:
            fields[analysis.restriction.kind] = analysis.restriction.spec
        return cls(fields, analysis)


def _render_job_page(
    svc: Services,
    run: Run,
    tokens_required: bool,
    rank: int | None = None,
    ranks: str | None = None,
) -> str:
    """A ready job's page: its ranks, clocks, stragglers, findings, and its timeline: the
    ranks ``ranks`` names (by default all of them) together on the reference clock, or one
    rank's (``rank``) on its own clock."""
    from web.job_page import job_context
    from web.job_timeline import chosen_ranks, job_clock

    report = ready_report(svc, run)
    # every rank together on the reference clock unless one rank is asked for
    spec = ranks if ranks and ranks.strip() else ("all" if rank is None else None)
    aligned = chosen_ranks(run, spec) if spec else []
    if aligned:
        clock = job_clock(svc, run)
        job = job_context(report, clock.t0_ns, None, clock, aligned)
        page_data: dict[str, Any] = {
            "run_id": run.id,
            "status": run.status,
            "t0_ns": clock.t0_ns,
            "span_ns": clock.span_ns,
            "highlights": job["highlights"],
            "findings": _finding_info(report["findings"]),
            "rank": None,
            "aligned": {
                "ranks": [clock.ranks[r].as_dict() for r in aligned],
                "all": (spec or "").strip() == "all",
                "job_ranks": len(job["ranks"]),
                "max_host_ranks": MAX_HOST_RANKS,
            },
        }
    else:
        cur, meta = open_run_database(svc, run, rank)
        cur.close()
        job = job_context(report, meta["t0_ns"], rank)
        page_data = {
            "run_id": run.id,
            "status": run.status,
            "t0_ns": meta["t0_ns"],
            "span_ns": meta["span_ns"],
            "highlights": job["highlights"],
            "findings": _finding_info(report["findings"]),
            "rank": rank,
        }
    shown = job["shown_rank"]
    # The Perfetto download is one rank's, on its own clock (the reference's on the aligned
    # page), and opens on what the timeline shows: its highlights and window, relative to
    # the timeline's origin, which is this rank's first event or, aligned, the earliest
    # instant of any rank (read on the reference clock, this rank's clock plus its offset).
    origin = clock.t0_ns + clock.ranks[shown].offset_ns if aligned else int(meta["t0_ns"])
    return svc.templates.get_template("job_run.html").render(
        run=RunView.of(run),
        report=report,
        job=job,
        perfetto=perfetto_context(
            svc.settings, run.id, run.name, job["highlights"], origin, rank=shown
        ),
        tokens_required=tokens_required,
        page_data=page_data,
        csrf_token=lambda: CSRF_PLACEHOLDER,
        ranks_spec=compact_ranks(aligned),
        max_aligned_ranks=MAX_ALIGNED_RANKS,
    )


def _render_run_page(
    svc: Services,
    run: Run,
    tokens_required: bool,
    form: RestrictionForm | None = None,
    rank: int | None = None,
    ranks: str | None = None,
) -> str:
    if run.kind == RunKind.JOB and run.status == RunStatus.READY:
        return _render_job_page(svc, run, tokens_required, rank, ranks)
    form = form or RestrictionForm.showing(None)
    active = form.active
    context: dict[str, Any] = {
        "run": live_view(svc, run),
        "report": None,
        "tokens_required": tokens_required,
        "page_data": {"run_id": run.id, "status": run.status, "highlights": {}},
        "csrf_token": lambda: CSRF_PLACEHOLDER,
        "form": form,
        "restriction": active.restriction if active else None,
        "query": restriction_query(active.restriction if active else None),
    }
    if run.status == RunStatus.READY:
        report = active.report if active else ready_report(svc, run)
        cur, meta = open_run_database(svc, run)
        try:
            choices = restriction_choices(cur)
        finally:
            cur.close()
        t0 = meta["t0_ns"]
        context["report"] = report
        context["choices"] = choices
        highlights = _highlights(report["findings"], t0)
        context["perfetto"] = perfetto_context(
            svc.settings, run.id, context["run"].name, highlights, t0
        )
        # Window offsets count from the first GPU activity, the timeline's from its first
        # event: the hint says how far apart they are.
        context["window_origin_ns"] = ready_report(svc, run)["trace"]["t0_ns"] - t0
        context["page_data"].update(
            {
                "t0_ns": t0,
                "span_ns": meta["span_ns"],
                "highlights": highlights,
                "findings": _finding_info(report["findings"]),
            }
        )
        if active is not None:  # the timeline opens on the part analysed
            context["page_data"]["view_ns"] = [
                active.intervals[0][0] - t0,
                active.intervals[-1][1] - t0,
            ]
        else:
            # The whole trace's analysed window (first to last GPU activity), not the
            # session around it: an nsys capture can hold 5 ms of work in 2.5 s.
            origin = report["trace"]["t0_ns"] - t0
            context["page_data"]["view_ns"] = [
                max(0, origin),
                min(meta["span_ns"], origin + max(1, int(report["metrics"]["window_ns"]))),
            ]
    return svc.templates.get_template("run.html").render(**context)


def _render_page(
    svc: Services,
    run: Run,
    tokens_required: bool,
    restriction: Restriction | None,
    rank: int | None = None,
    ranks: str | None = None,
) -> str:
    """The page of a ready run, of the whole trace or of the part ``restriction`` selects;
    a job's with ``rank``'s timeline, or ``ranks`` together."""
    analysis = analysis_of(svc, run, restriction) if restriction is not None else None
    form = RestrictionForm.showing(analysis)
    return _render_run_page(svc, run, tokens_required, form, rank, ranks)


class RunListPageController(Controller):
    path = "/"
    include_in_schema = False

    @blocking_get("/")
    def runs_page(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        q: FromQuery[str | None] = None,
        tag: FromQuery[str | None] = None,
        deleted: FromQuery[str | None] = None,
    ) -> Template:
        with svc.catalog.session() as s:
            runs, total = catalog_runs.list_runs(s, q=q, tag=tag, limit=200)
            tags = catalog_runs.all_tags(s)
        series = [series_summary(svc, st) for st in all_series(svc)]
        return Template(
            "runs.html",
            context={
                # red first: a series breaking its limits is what the page is opened for
                "series": sorted(series, key=lambda x: (not x.red, x.name)),
                "runs": [RunView.of(r) for r in runs],
                "total": total,
                "tags": tags,
                "q": q or "",
                "tag": tag or "",
                "tokens_required": svc.access.tokens_required(),
                "max_upload_bytes": svc.settings.max_upload_bytes,
                # The address this page was reached at, for the curl line to copy.
                "base_url": str(request.base_url).rstrip("/"),
                "deleted": deleted[:200] if deleted else None,
            },
        )


class RunPagesController(Controller):
    path = "/runs/{run_id:str}"
    include_in_schema = False
    dependencies = RESTRICTION_DEPENDENCY

    @blocking_get("/")
    def run_page(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        window: WindowQuery = None,
        steps: StepsQuery = None,
        range_name: RangeQuery = None,
        rank: int | None = Parameter(
            default=None, ge=0, le=1_000_000, description="a job's rank whose timeline to show"
        ),
        ranks: str | None = Parameter(
            default=None,
            max_length=20_000,
            description="a job's ranks to show together on the reference clock: all, or a list",
        ),
    ) -> Response[bytes]:
        fields = {"window": window, "steps": steps, "range": range_name}
        if any(v is not None and not v.strip() for v in fields.values()):
            # The form sends its unused fields empty: drop them, so the address (pasted
            # into a ticket) names only the restriction.
            kept = {k: v.strip() for k, v in fields.items() if v is not None and v.strip()}
            return Redirect(f"/runs/{run_id}{query_string(kept)}", status_code=303)
        run = load_run(svc, run_id)
        tokens_required = svc.access.tokens_required()
        token = ScopeState.from_scope(request.scope).csrf_token
        token_bytes = token.encode() if isinstance(token, str) else b""
        if run.status == RunStatus.READY:
            try:
                restriction = parse_restriction(window, steps, range_name)
                # A ready run's page depends only on its report (and the restriction):
                # rendered once per ingest generation and kept as bytes around the
                # per-visitor CSRF token.
                page = cached(
                    svc,
                    run,
                    restriction,
                    ("page", tokens_required, rank, ranks),
                    lambda: StoredPage.of(
                        _render_page(svc, run, tokens_required, restriction, rank, ranks)
                    ),
                )
            except BadRestrictionError as exc:
                # The whole trace, the form as sent and why it was refused: fixable in place.
                form = RestrictionForm({k: v or "" for k, v in fields.items()}, error=exc.detail)
                html = _render_run_page(svc, run, tokens_required, form).encode()
                return Response(
                    html.replace(_PLACEHOLDER, token_bytes),
                    status_code=400,
                    media_type=MediaType.HTML,
                )
            except ConflictException:  # built by an older version: now queued to re-ingest
                run = load_run(svc, run_id)
            else:
                # The token is part of the bytes, so of the ETag too; it stays the same
                # for one visitor (it comes from their cookie).
                etag = entity_tag(run.generation, page.digest, token_bytes)
                return stored_response(
                    request, page.body(token_bytes), etag, MediaType.HTML, "private, no-cache"
                )
        html = _render_run_page(svc, run, tokens_required).encode()
        return Response(html.replace(_PLACEHOLDER, token_bytes), media_type=MediaType.HTML)

    @blocking_get("/findings/{finding_id:str}")
    def finding_page(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        finding_id: FromPath[str],
        restriction: NamedDependency[Restriction | None],
    ) -> Template:
        run = load_run(svc, run_id)
        if run.status != RunStatus.READY:
            raise NotFoundException(
                f"run {run_id} is {run.status}; its findings appear once it is ready"
            )
        run, f = find_finding(svc, run_id, finding_id, restriction)
        query = restriction_query(restriction)
        link = finding_permalink(svc.settings, request, run_id, finding_id, query)
        note = analysis_of(svc, run, restriction).note if restriction is not None else None
        return Template(
            "finding.html",
            context={
                "run": RunView.of(run),
                "f": f,
                "rank": finding_rank(svc, run, finding_id),
                "ranks_label": _ranks_line(svc, run, finding_id),
                "permalink": link,
                "markdown": finding_markdown(
                    f, permalink=link, scope=finding_scope(svc, run, finding_id, note)
                ),
                "restriction": restriction,
                "restriction_note": note,
                "query": query,
                # the whole trace's finding across the run's series (a part has no history)
                "history": finding_history(svc, run, finding_id) if restriction is None else None,
                "history_chart": history_chart,
            },
        )

    @blocking_post("/delete")
    def delete_run_form(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
    ) -> Redirect:
        svc.access.check(request, form_token=data.get("token", ""))
        if data.get("confirm") != "yes":
            # The page's form cannot be sent unticked; anything else must say so as well.
            raise ValidationException("tick “yes, delete this run and its data” to delete it")
        name = load_run(svc, run_id).name
        remove_run(svc, run_id)
        return Redirect(f"/?{urlencode({'deleted': name})}", status_code=303)

    @blocking_post("/describe")
    def describe_form(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
    ) -> Redirect:
        """The run page's name and filing form: save, then show the run again."""
        svc.access.check(request, form_token=data.get("token", ""))
        fields = ("name", "tags", "series", "label")
        describe_run(svc, run_id, {k: data[k] for k in fields if k in data})
        return Redirect(f"/runs/{run_id}", status_code=303)

    @blocking_post("/slo")
    def slo_form(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
    ) -> Redirect:
        """The run page's objectives field: set them, then follow the re-analysis."""
        svc.access.check(request, form_token=data.get("token", ""))
        change_slo(svc, run_id, data.get("slo"))
        return Redirect(f"/runs/{run_id}", status_code=303)
