"""Background ingestion: a small thread pool that turns queued runs into ready ones.

Ingest is DuckDB work (which releases the GIL), so threads keep the service one process
with one catalog connection pool. A run becomes ``ready`` only after its trace database,
timeline tables and report file are complete and its findings are in the catalog, all
published by one guarded UPDATE. A restart mid-ingest leaves the run ``ingesting``; the
next start re-queues it (or fails it after repeated interruptions), never shows it ready.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ingest import TraceInputError, detect_format, load_trace
from ingest.limits import IngestLimits
from ingest.redacted_copy import REDACTION_VERSION, redact_in_place
from ingest.redaction import redact
from tracelens.core.out_of_memory import is_out_of_memory, out_of_memory_message
from tracelens.core.tracedb import TraceDB
from tracelens.llm.slo import parse_slo
from tracelens.report import ReportInputs, build_report
from web.catalog import Catalog, Run
from web.catalog import runs as catalog_runs
from web.ingest_progress import IngestProgress
from web.job_ingest import build_job_run, catalog_facts, is_job, kept_sources
from web.run_tables import keep_run_tables
from web.settings import Settings
from web.storage import RunFiles, write_json_atomic

log = logging.getLogger("tracelens.web.ingest")

# Orphaned run directories younger than this may still be an upload in flight.
ORPHAN_AGE_S = 600.0


def remove_orphan_dirs(runs_dir: Path, known: set[str]) -> None:
    """Run directories no catalog row owns (an upload cut off between moving its file
    in and inserting its row). Recent ones may belong to an upload in flight in
    another server process, so only those older than ORPHAN_AGE_S go."""
    if not runs_dir.is_dir():
        return
    now = time.time()
    for d in runs_dir.iterdir():
        if d.is_dir() and d.name not in known and now - d.stat().st_mtime > ORPHAN_AGE_S:
            log.warning("removing run directory %s: no catalog row owns it", d.name)
            RunFiles(runs_dir, d.name).remove()


def internal_error_message(label: str, exc: BaseException) -> str:
    """An unexpected failure as a run shows it: one line, never a traceback. Running out
    of memory is the server's limit, not a bug, and says which setting raises it."""
    if is_out_of_memory(exc):
        return out_of_memory_message(exc, label)
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{label}: internal error ({type(exc).__name__}: {first})"


