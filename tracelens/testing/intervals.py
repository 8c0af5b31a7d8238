"""Time intervals merged in plain Python: the definition the interval SQL's property tests
check against."""

from __future__ import annotations


def merge_intervals(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` merged into disjoint intervals (touching ones joined)."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out
