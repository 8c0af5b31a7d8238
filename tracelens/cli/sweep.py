"""``tracelens sweep RUN...``: runs at rising load, latency against throughput, the knee.

A RUN is a trace (analyzed here) or a saved JSON report (``analyze --format json``),
optionally with the benchmark client's results for it: ``RUN=RESULT``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ingest import TraceInputError
from tracelens.cli.options import (
    check_output,
    fail,
    format_option,
    output_option,
    parse_slo_option,
    write_output,
)

if TYPE_CHECKING:
    from tracelens.llm.bench_results import BenchRun

# The loader (DuckDB, NumPy), the report (every analyzer) and rich are imported where they
# are used, so `tracelens sweep --help` and usage errors cost only click.

# A saved report names its schema in its first key; this much of the head is read to see it.
_HEAD_BYTES = 4096


def _split_run(arg: str) -> tuple[Path, Path | None]:
    """``RUN`` or ``RUN=RESULT``; a path that exists with ``=`` in its name is a RUN."""
    path = Path(arg)
    if path.exists() or "=" not in arg:
        return path, None
    run, _, result = arg.rpartition("=")
    return Path(run), Path(result)


def _is_saved_report(path: Path) -> bool:
    if not path.is_file():
        return False
    with path.open("rb") as f:
        head = f.read(_HEAD_BYTES)
    from tracelens.report import REPORT_SCHEMA

    schema = REPORT_SCHEMA.split("/")[0].encode()
    return head.lstrip().startswith(b"{") and b'"schema": "' + schema + b"/" in head


def _saved_report(path: Path) -> dict[str, Any]:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        fail(f"{path}: cannot read the saved report ({exc})")
    if not isinstance(report, dict):
        fail(f"{path}: not a tracelens report")
    return report


def _bench(path: Path | None) -> BenchRun | None:
    if path is None:
        return None
    from tracelens.llm.bench_results import BenchInputError, load_bench_results

    try:
        return load_bench_results(path)
    except BenchInputError as exc:
        fail(str(exc))


def _report(path: Path, bench: BenchRun | None) -> dict[str, Any]:
    from ingest import load_trace
    from tracelens.llm.bench_results import client_summary
    from tracelens.report import ReportInputs, build_report

    if _is_saved_report(path):
        report = _saved_report(path)
        if bench is not None:
            # The client's results given now stand for any the report was saved with.
            report.setdefault("llm", {})["client"] = client_summary(bench)
        return report
    try:
        loaded = load_trace(path)
    except TraceInputError as exc:
        fail(str(exc))
    try:
        return build_report(loaded, inputs=ReportInputs(bench=bench))
    finally:
        loaded.close()


def _params(values: tuple[str, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in values:
        name, sep, raw = item.rpartition("=")
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not sep or not name or not value > 0 or value == float("inf"):
            fail(f"--param {item!r}: expected RUN=VALUE with a positive number")
        out[name] = value
    return out


@click.command("sweep")
@click.argument("runs", nargs=-1, required=True, metavar="RUN[=RESULT]...")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="RUN=VALUE",
    help="The run's concurrency or batch size (repeatable; RUN is its file name), for runs "
    "whose benchmark results and trace do not say it.",
)
@click.option(
    "--slo",
    metavar="OBJECTIVES",
    default=None,
    help="Serving objectives, e.g. ttft=200ms,tpot=50ms: name the highest-throughput run "
    "whose p95 latencies meet them.",
)
@format_option("text", "json", "markdown")
@output_option("the sweep")
def sweep(
    runs: tuple[str, ...], params: tuple[str, ...], slo: str | None, fmt: str, output: Path | None
) -> None:
    """p50/p95 TTFT and TPOT against output tokens/s over runs at rising load, and the knee.

    Each RUN is a trace or a saved JSON report, with its benchmark client's per-request
    results as RUN=RESULT (vllm bench serve --save-detailed JSON, sglang bench_serving
    --output-details JSONL).
    """
    objectives = parse_slo_option(slo)
    given = _params(params)
    check_output(output)
    split = [_split_run(arg) for arg in runs]
    # Every input is checked before any trace is analyzed, so a typo fails fast.
    for path, result in split:
        if not path.exists():
            fail(f"{path}: no such file or folder")
        if result is not None and not result.is_file():
            fail(f"{result}: no such results file")
    benches = [_bench(result) for _, result in split]
    reports = [
        (path.name, _report(path, bench)) for (path, _), bench in zip(split, benches, strict=True)
    ]
    from tracelens.report.sweep import SweepInputError, build_sweep

    try:
        d = build_sweep(reports, given, objectives)
    except SweepInputError as exc:
        fail(str(exc))
    from tracelens.report.render.sweep import render_sweep_markdown, render_sweep_text

    if fmt == "text":
        from rich.console import Console

        if output is None:
            render_sweep_text(d, Console())
            return
        try:
            with output.open("w", encoding="utf-8") as f:
                render_sweep_text(d, Console(file=f, width=160))
        except OSError as exc:
            fail(f"{output}: cannot write the sweep ({exc.strerror or exc})")
        return
    text = json.dumps(d, indent=2) + "\n" if fmt == "json" else render_sweep_markdown(d)
    if output is None:
        click.echo(text, nl=False)
    else:
        write_output(output, text)
