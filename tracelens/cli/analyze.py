"""``tracelens analyze PATH``: ingest a trace, run every analyzer, print the report.

``--fail-on`` is its CI gate (:data:`tracelens.cli.options.EXIT_GATE`).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

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

if TYPE_CHECKING:
    from ingest import LoadedTrace

# Ingest (DuckDB, NumPy) and the report (every analyzer) are imported where the command
# runs, not here, so that `tracelens analyze --help` and usage errors cost only click.

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
    from ingest.loader import is_tracelens_database

    if not force and not is_tracelens_database(db_path):
        fail(f"{db_path}: exists and is not a tracelens database; use --force to replace it")


def sample_trace_path() -> Path:
    return Path(str(resources.files("tracelens") / "samples" / "planted_training.pt.trace.json.gz"))


@click.command("analyze")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
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
    paths: tuple[Path, ...],
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

    Several files, a folder of several ranks' traces, or a .zip/.tar/.tar.gz of them
    (an archive of one trace is that trace) are one job: every rank is
    analysed, their clocks aligned, and stragglers and imbalance found across them
    (--rank picks one rank alone). --window, --steps or --range analyze only that part of
    a trace, as if it were the capture.
    """
    import duckdb

    from ingest import TraceInputError, load_trace
    from tracelens.core.out_of_memory import out_of_memory_message
    from tracelens.report import ReportInputs, build_report

    restriction = parse_restriction(window, steps, range_name)
    if sample:
        paths = (sample_trace_path(),)
    if not paths:
        raise click.UsageError("give a trace PATH (or --sample)")
    paths, labels = _open_archives(paths)
    job = _job_files(paths, rank)
    if job is not None:
        if db_path is not None or restriction is not None or slo or bench_path or capture_dir:
            fail(
                "--db, --window/--steps/--range, --slo, --bench and --capture-dir take one "
                "trace; give --rank R to analyze one rank of this job"
            )
        _analyze_job(job, thresholds, top, fmt, output, max_findings, fail_on, labels)
        return
    path = paths[0]
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
        fail(_relabelled(str(exc), labels))
    loaded = restrict_or_fail(loaded, restriction)
    try:
        report = build_report(loaded, thresholds, top, inputs=inputs)
    except (MemoryError, duckdb.OutOfMemoryException) as exc:  # even under the whole share
        # the group says this too, but only here is the trace known
        fail(out_of_memory_message(exc, _relabelled(str(path), labels)))
    finally:
        loaded.close()
    if str(loaded.path) in labels:
        report["source"]["path"] = labels[str(loaded.path)]
    _emit(report, fmt, output, max_findings)
    _gate(report["findings"], fail_on)


def _open_archives(paths: tuple[Path, ...]) -> tuple[tuple[Path, ...], dict[str, str]]:
    """``paths`` with each archive replaced by the traces it holds, extracted to a
    temporary folder that lives as long as the command; and each extracted file's label
    (``job.zip:rank-0.json``) for the report."""
    from ingest import TraceInputError
    from ingest.archive import archive_kind, extract_traces
    from ingest.limits import IngestLimits

    if not any(p.is_file() and archive_kind(p) for p in paths):
        return paths, {}
    ctx = click.get_current_context()
    tmp = Path(ctx.with_resource(tempfile.TemporaryDirectory(prefix="tracelens-archive-")))
    limit = IngestLimits.from_env().max_decompressed
    out: list[Path] = []
    labels: dict[str, str] = {}
    for i, p in enumerate(paths):
        if not (p.is_file() and archive_kind(p)):
            out.append(p)
            continue
        try:
            members = extract_traces(p, tmp / str(i), limit)
        except TraceInputError as exc:
            fail(str(exc))
        if not members:
            fail(f"{p}: archive holds no trace files (*.json, *.json.gz, *.sqlite)")
        for m in members:
            out.append(m.path)
            labels[str(m.path)] = f"{p}:{m.name}"
    return tuple(out), labels


