"""What every ``tracelens`` command shares: exit codes, the threshold option, failing cleanly."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import click

from tracelens.core.restriction import Restriction, RestrictionError, one_restriction
from tracelens.core.thresholds import Thresholds

# The exit codes of every command, the plugged-in ones included.
EXIT_OK = 0
# A CI gate tripped: ``analyze --fail-on``, ``diff --max-regression``.
EXIT_GATE = 1
# Unusable input or usage (click's own usage errors exit 2 too), with one line on stderr
# naming the file and the problem.
EXIT_BAD_INPUT = 2

if TYPE_CHECKING:
    from ingest import LoadedTrace
    from tracelens.llm.bench_results import BenchRun
    from tracelens.llm.slo import Objectives

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


def format_option(
    *choices: str, help_text: str = "Output format."
) -> Callable[[_Command], _Command]:
    """``--format`` (as ``fmt``), the first choice the default."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(list(choices)),
        default=choices[0],
        show_default=True,
        help=help_text,
    )


def output_option(what: str) -> Callable[[_Command], _Command]:
    """``-o/--output FILE``: write ``what`` there instead of standard output."""
    return click.option(
        "-o",
        "--output",
        type=click.Path(path_type=Path),
        default=None,
        help=f"Write {what} to this file instead of standard output.",
    )


def restriction_options(command: _Command) -> _Command:
    """``--window START:END`` / ``--steps FIRST:END`` / ``--range NAME[@DOMAIN]``, handed to
    the command as ``window``, ``steps``, ``range_name``; :func:`parse_restriction` reads
    them."""
    options = (
        click.option(
            "--window",
            metavar="START:END",
            default=None,
            help="Analyze only this time window: offsets from the start of the analysed window "
            "(first GPU activity), e.g. 2s:5s, 150ms:, :800ms (no unit: ns).",
        ),
        click.option(
            "--steps",
            metavar="FIRST:END",
            default=None,
            help="Analyze only profiler steps FIRST to END-1 (ProfilerStep#N), e.g. 5:15, 5:, 7.",
        ),
        click.option(
            "--range",
            "range_name",
            metavar="NAME[@DOMAIN]",
            default=None,
            help="Analyze only the instances of this annotation or NVTX range (exact name; "
            "@DOMAIN: its NVTX domain or Chrome category).",
        ),
    )
    for option in reversed(options):
        command = option(command)
    return command


def parse_restriction(
    window: str | None, steps: str | None, range_name: str | None
) -> Restriction | None:
    """The restriction the options give (at most one of them), or None."""
    try:
        return one_restriction(window, steps, range_name)
    except RestrictionError as exc:
        raise click.UsageError(str(exc)) from None


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
    from tracelens.llm.slo import parse_slo

    try:
        return parse_slo(text)
    except ValueError as exc:
        fail(f"--slo {text!r}: {exc}")


def read_bench_option(path: Path | None) -> BenchRun | None:
    """``--bench FILE``: a benchmark client's per-request results (None without it)."""
    if path is None:
        return None
    # the benchmark reader (NumPy behind it) only with --bench
    from tracelens.llm.bench_results import BenchInputError, load_bench_results

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


def restrict_or_fail(loaded: LoadedTrace, restriction: Restriction | None) -> LoadedTrace:
    """``loaded`` restricted (closing the unrestricted one), or as it is without one; a
    restriction that selects nothing fails with its message."""
    if restriction is None:
        return loaded
    from tracelens.core.restricted_db import restrict_loaded

    try:
        return restrict_loaded(loaded, restriction)
    except RestrictionError as exc:
        fail(str(exc))


def fail(message: str) -> NoReturn:
    """One line on stderr and exit 2."""
    click.echo(f"tracelens: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)
