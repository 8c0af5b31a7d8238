"""What a run's trace database keeps beyond the canonical tables, written once it is
analysed: what ingest said about the trace, the timeline tables, the flame graph's tree.

One function for a single trace's ingest and each rank of a job's (embedded or as a queue
job), so every database the web serves holds the same. It takes the :class:`TraceDB` the
analysis used, so the flame graph reuses the kernel attribution the report built.
"""

from __future__ import annotations

import json

import duckdb

from ingest import LoadedTrace
from ingest.redaction import redact
from ingest.schema import set_info
from tracelens.core.tracedb import TraceDB
from tracelens.flame_graph import store_call_path_tree
from web.timeline_store import build_timeline_tables

# The trace_info fact holding what ingest said about the trace (skipped events, ...).
INGEST_NOTES_FACT = "web_ingest_notes"


def stored_ingest_notes(con: duckdb.DuckDBPyConnection) -> list[str]:
    """What ingest said about a run's trace, as kept in its database ([] if never kept)."""
    row = con.execute("SELECT value FROM trace_info WHERE key = ?", [INGEST_NOTES_FACT]).fetchone()
    return [str(n) for n in json.loads(row[0])] if row else []


def keep_run_tables(loaded: LoadedTrace, db: TraceDB) -> None:
    """Write what the web reads of an analysed trace into its database, then checkpoint."""
    # A restricted analysis (web.run_restriction) starts again from the database, and its
    # report, as the CLI's, opens with ingest's notes: keep them there.
    set_info(loaded.con, {INGEST_NOTES_FACT: json.dumps(redact(loaded.notes))})
    build_timeline_tables(loaded.con)
    store_call_path_tree(db)
    loaded.con.execute("CHECKPOINT")
