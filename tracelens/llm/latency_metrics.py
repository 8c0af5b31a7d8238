"""Per-request and aggregate LLM serving latencies, with vLLM's definitions.

Per request (times from the ``llm_*`` tables of :mod:`tracelens.derived.llm_annotations`;
the per-request rows are ``llm_per_request``, the gaps ``llm_itl``, both in
:mod:`tracelens.derived.llm_latency`):

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

import msgspec

from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.llm_annotations import LLM_STEPS, LLM_TOKENS
from tracelens.derived.llm_latency import LLM_ITL, LLM_PER_REQUEST
from tracelens.llm.model import AnnotatedRequest, Distribution, LatencySummary

# The percentiles of every Distribution (its fields p50 ... p99).
PERCENTILES = (50, 90, 95, 99)


def summarize(db: TraceDB, values_sql: str) -> Distribution:
    """count, mean, p50/p90/p95/p99 and max of column ``v`` of ``values_sql`` (NULLs left out).

    Values are nanoseconds as floats (a mean or an interpolated percentile need not be a
    whole nanosecond); all but ``count`` are ``None`` when there is no value.
    """
    pct = ", ".join(f"quantile_cont(v, {p / 100}) AS p{p}" for p in PERCENTILES)
    row = db.dicts(
        f"SELECT count(v) AS count, avg(v) AS mean, {pct}, max(v) AS max "
        f"FROM ({values_sql}) WHERE v IS NOT NULL"
    )[0]
    values = {
        k: int(v) if k == "count" else None if v is None else float(v) for k, v in row.items()
    }
    return msgspec.convert(values, Distribution)


def per_request(db: TraceDB) -> list[AnnotatedRequest]:
    """One row per request."""
    require(db, LLM_PER_REQUEST)
    rows = db.dicts(
        "SELECT * FROM llm_per_request ORDER BY start_ns NULLS LAST, first_token_ns, rid"
    )
    for r in rows:
        for k, v in r.items():
            if isinstance(v, float) and k != "tpot_ns":
                r[k] = int(v)
        r["output_tokens"] = int(r["output_tokens"])
    return msgspec.convert(rows, list[AnnotatedRequest])


def latency_summary(db: TraceDB) -> LatencySummary:
    """The issue's ``llm`` numbers: request/token counts, latency summaries, throughput."""
    require(db, LLM_ITL, LLM_PER_REQUEST, LLM_STEPS, LLM_TOKENS)
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
    return LatencySummary(
        requests=int(counts["requests"]),
        output_tokens=int(counts["output_tokens"]),
        ttft_ns=summarize(db, "SELECT ttft_ns AS v FROM llm_per_request"),
        tpot_ns=summarize(db, "SELECT tpot_ns AS v FROM llm_per_request"),
        itl_ns=summarize(db, "SELECT itl_ns AS v FROM llm_itl"),
        e2e_ns=summarize(db, "SELECT e2e_ns AS v FROM llm_per_request"),
        span_ns=span_ns,
        output_tokens_per_s=counts["output_tokens"] / seconds if seconds else None,
        requests_per_s=counts["completed"] / seconds if seconds else None,
    )
