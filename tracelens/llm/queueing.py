"""How much of TTFT is queueing (request start -> first prefill start) versus prefill.

Also counts requests *passed over*: those that waited through two or more whole decode steps
running fewer requests than the largest batch of the run. A request waiting while batches
run below their proven size is the signature of static batching (no admission between
steps); a request waiting while every batch is full means the server is at capacity.
"""

from __future__ import annotations

import msgspec

from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.llm_annotations import LLM_STEPS
from tracelens.derived.llm_latency import LLM_PER_REQUEST
from tracelens.llm.model import QueuedRequest, Queueing


def queueing(db: TraceDB, top: int = 5) -> Queueing:
    """Queueing totals, requests passed over, and the longest waits."""
    require(db, LLM_PER_REQUEST, LLM_STEPS)
    r = db.dicts(
        """SELECT count(queue_ns) AS requests, coalesce(sum(queue_ns), 0) AS queue_ns,
                  coalesce(sum(prefill_ns), 0) AS prefill_ns,
                  coalesce(sum(ttft_ns), 0) AS ttft_ns, max(queue_ns) AS max_queue_ns
           FROM llm_per_request WHERE queue_ns IS NOT NULL AND ttft_ns IS NOT NULL"""
    )[0]
    max_batch = db.scalar("SELECT max(n_requests) FROM llm_steps WHERE kind = 'decode'")
    # Per waiting request, the under-filled decode steps that ran entirely inside its wait.
    # One such step is normal (a request arriving mid-step waits for it); two or more mean
    # the server kept stepping with free slots instead of admitting the request.
    slots = db.dicts(
        """WITH w AS (
               SELECT q.rid, count(s.step_id) AS steps,
                      count(s.step_id) FILTER (WHERE s.n_requests < ?) AS idle_slot_steps
               FROM llm_per_request q JOIN llm_steps s
                 ON s.kind = 'decode' AND s.start_ns >= q.start_ns
                AND s.end_ns <= q.start_ns + q.queue_ns
               WHERE q.queue_ns > 0 GROUP BY q.rid)
           SELECT coalesce(sum(steps), 0) AS steps,
                  count(*) FILTER (WHERE idle_slot_steps >= 2) AS requests
           FROM w""",
        [max_batch or 0],
    )[0]
    longest = db.dicts(
        """SELECT rid, start_ns, start_ns + queue_ns AS prefill_start_ns, queue_ns, ttft_ns
           FROM llm_per_request WHERE queue_ns IS NOT NULL
           ORDER BY queue_ns DESC, rid LIMIT ?""",
        [top],
    )
    ttft = int(r["ttft_ns"])
    return Queueing(
        requests=int(r["requests"]),
        queue_ns=int(r["queue_ns"]),
        prefill_ns=int(r["prefill_ns"]),
        ttft_ns=ttft,
        queue_share_pct=100.0 * int(r["queue_ns"]) / ttft if ttft > 0 else None,
        max_queue_ns=None if r["max_queue_ns"] is None else int(r["max_queue_ns"]),
        decode_steps_while_queued=int(slots["steps"]),
        requests_passed_over=int(slots["requests"]),
        max_decode_batch=None if max_batch is None else int(max_batch),
        longest=msgspec.convert(longest, list[QueuedRequest]),
    )
