"""A benchmark harness's cache flush between passes, inside the GPU's idle gaps.

Cold-cache benchmarks flush caches before each measured pass on purpose: FAIR's ``param``
harness runs ``[param|clear_cache]`` (it fills a large buffer and empties PyTorch's caching
allocator) between its ``measure|forward`` ranges, and other harnesses name the step
``flush_cache`` or ``clear_l2_cache``. The GPU idles through it, but the program under test
never pays it: the idle finding leaves the flush out of what it would give back and says
so. Where the flush also frees memory to the driver (a ``cudaFree`` inside its range:
``torch.cuda.empty_cache()``), the measured pass's allocation calls outside it are the pool
growing again after it, on a pass near the start (with autograd on, the previous pass's
outputs also keep their activations alive): a loop past its first passes reuses what it has
cached, so they are left out as well (on AlexNet, 30.3 ms of ``cudaMalloc`` that once ranked
second). The trace cannot split the two reasons, so the advice claims neither alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from ingest.derive_gaps import DEVICE_ALLOC_CALLS
from tracelens.core.tracedb import TraceDB

# A range named for flushing or clearing a cache (not the allocator calls themselves,
# which the idle finding counts as allocation time).
FLUSH_PATTERN = (
    r"(?i)(^|[^a-z])(clear|flush)[_ .-]?(the[_ .-]?)?(l2[_ .-]?)?caches?"
    r"|(^|[^a-z])(l2[_ .-]?)?caches?[_ .-]?(clear|flush)"
)

_FLUSH_IN_GAPS = """
SELECT coalesce(sum(least(r.end_ns, gaps.end_ns) - greatest(r.start_ns, gaps.start_ns)), 0)
           AS ns,
       mode(r.name) AS name,
       -- the driver frees inside it: the flush emptied the caching allocator's pool
       coalesce(sum((SELECT count(*) FROM api_calls a
                     WHERE a.name IN ('cudaFree', 'hipFree', 'cuMemFree', 'cuMemFree_v2')
                       AND a.start_ns >= r.start_ns AND a.end_ns <= r.end_ns)), 0) AS frees
FROM {gaps} JOIN ranges r
  ON r.device_id IS NULL AND r.start_ns < gaps.end_ns AND r.end_ns > gaps.start_ns
 AND regexp_matches(r.name, ?)
WHERE gaps.cause = ?
  -- the outermost flush range only: one nested in another is counted by it
  AND NOT EXISTS (SELECT 1 FROM ranges o
                  WHERE o.device_id IS NULL AND regexp_matches(o.name, ?)
                    AND o.pid IS NOT DISTINCT FROM r.pid AND o.tid IS NOT DISTINCT FROM r.tid
                    AND o.start_ns <= r.start_ns AND o.end_ns >= r.end_ns
                    AND (o.start_ns, o.end_ns) <> (r.start_ns, r.end_ns))
"""


# Allocation calls in the gaps outside any flush range: the pass refilling the pool.
_REFILL_IN_GAPS = """
SELECT coalesce(sum(least(a.end_ns, gaps.end_ns) - greatest(a.start_ns, gaps.start_ns)), 0),
       arg_max(a.name, a.end_ns - a.start_ns)
FROM {gaps} JOIN api_calls a ON a.start_ns < gaps.end_ns AND a.end_ns > gaps.start_ns
WHERE gaps.cause = ?
  AND a.name IN (SELECT unnest(?::VARCHAR[]))
  AND NOT EXISTS (SELECT 1 FROM ranges r
                  WHERE r.device_id IS NULL AND regexp_matches(r.name, ?)
                    AND r.start_ns <= a.start_ns AND r.end_ns >= a.end_ns)
"""


@dataclass(frozen=True)
class HarnessFlush:
    """Idle time of one cause spent in a harness's cache-flush ranges."""

    ns: int
    name: str | None
    frees: int  # driver free calls inside the flush ranges
    # allocation time in the gaps outside the flush ranges, where the flush freed memory:
    # the measured pass refilling the pool the flush handed back
    refill_ns: int = 0
    refill_call: str | None = None  # the allocation call with the most of that time


def flush_in_gaps(db: TraceDB, gaps: str, cause: str) -> HarnessFlush:
    """The part of ``cause``'s gaps (a subquery named ``gaps``) inside flush ranges."""
    row = db.dicts(_FLUSH_IN_GAPS.format(gaps=gaps), [FLUSH_PATTERN, cause, FLUSH_PATTERN])[0]
    frees = int(row["frees"] or 0)
    refill, call = (
        db.rows(
            _REFILL_IN_GAPS.format(gaps=gaps), [cause, list(DEVICE_ALLOC_CALLS), FLUSH_PATTERN]
        )[0]
        if frees and row["ns"]
        else (0, None)
    )
    return HarnessFlush(int(row["ns"] or 0), row["name"], frees, int(refill), call)
