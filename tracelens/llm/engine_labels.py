"""Read the step labels vLLM and SGLang write into their own profiler traces.

Both engines wrap every forward step in a ``record_function`` range whose name says what the
step scheduled. This module turns those host ranges of the canonical ``ranges`` table into
one row per engine step (temporary table ``engine_step_labels``), in SQL:

- vLLM, detailed: ``execute_{T}_context_{C}(sq{Σq}sk{Σk}sqsq{Σq²}sqsk{Σq·k})_generation_{G}(
  sq{Σq}sk{Σk}sqsq…sqsk…)``: a step that scheduled ``T`` tokens, ``C`` requests in prefill
  (context) with ``Σq`` new and ``Σk`` total (cached + new) tokens, and ``G`` requests in
  decode (``Σq`` > ``G`` with speculative decoding);
- vLLM, short: ``execute_context_{C}({Σq})_generation_{G}({Σq})``;
- SGLang: ``step[EXTEND bs={B} toks={T}]``, ``step[DECODE bs={B}]``, ``step[MIXED bs={B}]``,
  optionally with ``c=``/``g=`` request counts and ``c_sq=``/``c_sk=``/``g_sq=``/``g_sk=``
  token sums (builds that add them); ``IDLE`` steps run no request.

A step may carry both an SGLang and a vLLM-style label (SGLang builds that add the
``execute_…`` range): ranges of either grammar on one thread that overlap are one step. Its
counts come from the label that says most (the detailed ``execute_…`` one has the context
tokens), its source is SGLang when an SGLang label is among them. Steps that schedule no
request, and SGLang modes other than the three (speculative ``TARGET_VERIFY``,
``DRAFT_EXTEND``, …) are left out, and labels that look like either grammar but do not
parse are reported: warnings, never exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracelens.core.tracedb import TraceDB
from tracelens.llm.model import Engine

_N = "([0-9]+)"
VLLM_DETAILED = (
    rf"^execute_{_N}_context_{_N}\(sq{_N}sk{_N}sqsq[0-9]+sqsk[0-9]+\)"
    rf"_generation_{_N}\(sq{_N}sk{_N}sqsq[0-9]+sqsk[0-9]+\)$"
)
VLLM_SHORT = rf"^execute_context_{_N}\({_N}\)_generation_{_N}\({_N}\)$"
SGLANG = r"^step\[([A-Z_]+)((?: [^\]]*)?)\]$"
# Names that mean to be an engine step label; those no grammar reads are reported.
INTENT = r"^(execute_([0-9]+_context_|context_|new_[0-9]+_cached_)|step\[[A-Z])"
SGLANG_PHASES = {"EXTEND": "prefill", "DECODE": "decode", "MIXED": "mixed", "IDLE": "idle"}
_EXAMPLES = 3


def _field(key: str) -> str:
    """An integer ``key=N`` of an SGLang label body (NULL when absent)."""
    return f"TRY_CAST(nullif(regexp_extract(body, '(?:^| ){key}=([0-9]+)', 1), '') AS BIGINT)"


_LABELS_SQL = f"""
CREATE OR REPLACE TEMP TABLE engine_label_rows AS
WITH host AS (
    SELECT range_id, pid, tid, name, start_ns, end_ns FROM ranges
    WHERE device_id IS NULL AND end_ns >= start_ns
      AND (starts_with(name, 'execute_') OR starts_with(name, 'step['))
),
raw AS (
    SELECT *,
           regexp_extract(name, '{VLLM_DETAILED}',
                          ['t', 'c', 'csq', 'csk', 'g', 'gsq', 'gsk']) AS vd,
           regexp_extract(name, '{VLLM_SHORT}', ['c', 'csq', 'g', 'gsq']) AS vs,
           regexp_extract(name, '{SGLANG}', 1) AS mode,
           regexp_extract(name, '{SGLANG}', 2) AS body,
           regexp_matches(name, '{INTENT}') AS meant
    FROM host
),
typed AS (
    SELECT range_id, pid, tid, name, start_ns, end_ns, meant, mode,
           CASE WHEN vd.t <> '' THEN 'vllm_detailed' WHEN vs.c <> '' THEN 'vllm_short'
                WHEN mode <> '' THEN 'sglang' END AS grammar,
           TRY_CAST(coalesce(nullif(vd.c, ''), nullif(vs.c, '')) AS BIGINT) AS v_c,
           TRY_CAST(coalesce(nullif(vd.g, ''), nullif(vs.g, '')) AS BIGINT) AS v_g,
           TRY_CAST(coalesce(nullif(vd.csq, ''), nullif(vs.csq, '')) AS BIGINT) AS v_csq,
           TRY_CAST(coalesce(nullif(vd.gsq, ''), nullif(vs.gsq, '')) AS BIGINT) AS v_gsq,
           TRY_CAST(nullif(vd.csk, '') AS BIGINT) AS v_csk,
           TRY_CAST(nullif(vd.gsk, '') AS BIGINT) AS v_gsk,
           {_field("bs")} AS s_bs, {_field("toks")} AS s_toks,
           {_field("c")} AS s_c, {_field("g")} AS s_g,
           {_field("c_sq")} AS s_csq, {_field("c_sk")} AS s_csk,
           {_field("g_sq")} AS s_gsq, {_field("g_sk")} AS s_gsk
    FROM raw
)
SELECT range_id, pid, tid, name, start_ns, end_ns, meant, grammar, mode,
       CASE WHEN grammar = 'sglang' THEN 'sglang' WHEN grammar IS NOT NULL THEN 'vllm'
            END AS engine,
       CASE
           WHEN grammar LIKE 'vllm%' THEN
               CASE WHEN v_c > 0 AND v_g > 0 THEN 'mixed' WHEN v_c > 0 THEN 'prefill'
                    WHEN v_g > 0 THEN 'decode' ELSE 'idle' END
           WHEN grammar = 'sglang' THEN
               CASE mode WHEN 'EXTEND' THEN 'prefill' WHEN 'DECODE' THEN 'decode'
                         WHEN 'MIXED' THEN 'mixed' WHEN 'IDLE' THEN 'idle' END
       END AS phase,
       -- the label that says most wins when two label one step
       CASE grammar WHEN 'vllm_detailed' THEN 3 WHEN 'vllm_short' THEN 2 ELSE 1 END AS says,
       CASE WHEN grammar LIKE 'vllm%' THEN v_c + v_g ELSE s_bs END AS requests,
       CASE WHEN grammar LIKE 'vllm%' THEN v_g
            WHEN mode = 'EXTEND' THEN 0 WHEN mode = 'DECODE' THEN s_bs ELSE s_g END
           AS decode_requests,
       CASE WHEN grammar LIKE 'vllm%' THEN v_csq
            WHEN mode = 'EXTEND' THEN coalesce(s_csq, s_toks) WHEN mode = 'DECODE' THEN 0
            ELSE s_csq END AS prefill_tokens,
       CASE WHEN grammar LIKE 'vllm%' THEN v_gsq
            WHEN mode = 'EXTEND' THEN 0 WHEN mode = 'DECODE' THEN coalesce(s_gsq, s_bs)
            ELSE coalesce(s_gsq, s_g) END AS decode_tokens,
       CASE WHEN grammar LIKE 'vllm%' THEN v_csk + v_gsk
            WHEN mode = 'EXTEND' THEN s_csk WHEN mode = 'DECODE' THEN s_gsk
            ELSE s_csk + s_gsk END AS context_tokens
