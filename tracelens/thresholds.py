"""Named, documented thresholds every analyzer reads; each can be overridden.

Override from the CLI with ``--threshold NAME=VALUE`` (repeatable) or in code with
``Thresholds(name=value)``. ``docs/thresholds.md`` lists them (generated from this file's
field docs by ``tracelens thresholds``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Thresholds:
    # Severity: share of the analysed window (GPU activity span) a finding would give back.
    severity_critical_pct: float = 25.0
    severity_high_pct: float = 10.0
    severity_medium_pct: float = 3.0
    severity_low_pct: float = 0.5

    # Idle GPU: a cause is reported when its gaps add up to at least this share of the window.
    idle_min_cause_pct: float = 1.0
    # Idle GPU: how many of the longest gaps a finding lists as evidence.
    idle_top_gaps: int = 5

    # H2D: copies below this size count as "small" (per-copy overhead dominates).
    h2d_small_copy_bytes: int = 64 * 1024
    # H2D: at least this many small copies before "many small copies" is reported.
    h2d_small_copy_min_count: int = 100
    # H2D: pinned-memory bandwidth assumed when estimating what pinning would save (GB/s).
    h2d_pinned_gbps: float = 20.0
    # H2D: a transfer size repeated at least this many times is "copied again every step".
    h2d_repeat_min_count: int = 5

    # Hot operators/kernels: how many to report and list.
    hot_top_n: int = 10
    # Hot: a kernel or operator below this share of GPU busy time is not reported.
    hot_min_share_pct: float = 5.0

    # Variance: groups need at least this many instances to judge their spread.
    variance_min_count: int = 10
    # Variance: coefficient of variation (stddev / mean) at or above which a group is erratic.
    variance_min_cv: float = 0.5
    # Variance: and p95 at least this multiple of the median.
    variance_min_p95_over_p50: float = 1.5
    # Variance: report at most this many groups per kind (kernel, operator).
    variance_top_n: int = 10

    @classmethod
    def with_overrides(cls, overrides: dict[str, str]) -> Thresholds:
        known = {f.name: f for f in fields(cls)}
        values: dict[str, object] = {}
        for name, raw in overrides.items():
            if name not in known:
                raise ValueError(f"unknown threshold {name!r}")
            typ = known[name].type
            try:
                values[name] = int(raw) if typ in (int, "int") else float(raw)
            except ValueError:
                raise ValueError(f"threshold {name} needs a number, got {raw!r}") from None
        return cls(**values)  # type: ignore[arg-type]
