"""The catalog: which runs exist, their status, findings and API tokens (SQLAlchemy 2).

SQLite under the data directory by default; any SQLAlchemy URL works (PostgreSQL is
tested). The schema is managed by the Alembic migrations in ``migrations/``.
"""

from web.catalog.engine import Catalog, default_database_url, upgrade_schema
from web.catalog.models import (
    ApiToken,
    Base,
    FindingRow,
    Run,
    RunKind,
    RunStatus,
    SeriesDefinition,
)

__all__ = [
    "ApiToken",
    "Base",
    "Catalog",
    "FindingRow",
    "Run",
    "RunKind",
    "RunStatus",
    "SeriesDefinition",
    "default_database_url",
    "upgrade_schema",
]
