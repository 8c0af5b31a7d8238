"""Per-request and aggregate LLM serving latencies, with vLLM's definitions.

Per request (times from the ``llm_*`` tables of :mod:`tracelens.llm.annotations`):

- token times: the end of every prefill or decode step that lists the request;
- TTFT = end of its first prefill step - start of its ``llm.request`` range;
- ITL: the gaps between its consecutive token times;
- TPOT = (last token time - first token time) / (output tokens - 1), only for requests with
  more than one token;
- end-to-end latency = end of its request range - start of its request range (the last
  token time stands in for the end only if the range had none);
- queueing = start of its first prefill step - start of its request range; prefill
  execution = that step's duration (queueing + prefill execution = TTFT).

Aggregates are the mean and the percentiles p50, p90, p95, p99, each by linear
interpolation between the closest ranks (DuckDB ``quantile_cont``, numpy's default). TTFT,
TPOT and end-to-end latency are taken over requests, ITL over all gaps of all requests.
Throughput is measured over the span from the first request start (first step start if no
request range exists) to the last token.
"""

from __future__ import annotations

from typing import Any

from tracelens.core.tracedb import TraceDB

PERCENTILES = (50, 90, 95, 99)

# One row per request id seen in a request range or a step.
PER_REQUEST_SQL = """
WITH tok AS (
    SELECT rid, count(*) AS output_tokens, min(t_ns) AS first_token_ns,
           max(t_ns) AS last_token_ns,
           min(t_ns) FILTER (WHERE kind = 'prefill') AS first_prefill_end_ns,
           arg_min(step_start_ns, t_ns) FILTER (WHERE kind = 'prefill') AS first_prefill_start_ns
    FROM llm_tokens GROUP BY rid
),
ids AS (SELECT rid FROM llm_requests UNION SELECT rid FROM tok)
SELECT ids.rid,
       r.start_ns,
       coalesce(r.end_ns, t.last_token_ns) AS end_ns,
       coalesce(t.output_tokens, 0) AS output_tokens,
       t.first_token_ns, t.last_token_ns,
       t.first_prefill_end_ns - r.start_ns AS ttft_ns,
       CASE WHEN t.output_tokens > 1
            THEN (t.last_token_ns - t.first_token_ns) / (t.output_tokens - 1) END AS tpot_ns,
       CASE WHEN r.start_ns IS NOT NULL THEN coalesce(r.end_ns, t.last_token_ns) - r.start_ns
            END AS e2e_ns,
       t.first_prefill_start_ns - r.start_ns AS queue_ns,
       t.first_prefill_end_ns - t.first_prefill_start_ns AS prefill_ns
FROM ids LEFT JOIN llm_requests r USING (rid) LEFT JOIN tok t USING (rid)
"""

# Inter-token gaps: one row per token after the first of each request.
ITL_SQL = """
CREATE OR REPLACE TEMP TABLE llm_itl AS
SELECT * FROM (
    SELECT rid, token_index, step_id, kind,
           lag(t_ns) OVER (PARTITION BY rid ORDER BY token_index) AS prev_t_ns, t_ns,
           t_ns - lag(t_ns) OVER (PARTITION BY rid ORDER BY token_index) AS itl_ns
    FROM llm_tokens
) WHERE itl_ns IS NOT NULL
"""


def summarize(db: TraceDB, values_sql: str) -> dict[str, Any]:
    """count, mean, p50/p90/p95/p99 and max of column ``v`` of ``values_sql`` (NULLs left out).

    Values are nanoseconds as floats (a mean or an interpolated percentile need not be a
    whole nanosecond); all but ``count`` are ``None`` when there is no value.
    """
    pct = ", ".join(f"quantile_cont(v, {p / 100}) AS p{p}" for p in PERCENTILES)
    row = db.dicts(
        f"SELECT count(v) AS count, avg(v) AS mean, {pct}, max(v) AS max "
        f"FROM ({values_sql}) WHERE v IS NOT NULL"
    )[0]
    return {
        k: (int(v) if k == "count" else (None if v is None else float(v))) for k, v in row.items()
    }


def per_request(db: TraceDB) -> list[dict[str, Any]]:
    """One dict per request; needs ``llm_per_request`` (made by :func:`latency_summary`)."""
    rows = db.dicts(
        "SELECT * FROM llm_per_request ORDER BY start_ns NULLS LAST, first_token_ns, rid"
    )
    for r in rows:
        for k, v in r.items():
            if isinstance(v, float) and k != "tpot_ns":
                r[k] = int(v)
        r["output_tokens"] = int(r["output_tokens"])
    return rows


def latency_summary(db: TraceDB) -> dict[str, Any]:
    """The issue's ``llm`` numbers: request/token counts, latency summaries, throughput."""
    db.con.execute(ITL_SQL)
    db.con.execute(f"CREATE OR REPLACE TEMP TABLE llm_per_request AS {PER_REQUEST_SQL}")
    counts = db.dicts(
        """SELECT count(*) AS requests,
                  coalesce(sum(output_tokens), 0) AS output_tokens,
                  count(*) FILTER (WHERE output_tokens > 0) AS completed,
                  coalesce(min(start_ns), (SELECT min(start_ns) FROM llm_steps)) AS span_start,
                  (SELECT max(t_ns) FROM llm_tokens) AS span_end
           FROM llm_per_request"""
    )[0]
    span_ns = None
    if counts["span_start"] is not None and counts["span_end"] is not None:
        span_ns = int(counts["span_end"] - counts["span_start"])
    seconds = span_ns / 1e9 if span_ns else None
    return {
        "requests": int(counts["requests"]),
        "output_tokens": int(counts["output_tokens"]),
        "ttft_ns": summarize(db, "SELECT ttft_ns AS v FROM llm_per_request"),
        "tpot_ns": summarize(db, "SELECT tpot_ns AS v FROM llm_per_request"),
        "itl_ns": summarize(db, "SELECT itl_ns AS v FROM llm_itl"),
        "e2e_ns": summarize(db, "SELECT e2e_ns AS v FROM llm_per_request"),
        "span_ns": span_ns,
        "output_tokens_per_s": counts["output_tokens"] / seconds if seconds else None,
        "requests_per_s": counts["completed"] / seconds if seconds else None,
    }
