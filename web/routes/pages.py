"""HTML pages: run list with upload, run page, finding permalink page."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Controller, Request, Response
from litestar.di import NamedDependency
from litestar.enums import MediaType, RequestEncodingType
from litestar.exceptions import NotFoundException
from litestar.params import Body, FromPath, FromQuery
from litestar.response import Redirect, Template
from litestar.utils.scope.state import ScopeState

from tracelens.report.render.markdown import finding_markdown
from web.api_schema import RunView
from web.catalog import Run, RunStatus
from web.catalog import runs as catalog_runs
from web.conditional import entity_tag, stored_response
from web.errors import ConflictException
from web.permalinks import finding_permalink
from web.routes.blocking import blocking_get, blocking_post
from web.run_lifecycle import change_slo, remove_run
from web.run_lookup import find_finding, load_run, open_run_database, ready_report
from web.services import Services

# Stands in for the visitor's CSRF token in cached pages; replaced on every response.
CSRF_PLACEHOLDER = "__tracelens_csrf_token__"
_PLACEHOLDER = CSRF_PLACEHOLDER.encode()


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


def _render_run_page(svc: Services, run: Run, tokens_required: bool) -> str:
    context: dict[str, Any] = {
        "run": RunView.of(run),
        "report": None,
        "tokens_required": tokens_required,
        "page_data": {"run_id": run.id, "status": run.status, "highlights": {}},
        "csrf_token": lambda: CSRF_PLACEHOLDER,
    }
    if run.status == RunStatus.READY:
        report = ready_report(svc, run)
        cur, meta = open_run_database(svc, run)
        cur.close()
        context["report"] = report
        context["page_data"].update(
            {
                "t0_ns": meta["t0_ns"],
                "span_ns": meta["span_ns"],
                "highlights": _highlights(report["findings"], meta["t0_ns"]),
            }
        )
    return svc.templates.get_template("run.html").render(**context)


class RunListPageController(Controller):
    path = "/"
    include_in_schema = False

    @blocking_get("/")
    def runs_page(
        self,
        svc: NamedDependency[Services],
        q: FromQuery[str | None] = None,
        tag: FromQuery[str | None] = None,
    ) -> Template:
        with svc.catalog.session() as s:
            runs, total = catalog_runs.list_runs(s, q=q, tag=tag, limit=200)
            tags = catalog_runs.all_tags(s)
        return Template(
            "runs.html",
            context={
                "runs": [RunView.of(r) for r in runs],
                "total": total,
                "tags": tags,
                "q": q or "",
                "tag": tag or "",
                "tokens_required": svc.access.tokens_required(),
                "max_upload_bytes": svc.settings.max_upload_bytes,
            },
        )


class RunPagesController(Controller):
    path = "/runs/{run_id:str}"
    include_in_schema = False

    @blocking_get("/")
    def run_page(
        self, request: Request[Any, Any, Any], svc: NamedDependency[Services], run_id: FromPath[str]
    ) -> Response[bytes]:
        run = load_run(svc, run_id)
        tokens_required = svc.access.tokens_required()
        token = ScopeState.from_scope(request.scope).csrf_token
        token_bytes = token.encode() if isinstance(token, str) else b""
        if run.status == RunStatus.READY:
            # A ready run's page depends only on its report: rendered once per ingest
            # generation and kept as bytes around the per-visitor CSRF token.
            try:
                page = svc.run_data.memo(
                    (run.id, run.generation, "page", tokens_required),
                    lambda: StoredPage.of(_render_run_page(svc, run, tokens_required)),
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
    ) -> Template:
        run = load_run(svc, run_id)
        if run.status != RunStatus.READY:
            raise NotFoundException(
                f"run {run_id} is {run.status}; its findings appear once it is ready"
            )
        _, f = find_finding(svc, run_id, finding_id)
        link = finding_permalink(svc.settings, request, run_id, finding_id)
        return Template(
            "finding.html",
            context={
                "run": RunView.of(run),
                "f": f,
                "permalink": link,
                "markdown": finding_markdown(f, permalink=link),
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
        remove_run(svc, run_id)
        return Redirect("/", status_code=303)

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
