"""Do prefill steps stall running decodes? (inter-token gaps that contain a prefill step)

A decode inter-token gap of a request (from one of its tokens to the next, ending in a
decode step) is *stalled* when a whole prefill step of other requests ran inside it: the
request's next token waited for someone else's prompt. The baseline is the median of the
unstalled decode gaps; a stalled gap's excess is its length minus that baseline. The gaps
and the prefills inside them are ``llm_itl_stalls`` (:mod:`tracelens.derived.llm_latency`).
"""

from __future__ import annotations

import msgspec

from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.llm_latency import LLM_ITL_STALLS
from tracelens.llm.model import PrefillStalls, StalledGap


def prefill_stalls(db: TraceDB, top: int = 5) -> tuple[PrefillStalls, list[StalledGap]]:
    """The stalled decode gaps counted, and the ``top`` longest of them."""
    require(db, LLM_ITL_STALLS)
    r = db.dicts(
        """SELECT count(*) AS decode_gaps,
                  count(*) FILTER (WHERE prefills > 0) AS stalled,
                  median(itl_ns) FILTER (WHERE prefills = 0) AS baseline_ns,
                  avg(itl_ns) FILTER (WHERE prefills > 0) AS mean_stalled_ns,
                  count(DISTINCT rid) FILTER (WHERE prefills > 0) AS requests_stalled
           FROM llm_itl_stalls"""
    )[0]
    baseline = r["baseline_ns"]
    excess = 0
    worst: list[StalledGap] = []
    if r["stalled"] and baseline is not None:
        excess = int(
            db.scalar(
                "SELECT sum(greatest(0, itl_ns - ?)) FROM llm_itl_stalls WHERE prefills > 0",
                [baseline],
            )
            or 0
        )
        rows = db.dicts(
            """SELECT rid, token_index, prev_t_ns AS start_ns, t_ns AS end_ns, itl_ns,
                      prefills, prefill_ns
               FROM llm_itl_stalls WHERE prefills > 0 ORDER BY itl_ns DESC, rid LIMIT ?""",
            [top],
        )
        worst = msgspec.convert(
            [{k: v if k == "rid" else int(v) for k, v in row.items()} for row in rows],
            list[StalledGap],
        )
    stalls = PrefillStalls(
        decode_gaps=int(r["decode_gaps"]),
        stalled_gaps=int(r["stalled"]),
        requests_stalled=int(r["requests_stalled"]),
        baseline_itl_ns=None if baseline is None else float(baseline),
        mean_stalled_itl_ns=None if r["mean_stalled_ns"] is None else float(r["mean_stalled_ns"]),
        excess_ns=excess,
    )
    return stalls, worst
