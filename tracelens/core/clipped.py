"""Long names shortened for titles and tables: a kernel's demangled signature can run to
hundreds of characters, and a finding's title names it once."""

from __future__ import annotations


def clipped(name: str, width: int = 80) -> str:
    """``name``, cut to ``width`` characters with an ellipsis where longer."""
    return name if len(name) <= width else name[: width - 1] + "…"
