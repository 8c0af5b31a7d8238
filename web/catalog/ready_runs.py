"""Ready runs as last read from the catalog, checked against it on every use.

Loading a run through the ORM (a session, its transaction, the whole row with its JSON
columns decoded) was half the server's CPU per request on the pages and JSON that
dashboards poll. A ready run's row changes only when it is edited, re-ingested or
deleted, and each of these writes a new ``updated_at`` (or ``status``, or removes the
row). So a kept copy is served when one narrow query of those three columns still
matches it, from any server process; anything else is read afresh. A run that is not
ready (its progress changes all the time) is never kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Engine, bindparam, select

from web.catalog.models import Run, RunStatus

# Enough for the runs dashboards and tickets poll at once. Each is one row, a job's with
# its ranks' list (tens of kB for a thousand ranks), so the bound is kept small.
_KEPT = 128

_STAMP_BY_ID = select(Run.status, Run.generation, Run.updated_at).where(
    Run.id == bindparam("run_id")
)


class ReadyRuns:
    """Kept copies of ready runs (detached, read-only), newest use last."""

    def __init__(self, engine: Engine, load: Callable[[str], Run | None]) -> None:
        self._engine = engine
        self._load = load
        self._kept: OrderedDict[str, tuple[tuple[str, int, datetime], Run]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, run_id: str) -> Run | None:
        with self._lock:
            kept = self._kept.get(run_id)
        if kept is not None and self._stamp(run_id) == kept[0]:
            with self._lock:
                self._kept.move_to_end(run_id)
            return kept[1]
        run = self._load(run_id)
        with self._lock:
            if run is not None and run.status == RunStatus.READY:
                self._kept[run_id] = ((run.status, run.generation, run.updated_at), run)
                self._kept.move_to_end(run_id)
                while len(self._kept) > _KEPT:
                    self._kept.popitem(last=False)
            else:
                self._kept.pop(run_id, None)
        return run

    def _stamp(self, run_id: str) -> tuple[str, int, datetime] | None:
        with self._engine.connect() as con:
            row = con.execute(_STAMP_BY_ID, {"run_id": run_id}).first()
        return None if row is None else (row[0], row[1], row[2])
