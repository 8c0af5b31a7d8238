"""``tracelens serve``: the web service with zero configuration.

Registered under the ``tracelens.commands`` entry-point group, so the core CLI finds it
without importing the web layer.
"""

from __future__ import annotations

from pathlib import Path

import click


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
def serve(host: str, port: int, data_dir: Path | None, ingest_workers: int | None) -> None:
    """Serve the web app: upload traces, follow ingestion, share findings."""
    import uvicorn

    from web.app import create_app
    from web.settings import Settings

    overrides = {"ingest_workers": ingest_workers} if ingest_workers else {}
    settings = Settings.from_env(data_dir, **overrides)
    app = create_app(settings)
    click.echo(f"tracelens: data in {settings.data_dir}; serving on http://{host}:{port}/")
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)