FROM typed
WHERE grammar IS NOT NULL OR meant
"""

# Overlapping labels on one thread are one step: a label starts a new step when it begins
# at or after the end of every earlier label on its thread.
_CLUSTER_SQL = """
CREATE OR REPLACE TEMP TABLE engine_label_clusters AS
WITH ordered AS (
    SELECT *, max(end_ns) OVER (PARTITION BY pid, tid ORDER BY start_ns, end_ns DESC, range_id
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM engine_label_rows WHERE grammar IS NOT NULL
),
flagged AS (
    SELECT *, sum(CASE WHEN prev_end IS NULL OR start_ns >= prev_end THEN 1 ELSE 0 END)
                  OVER (PARTITION BY pid, tid ORDER BY start_ns, end_ns DESC, range_id) AS k
    FROM ordered
)
SELECT pid, tid, k, min(start_ns) AS range_start_ns, max(end_ns) AS range_end_ns,
       count(*) AS labels,
       bool_or(engine = 'sglang') AS has_sglang,
       count(DISTINCT phase) AS phases,
       arg_max(phase, says * 1000000000000 - range_id) AS phase,
       arg_max(requests, says * 1000000000000 - range_id) AS requests,
       arg_max(decode_requests, says * 1000000000000 - range_id) AS decode_requests,
       arg_max(prefill_tokens, says * 1000000000000 - range_id) AS prefill_tokens,
       arg_max(decode_tokens, says * 1000000000000 - range_id) AS decode_tokens,
       arg_max(context_tokens, says * 1000000000000 - range_id) AS context_tokens,
       arg_max(mode, CASE WHEN engine = 'sglang' THEN 1 ELSE 0 END) AS sglang_mode
FROM flagged GROUP BY pid, tid, k
"""

_STEPS_SQL = """
CREATE OR REPLACE TEMP TABLE engine_step_labels AS
SELECT row_number() OVER (ORDER BY range_start_ns, range_end_ns, pid, tid) AS step_id,
       pid, tid, range_start_ns, range_end_ns,
       CASE WHEN has_sglang THEN 'sglang' ELSE 'vllm' END AS engine,
       phase, requests, decode_requests, prefill_tokens, decode_tokens, context_tokens
FROM engine_label_clusters WHERE phase IN ('prefill', 'decode', 'mixed')
"""


@dataclass
class EngineLabels:
    """What was found; the table itself lives in the trace database's connection."""

    steps: int
    source: Engine | None  # None when no step label was read
    warnings: list[str] = field(default_factory=list)


def read_engine_labels(db: TraceDB) -> EngineLabels:
    """Build ``engine_step_labels`` in ``db`` and say what was found."""
    db.con.execute(_LABELS_SQL)
    db.con.execute(_CLUSTER_SQL)
    db.con.execute(_STEPS_SQL)
    # The clusters and steps are drawn from engine_label_rows alone: without a label (most
    # traces) every check below finds nothing and there are no steps.
    if not db.scalar("SELECT count(*) FROM engine_label_rows"):
        return EngineLabels(0, None, [])
    warnings: list[str] = []
    bad = db.dicts(
        "SELECT name, count(*) OVER () AS n FROM engine_label_rows WHERE grammar IS NULL "
        f"ORDER BY start_ns, range_id LIMIT {_EXAMPLES}"
    )
    if bad:
        shown = ", ".join(repr(r["name"]) for r in bad)
        warnings.append(
            f"{bad[0]['n']:,} ranges look like vLLM or SGLang step labels but follow neither "
            f"grammar and were ignored (e.g. {shown})"
        )
    idle = db.scalar("SELECT count(*) FROM engine_label_clusters WHERE phase = 'idle'")
    if idle:
        warnings.append(
            f"{idle:,} engine step{'s' if idle > 1 else ''} scheduled no request (idle or "
            "dummy steps) and are left out"
        )
    other = db.rows(
        """SELECT sglang_mode, count(*) FROM engine_label_clusters WHERE phase IS NULL
           GROUP BY 1 ORDER BY 2 DESC, 1"""
    )
    if other:
        modes = ", ".join(f"{m} ({n:,})" for m, n in other)
        warnings.append(
            f"SGLang steps of modes other than EXTEND, DECODE and MIXED are left out: {modes}"
        )
    disagree = db.scalar(
        "SELECT count(*) FROM engine_label_clusters WHERE phases > 1 "
        "AND phase IN ('prefill', 'decode', 'mixed')"
    )
    if disagree:
        warnings.append(
            f"{disagree:,} steps carry two labels that disagree on the phase; the "
            "execute_… label, which says more, is used"
        )
    counts = db.rows("SELECT count(*), bool_or(engine = 'sglang') FROM engine_step_labels")[0]
    steps = int(counts[0])
    source: Engine | None = None if not steps else ("sglang" if counts[1] else "vllm")
    return EngineLabels(steps, source, warnings)
