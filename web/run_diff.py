"""The diff of two ready runs' stored reports: what ``tracelens diff`` says of them.

The stored reports list only their top kernels and operators, so the diff carries a note
saying a name missing on one side may lie below that report's cut-off.
"""

from __future__ import annotations

import math
from typing import Any

from litestar.exceptions import ValidationException

from tracelens.report.diff import build_diff
from web.api_schema import RunView
from web.catalog import RunKind
from web.run_lookup import load_ready_run, ready_report
from web.services import Services

# Rows per kernel and operator list in the reports stored at ingest (build_report's default).
STORED_TOP = 10


def _check_pct(max_regression: float | None) -> float | None:
    # float() accepts "nan" and "inf": neither is a usable limit.
    if max_regression is not None and not math.isfinite(max_regression):
        raise ValidationException("max_regression must be a finite number (percent)")
    return max_regression


def compare_runs(
    svc: Services, base: str, cand: str, max_regression: float | None
) -> tuple[dict[str, Any], RunView, RunView]:
    """The diff of two ready runs, with both runs (404 unknown, 409 not ready)."""
    run_a = load_ready_run(svc, base)
    run_b = load_ready_run(svc, cand)
    for run in (run_a, run_b):
        if run.kind == RunKind.JOB:
            raise ValidationException(
                f"run {run.id} is a job of several ranks: comparing jobs is not available "
                "yet (compare single traces)"
            )
    report_a = ready_report(svc, run_a)
    report_b = ready_report(svc, run_b)
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
    return d, RunView.of(run_a), RunView.of(run_b)
