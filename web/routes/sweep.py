"""The latency-throughput sweep over runs sharing a tag: a page with its chart, and JSON."""

from __future__ import annotations

from typing import Any

from litestar import Controller
from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.response import Template

from tracelens.report.render.sweep_chart import render_sweep_svg
from web.api_schema import error_responses
from web.catalog import runs as catalog_runs
from web.routes.blocking import blocking_get
from web.run_sweep import sweep_of_tag
from web.services import Services


class SweepApiController(Controller):
    path = "/api/sweep"

    @blocking_get("/", responses=error_responses(400))
    def sweep(
        self, svc: NamedDependency[Services], tag: FromQuery[str], slo: FromQuery[str | None] = None
    ) -> dict[str, Any]:
        """The sweep (``tracelens sweep`` JSON) of the ready runs tagged ``tag``."""
        sweep, _ = sweep_of_tag(svc, tag, slo)
        return sweep


class SweepPageController(Controller):
    path = "/sweep"
    include_in_schema = False

    @blocking_get("/")
    def sweep_page(
        self,
        svc: NamedDependency[Services],
        tag: FromQuery[str | None] = None,
        slo: FromQuery[str | None] = None,
    ) -> Template:
        with svc.catalog.session() as s:
            tags = catalog_runs.all_tags(s)
        context: dict[str, Any] = {"tag": tag or "", "slo": slo or "", "tags": tags, "s": None}
        if tag:
            sweep, runs = sweep_of_tag(svc, tag, slo)
            context.update(
                {
                    "s": sweep,
                    "chart": render_sweep_svg(sweep),
                    "ids": {r.name: r.id for r in runs},
                }
            )
        return Template("sweep.html", context=context)
