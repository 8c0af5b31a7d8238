"""``tracelens serve``: the web service with zero configuration.

Registered under the ``tracelens.commands`` entry-point group, so the core CLI finds it
without importing the web layer.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import click

# Fail at import, not mid-command: the core CLI then lists these commands as unavailable
# and says which extra to install, instead of a traceback from a lazy import.
_MISSING = [
    m
    for m in ("litestar", "uvicorn", "sqlalchemy", "alembic", "jinja2")
    if importlib.util.find_spec(m) is None
]
if _MISSING:
    raise ImportError(f"{_MISSING[0]} is not installed", name=_MISSING[0])


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=int, help="Port to listen on.")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Catalog, run databases and uploads (default: $TRACELENS_HOME or ~/.tracelens).",
)
@click.option(
    "--workers",
    "ingest_workers",
    type=click.IntRange(1, 64),
    default=None,
    help="Traces ingested at once (default: $TRACELENS_INGEST_WORKERS or 2).",
)
@click.option(
    "--processes",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Server processes sharing the port (with Redis, rate limits are shared too).",
)
def serve(
    host: str, port: int, data_dir: Path | None, ingest_workers: int | None, processes: int
) -> None:
    """Serve the web app: upload traces, follow ingestion, share findings."""
    import uvicorn

    from web.app import create_app
    from web.settings import Settings

    overrides = {"ingest_workers": ingest_workers} if ingest_workers else {}
    settings = Settings.from_env(data_dir, **overrides)
    click.echo(f"tracelens: data in {settings.data_dir}; serving on http://{host}:{port}/")
    if processes == 1:
        app = create_app(settings)
        uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)
        return
    # Worker processes build their own app from the environment: hand the options down.
    # Each runs ingest workers too; runs are claimed atomically in the catalog, so no run
    # is ingested twice at once.
    os.environ["TRACELENS_HOME"] = str(settings.data_dir)
    if ingest_workers:
        os.environ["TRACELENS_INGEST_WORKERS"] = str(ingest_workers)
    uvicorn.run(
        "web.app:app_from_env",
        factory=True,
        workers=processes,
        host=host,
        port=port,
        log_level="info",
        access_log=False,
    )


@click.group("api-token")
def api_token() -> None:
    """Manage the API tokens kept in the catalog (uploads and deletes then need one)."""


_data_dir_option = click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The service's data directory (default: $TRACELENS_HOME or ~/.tracelens).",
)


def _catalog(data_dir: Path | None):  # type: ignore[no-untyped-def]
    from web.catalog import Catalog
    from web.settings import Settings

    return Catalog(Settings.from_env(data_dir).database_url)


@api_token.command("create")
@click.argument("name")
@_data_dir_option
def create_api_token(name: str, data_dir: Path | None) -> None:
    """Create a token called NAME and print it (once: only its hash is stored)."""
    from sqlalchemy.exc import IntegrityError

    from web.catalog.tokens import create_token

    catalog = _catalog(data_dir)
    try:
        with catalog.session() as s:
            token = create_token(s, name)
    except IntegrityError:
        raise click.ClickException(f"a token named {name!r} exists already") from None
    click.echo(token)


@api_token.command("list")
@_data_dir_option
def list_api_tokens(data_dir: Path | None) -> None:
    """List token names and when they were created."""
    from web.catalog.tokens import list_tokens

    with _catalog(data_dir).session() as s:
        for name, created in list_tokens(s):
            click.echo(f"{name}\t{created}")


@api_token.command("revoke")
@click.argument("name")
@_data_dir_option
def revoke_api_token(name: str, data_dir: Path | None) -> None:
    """Delete the token called NAME."""
    from web.catalog.tokens import revoke_token

    with _catalog(data_dir).session() as s:
        if not revoke_token(s, name):
            raise click.ClickException(f"no token named {name!r}")
    click.echo(f"revoked {name}")
