"""What every ``tracelens`` command shares: exit codes, threshold options, failing cleanly.

Exit codes everywhere: 0 ok, 1 a CI gate tripped (``--fail-on``, ``--max-regression``),
2 unusable input or usage, with one line on stderr naming the file and the problem.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from tracelens.core.thresholds import Thresholds

EXIT_OK, EXIT_GATE, EXIT_BAD_INPUT = 0, 1, 2


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
