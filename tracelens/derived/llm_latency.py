"""``llm_per_request``, ``llm_itl``, ``llm_itl_stalls``: per-request latencies and the gaps
between tokens, with vLLM's definitions (see :mod:`tracelens.llm.latency_metrics`)."""

from __future__ import annotations

from ingest.schema import Column
from tracelens.derived.llm_annotations import LLM_REQUESTS, LLM_STEPS, LLM_TOKENS
from tracelens.derived.table import DerivedTable

_RID = Column("rid", "VARCHAR", "Request id")

LLM_PER_REQUEST = DerivedTable(
    "llm_per_request",
    "One row per request id seen in a request range or a step, with its latencies",
    (
        _RID,
        Column("start_ns", "BIGINT", "Start of its llm.request range; NULL without one"),
        Column("end_ns", "BIGINT", "End of that range, else its last token time"),
        Column("output_tokens", "BIGINT", "Tokens it received"),
        Column("first_token_ns", "BIGINT", "Time of its first token"),
        Column("last_token_ns", "BIGINT", "Time of its last token"),
        Column("ttft_ns", "BIGINT", "Time to first token: first prefill end - request start"),
        Column(
            "tpot_ns",
            "DOUBLE",
            "Time per output token after the first; NULL with fewer than 2 tokens",
        ),
        Column("e2e_ns", "BIGINT", "End-to-end latency: end_ns - start_ns"),
        Column("queue_ns", "BIGINT", "Queueing: first prefill start - request start"),
        Column("prefill_ns", "BIGINT", "Duration of its first prefill step"),
    ),
    """
    WITH tok AS (
        SELECT rid, count(*) AS output_tokens, min(t_ns) AS first_token_ns,
               max(t_ns) AS last_token_ns,
               min(t_ns) FILTER (WHERE kind = 'prefill') AS first_prefill_end_ns,
               arg_min(step_start_ns, t_ns) FILTER (WHERE kind = 'prefill')
                   AS first_prefill_start_ns
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
    """,
    requires=(LLM_REQUESTS, LLM_TOKENS),
)

LLM_ITL = DerivedTable(
    "llm_itl",
    "Inter-token gaps: one row per token after the first of each request",
    (
        _RID,
        Column("token_index", "BIGINT", "The later token's number (2, 3, ...)"),
        Column("step_id", "BIGINT", "The step that emitted it (llm_steps.step_id)"),
        Column("kind", "VARCHAR", "That step's kind: prefill or decode"),
        Column("prev_t_ns", "BIGINT", "Time of the token before"),
        Column("t_ns", "BIGINT", "Time of this token"),
        Column("itl_ns", "BIGINT", "The gap: t_ns - prev_t_ns"),
    ),
    """
    SELECT * FROM (
        SELECT rid, token_index, step_id, kind,
               lag(t_ns) OVER (PARTITION BY rid ORDER BY token_index) AS prev_t_ns, t_ns,
               t_ns - lag(t_ns) OVER (PARTITION BY rid ORDER BY token_index) AS itl_ns
        FROM llm_tokens
    ) WHERE itl_ns IS NOT NULL
    """,
    requires=(LLM_TOKENS,),
)

# A decode gap is stalled when a whole prefill step of other requests ran inside it.
LLM_ITL_STALLS = DerivedTable(
    "llm_itl_stalls",
    "Decode inter-token gaps with the prefill steps that ran wholly inside them",
    (
        _RID,
        Column("token_index", "BIGINT", "The later token's number"),
        Column("prev_t_ns", "BIGINT", "Time of the token before"),
        Column("t_ns", "BIGINT", "Time of this token"),
        Column("itl_ns", "BIGINT", "The gap (ns)"),
        Column("prefills", "BIGINT", "Prefill steps inside the gap; 0: not stalled"),
        Column("prefill_ns", "HUGEINT", "Their summed duration (ns)"),
    ),
    """
    SELECT i.rid, i.token_index, i.prev_t_ns, i.t_ns, i.itl_ns,
           count(p.step_id) AS prefills, coalesce(sum(p.end_ns - p.start_ns), 0) AS prefill_ns
    FROM llm_itl i
    LEFT JOIN llm_steps p
      ON p.kind = 'prefill' AND p.start_ns >= i.prev_t_ns AND p.end_ns <= i.t_ns
    WHERE i.kind = 'decode'
    GROUP BY i.rid, i.token_index, i.prev_t_ns, i.t_ns, i.itl_ns
    """,
    requires=(LLM_ITL, LLM_STEPS),
)
