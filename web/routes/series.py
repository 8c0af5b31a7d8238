"""Series of runs: the list and one series as JSON (``/api/series``), its definition
(tags, regression limits), and its page (``/series/{name}``) with a chart per metric."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, Request
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody, Parameter
from litestar.response import Template
from litestar.status_codes import HTTP_200_OK

from tracelens.report.render.diff import fmt_value
from web.api_schema import error_responses
from web.routes.blocking import blocking_get, blocking_put
from web.run_series import all_series, define_series, series_detail, series_summary
from web.series_chart import metric_chart
from web.series_schema import SeriesChange, SeriesDetail, SeriesList
from web.services import Services

WINDOW_HELP = "Runs before each run that give its band (3-100)."


class SeriesApiController(Controller):
    path = "/api/series"
    tags = ("series",)

    @blocking_get(
        "/",
        summary="Every series: runs, latest run, and whether it breaks its limits (red)",
        responses=error_responses(),
    )
    def list_series(self, svc: NamedDependency[Services]) -> SeriesList:
        return SeriesList(series=[series_summary(svc, st) for st in all_series(svc)])

    @blocking_get(
        "/{name:str}",
        summary="A series: its ready runs in recording order, a trend per metric, change "
        "points, outliers and alerts",
        description=(
            "Runs are ordered by the time their trace was recorded (the upload time where the "
            "trace does not say). Each metric's points carry the band of normal variation "
            "the `window` runs before give them and what they are (`normal`, `change`, "
            "`outlier`, `pending`, `shifted`); change points link to the diff of the runs "
            "on either side. `red` when the latest run breaks one of the series' limits."
        ),
        responses=error_responses(404),
    )
    def get_series(
        self,
        svc: NamedDependency[Services],
        name: FromPath[str],
        window: int | None = Parameter(default=None, description=WINDOW_HELP),
    ) -> SeriesDetail:
        return series_detail(svc, name, window)

    @blocking_put(
        "/{name:str}",
        status_code=HTTP_200_OK,
        summary="Define a series: the tags selecting its runs, its regression limits",
        description=(
            'Body: `{"tags": "gpu=h100,job=nightly", "limits": "ttft_p95=+10%,busy=-5pt"}` '
            "(either; a field left out stays, null or an empty string removes it). Runs "
            "carrying every tag join the series, beside those uploaded with `series`. A "
            "limit is `METRIC=[+|-]N%` (against the median of the runs before the latest) "
            "or `N pt` for the percentages (`busy`, `top_impact`). 400 for a name or "
            "limits that do not parse."
        ),
        responses=error_responses(401, 403),
    )
    def put_series(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        name: FromPath[str],
        data: JSONBody[SeriesChange],
    ) -> SeriesDetail:
        svc.access.check(request)
        # A field the body leaves out stays as it is.
        tags = ... if data.tags is msgspec.UNSET else data.tags
        limits = ... if data.limits is msgspec.UNSET else data.limits
        define_series(svc, name, tags, limits)
        return series_detail(svc, name.strip())


class SeriesPageController(Controller):
    path = "/series"
    include_in_schema = False

    @blocking_get("/{name:str}")
    def series_page(
        self,
        svc: NamedDependency[Services],
        name: FromPath[str],
        window: FromQuery[int | None] = None,
    ) -> Template:
        detail = series_detail(svc, name, window)
        return Template(
            "series.html",
            context={
                "s": detail,
                "charts": [metric_chart(m) for m in detail.metrics],
                "labels": {r.id: r.label or r.name for r in detail.runs},
                "fmt_value": fmt_value,
            },
        )
