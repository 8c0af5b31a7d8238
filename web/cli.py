"""``tracelens serve``: the web service with zero configuration.

Registered under the ``tracelens.commands`` entry-point group, so the core CLI finds it
without importing the web layer.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

if TYPE_CHECKING:
    from web.catalog import Catalog

# Fail at import, not mid-command: the core CLI then lists these commands as unavailable
# and says which extra to install, instead of a traceback from a lazy import.
_MISSING = [
    m
    for m in ("litestar", "uvicorn", "sqlalchemy", "alembic", "jinja2")
    if importlib.util.find_spec(m) is None
]
if _MISSING:
    raise ImportError(f"{_MISSING[0]} is not installed", name=_MISSING[0])


def fail(message: str) -> NoReturn:
    # imported late: tracelens.cli loads this module as a plugin while it initializes
    from tracelens.cli.options import fail as core_fail

    core_fail(message)


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
@click.option(
    "--open",
    "open_access",
    is_flag=True,
    help="Accept writes without a token even though catalog tokens exist or existed.",
)
def serve(
    host: str,
    port: int,
    data_dir: Path | None,
    ingest_workers: int | None,
    processes: int,
    open_access: bool,
) -> None:
    """Serve the web app: upload traces, follow ingestion, share findings."""
    import uvicorn

    from web.app import create_app
    from web.settings import Settings

    overrides: dict[str, object] = {"ingest_workers": ingest_workers} if ingest_workers else {}
    if open_access:
        overrides["open_access"] = True
    from web.redis_check import redis_status

    settings = Settings.from_env(data_dir, **overrides)
    if settings.allowed_hosts is None:
        from web.settings import default_allowed_hosts

        settings.allowed_hosts = default_allowed_hosts(host, port, settings.public_url)
    redis = redis_status(settings.redis_url)
    if redis is not None and redis.startswith("invalid"):
        fail(f"TRACELENS_REDIS_URL: {redis}")
    if redis is not None and redis != "ok":
        click.echo(
            f"tracelens: warning: Redis at TRACELENS_REDIS_URL is {redis}; uploads answer 503 "
            "until it is back",
            err=True,
        )
    click.echo(f"tracelens: data in {settings.data_dir}; serving on http://{host}:{port}/")
    if processes == 1:
        try:
            app = create_app(settings)
        except Exception as exc:  # the catalog database refuses: one line, not a traceback
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            fail(f"cannot open the catalog database ({first})")
        uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)
        return
    # Worker processes build their own app from the environment: hand the options down.
    # Each runs ingest workers too; runs are claimed atomically in the catalog, so no run
    # is ingested twice at once.
    os.environ["TRACELENS_HOME"] = str(settings.data_dir)
    if ingest_workers:
        os.environ["TRACELENS_INGEST_WORKERS"] = str(ingest_workers)
    if settings.allowed_hosts:
        os.environ["TRACELENS_ALLOWED_HOSTS"] = ",".join(settings.allowed_hosts)
    if open_access:
        os.environ["TRACELENS_OPEN_ACCESS"] = "1"
    uvicorn.run(
        "web.app:app_from_env",
        factory=True,
        workers=processes,
        host=host,
        port=port,
        log_level="info",
        access_log=False,
    )


@click.command("worker")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The data directory the web process uses, shared with it (default: $TRACELENS_HOME).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 64),
    default=None,
    help="Jobs this worker runs at once (default: $TRACELENS_INGEST_WORKERS or 2).",
)
@click.option("--name", default=None, help="This worker's name in job records (host-pid-…).")
def worker(data_dir: Path | None, concurrency: int | None, name: str | None) -> None:
    """Run ingest jobs from the queue at $TRACELENS_QUEUE_URL (the scale-out mode).

    Start any number, on any machines that share the data directory (a network
    filesystem) and the catalog ($TRACELENS_DATABASE_URL, PostgreSQL) with the web
    process. SIGTERM lets running jobs finish for a while; a killed worker's jobs go to
    another worker after the visibility timeout.
    """
    import asyncio
    import logging

    from web.settings import Settings

    settings = Settings.from_env(data_dir)
    if not settings.queue_url:
        fail("TRACELENS_QUEUE_URL is not set: a worker needs the queue's Redis URL")
    if importlib.util.find_spec("saq") is None:
        fail("the queue needs SAQ: pip install 'tracelens[queue]'")
    from web.redis_check import redis_status

    status = redis_status(settings.queue_url)
    if status != "ok":
        fail(f"TRACELENS_QUEUE_URL: Redis is {status}")
    from web.queue.worker import build_worker, run_worker

    if name is not None and (":" in name or not name.strip()):
        fail(f"--name {name!r}: a worker name cannot be empty or hold ':'")

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        built = build_worker(settings, concurrency or settings.ingest_workers, name)
    except Exception as exc:  # the catalog database refuses: one line, not a traceback
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        fail(f"cannot open the catalog database ({first})")
    click.echo(
        f"tracelens: worker {built.id} on queue {settings.queue_name!r}, data in "
        f"{settings.data_dir}, {built.concurrency} at once"
    )
    asyncio.run(run_worker(built))


@click.group("api-token")
def api_token() -> None:
    """Manage the API tokens kept in the catalog (uploads and deletes then need one)."""


_data_dir_option = click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The service's data directory (default: $TRACELENS_HOME or ~/.tracelens).",
)


def _catalog(data_dir: Path | None) -> Catalog:
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
        fail(f"a token named {name!r} exists already")
    click.echo(token)


@api_token.command("list")
@_data_dir_option
def list_api_tokens(data_dir: Path | None) -> None:
    """List token names, when they were created, and whether they are revoked."""
    from web.catalog.tokens import list_tokens

    with _catalog(data_dir).session() as s:
        for name, created, revoked in list_tokens(s):
            click.echo(f"{name}\t{created}" + (f"\trevoked {revoked}" if revoked else ""))


@api_token.command("revoke")
@click.argument("name")
@_data_dir_option
def revoke_api_token(name: str, data_dir: Path | None) -> None:
    """Revoke the token called NAME (writes stay locked even when none is left)."""
    from web.catalog.tokens import revoke_token

    with _catalog(data_dir).session() as s:
        if not revoke_token(s, name):
            fail(f"no token named {name!r}")
    click.echo(f"revoked {name}")
