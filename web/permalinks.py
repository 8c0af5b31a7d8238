"""The public address of a finding's page, for tickets and the copied Markdown.

A finding of a restricted analysis links with its restriction (``?steps=5:15``): its
impact is a share of that part of the trace, and the page it opens shows that analysis.
"""

from __future__ import annotations

from typing import Any

from litestar import Request

from web.settings import Settings


def finding_permalink(
    settings: Settings,
    request: Request[Any, Any, Any],
    run_id: str,
    finding_id: str,
    query: str = "",
) -> str:
    """``query``: the restriction's (:func:`web.run_restriction.restriction_query`), or ""."""
    # Behind a proxy the request's own base URL is the internal one: the configured public
    # URL, when there is one, is what a reader of the ticket can open.
    base = settings.public_url or str(request.base_url).rstrip("/")
    return f"{base.rstrip('/')}/runs/{run_id}/findings/{finding_id}{query}"
