"""The public address of a finding's page, for tickets and the copied Markdown."""

from __future__ import annotations

from typing import Any

from litestar import Request

from web.settings import Settings


def finding_permalink(
    settings: Settings, request: Request[Any, Any, Any], run_id: str, finding_id: str
) -> str:
    # Behind a proxy the request's own base URL is the internal one: the configured public
    # URL, when there is one, is what a reader of the ticket can open.
    base = settings.public_url or str(request.base_url).rstrip("/")
    return f"{base.rstrip('/')}/runs/{run_id}/findings/{finding_id}"
