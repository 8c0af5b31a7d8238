"""The long-lived objects a request handler needs, built once per app."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

from litestar.plugins.jinja import JinjaTemplateEngine

from web.api_schema import JobState, QueueHealth
from web.catalog import Catalog, Run
from web.catalog.ready_runs import ReadyRuns
from web.run_data import RunData
from web.security import AccessControl
from web.settings import Settings


class Backpressure(NamedTuple):
    waiting: int  # jobs waiting on the queue
    retry_after_s: int


class Ingestion(Protocol):
    """Where runs go to be ingested: this process's thread pool
    (:class:`web.ingest_worker.IngestWorker`) or the queue (:class:`IngestQueue`)."""

    def start(self) -> None: ...
    def submit(self, run_id: str) -> None: ...
    def shutdown(self, wait: bool = True) -> None: ...


class IngestQueue(Ingestion, Protocol):
    """The scale-out mode's dispatcher (:class:`web.queue.dispatcher.QueueDispatcher`),
    which loads the queue's library only when a queue is configured."""

    def backpressure(self) -> Backpressure | None: ...
    def job_state(self, run: Run) -> JobState | None: ...
    def health(self) -> QueueHealth: ...


@dataclass
class Services:
    settings: Settings
    catalog: Catalog
    worker: Ingestion
    run_data: RunData
    access: AccessControl
    templates: JinjaTemplateEngine
    # Ready runs kept between requests, checked against the catalog on each use.
    ready_runs: ReadyRuns
    # The scale-out mode's dispatcher (the same object as ``worker``), None when embedded.
    queue: IngestQueue | None = None
