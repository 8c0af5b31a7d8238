"""The part of the trace window the findings describe, and their shares of it.

Two things leave part of the recorded window out of what the findings are about: a warm-up
span (``warmup.leave_out_warmup`` trims the other findings to the time after it) and the
ranges the idle claims set aside (a capture-start wait on unrecorded work, the host's phases
with unified memory before the first launch and after the last work). A finding's share of
the window, and so its severity, is of what it describes: 74 ms idle in the 80 ms after a
12.8 s warm-up is most of the steady state, not 0.6 % of the capture; SGLang's 10.5 ms decode
step after a 463 ms wait is what the findings describe, and a GEMM's 1.7 ms beyond its
roofline is a sixth of it, not 0.3 % of the capture; a T4 kernel stalled 35 ms on page faults
is a third of the 100 ms of GPU work, not 3 % of a second the host spent writing managed
memory. The window is decided here once, and the shares rescaled once.
"""

from __future__ import annotations

from tracelens.analyzers import warmup
from tracelens.analyzers.idle_scope import claim_of
from tracelens.core.findings import Finding
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns


def described_window(findings: list[Finding], db: TraceDB, t: Thresholds) -> tuple[int, str] | None:
    """Nanoseconds the findings describe, where that is less than the whole window, and
    how a reader is told what their shares are of ("the 79.6 ms after the warm-up").

    After a warm-up finding: the window after its span (the claims are not applied on top,
    the span already starts the described part). Otherwise the claimed range across devices,
    where a claim leaves something out. None: the whole window, nothing to rescale.
    """
    if any(f.analyzer == warmup.ANALYZER for f in findings):
        span = warmup.warmup_span(db, t)
        if span is None:
            return None
        after = max(0, db.window[1] - span.end_ns)
        return (after, f"the {fmt_ns(after)} after the warm-up") if after else None
    claims = [claim_of(db, dev.device_id, t) for dev in db.devices]
    if not any(c.capture_start is not None or c.uvm_before_ns or c.uvm_after_ns for c in claims):
        return None
    claimed = max(c.hi_ns for c in claims) - min(c.lo_ns for c in claims)
    if claimed <= 0:
        return None
    parts = []
    if any(c.capture_start is not None for c in claims):
        parts.append("after the capture-start wait")
    if any(c.uvm_before_ns or c.uvm_after_ns for c in claims):
        # from when the first launched work was queued (its launch call returned) or began
        parts.append("from the first launched GPU work to the end of the last")
    return claimed, f"the {fmt_ns(claimed)} {', '.join(parts)}"


def share_of_described_window(findings: list[Finding], db: TraceDB, t: Thresholds) -> None:
    """Make each costed finding's ``impact_pct`` its share of the described window, and
    say so in its ``impact_share_of``."""
    described = described_window(findings, db, t)
    if described is None:
        return
    window, what = described
    for f in findings:
        if f.analyzer != warmup.ANALYZER and f.impact_ns > 0:
            f.impact_pct = 100.0 * f.impact_ns / window
            f.impact_share_of = what
