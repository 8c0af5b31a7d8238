"""``tracelens`` command line: one group, a module per command.

Every command exits with the codes of :mod:`tracelens.cli.options`. A command's module is
imported only when that command runs (:mod:`tracelens.cli.lazy_group`), so each pays for
its own imports alone.
"""

from __future__ import annotations

import click

from tracelens import __version__
from tracelens.cli.lazy_group import LazyGroup

COMMANDS = {
    "analyze": "tracelens.cli.analyze:analyze",
    "diff": "tracelens.cli.diff:diff",
    "sweep": "tracelens.cli.sweep:sweep",
    "sql": "tracelens.cli.sql:sql",
    "export": "tracelens.cli.export:export",
    "thresholds": "tracelens.cli.thresholds:list_thresholds",
    "schema": "tracelens.cli.schema:list_schema",
    "upload": "tracelens.cli.upload:upload",
    "series": "tracelens.cli.series:series",
}


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="tracelens")
def main() -> None:
    """Where the GPU time went, and what to change: PyTorch profiler and Nsight traces."""
