"""``tracelens diff BASELINE CANDIDATE``: what changed between two runs, with a CI verdict.

``--max-regression`` is its CI gate (:data:`tracelens.cli.options.EXIT_GATE`).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ingest import TraceInputError
from tracelens.cli.options import (
    EXIT_GATE,
    EXIT_OK,
    check_output,
    fail,
    format_option,
    output_option,
    threshold_option,
    write_output,
)
from tracelens.core.thresholds import Thresholds

if TYPE_CHECKING:
    from ingest import LoadedTrace

# The loader (DuckDB, NumPy) and the report (every analyzer) are imported where they are
# used, so `tracelens diff --help` and usage errors cost only click.

# Both reports list every kernel and operator, so a name missing on one side is truly absent.
_ALL_ROWS = 1_000_000


def _load(path: Path, rank: int | None) -> LoadedTrace:
    from ingest import load_trace

    try:
        return load_trace(path, rank=rank)
    except TraceInputError as exc:
        fail(str(exc))


def _reports(
    baseline: Path, candidate: Path, thresholds: Thresholds, rank: int | None
) -> tuple[dict, dict]:
    from tracelens.report import build_report

    # Both inputs are ingested before either is analyzed, so a bad second file fails fast.
    a = _load(baseline, rank)
    try:
        b = _load(candidate, rank)
    except SystemExit:
        a.close()
        raise
    try:
        return build_report(a, thresholds, _ALL_ROWS), build_report(b, thresholds, _ALL_ROWS)
    finally:
        a.close()
        b.close()


def _is_job(path: Path) -> bool:
    from ingest.loader import trace_files_in

    return path.is_dir() and len(trace_files_in(path)) > 1


def _job_diff(
    baseline: Path,
    candidate: Path,
    thresholds: Thresholds,
    max_regression: float | None,
    top: int,
) -> dict:
    """Two jobs (profiler output folders of several ranks), compared rank by rank."""
    from ingest.loader import rank_files
    from tracelens.ranks.job import analyze_job
    from tracelens.ranks.job_diff import build_job_diff

    try:
        files = rank_files([baseline]), rank_files([candidate])
    except TraceInputError as exc:
        fail(str(exc))
    jobs = []
    for side in files:
        try:
            jobs.append(analyze_job(side, thresholds, _ALL_ROWS))
        except TraceInputError as exc:
            fail(str(exc))
    return build_job_diff(jobs[0], jobs[1], max_regression, top)


@click.command("diff")
@click.argument("baseline", type=click.Path(path_type=Path))
@click.argument("candidate", type=click.Path(path_type=Path))
@format_option("text", "json", "markdown")
@click.option(
    "--max-regression",
    "max_regression",
    type=float,
    default=None,
    metavar="PCT",
    help="Exit 1 when the headline time (median step, else request latency, else wall time) "
    "grows by more than PCT percent.",
)
@click.option(
    "--top",
    type=click.IntRange(1, 1000),
    default=15,
    show_default=True,
    help="Kernel and operator rows to list (largest changes first).",
)
@click.option("--rank", type=int, default=None, help="For profiler output folders: this rank.")
@threshold_option("Override an analyzer threshold (repeatable), for both runs.")
@output_option("the diff")
def diff(
    baseline: Path,
    candidate: Path,
    fmt: str,
    max_regression: float | None,
    top: int,
    rank: int | None,
    thresholds: Thresholds,
    output: Path | None,
) -> None:
    """Compare CANDIDATE against BASELINE: metrics, kernels, operators, findings, verdict.

    Two profiler output folders of several ranks are compared rank by rank (``--rank R``
    compares one rank of each)."""
    check_output(output)
    if max_regression is not None and not math.isfinite(max_regression):
        fail(f"--max-regression must be a finite number of percent, got {max_regression}")
    jobs = rank is None and (_is_job(baseline), _is_job(candidate))
    if jobs and any(jobs):
        if not all(jobs):
            single = candidate if jobs[0] else baseline
            fail(
                f"{single}: one trace, while the other side is a job of several ranks; "
                "compare one rank of the job with --rank R"
            )
        from tracelens.report.render.job_diff import (
            render_job_diff_markdown,
            render_job_diff_text,
        )

        d = _job_diff(baseline, candidate, thresholds, max_regression, top)
        render = {"markdown": render_job_diff_markdown, "text": render_job_diff_text}
    else:
        from tracelens.report.diff import build_diff
        from tracelens.report.render.diff import render_diff_markdown, render_diff_text

        report_a, report_b = _reports(baseline, candidate, thresholds, rank)
        d = build_diff(report_a, report_b, max_regression, top)
        render = {"markdown": render_diff_markdown, "text": render_diff_text}
    text = json.dumps(d, indent=2, default=str) + "\n" if fmt == "json" else render[fmt](d)
    if output is None:
        click.echo(text, nl=False)
    else:
        write_output(output, text)
    sys.exit(EXIT_GATE if d["verdict"]["regression"] else EXIT_OK)
