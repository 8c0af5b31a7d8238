"""JSON API for a ready run's analysis: the report and its ranked findings, of the whole
trace or, with ``window=``, ``steps=`` or ``range=``, of a part of it."""

from __future__ import annotations

import json
from typing import Any

from litestar import Controller, Request, Response
from litestar.di import NamedDependency
from litestar.enums import MediaType
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath

from tracelens.core.restriction import Restriction
from tracelens.report.model import Finding, Report
from tracelens.report.render.markdown import finding_markdown
from web.api_schema import FindingView, error_responses
from web.catalog import Run
from web.conditional import entity_tag, stored_response
from web.permalinks import finding_permalink
from web.routes.blocking import blocking_get
from web.run_lookup import load_ready_run
from web.run_restriction import (
    RESTRICTION_DEPENDENCY,
    analysis_of,
    cached,
    find_finding,
    finding_rank,
    finding_scope,
    report_of,
    restriction_query,
)
from web.services import Services

_RESTRICTED = (
    " With `window`, `steps` or `range` (at most one) it is the analysis of that part of the "
    "trace, as `tracelens analyze --window/--steps/--range` gives it, its note saying what was "
    "analysed; computed on the first request and kept per ingest generation. 400 for a "
    "restriction that does not parse or selects nothing in the trace, with the CLI's message."
)
_NOT_MODIFIED = ResponseSpec(
    data_container=None, description="Not modified: `If-None-Match` names the current ETag"
)


def _scope(svc: Services, run: Run, finding_id: str, restriction: Restriction | None) -> str | None:
    """The restriction's note for a finding's Markdown (None for the whole trace), and for
    a job's finding the rank it is of."""
    note = analysis_of(svc, run, restriction).note if restriction is not None else None
    return finding_scope(svc, run, finding_id, note)


class ReportController(Controller):
    path = "/api/runs/{run_id:str}"
    tags = ("reports",)
    dependencies = RESTRICTION_DEPENDENCY

    @blocking_get(
        "/report",
        summary="The full report, as `tracelens analyze --format json`",
        description="The report computed at ingest." + _RESTRICTED,
        responses={
            # The stored report as it is: its shape is Report's, plus any section this
            # version registers but does not declare yet.
            200: ResponseSpec(
                data_container=Report,
                description="The report (docs/json-schema.md)",
                generate_examples=False,
            ),
            304: _NOT_MODIFIED,
            **error_responses(404, 409),
        },
    )
    def get_report(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        restriction: NamedDependency[Restriction | None],
    ) -> Response[bytes]:
        return self._stored_json(request, svc, run_id, restriction, "report.json", None)

    @blocking_get(
        "/findings",
        summary="Findings, ranked, in the CLI's JSON shape",
        description="The report's `findings`." + _RESTRICTED,
        responses={
            200: ResponseSpec(
                data_container=list[Finding],
                description="The report's `findings` list (docs/json-schema.md)",
                generate_examples=False,
            ),
            304: _NOT_MODIFIED,
            **error_responses(404, 409),
        },
    )
    def get_findings(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        restriction: NamedDependency[Restriction | None],
    ) -> Response[bytes]:
        # This is what tickets and dashboards poll.
        return self._stored_json(request, svc, run_id, restriction, "findings.json", "findings")

    @staticmethod
    def _stored_json(
        request: Request[Any, Any, Any],
        svc: Services,
        run_id: str,
        restriction: Restriction | None,
        name: str,
        key: str | None,
    ) -> Response[bytes]:
        """The report (or its ``key``) as JSON, serialized once per ingest generation and
        restriction, with an ETag of both: a client's copy of one never matches another."""
        run = load_ready_run(svc, run_id)

        def serialize() -> tuple[bytes, str]:
            report = report_of(svc, run, restriction)
            body = json.dumps(report if key is None else report[key], separators=(",", ":"))
            return body.encode(), entity_tag(
                run.generation, restriction_query(restriction).encode(), body.encode()
            )

        body, etag = cached(svc, run, restriction, (name,), serialize)
        return stored_response(request, body, etag, MediaType.JSON)

    @blocking_get(
        "/findings/{finding_id:str}",
        summary="One finding, its permalink and Markdown",
        description=(
            "With a restriction, the finding of that part's analysis; its permalink and "
            "Markdown carry the restriction."
        ),
        responses=error_responses(404, 409),
    )
    def get_finding(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        finding_id: FromPath[str],
        restriction: NamedDependency[Restriction | None],
    ) -> FindingView:
        run, f = find_finding(svc, run_id, finding_id, restriction)
        link = finding_permalink(
            svc.settings, request, run_id, finding_id, restriction_query(restriction)
        )
        return FindingView(
            run_id=run_id,
            permalink=link,
            markdown=finding_markdown(
                f, permalink=link, scope=_scope(svc, run, finding_id, restriction)
            ),
            finding=f,
            rank=finding_rank(svc, run, finding_id),
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
        restriction: NamedDependency[Restriction | None],
    ) -> str:
        run, f = find_finding(svc, run_id, finding_id, restriction)
        link = finding_permalink(
            svc.settings, request, run_id, finding_id, restriction_query(restriction)
        )
        return finding_markdown(f, permalink=link, scope=_scope(svc, run, finding_id, restriction))
