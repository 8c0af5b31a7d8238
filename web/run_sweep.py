"""The sweep over the ready runs sharing a tag: what ``tracelens sweep`` says of them.

Each run's load comes from its benchmark results or engine steps as in the CLI, or from a
``concurrency:N`` / ``batch:N`` / ``rate:N`` tag on the run (a tag is what people put on
the runs of one sweep).
"""

from __future__ import annotations

import re
from typing import Any

from litestar.exceptions import ValidationException

from tracelens.llm.slo import Objectives, parse_slo
from tracelens.report.sweep import SweepInputError, build_sweep
from web.catalog import Run, RunKind, RunStatus
from web.catalog import runs as catalog_runs
from web.run_lookup import ready_report
from web.services import Services

_PARAM_TAG = re.compile(r"^(?:concurrency|batch|bs|rate):([0-9]+(?:\.[0-9]+)?)$")


def _param_of(run: Run) -> float | None:
    for tag in run.tags.split(","):
        m = _PARAM_TAG.match(tag)
        if m:
            return float(m.group(1))
    return None


def sweep_of_tag(svc: Services, tag: str, slo: str | None) -> tuple[dict[str, Any], list[Run]]:
    """The sweep of the ready runs tagged ``tag`` (400 when it cannot be built)."""
    objectives: Objectives | None = None
    if slo and slo.strip():
        try:
            objectives = parse_slo(slo)
        except ValueError as exc:
            raise ValidationException(f"slo: {exc}") from None
    with svc.catalog.session() as s:
        runs, _ = catalog_runs.list_runs(s, tag=tag, status=RunStatus.READY, limit=200)
    # a job's report is not one trace's: a sweep reads single traces (jobs are left out)
    runs = [r for r in runs if r.kind != RunKind.JOB]
    # Labels must be unique: the run's name, with its id where two runs share a name.
    names = [r.name for r in runs]
    labels = [
        n if names.count(n) == 1 else f"{n} ({r.id})" for n, r in zip(names, runs, strict=True)
    ]
    params = {
        lab: p for lab, r in zip(labels, runs, strict=True) if (p := _param_of(r)) is not None
    }
    try:
        sweep = build_sweep(
            [(lab, ready_report(svc, r)) for lab, r in zip(labels, runs, strict=True)],
            params,
            objectives,
        )
    except SweepInputError as exc:
        raise ValidationException(f"tag {tag!r}: {exc}") from None
    return sweep, runs
