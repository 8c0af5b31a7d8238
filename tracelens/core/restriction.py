"""What part of a trace to analyze: a time window, a span of profiler steps, or the
instances of an annotation range.

Serving traces carry warm-up and uneven load, and a training capture's first steps are
not its steady state; a restriction names the part worth analyzing. It is written as on
the command line (``--window 2s:5s``, ``--steps 5:15``, ``--range NAME[@DOMAIN]``, the
syntax of Nsight Systems' ``--filter-nvtx``) and resolves, against one trace, to the time
intervals :mod:`tracelens.core.restricted_db` keeps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from tracelens.core.units import fmt_ns

if TYPE_CHECKING:
    from tracelens.core.tracedb import TraceDB

RestrictionKind = Literal["window", "steps", "range"]

# A duration as a user writes it: 1500000, 1500000ns, 1500us, 1.5ms, 0.0015s.
_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(ns|us|µs|ms|s)?\s*")
_NS_PER_UNIT = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_STEP_NUMBER = re.compile(r"\s*([0-9]+)?\s*")

Interval = tuple[int, int]


class RestrictionError(ValueError):
    """A restriction that cannot be read, or that selects nothing in the trace."""


@dataclass(frozen=True)
class Restriction:
    """One restriction, kept as written; :meth:`intervals` resolves it for a trace."""

    kind: RestrictionKind
    spec: str

    def __post_init__(self) -> None:
        # Parsing here makes a malformed spec fail before any trace is read.
        _PARSERS[self.kind](self.spec)

    def intervals(self, db: TraceDB) -> list[Interval]:
        """The half-open ``[start_ns, end_ns)`` intervals it selects in ``db``'s trace, on
        the trace clock, sorted and disjoint; raises :class:`RestrictionError` when it
        selects nothing."""
        if self.kind == "window":
            return [_window_interval(db, self.spec)]
        if self.kind == "steps":
            return [_steps_interval(db, self.spec)]
        return _range_intervals(db, self.spec)

    def describe(self, intervals: list[Interval]) -> str:
        """A note for the report: what was analysed."""
        total = sum(e - s for s, e in intervals)
        what = {"window": "the window", "steps": "profiler steps", "range": "range"}[self.kind]
        span = f"{len(intervals)} instances, {fmt_ns(total)} in all" if len(intervals) > 1 else ""
        span = span or f"{fmt_ns(total)}"
        return (
            f"analysed only {what} {self.spec} ({span}): work issued outside it, and "
            "idle time outside it, are left out"
        )


def one_restriction(
    window: str | None, steps: str | None, range_name: str | None
) -> Restriction | None:
    """The restriction one of the three specs gives, None without any; more than one is an
    error (a window inside some steps is a window: give that)."""
    given: list[Restriction] = []
    if window is not None:
        given.append(Restriction("window", window))
    if steps is not None:
        given.append(Restriction("steps", steps))
    if range_name is not None:
        given.append(Restriction("range", range_name))
    if len(given) > 1:
        raise RestrictionError("give at most one of a window, steps or a range")
    return given[0] if given else None


def parse_duration(text: str) -> int:
    """Nanoseconds from ``1500000``, ``1500us``, ``1.5ms`` or ``0.0015s`` (no unit: ns)."""
    m = _DURATION.fullmatch(text)
    if not m:
        raise RestrictionError(f"expected a duration such as 1.5s, 200ms or 300us, got {text!r}")
    return round(float(m.group(1)) * _NS_PER_UNIT[m.group(2) or "ns"])


def _split(spec: str, what: str) -> tuple[str, str]:
    start, sep, end = spec.partition(":")
    if not sep:
        raise RestrictionError(f"expected START:END for {what}, got {spec!r}")
    return start.strip(), end.strip()


def _parse_window(spec: str) -> tuple[int | None, int | None]:
    start, end = _split(spec, "--window")
    lo = parse_duration(start) if start else None
    hi = parse_duration(end) if end else None
    if lo is not None and hi is not None and hi <= lo:
        raise RestrictionError(f"--window {spec}: END must be after START")
    return lo, hi


def _parse_steps(spec: str) -> tuple[int | None, int | None]:
    if ":" not in spec:
        m = _STEP_NUMBER.fullmatch(spec)
        if not m or m.group(1) is None:
            raise RestrictionError(f"expected a step number or FIRST:END, got {spec!r}")
        return int(m.group(1)), int(m.group(1)) + 1
    first, end = _split(spec, "--steps")
    bounds: list[int | None] = []
    for part in (first, end):
        m = _STEP_NUMBER.fullmatch(part)
        if not m:
            raise RestrictionError(f"--steps {spec}: step numbers are whole numbers")
        bounds.append(int(m.group(1)) if m.group(1) is not None else None)
    lo, hi = bounds
    if lo is not None and hi is not None and hi <= lo:
        raise RestrictionError(f"--steps {spec}: END must be after FIRST (END is excluded)")
    return lo, hi


def _parse_range(spec: str) -> tuple[str, str | None]:
    # The domain follows the last '@': range names (NVTX payloads) may contain one.
    name, sep, domain = spec.rpartition("@")
    if not sep:
        name, domain = spec, ""
    if not name:
        raise RestrictionError(f"expected NAME[@DOMAIN], got {spec!r}")
    return name, domain or None


_PARSERS = {"window": _parse_window, "steps": _parse_steps, "range": _parse_range}


def _window_interval(db: TraceDB, spec: str) -> Interval:
    # Offsets count from the start of the analysed window (the report's trace.t0_ns), the
    # zero of every time the report and the web timeline show; an open side runs to the
    # first or last record of any kind.
    lo, hi = _parse_window(spec)
    t0 = db.window[0]
    first, last = _trace_extent(db)
    start = t0 + lo if lo is not None else min(first, t0)
    end = t0 + hi if hi is not None else max(last, t0) + 1
    if start > last:
        raise RestrictionError(
            f"--window {spec}: starts after the trace ends ({fmt_ns(last - t0)} after its start)"
        )
    return start, end


def _trace_extent(db: TraceDB) -> Interval:
    row = db.rows(
        """SELECT min(s), max(e) FROM (
               SELECT min(start_ns) s, max(end_ns) e FROM kernels
               UNION ALL SELECT min(start_ns), max(end_ns) FROM memcpys
               UNION ALL SELECT min(start_ns), max(end_ns) FROM memsets
               UNION ALL SELECT min(start_ns), max(end_ns) FROM cpu_ops
               UNION ALL SELECT min(start_ns), max(end_ns) FROM api_calls
               UNION ALL SELECT min(start_ns), max(end_ns) FROM ranges)"""
    )[0]
    return int(row[0] or 0), int(row[1] or 0)


def _steps_interval(db: TraceDB, spec: str) -> Interval:
    from tracelens.derived import require
    from tracelens.derived.profiler_steps import PROFILER_STEPS

    lo, hi = _parse_steps(spec)
    require(db, PROFILER_STEPS)
    row = db.rows(
        """SELECT min(start_ns), max(end_ns), count(*) FROM profiler_steps
           WHERE step_no >= coalesce(?, step_no) AND step_no < coalesce(?, step_no + 1)""",
        [lo, hi],
    )[0]
    if not row[2]:
        known = db.rows("SELECT min(step_no), max(step_no), count(*) FROM profiler_steps")[0]
        have = f"steps {known[0]} to {known[1]}" if known[2] else "no ProfilerStep#N ranges"
        raise RestrictionError(f"--steps {spec}: no such steps (the trace has {have})")
    return int(row[0]), int(row[1])


def _range_intervals(db: TraceDB, spec: str) -> list[Interval]:
    name, domain = _parse_range(spec)
    rows = db.rows(
        """SELECT start_ns, end_ns FROM ranges
           WHERE name = ? AND (? IS NULL OR domain = ?) AND end_ns > start_ns
           ORDER BY start_ns, end_ns""",
        [name, domain, domain],
    )
    if not rows:
        where = f" in domain {domain!r}" if domain else ""
        raise RestrictionError(f"--range {spec}: no range named {name!r}{where} in the trace")
    return merge_intervals([(int(s), int(e)) for s, e in rows])


def merge_intervals(intervals: list[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same time (nested instances are one)."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
