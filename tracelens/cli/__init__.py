"""``tracelens`` command line: one group, a module per command.

Every command exits with the codes of :mod:`tracelens.cli.options`.
"""

from __future__ import annotations

import click

from tracelens import __version__
from tracelens.cli.analyze import analyze
from tracelens.cli.diff import diff
from tracelens.cli.export import export
from tracelens.cli.options import fail
from tracelens.cli.schema import list_schema
from tracelens.cli.sql import sql
from tracelens.cli.sweep import sweep
from tracelens.cli.thresholds import list_thresholds


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracelens")
def main() -> None:
    """Where the GPU time went, and what to change: PyTorch profiler and Nsight traces."""


def _load_plugin_commands() -> None:
    """Commands from other packages (``tracelens serve`` lives in ``web``).

    They register under the ``tracelens.commands`` entry-point group, so the core never
    imports the web layer: dependencies keep pointing web -> tracelens -> ingest.
    """
    from importlib.metadata import entry_points

    for ep in entry_points(group="tracelens.commands"):
        if ep.name in main.commands:
            continue
        try:
            command = ep.load()
        except ImportError as exc:  # the optional extra is not installed
            missing = exc.name or "a dependency"

            @click.command(ep.name, help=f"(unavailable: {missing} is not installed)")
            def unavailable(_missing: str = missing) -> None:
                fail(f"this command needs {_missing}; install tracelens[web]")

            main.add_command(unavailable, ep.name)
            continue
        main.add_command(command, ep.name)


for _command in (analyze, diff, sweep, list_thresholds, list_schema, sql, export):
    main.add_command(_command)
_load_plugin_commands()
