"""The terminal table of a latency distribution per row: a label, then numbers.

At 80 columns a boxed table of eight columns left the label one character wide (rich
shrinks the wrappable columns first), so "decode" and "ITL (engine)" read as "…". The
table has no vertical rules and no outer padding, the label never wraps, and only the
first number column (a count such as "32 in 1 step") may.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table


def percentile_table(title: str, caption: str, label: str, columns: tuple[str, ...]) -> Table:
    # rich is imported for the text report only: the Markdown one never needs it
    from rich import box
    from rich.table import Table

    t = Table(
        title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True
    )
    t.add_column(label, no_wrap=True)
    for i, c in enumerate(columns):
        t.add_column(c, justify="right", no_wrap=i > 0)
    return t
