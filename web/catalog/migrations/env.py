"""Alembic environment: runs on a connection handed over by the app, or on the ini's URL."""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import engine_from_config, pool

from web.catalog.models import Base

config = context.config
# Run by hand (`alembic upgrade head`), the catalog the service uses wins over the ini's URL.
if os.environ.get("TRACELENS_DATABASE_URL") and "connection" not in config.attributes:
    config.set_main_option(
        "sqlalchemy.url", os.environ["TRACELENS_DATABASE_URL"].replace("%", "%%")
    )
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = engine_from_config(
        config.get_section(config.config_ini_section, {}),
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with engine.connect() as con:
        # batch mode: SQLite cannot ALTER most things in place.
        context.configure(connection=con, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
