"""Do prefill steps stall running decodes? (inter-token gaps that contain a prefill step)

A decode inter-token gap of a request (from one of its tokens to the next, ending in a
decode step) is *stalled* when a whole prefill step of other requests ran inside it: the
request's next token waited for someone else's prompt. The baseline is the median of the
unstalled decode gaps; a stalled gap's excess is its length minus that baseline.
"""

from __future__ import annotations

from typing import Any

from tracelens.core.tracedb import TraceDB

STALL_SQL = """
CREATE OR REPLACE TEMP TABLE llm_itl_stalls AS
SELECT i.rid, i.token_index, i.prev_t_ns, i.t_ns, i.itl_ns,
       count(p.step_id) AS prefills, coalesce(sum(p.end_ns - p.start_ns), 0) AS prefill_ns
FROM llm_itl i
LEFT JOIN llm_steps p
  ON p.kind = 'prefill' AND p.start_ns >= i.prev_t_ns AND p.end_ns <= i.t_ns
WHERE i.kind = 'decode'
GROUP BY i.rid, i.token_index, i.prev_t_ns, i.t_ns, i.itl_ns
"""


def prefill_stalls(db: TraceDB, top: int = 5) -> dict[str, Any]:
    db.con.execute(STALL_SQL)
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
    worst: list[dict[str, Any]] = []
    if r["stalled"] and baseline is not None:
        excess = int(
            db.scalar(
                "SELECT sum(greatest(0, itl_ns - ?)) FROM llm_itl_stalls WHERE prefills > 0",
                [baseline],
            )
            or 0
        )
        worst = db.dicts(
            """SELECT rid, token_index, prev_t_ns AS start_ns, t_ns AS end_ns, itl_ns,
                      prefills, prefill_ns
               FROM llm_itl_stalls WHERE prefills > 0 ORDER BY itl_ns DESC, rid LIMIT ?""",
            [top],
        )
    return {
        "decode_gaps": int(r["decode_gaps"]),
        "stalled_gaps": int(r["stalled"]),
        "requests_stalled": int(r["requests_stalled"]),
        "baseline_itl_ns": None if baseline is None else float(baseline),
        "mean_stalled_itl_ns": None
        if r["mean_stalled_ns"] is None
        else float(r["mean_stalled_ns"]),
        "excess_ns": excess,
        "worst": worst,
    }
