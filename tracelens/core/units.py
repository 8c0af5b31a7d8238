"""Human units for durations, sizes and rates, used by every renderer and advice text."""

from __future__ import annotations


def fmt_ns(ns: float | int | None) -> str:
    if ns is None:
        return "-"
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.3g} s" if a < 100e9 else f"{ns / 1e9:,.0f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.3g} ms" if a < 100e6 else f"{ns / 1e6:,.0f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.3g} µs" if a < 100e3 else f"{ns / 1e3:,.0f} µs"
    return f"{ns:.0f} ns"


def fmt_bytes(n: float | int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}" if abs(n) / size < 1000 else f"{n / size:,.0f} {unit}"
    return f"{n:.0f} B"


def fmt_gbps(nbytes: float, ns: float) -> str:
    return f"{nbytes / ns:.3g} GB/s" if ns > 0 else "-"


def fmt_count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` with its noun in the right number: "1 kernel", "2 kernels", "1 copy", "0 copies"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