class IngestWorker:
    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        on_published: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self.on_published = on_published
        self._pool = ThreadPoolExecutor(
            max_workers=settings.ingest_workers, thread_name_prefix="tracelens-ingest"
        )
        # Each concurrent ingest gets its share of the machine's memory.
        self.limits = dataclasses.replace(
            IngestLimits.from_env(concurrent=settings.ingest_workers),
            max_decompressed=settings.max_decompressed_bytes,
        )
        self._lock = threading.Lock()
        self._pending: dict[str, Future[None]] = {}
        # Runs queued again while their ingest was still finishing: a run is ``ready`` to
        # clients from its publishing UPDATE, before its thread has returned, so a re-queue
        # in that window (new objectives, a re-ingest) must not be dropped as a duplicate.
        self._again: set[str] = set()

    def start(self) -> None:
        """Re-queue runs a previous process left mid-ingest, and queue every queued run."""
        with self.catalog.session() as s:
            catalog_runs.requeue_unredacted(s, REDACTION_VERSION)
            queued = catalog_runs.recover_interrupted(s)
            known = catalog_runs.all_run_ids(s)
        remove_orphan_dirs(self.settings.runs_dir, known)
        for run_id in queued:
            self.submit(run_id)

    def submit(self, run_id: str) -> None:
        with self._lock:
            if run_id in self._pending and not self._pending[run_id].done():
                self._again.add(run_id)
                return
            self._pending[run_id] = self._pool.submit(self._run_safely, run_id)

    def idle(self) -> bool:
        with self._lock:
            return all(f.done() for f in self._pending.values())

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=True)

    def _run_safely(self, run_id: str) -> None:
        try:
            self.ingest(run_id)
        except Exception:  # the pool must survive anything one trace does
            log.exception("ingest of run %s crashed", run_id)
        finally:
            with self._lock:
                self._pending.pop(run_id, None)
                if run_id in self._again:  # claiming is guarded: a run not queued is left
                    self._again.discard(run_id)
                    self._resubmit(run_id)

    def _resubmit(self, run_id: str) -> None:
        try:
            self._pending[run_id] = self._pool.submit(self._run_safely, run_id)
        except RuntimeError:  # shutting down: the next start queues every queued run
            log.info("run %s left queued for the next start", run_id)

    def ingest(self, run_id: str) -> None:
        with self.catalog.session() as s:
            generation = catalog_runs.claim(s, run_id)
            run = catalog_runs.get_run(s, run_id) if generation is not None else None
        if generation is None or run is None:
            return  # deleted, or another worker owns it
        self.ingest_claimed(run, generation)

    def ingest_claimed(
        self,
        run: Run,
        generation: int,
        on_progress: Callable[[float], None] | None = None,
        retry_internal_errors: bool = False,
    ) -> None:
        """Build and publish ``generation`` of a run its caller has claimed.

        Progress goes to the catalog unless ``on_progress`` takes it (a queue job reports
        to its job state). A bad trace fails the run; an internal error does too, unless
        ``retry_internal_errors``: then its partial files go and the error propagates, for
        the caller to try again (``internal_error_message`` words the last one).
        """
        run_id = run.id
        files = RunFiles(self.settings.runs_dir, run_id)
        label = run.original_filename
        progress = on_progress or (lambda f: self._progress(run_id, generation, f))
        try:
            files.remove_partials()
            self.redact_kept_originals(files, run)
            if is_job(run):
                report = build_job_run(files, generation, run, self.limits, progress)
            else:
                report = self._build(files, generation, run, label, progress)
        except TraceInputError as exc:
            self._fail(run_id, generation, f"{label}: {exc.problem}")
            return
        except Exception as exc:
            log.exception("ingest of run %s failed", run_id)
            if retry_internal_errors:
                files.remove_partials(generation)
                raise
            self._fail(run_id, generation, internal_error_message(label, exc))
            return
        fmt, facts = catalog_facts(run, report)
        with self.catalog.session() as s:
            published = catalog_runs.mark_ready(
                s, run_id, generation, fmt, facts, report["findings"]
            )
        if not published:  # deleted or re-queued meanwhile: what we built belongs to no one
            for p in (*files.databases(generation), files.report(generation)):
                p.unlink(missing_ok=True)
            self._remove_if_deleted(run_id, files)
            return
        files.remove_generations_before(generation)
        if self.on_published is not None:
            self.on_published(run_id)

    def redact_kept_originals(self, files: RunFiles, run: Run) -> None:
        """Originals kept before redaction (or under older rules) are redacted first."""
        if run.source_redaction < REDACTION_VERSION:
            for source in kept_sources(files, run):
                self._redact_original(source, run.id)

    def _redact_original(self, path: Path, run_id: str) -> None:
        """An original kept before redaction (or under older rules): redact it first."""
        redact_in_place(path, detect_format(path), self.settings.max_decompressed_bytes)
        with self.catalog.session() as s:
            catalog_runs.set_source_redaction(s, run_id, REDACTION_VERSION)

    def _build(
        self,
        files: RunFiles,
        generation: int,
        run: Run,
        label: str,
        report_progress: Callable[[float], None],
    ) -> dict[str, Any]:
        progress = IngestProgress(report_progress)
        loaded = load_trace(
            files.source(run.source_file),
            db_path=files.database(generation),
            on_progress=progress.reading,
            limits=self.limits,
        )
        try:
            progress.loaded()
            db = TraceDB(loaded.con)
            report = build_report(
                loaded,
                db=db,
                label=label,
                sha256=run.sha256,
                inputs=ReportInputs(slo=parse_slo(run.slo) if run.slo else None),
                on_progress=progress.analysing,
            )
            progress.analysed()
            keep_run_tables(loaded, db)
            progress.timeline_built()
        finally:
            loaded.close()
        write_json_atomic(files.report(generation), report)
        return report

    def _progress(self, run_id: str, generation: int, fraction: float) -> None:
        with self.catalog.session() as s:
            catalog_runs.set_progress(s, run_id, generation, fraction)

    def _fail(self, run_id: str, generation: int, error: str) -> None:
        # only this generation's leftovers: a newer ingest of the run may be writing its own
        RunFiles(self.settings.runs_dir, run_id).remove_partials(generation)
        with self.catalog.session() as s:
            catalog_runs.mark_failed(s, run_id, generation, redact(error))
        self._remove_if_deleted(run_id, RunFiles(self.settings.runs_dir, run_id))

    def _remove_if_deleted(self, run_id: str, files: RunFiles) -> None:
        """A run deleted mid-ingest: drop whatever the ingest wrote after the delete."""
        with self.catalog.session() as s:
            gone = catalog_runs.get_run(s, run_id) is None
        if gone:
            files.remove()
