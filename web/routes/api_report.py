"""JSON API for a ready run's analysis: the report and its ranked findings."""

from __future__ import annotations

import json
from typing import Any

from litestar import Controller, Request, Response
from litestar.di import NamedDependency
from litestar.enums import MediaType
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath

from tracelens.report.model import Finding, Report
from tracelens.report.render.markdown import finding_markdown
from web.api_schema import FindingView, error_responses
from web.conditional import entity_tag, stored_response
from web.permalinks import finding_permalink
from web.routes.blocking import blocking_get
from web.run_lookup import find_finding, load_ready_run, ready_report
from web.services import Services


class ReportController(Controller):
    path = "/api/runs/{run_id:str}"
    tags = ("reports",)

    @blocking_get(
        "/report",
        summary="The full report, as `tracelens analyze --format json`",
        responses={
            # The stored report as it is: its shape is Report's, plus any section this
            # version registers but does not declare yet.
            200: ResponseSpec(
                data_container=Report,
                description="The report (docs/json-schema.md)",
                generate_examples=False,
            ),
            **error_responses(404, 409),
        },
    )
    def get_report(self, svc: NamedDependency[Services], run_id: FromPath[str]) -> dict[str, Any]:
        return ready_report(svc, load_ready_run(svc, run_id))

    @blocking_get(
        "/findings",
        summary="Findings, ranked, in the CLI's JSON shape",
        responses={
            200: ResponseSpec(
                data_container=list[Finding],
                description="The report's `findings` list (docs/json-schema.md)",
                generate_examples=False,
            ),
            304: ResponseSpec(
                data_container=None,
                description="Not modified: `If-None-Match` names the current ETag",
            ),
            **error_responses(404, 409),
        },
    )
    def get_findings(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
    ) -> Response[bytes]:
        run = load_ready_run(svc, run_id)

        def serialize() -> tuple[bytes, str]:
            findings = ready_report(svc, run)["findings"]
            body = json.dumps(findings, separators=(",", ":")).encode()
            return body, entity_tag(run.generation, body)

        # Serialized once per ingest generation: this is what tickets and dashboards poll.
        body, etag = svc.run_data.memo((run.id, run.generation, "findings.json"), serialize)
        return stored_response(request, body, etag, MediaType.JSON)

    @blocking_get(
        "/findings/{finding_id:str}",
        summary="One finding, its permalink and Markdown",
        responses=error_responses(404, 409),
    )
    def get_finding(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        finding_id: FromPath[str],
    ) -> FindingView:
        _, f = find_finding(svc, run_id, finding_id)
        link = finding_permalink(svc.settings, request, run_id, finding_id)
        return FindingView(
            run_id=run_id,
            permalink=link,
            markdown=finding_markdown(f, permalink=link),
            finding=f,
        )

    @blocking_get(
        "/findings/{finding_id:str}/markdown",
        media_type="text/markdown",
        summary="One finding as Markdown for a ticket (with its permalink)",
        responses=error_responses(404, 409),
    )
    def get_finding_markdown(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        finding_id: FromPath[str],
    ) -> str:
        _, f = find_finding(svc, run_id, finding_id)
        return finding_markdown(
            f, permalink=finding_permalink(svc.settings, request, run_id, finding_id)
        )
