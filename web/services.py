"""The long-lived objects a request handler needs, built once per app."""

from __future__ import annotations

from dataclasses import dataclass

from litestar.plugins.jinja import JinjaTemplateEngine

from web.catalog import Catalog
from web.ingest_worker import IngestWorker
from web.run_data import RunData
from web.security import AccessControl
from web.settings import Settings


@dataclass
class Services:
    settings: Settings
    catalog: Catalog
    worker: IngestWorker
    run_data: RunData
    access: AccessControl
    templates: JinjaTemplateEngine
