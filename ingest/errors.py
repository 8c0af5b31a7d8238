"""The one error type readers raise for unusable input."""

from __future__ import annotations

from pathlib import Path


class TraceInputError(Exception):
    """Input that cannot be read as a trace. ``str()`` is one line naming the file."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")
