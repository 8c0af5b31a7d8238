"""Compare two runs: the diff as JSON (``/api/compare``) and as a page (``/compare``).

Both show :func:`web.run_diff.compare_runs`, the content of ``tracelens diff`` for the two
runs' stored reports.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from litestar import Controller, Request
from litestar.di import NamedDependency
from litestar.exceptions import ValidationException
from litestar.params import FromQuery
from litestar.response import Template

from tracelens.report.render.diff import DiffLinks, fmt_delta, fmt_value, render_diff_markdown
from web.api_schema import ComparedRuns, Comparison, RunView, error_responses
from web.catalog import RunStatus
from web.catalog import runs as catalog_runs
from web.routes.blocking import blocking_get
from web.run_diff import compare_runs
from web.services import Services


def _links(
    svc: Services, request: Request[Any, Any, Any], base: str, cand: str, limit: str | None
) -> DiffLinks:
    """The addresses a pasted comparison links to: both runs, itself, each finding."""
    root = (svc.settings.public_url or str(request.base_url)).rstrip("/")
    query = {"base": base, "cand": cand} | ({"max_regression": limit} if limit else {})
    runs = {"baseline": base, "candidate": cand}
    return DiffLinks(
        baseline=f"{root}/runs/{base}",
        candidate=f"{root}/runs/{cand}",
        compare=f"{root}/compare?{urlencode(query)}",
        finding=lambda side, fid: f"{root}/runs/{runs[side]}/findings/{fid}",
    )


def _parse_pct(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValidationException(
            f"max_regression must be a number (percent), not {text!r}"
        ) from None


class CompareApiController(Controller):
    path = "/api/compare"
    tags = ("compare",)

    @blocking_get(
        "/",
        summary="What changed from run `base` to run `cand` (the `tracelens diff` JSON)",
        description=(
            "Metrics side by side, kernels and operators whose totals or counts changed, "
            "findings that appeared, resolved or changed impact, and a verdict. "
            "`max_regression` (percent) marks a larger slowdown as a regression. 404 for an "
            "unknown run, 409 when a run is not ready, 400 for missing or invalid parameters."
        ),
        responses=error_responses(404, 409),
    )
    def api_compare(
        self,
        svc: NamedDependency[Services],
        base: FromQuery[str],
        cand: FromQuery[str],
        max_regression: FromQuery[float | None] = None,
    ) -> Comparison:
        d, run_a, run_b = compare_runs(svc, base, cand, max_regression)
        return Comparison(**d, runs=ComparedRuns(baseline=run_a.id, candidate=run_b.id))


def _ready_runs(svc: Services) -> list[RunView]:
    with svc.catalog.session() as s:
        runs, _ = catalog_runs.list_runs(s, status=RunStatus.READY, limit=200)
    return [RunView.of(r) for r in runs]


class ComparePageController(Controller):
    path = "/compare"
    include_in_schema = False

    @blocking_get("/")
    def compare_page(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        base: FromQuery[str | None] = None,
        cand: FromQuery[str | None] = None,
        max_regression: FromQuery[str | None] = None,
    ) -> Template:
        # The page's own form sends the field empty when no limit is wanted. A value that
        # is no number gives the form back with the reason, not a bare 400.
        limit, error = None, None
        if max_regression and max_regression.strip():
            try:
                limit = _parse_pct(max_regression.strip())
            except ValidationException as e:
                error = str(e.detail)
        context: dict[str, Any] = {
            "base": base or "",
            "cand": cand or "",
            "max_regression": limit if error is None else max_regression,
            "error": error,
            "choices": _ready_runs(svc),
            "d": None,
        }
        # Without both runs the page is the chooser (where the run page's link lands).
        if base and cand and error is None:
            d, run_a, run_b = compare_runs(svc, base, cand, limit)
            context.update(
                {
                    "d": d,
                    "run_a": run_a,
                    "run_b": run_b,
                    "markdown": render_diff_markdown(
                        d, _links(svc, request, base, cand, max_regression)
                    ),
                    # The CLI's formatting, so the page and the copied Markdown read alike.
                    "fmt_value": fmt_value,
                    "fmt_delta": fmt_delta,
                }
            )
        return Template("compare.html", context=context, status_code=400 if error else 200)
