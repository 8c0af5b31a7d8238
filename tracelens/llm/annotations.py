"""What the ``llm.*`` annotation ranges of a trace hold, and what in them is malformed.

The convention is written by :mod:`tracelens.annotate` (see there). The ranges become the
derived ``llm_*`` tables of :mod:`tracelens.derived.llm_annotations` (``llm_requests``,
``llm_steps``, ``llm_tokens`` and the stages between); this module counts what they hold
and turns anything that does not follow the convention into a warning, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.llm_annotations import (
    LLM_RAW,
    LLM_REQUEST_RANGES,
    LLM_REQUESTS,
    LLM_STEP_MEMBERS,
    LLM_STEP_MEMBERS_ALL,
    LLM_STEP_RANGES,
    LLM_STEPS,
    LLM_TOKENS,
)

_BAD_NAMES_SQL = "SELECT name FROM llm_raw WHERE meant AND kind = '' ORDER BY start_ns"
# How many offending names a warning quotes.
_EXAMPLES = 3


@dataclass
class LlmAnnotations:
    """What was found; the tables themselves live in the trace database's connection."""

    request_ranges: int
    prefill_steps: int
    decode_steps: int
    warnings: list[str] = field(default_factory=list)

    @property
    def present(self) -> bool:
        return bool(self.request_ranges or self.prefill_steps or self.decode_steps)


def parse_annotations(db: TraceDB) -> LlmAnnotations:
    """Build the ``llm_*`` tables in ``db`` and say what was found (once per TraceDB)."""
    return db.memo("llm_annotations", lambda: _parse(db))


def _examples(db: TraceDB, sql: str) -> str:
    names = [r[0] for r in db.rows(sql + f" LIMIT {_EXAMPLES}")]
    return ", ".join(repr(n) for n in names)


def _parse(db: TraceDB) -> LlmAnnotations:
    require(
        db,
        LLM_RAW,
        LLM_REQUEST_RANGES,
        LLM_REQUESTS,
        LLM_STEP_RANGES,
        LLM_STEP_MEMBERS_ALL,
        LLM_STEP_MEMBERS,
        LLM_STEPS,
        LLM_TOKENS,
    )
    # Every llm_* table is drawn from llm_raw alone, so without llm.* ranges (most traces)
    # each check below finds nothing and each count is 0: one query instead of thirteen.
    if not db.scalar("SELECT count(*) FROM llm_raw"):
        return LlmAnnotations(0, 0, 0, [])
    warnings: list[str] = []
    bad_names = db.scalar("SELECT count(*) FROM llm_raw WHERE meant AND kind = ''")
    if bad_names:
        warnings.append(
            f"{bad_names:,} annotation ranges do not follow the llm.request[<rid>] / "
            f"llm.prefill[<rid>,...] / llm.decode[<rid>,...] convention and were ignored "
            f"(e.g. {_examples(db, _BAD_NAMES_SQL)})"
        )
    bad_times = db.scalar(
        "SELECT count(*) FROM llm_raw WHERE kind <> '' AND (end_ns IS NULL OR end_ns < start_ns)"
    )
    if bad_times:
        warnings.append(f"{bad_times:,} llm.* ranges without a valid end time were ignored")
    bad_rids = db.scalar(
        "SELECT count(*) FROM llm_raw WHERE kind = 'request' "
        "AND (trim(body) = '' OR contains(body, ','))"
    )
    if bad_rids:
        warnings.append(
            f"{bad_rids:,} llm.request ranges carry an empty id or a list of ids; "
            "a request range names exactly one request, so they were ignored"
        )
    dup = db.dicts(
        "SELECT rid, count(*) AS n FROM llm_request_ranges GROUP BY rid HAVING n > 1 ORDER BY rid"
    )
    if dup:
        warnings.append(
            f"{len(dup):,} request ids have more than one llm.request range "
            f"(e.g. {', '.join(repr(d['rid']) for d in dup[:_EXAMPLES])}); the earliest is used"
        )
    empty_ids = db.scalar("SELECT count(*) FROM llm_step_members_all WHERE rid = ''")
    if empty_ids:
        warnings.append(
            f"{empty_ids:,} empty request ids in llm.prefill/llm.decode names were ignored"
        )
    repeated = db.scalar(
        """SELECT count(*) FROM (SELECT step_id, rid FROM llm_step_members_all WHERE rid <> ''
           GROUP BY step_id, rid HAVING count(*) > 1)"""
    )
    if repeated:
        warnings.append(
            f"{repeated:,} steps list the same request id twice; it counts as one token"
        )
    empty_steps = db.scalar(
        "SELECT count(*) FROM llm_step_ranges WHERE step_id NOT IN "
        "(SELECT step_id FROM llm_step_members)"
    )
    if empty_steps:
        warnings.append(f"{empty_steps:,} prefill/decode steps list no request id and were ignored")
    warnings += _consistency_warnings(db)
    counts = db.rows(
        """SELECT (SELECT count(*) FROM llm_requests),
                  (SELECT count(*) FROM llm_steps WHERE kind = 'prefill'),
                  (SELECT count(*) FROM llm_steps WHERE kind = 'decode')"""
    )[0]
    return LlmAnnotations(int(counts[0]), int(counts[1]), int(counts[2]), warnings)


def _consistency_warnings(db: TraceDB) -> list[str]:
    """Requests whose ranges contradict each other: metrics stay defined where they can."""
    checks = [
        (
            """SELECT DISTINCT rid FROM llm_tokens
               WHERE rid NOT IN (SELECT rid FROM llm_requests) ORDER BY rid""",
            "requests have steps but no llm.request range, so their TTFT and end-to-end "
            "latency are unknown (TPOT and ITL are still measured)",
        ),
        (
            """SELECT rid FROM llm_requests
               WHERE rid NOT IN (SELECT rid FROM llm_tokens) ORDER BY rid""",
            "requests have an llm.request range but no prefill/decode step lists them "
            "(no output tokens); they count as requests but not in the token metrics",
        ),
        (
            """SELECT rid FROM llm_tokens GROUP BY rid
               HAVING count(*) FILTER (WHERE kind = 'prefill') = 0 ORDER BY rid""",
            "requests have decode steps but no prefill step, so their TTFT is unknown",
        ),
        (
            """SELECT rid FROM llm_tokens GROUP BY rid
               HAVING min(t_ns) < min(t_ns) FILTER (WHERE kind = 'prefill') ORDER BY rid""",
            "requests emit a decode token before their first prefill step ends; "
            "TTFT still uses the first prefill step",
        ),
        (
            """SELECT r.rid FROM llm_requests r JOIN llm_tokens t USING (rid)
               GROUP BY r.rid, r.start_ns, r.end_ns
               HAVING min(t.step_start_ns) < r.start_ns OR max(t.t_ns) > r.end_ns
               ORDER BY r.rid""",
            "requests have steps outside their llm.request range (the range opens too late "
            "or closes too early); latencies use the range as recorded",
        ),
    ]
    out: list[str] = []
    for sql, text in checks:
        rids = [r[0] for r in db.rows(sql)]
        if rids:
            shown = ", ".join(repr(r) for r in rids[:_EXAMPLES])
            more = f" and {len(rids) - _EXAMPLES:,} more" if len(rids) > _EXAMPLES else ""
            out.append(f"{len(rids):,} {text}: {shown}{more}")
    return out
