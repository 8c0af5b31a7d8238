"""One Chrome-trace event as JSON text, with exact microsecond times.

Chrome traces count in microseconds; ours are whole nanoseconds, written as microseconds
with three decimals from integer arithmetic so no time moves (a float would, at epoch
scale), which tracelens's reader and Perfetto's read back to the same nanosecond.
"""

from __future__ import annotations

import json
from typing import Any


def us_text(ns: int) -> str:
    """``ns`` nanoseconds as exact microsecond text: 1234567 -> ``1234.567``."""
    sign = "-" if ns < 0 else ""
    whole, frac = divmod(abs(int(ns)), 1000)
    return f"{sign}{whole}.{frac:03d}"


def chrome_event(
    fields: dict[str, Any], ts_ns: int | None = None, dur_ns: int | None = None
) -> bytes:
    """``fields`` (ph, name, pid, tid, args, ...) with ``ts``/``dur`` from nanoseconds."""
    times = []
    if ts_ns is not None:
        times.append(f'"ts":{us_text(ts_ns)}')
    if dur_ns is not None:
        times.append(f'"dur":{us_text(dur_ns)}')
    body = json.dumps(fields, ensure_ascii=False, separators=(",", ":"), default=str)
    if not times:
        return body.encode()
    inner = body[1:-1]
    return ("{" + ",".join(times) + ("," + inner if inner else "") + "}").encode()
