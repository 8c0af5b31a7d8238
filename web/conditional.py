"""Answers from stored bytes with an ETag, and ``304 Not Modified`` when the client has them.

A ready run's page and findings change only when the run is re-ingested, and they are
what browsers, dashboards and tickets poll. Each is kept as bytes once per ingest
generation (:meth:`web.run_data.RunData.memo`); a client that sends back the ETag it was
given (``If-None-Match``) gets an empty 304, so the bytes are not sent again.
``Cache-Control: no-cache`` lets it store them but makes it ask every time, so a
re-ingest (a new generation, so a new ETag) is seen at once.
"""

from __future__ import annotations

import hashlib
from typing import Any

from litestar import Request, Response

CACHE_CONTROL = "no-cache"


def entity_tag(generation: int, *parts: bytes) -> str:
    """A strong ETag for ``parts`` of one ingest generation of a run."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return f'"{generation}-{digest.hexdigest()[:32]}"'


def client_has(request: Request[Any, Any, Any], etag: str) -> bool:
    """Whether ``If-None-Match`` names ``etag`` (or ``*``), compared weakly (RFC 9110)."""
    header = request.headers.get("if-none-match")
    if not header:
        return False
    tags = {t.strip().removeprefix("W/") for t in header.split(",")}
    return "*" in tags or etag.removeprefix("W/") in tags


def stored_response(
    request: Request[Any, Any, Any],
    body: bytes,
    etag: str,
    media_type: str,
    cache_control: str = CACHE_CONTROL,
) -> Response[bytes]:
    """``body`` with its ETag, or an empty 304 when the client already holds it."""
    headers = {"etag": etag, "cache-control": cache_control}
    if client_has(request, etag):
        return Response(b"", status_code=304, headers=headers, media_type=media_type)
    return Response(body, headers=headers, media_type=media_type)
