"""``llm_*`` tables from the ``llm.request[...]`` / ``llm.prefill[...]`` / ``llm.decode[...]``
annotation ranges (the convention :mod:`tracelens.annotate` writes).

NVTX ranges and ``record_function`` ranges alike, all in SQL so it scales with the trace.
The three that the metrics read:

- ``llm_requests``: the first ``llm.request[rid]`` range per id;
- ``llm_steps``: prefill and decode steps that list at least one request;
- ``llm_tokens``: one row per output token, at the end of each step that lists the
  request, numbered from 1 per request.

The others are the stages between, kept so :mod:`tracelens.llm.annotations` can say what
did not follow the convention.
"""

from __future__ import annotations

from ingest.schema import Column
from tracelens.annotate import NVTX_DOMAIN
from tracelens.derived.table import DerivedTable

# A well-formed name; group 1 is the kind, group 2 the comma-separated request ids.
NAME_PATTERN = r"^llm\.(request|prefill|decode)\[([^\[\]]*)\]$"
# Names that clearly mean to follow the convention; those not matching NAME_PATTERN are
# reported. Other ``llm.*`` names belong to the user and are left alone.
INTENT_PATTERN = r"^llm\.(request|prefill|decode)([^A-Za-z0-9_]|$)"

_START = Column("start_ns", "BIGINT", "Range start (ns on the trace clock)")
_END = Column("end_ns", "BIGINT", "Range end (ns on the trace clock)")
_RID = Column("rid", "VARCHAR", "Request id, as written in the range name")
_STEP_ID = Column("step_id", "BIGINT", "Step number, in (start, end) order")
_KIND = Column("kind", "VARCHAR", "prefill or decode")

# Host ranges only: a CUDA Chrome trace repeats each record_function on the GPU timeline
# as a gpu_user_annotation (device_id set), which would double every step. Under nsys with
# torch's emit_nvtx, record_function ranges also become NVTX ranges in the default domain,
# beside the ones tracelens.annotate emits in its own domain: when that domain is present,
# it alone is read. One range recorded twice counts once.
LLM_RAW = DerivedTable(
    "llm_raw",
    "Host ranges named llm.*, each once, split into kind and body by the naming convention",
    (
        Column("range_id", "BIGINT", "The range (ranges.range_id; the lowest of duplicates)"),
        Column("name", "VARCHAR", "Range name"),
        _START,
        _END,
        Column("kind", "VARCHAR", "request, prefill or decode; '' if the name is malformed"),
        Column("body", "VARCHAR", "Text between the brackets: the request id(s)"),
        Column("meant", "BOOLEAN", "The name means to follow the convention"),
    ),
    f"""
    WITH host AS (
        SELECT * FROM ranges WHERE device_id IS NULL AND name LIKE 'llm.%'
    )
    SELECT min(range_id) AS range_id, name, start_ns, end_ns,
           regexp_extract(name, '{NAME_PATTERN}', 1) AS kind,
           regexp_extract(name, '{NAME_PATTERN}', 2) AS body,
           regexp_matches(name, '{INTENT_PATTERN}') AS meant
    FROM host
    WHERE domain = '{NVTX_DOMAIN}'
       OR NOT EXISTS (SELECT 1 FROM host WHERE domain = '{NVTX_DOMAIN}')
    GROUP BY name, start_ns, end_ns
    """,
)

LLM_REQUEST_RANGES = DerivedTable(
    "llm_request_ranges",
    "Valid llm.request ranges (one id, an end time), numbered per request id",
    (
        _RID,
        _START,
        _END,
        Column("k", "BIGINT", "1 for the request's earliest range, 2 for the next, ..."),
    ),
    """
    SELECT trim(body) AS rid, start_ns, end_ns,
           row_number() OVER (PARTITION BY trim(body) ORDER BY start_ns, range_id) AS k
    FROM llm_raw
    WHERE kind = 'request' AND end_ns >= start_ns
      AND trim(body) <> '' AND NOT contains(body, ',')
    """,
    requires=(LLM_RAW,),
)

LLM_REQUESTS = DerivedTable(
    "llm_requests",
    "One row per request: its first llm.request range",
    (
        _RID,
        Column("start_ns", "BIGINT", "Request start"),
        Column("end_ns", "BIGINT", "Request end"),
    ),
    "SELECT rid, start_ns, end_ns FROM llm_request_ranges WHERE k = 1",
    requires=(LLM_REQUEST_RANGES,),
)

LLM_STEP_RANGES = DerivedTable(
    "llm_step_ranges",
    "Valid llm.prefill / llm.decode ranges (with an end time)",
    (_STEP_ID, _KIND, _START, _END, Column("body", "VARCHAR", "The listed request ids")),
    """
    SELECT row_number() OVER (ORDER BY start_ns, end_ns, range_id) AS step_id,
           kind, start_ns, end_ns, body
    FROM llm_raw WHERE kind IN ('prefill', 'decode') AND end_ns >= start_ns
    """,
    requires=(LLM_RAW,),
)

LLM_STEP_MEMBERS_ALL = DerivedTable(
    "llm_step_members_all",
    "Every request id a step lists, as written (empty ids and repeats included)",
    (_STEP_ID, Column("rid", "VARCHAR", "Request id, trimmed; '' for an empty one")),
    "SELECT step_id, trim(unnest(string_split(body, ','))) AS rid FROM llm_step_ranges",
    requires=(LLM_STEP_RANGES,),
)

LLM_STEP_MEMBERS = DerivedTable(
    "llm_step_members",
    "The requests in each step: non-empty ids, each once",
    (_STEP_ID, _RID),
    "SELECT DISTINCT step_id, rid FROM llm_step_members_all WHERE rid <> ''",
    requires=(LLM_STEP_MEMBERS_ALL,),
)

LLM_STEPS = DerivedTable(
    "llm_steps",
    "Prefill and decode steps that list at least one request",
    (
        _STEP_ID,
        _KIND,
        Column("start_ns", "BIGINT", "Step start"),
        Column("end_ns", "BIGINT", "Step end: when its tokens are out"),
        Column("n_requests", "BIGINT", "Requests in the step (batch size)"),
    ),
    """
    SELECT s.step_id, s.kind, s.start_ns, s.end_ns, count(m.rid) AS n_requests
    FROM llm_step_ranges s JOIN llm_step_members m USING (step_id)
    GROUP BY ALL
    """,
    requires=(LLM_STEP_RANGES, LLM_STEP_MEMBERS),
)

LLM_TOKENS = DerivedTable(
    "llm_tokens",
    "One row per output token: each request in each step emits one at the step's end",
    (
        _RID,
        _STEP_ID,
        _KIND,
        Column("step_start_ns", "BIGINT", "Start of the step"),
        Column("t_ns", "BIGINT", "Token time: end of the step"),
        Column("token_index", "BIGINT", "1 for the request's first token, 2 for the next, ..."),
    ),
    """
    SELECT m.rid, s.step_id, s.kind, s.start_ns AS step_start_ns, s.end_ns AS t_ns,
           row_number() OVER (PARTITION BY m.rid ORDER BY s.end_ns, s.step_id) AS token_index
    FROM llm_step_members m JOIN llm_steps s USING (step_id)
    """,
    requires=(LLM_STEP_MEMBERS, LLM_STEPS),
)