def _job_files(paths: tuple[Path, ...], rank: int | None) -> list[tuple[int, Path]] | None:
    """The job's (rank, file) pairs when the paths hold more than one trace, else None."""
    from ingest import TraceInputError
    from ingest.loader import rank_files, trace_files_in

    if rank is not None and len(paths) == 1:
        return None
    if len(paths) == 1 and not (paths[0].is_dir() and len(trace_files_in(paths[0])) > 1):
        return None
    try:
        files = rank_files(list(paths))
    except TraceInputError as exc:
        fail(str(exc))
    if rank is not None:
        chosen = [p for r, p in files if r == rank]
        if not chosen:
            fail(f"no trace for rank {rank} among the inputs (ranks: {[r for r, _ in files]})")
        return None if len(chosen) == 1 and _single(paths, chosen[0]) else [(rank, chosen[0])]
    return files if len(files) > 1 else None


def _single(paths: tuple[Path, ...], chosen: Path) -> bool:
    return len(paths) == 1 or chosen in paths


def _analyze_job(
    files: list[tuple[int, Path]],
    thresholds: Thresholds,
    top: int,
    fmt: str,
    output: Path | None,
    max_findings: int | None,
    fail_on: str | None,
    labels: dict[str, str],
) -> None:
    from ingest import TraceInputError
    from tracelens.ranks.job import analyze_job

    check_output(output)
    if fmt == "html":
        fail("HTML output takes one trace; a job renders as text, markdown or json")
    try:
        job = analyze_job(files, thresholds, top)
    except TraceInputError as exc:
        fail(_relabelled(str(exc), labels))
    for row in job["ranks"]:
        row["file"] = labels.get(row["file"], row["file"])
    for rep in job["rank_reports"].values():
        rep["source"]["path"] = labels.get(rep["source"]["path"], rep["source"]["path"])
    if fmt == "json":
        _deliver(json.dumps(job, indent=2, default=str) + "\n", output)
    elif fmt == "markdown":
        from tracelens.report.render.job_text import render_job_markdown

        _deliver(render_job_markdown(job, max_findings), output)
    else:
        from tracelens.report.render.job_text import render_job_text

        _deliver_rich(lambda console: render_job_text(job, console, max_findings), output)
    _gate(job["findings"], fail_on)


def _relabelled(message: str, labels: dict[str, str]) -> str:
    """An error about an extracted file, naming it as the archive's member."""
    for path, label in labels.items():
        if message.startswith(path + ":"):
            return label + message[len(path) :]
    return message


def _load_with_progress(
    path: Path, db_path: Path | None, rank: int | None, capture_dir: Path | None, size: int
) -> LoadedTrace:
    """Ingest with a progress bar on stderr when it is a terminal."""
    # rich is imported here, not at the top: small traces (most runs) never draw a bar.
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    from ingest import load_trace

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
    from tracelens.report.model import Report

    if fmt == "json":
        text = json.dumps(report, indent=2, default=str) + "\n"
    elif fmt == "markdown":
        from tracelens.report.render.markdown import render_markdown

        text = render_markdown(Report.of(report), max_findings)
    elif fmt == "html":
        from tracelens.report.render.html import render_html

        text = render_html(report)
    else:
        from tracelens.report.render.text import render_text

        typed = Report.of(report)
        _deliver_rich(lambda console: render_text(typed, console, max_findings), output)
        return
    _deliver(text, output)


def _gate(findings: list[dict[str, Any]], fail_on: str | None) -> None:
    """``--fail-on``: exit 1 when a finding is at or above that severity."""
    if fail_on is not None:
        floor = Severity.parse(fail_on)
        if any(Severity.parse(f["severity"]) >= floor for f in findings):
            sys.exit(EXIT_GATE)


def _deliver(text: str, output: Path | None) -> None:
    if output is None:
        click.echo(text, nl=False)
    else:
        write_output(output, text)


def _deliver_rich(render: Callable[[Any], None], output: Path | None) -> None:
    """Draw a rich rendering on the terminal, or into ``output`` 120 columns wide."""
    from rich.console import Console

    if output is None:
        render(Console())
        return
    try:
        with output.open("w", encoding="utf-8") as f:
            render(Console(file=f, width=120))
    except OSError as exc:
        fail(f"{output}: cannot write the report ({exc.strerror or exc})")
