"""When a trace was recorded, on the wall clock: what orders a series of runs.

Traces keep their own clocks. Kineto writes epoch-scale microseconds (older versions) or
times relative to ``baseTimeNanoseconds`` (its realtime origin); Nsight Systems counts from
the session start, whose UTC time the export keeps (to the second). A trace whose clock
cannot be placed on the calendar has no recording time, and a series falls back to the
upload time for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

# Times at or after 2001-09-09 in ns since 1970 are taken as epoch timestamps already: a
# trace-relative clock never runs that long.
_EPOCH_SCALE_NS = 10**18


def recorded_at_ns(info: Mapping[str, str], t0_ns: int) -> int | None:
    """``t0_ns`` (the first activity) in ns since the Unix epoch, or None when unknowable."""
    if t0_ns >= _EPOCH_SCALE_NS:
        return t0_ns
    base = _int(info.get("base_time_ns"))
    if base is not None and base > 0:
        return base + t0_ns
    session = _utc_ns(info.get("session_start_utc"))
    if session is not None:
        return session + t0_ns
    return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def _utc_ns(text: str | None) -> int | None:
    """nsys's ``utcTime`` (``2023-07-30T09:30:32``, UTC without a zone) in epoch ns."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp()) * 10**9 + moment.microsecond * 1000
