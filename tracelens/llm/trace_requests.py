"""The trace's annotated requests as :class:`RequestLatency` records, phases included."""

from __future__ import annotations

from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.llm_latency import LLM_ITL, LLM_ITL_STALLS, LLM_PER_REQUEST
from tracelens.llm.request_latency import RequestLatency

_SQL = """
SELECT p.rid, p.start_ns, p.end_ns, p.output_tokens, p.ttft_ns, p.tpot_ns, p.e2e_ns,
       p.queue_ns, p.prefill_ns, p.last_token_ns - p.first_token_ns AS decode_ns,
       coalesce(i.itls, []) AS itls, s.stalled_ns
FROM llm_per_request p
LEFT JOIN (SELECT rid, list(itl_ns ORDER BY token_index) AS itls FROM llm_itl GROUP BY rid) i
  USING (rid)
LEFT JOIN (SELECT rid, sum(prefill_ns) AS stalled_ns FROM llm_itl_stalls GROUP BY rid) s
  USING (rid)
ORDER BY p.start_ns NULLS LAST, p.first_token_ns, p.rid
"""


def _f(v: object) -> float | None:
    return None if v is None else float(v)  # type: ignore[arg-type]


def trace_requests(db: TraceDB) -> list[RequestLatency]:
    """One record per annotated request (none without annotations)."""
    require(db, LLM_PER_REQUEST, LLM_ITL, LLM_ITL_STALLS)
    out = []
    for r in db.dicts(_SQL):
        out.append(
            RequestLatency(
                rid=str(r["rid"]),
                ok=True,
                output_tokens=int(r["output_tokens"]),
                ttft_ns=_f(r["ttft_ns"]),
                tpot_ns=_f(r["tpot_ns"]),
                e2e_ns=_f(r["e2e_ns"]),
                itls_ns=[float(g) for g in r["itls"]],
                queue_ns=_f(r["queue_ns"]),
                prefill_ns=_f(r["prefill_ns"]),
                decode_ns=_f(r["decode_ns"]),
                decode_stalled_ns=float(r["stalled_ns"] or 0)
                if r["decode_ns"] is not None
                else None,
                start_ns=None if r["start_ns"] is None else int(r["start_ns"]),
                end_ns=None if r["end_ns"] is None else int(r["end_ns"]),
            )
        )
    return out
