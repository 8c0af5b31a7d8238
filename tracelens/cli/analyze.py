"""``tracelens analyze PATH``: ingest a trace, run every analyzer, print the report.

``--fail-on`` is its CI gate (:data:`tracelens.cli.options.EXIT_GATE`).
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import click

from ingest import LoadedTrace, TraceInputError, load_trace
from ingest.loader import is_tracelens_database
from tracelens.cli.options import (
    EXIT_GATE,
    check_output,
    fail,
    format_option,
    output_option,
    parse_restriction,
    parse_slo_option,
    read_bench_option,
    restrict_or_fail,
    restriction_options,
    threshold_option,
    write_output,
)
from tracelens.core.findings import Severity
from tracelens.core.thresholds import Thresholds
from tracelens.report import ReportInputs, build_report
from tracelens.report.model import Report

# Below this size ingest is quick enough that a progress bar would only flicker.
PROGRESS_MIN_BYTES = 20 * 1024 * 1024


def check_db_target(db_path: Path, trace: Path, force: bool) -> None:
    """``--db`` never overwrites the input, nor (without --force) a file it did not write."""
    if not db_path.exists():
        return
    if db_path.is_dir():
        fail(f"{db_path}: is a directory; give a file name for --db")
    if trace.exists() and (db_path.resolve() == trace.resolve() or db_path.samefile(trace)):
        fail(f"{db_path}: --db names the input trace itself; choose another file")
    if not force and not is_tracelens_database(db_path):
        fail(f"{db_path}: exists and is not a tracelens database; use --force to replace it")


def sample_trace_path() -> Path:
    return Path(str(resources.files("tracelens") / "samples" / "planted_training.pt.trace.json.gz"))


@click.command("analyze")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@format_option("text", "json", "markdown", "html")
@click.option(
    "--fail-on",
    type=click.Choice([s.label for s in Severity]),
    default=None,
    help="Exit 1 when a finding has this severity or higher (for CI).",
)
@click.option(
    "--top",
    type=click.IntRange(1, 1000),
    default=10,
    show_default=True,
    help="Rows in the top kernels/operators tables.",
)
@click.option(
    "--max-findings",
    type=click.IntRange(1),
    default=None,
    help="Show at most this many findings (text/markdown).",
)
@click.option(
    "--db",
    "db_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Keep the trace database in this DuckDB file (default: in memory).",
)
@click.option(
    "--rank",
    type=int,
    default=None,
    help="For a profiler output folder: analyze this rank's trace.",
)
@click.option(
    "--capture-dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=None,
    help="Graph capture traces (with execution_details.json) naming the operators behind "
    "replayed CUDA/HIP graph kernels (default: a capture_traces/ folder beside the trace).",
)
@threshold_option("Override a threshold (repeatable); `tracelens thresholds` lists them.")
@restriction_options
@click.option(
    "--slo",
    metavar="OBJECTIVES",
    default=None,
    help="Serving objectives, e.g. ttft=200ms,tpot=50ms,itl=100ms,e2e=10s: attainment and "
    "goodput of the trace's annotated requests (or, with --bench, the client's).",
)
@click.option(
    "--bench",
    "bench_path",
    type=click.Path(path_type=Path),
    default=None,
    help="A benchmark client's per-request results (vllm bench serve --save-detailed JSON, "
    "sglang bench_serving --output-details JSONL), shown beside the trace's view.",
)
@output_option("the report")
@click.option(
    "--force",
    is_flag=True,
    help="With --db: replace the file even if it is not a tracelens database.",
)
@click.option("--sample", is_flag=True, help="Analyze the bundled sample trace.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def analyze(
    path: Path | None,
    fmt: str,
    fail_on: str | None,
    top: int,
    max_findings: int | None,
    db_path: Path | None,
    rank: int | None,
    capture_dir: Path | None,
    thresholds: Thresholds,
    slo: str | None,
    bench_path: Path | None,
    window: str | None,
    steps: str | None,
    range_name: str | None,
    output: Path | None,
    force: bool,
    sample: bool,
    quiet: bool,
) -> None:
    """Analyze a trace: .json, .json.gz, a profiler output folder, or an nsys .sqlite.

    --window, --steps or --range analyze only that part of it, as if it were the capture.
    """
    restriction = parse_restriction(window, steps, range_name)
    if sample:
        path = sample_trace_path()
    if path is None:
        raise click.UsageError("give a trace PATH (or --sample)")
    inputs = ReportInputs(slo=parse_slo_option(slo), bench=read_bench_option(bench_path))
    check_output(output)
    if db_path is not None:
        check_db_target(db_path, path, force)
    size = path.stat().st_size if path.is_file() else 0
    try:
        if not quiet and size >= PROGRESS_MIN_BYTES:
            loaded = _load_with_progress(path, db_path, rank, capture_dir, size)
        else:
            loaded = load_trace(path, db_path=db_path, rank=rank, capture_dir=capture_dir)
    except TraceInputError as exc:
        fail(str(exc))
    loaded = restrict_or_fail(loaded, restriction)
    try:
        report = build_report(loaded, thresholds, top, inputs=inputs)
    finally:
        loaded.close()
    _emit(report, fmt, output, max_findings)
    if fail_on is not None:
        floor = Severity.parse(fail_on)
        if any(Severity.parse(f["severity"]) >= floor for f in report["findings"]):
            sys.exit(EXIT_GATE)


def _load_with_progress(
    path: Path, db_path: Path | None, rank: int | None, capture_dir: Path | None, size: int
) -> LoadedTrace:
    """Ingest with a progress bar on stderr when it is a terminal."""
    # rich is imported here, not at the top: small traces (most runs) never draw a bar.
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    err = Console(stderr=True)
    if not err.is_terminal:
        return load_trace(path, db_path=db_path, rank=rank, capture_dir=capture_dir)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task(f"ingesting {path.name}", total=size)
        return load_trace(
            path,
            db_path=db_path,
            rank=rank,
            capture_dir=capture_dir,
            on_progress=lambda done, total: progress.update(task, completed=done, total=total),
        )


def _emit(report: dict[str, Any], fmt: str, output: Path | None, max_findings: int | None) -> None:
    # Each renderer is imported only for its format: rich (text), Jinja (HTML) and the
    # Markdown writer are start-up cost for every other one.
    if fmt == "json":
        text = json.dumps(report, indent=2, default=str) + "\n"
    elif fmt == "markdown":
        from tracelens.report.render.markdown import render_markdown

        text = render_markdown(Report.of(report), max_findings)
    elif fmt == "html":
        from tracelens.report.render.html import render_html

        text = render_html(report)
    else:
        from rich.console import Console

        from tracelens.report.render.text import render_text

        typed = Report.of(report)
        if output is None:
            render_text(typed, Console(), max_findings)
            return
        try:
            with output.open("w", encoding="utf-8") as f:
                render_text(typed, Console(file=f, width=120), max_findings)
        except OSError as exc:
            fail(f"{output}: cannot write the report ({exc.strerror or exc})")
        return
    if output is None:
        click.echo(text, nl=False)
    else:
        write_output(output, text)
