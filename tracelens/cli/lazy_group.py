"""A click group that imports a command's module only when that command runs.

``tracelens analyze`` on a small trace is mostly start-up: importing every command's
module (DuckDB, the renderers, the web layer behind ``serve``) up front cost about half
its time and a third of its memory. The group knows its commands by name and import
path, and the plugged-in ones by entry point, so naming a command imports that command
alone. ``--help`` lists the core commands from their summaries (the first paragraph of
each command's help, kept next to its import path) without importing them; a test
checks the summaries against the commands' own help.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import click

# Other packages register commands here (``tracelens serve`` lives in ``web``), so the
# core never imports the web layer: dependencies keep pointing web -> tracelens -> ingest.
PLUGIN_GROUP = "tracelens.commands"


class LazyGroup(click.Group):
    """Commands given as ``{name: "package.module:attribute"}`` plus entry-point plugins.

    ``summaries`` (``{name: first paragraph of its help}``) lets the group's help list a
    command without importing its module; a command without one is imported to list it.
    """

    def __init__(
        self,
        *args: Any,
        lazy_commands: Mapping[str, str],
        summaries: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)
        self.summaries = dict(summaries or {})
        self._listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands, *_plugin_names()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            if self._listing and cmd_name in self.summaries:
                return self._summary_stand_in(cmd_name)
            command = self._load(cmd_name)
            if command is None:
                return None
            self.add_command(command, cmd_name)
        return self.commands[cmd_name]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own listing (its layout and shortening), fed stand-ins for the commands
        # not imported yet
        with self._listing_commands():
            super().format_commands(ctx, formatter)

    @contextmanager
    def _listing_commands(self) -> Iterator[None]:
        self._listing = True
        try:
            yield
        finally:
            self._listing = False

    def _summary_stand_in(self, name: str) -> click.Command:
        """A command that lists as ``name`` does: click shortens its help the same way,
        since it reads only the first paragraph."""
        return click.Command(name, help=self.summaries[name])

    def _load(self, name: str) -> click.Command | None:
        target = self.lazy_commands.get(name)
        if target is not None:
            module, _, attribute = target.partition(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{target} is not a click command")
            return command
        return load_plugin(name)


def _plugin_names() -> list[str]:
    from importlib.metadata import entry_points

    return [ep.name for ep in entry_points(group=PLUGIN_GROUP)]


def load_plugin(name: str) -> click.Command | None:
    """The plugged-in command ``name``, a stand-in saying what is missing, or None."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=PLUGIN_GROUP, name=name):
        try:
            command = ep.load()
        except ImportError as exc:  # the optional extra is not installed
            return _unavailable(name, exc.name or "a dependency")
        if not isinstance(command, click.Command):
            raise TypeError(f"entry point {ep.value} is not a click command")
        return command
    return None


def _unavailable(name: str, missing: str) -> click.Command:
    @click.command(name, help=f"(unavailable: {missing} is not installed)")
    def unavailable() -> None:
        # imported on use, so the group itself stays as light as click
        from tracelens.cli.options import fail

        fail(f"this command needs {missing}; install tracelens[web]")

    return unavailable
