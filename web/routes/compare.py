"""Compare two runs: the diff as JSON (``/api/compare``) and as a page (``/compare``).

Both show :func:`tracelens.report.diff.build_diff` of the two runs' stored reports, the content of
``tracelens diff``. The stored reports list only their top kernels and operators, so the
diff carries a note saying a name missing on one side may lie below that report's cut-off.
"""

from __future__ import annotations

import math
from typing import Any

from litestar import get
from litestar.di import NamedDependency
from litestar.exceptions import ValidationException
from litestar.params import FromQuery
from litestar.response import Template

from tracelens.report.diff import build_diff
from tracelens.report.render.diff import fmt_delta, fmt_value, render_diff_markdown
from web.catalog import RunStatus
from web.catalog import runs as catalog_runs
from web.routes.api_runs import load_ready_run, run_json
from web.services import Services

# Rows per kernel and operator list in the reports stored at ingest (build_report's default).
STORED_TOP = 10


def _check_pct(max_regression: float | None) -> float | None:
    # float() accepts "nan" and "inf": neither is a usable limit.
    if max_regression is not None and not math.isfinite(max_regression):
        raise ValidationException("max_regression must be a finite number (percent)")
    return max_regression


def _parse_pct(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValidationException(
            f"max_regression must be a number (percent), not {text!r}"
        ) from None


def compare_runs(
    svc: Services, base: str, cand: str, max_regression: float | None
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The diff of two ready runs, with both runs' JSON (404 unknown, 409 not ready)."""
    run_a = load_ready_run(svc, base)
    run_b = load_ready_run(svc, cand)
    report_a = svc.run_data.report(run_a.id, run_a.generation)
    report_b = svc.run_data.report(run_b.id, run_b.generation)
    d = build_diff(report_a, report_b, _check_pct(max_regression))
    # build_diff notes cut-off kernel lists only (it can tell from the kernel count); the
    # operator list has no total to check against, so a full-length list may be cut off too.
    if not d["notes"] and any(
        len(r.get("top_ops", [])) >= STORED_TOP for r in (report_a, report_b)
    ):
        d["notes"].append(
            f"Operator rows compare the reports' top {STORED_TOP} lists; a name missing on one "
            "side may lie below that report's cut-off."
        )
    return d, run_json(run_a), run_json(run_b)


@get(
    "/api/compare",
    summary="What changed from run `base` to run `cand` (the `tracelens diff` JSON)",
    description=(
        "Metrics side by side, kernels and operators whose totals or counts changed, findings "
        "that appeared, resolved or changed impact, and a verdict. `max_regression` (percent) "
        "marks a larger slowdown as a regression. 404 for an unknown run, 409 when a run is "
        "not ready, 400 for missing or invalid parameters."
    ),
    sync_to_thread=True,
)
def api_compare(
    svc: NamedDependency[Services],
    base: FromQuery[str],
    cand: FromQuery[str],
    max_regression: FromQuery[float | None] = None,
) -> dict[str, Any]:
    d, run_a, run_b = compare_runs(svc, base, cand, max_regression)
    d["runs"] = {"baseline": run_a["id"], "candidate": run_b["id"]}
    return d


def _ready_runs(svc: Services) -> list[dict[str, Any]]:
    with svc.catalog.session() as s:
        runs, _ = catalog_runs.list_runs(s, status=RunStatus.READY, limit=200)
    return [run_json(r) for r in runs]


@get("/compare", include_in_schema=False, sync_to_thread=True)
def compare_page(
    svc: NamedDependency[Services],
    base: FromQuery[str | None] = None,
    cand: FromQuery[str | None] = None,
    max_regression: FromQuery[str | None] = None,
) -> Template:
    # The page's own form sends the field empty when no limit is wanted.
    limit = _parse_pct(max_regression) if max_regression and max_regression.strip() else None
    context: dict[str, Any] = {
        "base": base or "",
        "cand": cand or "",
        "max_regression": limit,
        "choices": _ready_runs(svc),
        "d": None,
    }
    # Without both runs the page is the chooser (where the run page's link lands).
    if base and cand:
        d, run_a, run_b = compare_runs(svc, base, cand, limit)
        context.update(
            {
                "d": d,
                "run_a": run_a,
                "run_b": run_b,
                "markdown": render_diff_markdown(d),
                # The CLI's formatting, so the page and the copied Markdown read alike.
                "fmt_value": fmt_value,
                "fmt_delta": fmt_delta,
            }
        )
    return Template("compare.html", context=context)


ROUTES = [api_compare, compare_page]
