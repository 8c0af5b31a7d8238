"""The Litestar application: catalog, ingest worker, routes, templates, static files."""

from __future__ import annotations

import gc
from functools import partial
from pathlib import Path

from litestar import Litestar
from litestar.config.allowed_hosts import AllowedHostsConfig
from litestar.di import Provide
from litestar.logging import LoggingConfig
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig

from tracelens import __version__
from tracelens.report.render.html import STATIC_DIR as REPORT_STATIC_DIR
from tracelens.report.render.html import html_environment
from web.catalog import Catalog
from web.catalog.ready_runs import ReadyRuns
from web.catalog.runs import fresh_run
from web.errors import EXCEPTION_HANDLERS
from web.ingest_worker import IngestWorker
from web.routes.api_flame_graph import FlameGraphController
from web.routes.api_reference import api_reference
from web.routes.api_report import ReportController
from web.routes.api_runs import RunController, RunsController
from web.routes.api_timeline import TimelineController
from web.routes.compare import CompareApiController, ComparePageController
from web.routes.health import health
from web.routes.metrics import prometheus_metrics
from web.routes.pages import RunListPageController, RunPagesController
from web.routes.series import SeriesApiController, SeriesPageController
from web.routes.sweep import SweepApiController, SweepPageController
from web.run_data import RunData
from web.security import (
    AccessControl,
    csrf_config,
    rate_limit_config,
    reject_nul_middleware,
    security_headers_hook,
    store_registry,
)
from web.services import Ingestion, IngestQueue, Services
from web.settings import Settings

HERE = Path(__file__).resolve().parent


def _template_engine() -> JinjaTemplateEngine:
    # The report's environment: the pages import the report's parts from its templates.
    return JinjaTemplateEngine.from_environment(html_environment(HERE / "templates"))


def app_from_env() -> Litestar:
    """App factory for servers started by import string (several worker processes)."""
    return create_app(Settings.from_env())


def create_app(settings: Settings | None = None, start_worker: bool = True) -> Litestar:
    """The app for ``settings`` (from the environment by default).

    The catalog schema is upgraded here, before the first request, and runs left
    mid-ingest by a previous process are re-queued when the app starts.
    """
    settings = settings or Settings.from_env()
    settings.runs_dir.mkdir(parents=True, exist_ok=True)
    settings.uploads_dir.mkdir(parents=True, exist_ok=True)
    catalog = Catalog(settings.database_url)
    run_data = RunData(settings.runs_dir)
    queue: IngestQueue | None = None
    worker: Ingestion
    if settings.queue_url:
        from web.queue.dispatcher import QueueDispatcher

        worker = queue = QueueDispatcher(settings, catalog)
    else:
        worker = IngestWorker(settings, catalog, on_published=run_data.forget)
    templates = _template_engine()
    services = Services(
        settings=settings,
        catalog=catalog,
        worker=worker,
        run_data=run_data,
        access=AccessControl(settings, catalog),
        templates=templates,
        ready_runs=ReadyRuns(catalog.engine, partial(fresh_run, catalog)),
        queue=queue,
    )
    for stale in settings.uploads_dir.glob("*.part"):  # uploads cut off by a restart
        stale.unlink(missing_ok=True)

    def on_startup() -> None:
        if start_worker:
            worker.start()
        # Everything imported and built so far lives as long as the process. A full
        # collection walked all of it (~100 k objects: 50-100 ms on a busy core) several
        # times a second under load, which was the run page's p95; frozen, the collector
        # walks only what requests make.
        gc.collect()
        gc.freeze()

    def on_shutdown() -> None:
        worker.shutdown(wait=False)
        catalog.dispose()
        gc.unfreeze()  # an app stopped in a process that goes on (tests) is collectable

    app = Litestar(
        route_handlers=[
            RunsController,
            RunController,
            ReportController,
            TimelineController,
            FlameGraphController,
            CompareApiController,
            health,
            RunListPageController,
            RunPagesController,
            ComparePageController,
            SweepApiController,
            SweepPageController,
            SeriesApiController,
            SeriesPageController,
            prometheus_metrics,
            api_reference,
            create_static_files_router(
                path="/static", directories=[HERE / "static", REPORT_STATIC_DIR]
            ),
        ],
        dependencies={"svc": Provide(lambda: services, sync_to_thread=False)},
        template_config=TemplateConfig(engine=templates),
        openapi_config=OpenAPIConfig(
            title="tracelens",
            version=__version__,
            path="/schema",
            render_plugins=[JsonRenderPlugin()],
        ),
        exception_handlers=EXCEPTION_HANDLERS,
        csrf_config=csrf_config(settings),
        middleware=[
            reject_nul_middleware,
            rate_limit_config(settings).middleware,
        ],
        stores=store_registry(settings),
        before_send=[security_headers_hook],
        allowed_hosts=(
            AllowedHostsConfig(allowed_hosts=list(settings.allowed_hosts), www_redirect=False)
            if settings.allowed_hosts
            else None
        ),
        on_startup=[on_startup],
        on_shutdown=[on_shutdown],
        logging_config=LoggingConfig(
            root={"level": "INFO", "handlers": ["queue_listener"]},
            log_exceptions="debug",
        ),
        debug=False,
    )
    app.state.services = services
    return app
