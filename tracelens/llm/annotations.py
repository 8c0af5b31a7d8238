"""Parse ``llm.request[...]`` / ``llm.prefill[...]`` / ``llm.decode[...]`` ranges into tables.

The convention is written by :mod:`tracelens.annotate` (see there). This module turns the
host annotation ranges of the canonical ``ranges`` table (NVTX ranges or ``record_function``
ranges alike) into three temporary DuckDB tables, all in SQL so it scales with the trace:

- ``llm_requests(rid, start_ns, end_ns)``: the first ``llm.request[rid]`` range per id;
- ``llm_steps(step_id, kind, start_ns, end_ns, n_requests)``: prefill and decode steps;
- ``llm_tokens(rid, step_id, kind, step_start_ns, t_ns, token_index)``: one row per output
  token, at the end of each step that lists the request, numbered from 1 per request.

Anything that does not follow the convention becomes a warning, never an exception.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from tracelens.annotate import NVTX_DOMAIN
from tracelens.core.tracedb import TraceDB

# A well-formed name; group 1 is the kind, group 2 the comma-separated request ids.
NAME_PATTERN = r"^llm\.(request|prefill|decode)\[([^\[\]]*)\]$"
# Names that clearly mean to follow the convention; those not matching NAME_PATTERN are
# reported. Other ``llm.*`` names belong to the user and are left alone.
INTENT_PATTERN = r"^llm\.(request|prefill|decode)([^A-Za-z0-9_]|$)"
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


_parsed: weakref.WeakKeyDictionary[TraceDB, LlmAnnotations] = weakref.WeakKeyDictionary()


def parse_annotations(db: TraceDB) -> LlmAnnotations:
    """Build the ``llm_*`` tables in ``db`` (once per TraceDB) and say what was found."""
    cached = _parsed.get(db)
    if cached is not None:
        return cached
    result = _parse(db)
    _parsed[db] = result
    return result


def _examples(db: TraceDB, sql: str) -> str:
    names = [r[0] for r in db.rows(sql + f" LIMIT {_EXAMPLES}")]
    return ", ".join(repr(n) for n in names)


def _parse(db: TraceDB) -> LlmAnnotations:
    warnings: list[str] = []
    # Host ranges only: a CUDA Chrome trace repeats each record_function on the GPU
    # timeline as a gpu_user_annotation (device_id set), which would double every step.
    # Under nsys with torch's emit_nvtx, record_function ranges also become NVTX ranges in
    # the default domain, beside the ones tracelens.annotate emits in its own domain: when
    # that domain is present, it alone is read. One range recorded twice counts once.
    db.con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE llm_raw AS
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
        """
    )
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

    db.con.execute(
        """
        CREATE OR REPLACE TEMP TABLE llm_request_ranges AS
        SELECT trim(body) AS rid, start_ns, end_ns,
               row_number() OVER (PARTITION BY trim(body) ORDER BY start_ns, range_id) AS k
        FROM llm_raw
        WHERE kind = 'request' AND end_ns >= start_ns
          AND trim(body) <> '' AND NOT contains(body, ',')
        """
    )
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
    db.con.execute(
        """
        CREATE OR REPLACE TEMP TABLE llm_requests AS
        SELECT rid, start_ns, end_ns FROM llm_request_ranges WHERE k = 1
        """
    )

    db.con.execute(
        """
        CREATE OR REPLACE TEMP TABLE llm_step_ranges AS
        SELECT row_number() OVER (ORDER BY start_ns, end_ns, range_id) AS step_id,
               kind, start_ns, end_ns, body
        FROM llm_raw WHERE kind IN ('prefill', 'decode') AND end_ns >= start_ns
        """
    )
    db.con.execute(
        """
        CREATE OR REPLACE TEMP TABLE llm_step_members_all AS
        SELECT step_id, trim(unnest(string_split(body, ','))) AS rid FROM llm_step_ranges
        """
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
    db.con.execute(
        """
        CREATE OR REPLACE TEMP TABLE llm_step_members AS
        SELECT DISTINCT step_id, rid FROM llm_step_members_all WHERE rid <> ''
        """
    )
    db.con.execute(
        """
        CREATE OR REPLACE TEMP TABLE llm_steps AS
        SELECT s.step_id, s.kind, s.start_ns, s.end_ns, count(m.rid) AS n_requests
        FROM llm_step_ranges s JOIN llm_step_members m USING (step_id)
        GROUP BY ALL
        """
    )
    empty_steps = db.scalar(
        "SELECT count(*) FROM llm_step_ranges WHERE step_id NOT IN "
        "(SELECT step_id FROM llm_step_members)"
    )
    if empty_steps:
        warnings.append(f"{empty_steps:,} prefill/decode steps list no request id and were ignored")
    db.con.execute(
        """
        CREATE OR REPLACE TEMP TABLE llm_tokens AS
        SELECT m.rid, s.step_id, s.kind, s.start_ns AS step_start_ns, s.end_ns AS t_ns,
               row_number() OVER (PARTITION BY m.rid ORDER BY s.end_ns, s.step_id) AS token_index
        FROM llm_step_members m JOIN llm_steps s USING (step_id)
        """
    )
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
