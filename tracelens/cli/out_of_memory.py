"""Out of memory in any command is one line on stderr and exit 2, never a traceback
(the wording is :mod:`tracelens.core.out_of_memory`'s, shared with the web)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from tracelens.core.out_of_memory import is_out_of_memory, out_of_memory_message


@contextmanager
def out_of_memory_in_one_line() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        # imported here: --help loads this module and must stay light
        from tracelens.cli.options import EXIT_BAD_INPUT

        click.echo(f"tracelens: error: {out_of_memory_message(exc)}", err=True)
        sys.exit(EXIT_BAD_INPUT)
