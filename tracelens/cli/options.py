"""What every ``tracelens`` command shares: exit codes, the threshold option, failing cleanly."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import click

from tracelens.core.thresholds import Thresholds
from tracelens.llm.bench_results import BenchInputError, BenchRun, load_bench_results
from tracelens.llm.slo import Objectives, parse_slo

# The exit codes of every command, the plugged-in ones included.
EXIT_OK = 0
# A CI gate tripped: ``analyze --fail-on``, ``diff --max-regression``.
EXIT_GATE = 1
# Unusable input or usage (click's own usage errors exit 2 too), with one line on stderr
# naming the file and the problem.
EXIT_BAD_INPUT = 2

_Command = TypeVar("_Command", bound=Callable[..., object])


def threshold_option(help_text: str) -> Callable[[_Command], _Command]:
    """``--threshold NAME=VALUE`` (repeatable), handed to the command as :class:`Thresholds`."""
    return click.option(
        "--threshold",
        "thresholds",
        multiple=True,
        metavar="NAME=VALUE",
        help=help_text,
        callback=lambda _ctx, _param, values: parse_thresholds(values),
    )


def parse_thresholds(values: tuple[str, ...]) -> Thresholds:
    """``--threshold NAME=VALUE`` options as a :class:`Thresholds`."""
    overrides: dict[str, str] = {}
    for item in values:
        name, sep, raw = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--threshold")
        overrides[name.strip()] = raw.strip()
    try:
        return Thresholds.with_overrides(overrides)
    except ValueError as exc:
        fail(f"--threshold: {exc}")


def parse_slo_option(text: str | None) -> Objectives | None:
    """``--slo ttft=200ms,tpot=50ms`` as :class:`Objectives` (None without the option)."""
    if text is None:
        return None
    try:
        return parse_slo(text)
    except ValueError as exc:
        fail(f"--slo {text!r}: {exc}")


def read_bench_option(path: Path | None) -> BenchRun | None:
    """``--bench FILE``: a benchmark client's per-request results (None without it)."""
    if path is None:
        return None
    try:
        return load_bench_results(path)
    except BenchInputError as exc:
        fail(f"--bench {exc}")


def check_output(path: Path | None) -> None:
    """Refuse an ``-o`` path that cannot be written before any work is done."""
    if path is None:
        return
    if path.is_dir():
        fail(f"{path}: is a directory; give a file name for -o")
    if not path.parent.is_dir():
        fail(f"{path}: cannot write the report: directory {path.parent} does not exist")


def write_output(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"{path}: cannot write the report ({exc.strerror or exc})")


def fail(message: str) -> NoReturn:
    """One line on stderr and exit 2."""
    click.echo(f"tracelens: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)
