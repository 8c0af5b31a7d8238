"""tracelens: where the GPU time went, and what to change.

``tracelens.load(path)`` gives a :class:`~tracelens.api.trace.Trace` (``docs/api.md``).
The API is imported on first use, so ``import tracelens`` (and the command line, which
imports this package first) does not load DuckDB or polars.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from tracelens.api import LlmFrames, Trace, diff, load

__all__ = ["LlmFrames", "Trace", "__version__", "diff", "load"]

_API_NAMES = frozenset({"LlmFrames", "Trace", "diff", "load"})


def __getattr__(name: str) -> Any:
    if name in _API_NAMES:
        import tracelens.api

        return getattr(tracelens.api, name)
    raise AttributeError(f"module 'tracelens' has no attribute {name!r}")
