"""Errors as the client expects them: JSON ``{"error": "..."}`` under /api, a page elsewhere.

Never a traceback: an unexpected exception is logged and answered with a generic 500.
"""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.response import Template

from web.uploads import UploadError

log = logging.getLogger("tracelens.web")


def _message(exc: HTTPException) -> str:
    if isinstance(exc, ValidationException) and isinstance(exc.extra, list) and exc.extra:
        parts = []
        for item in exc.extra:
            if isinstance(item, dict):
                key = item.get("key") or item.get("source") or ""
                parts.append(f"{key}: {item.get('message', 'invalid')}".strip(": "))
        if parts:
            return "invalid request: " + "; ".join(parts)
    return str(exc.detail)


def _respond(request: Request[Any, Any, Any], status: int, message: str) -> Response[Any]:
    if request.url.path.startswith(("/api", "/schema")) or "text/html" not in request.headers.get(
        "accept", ""
    ):
        return Response({"error": message}, status_code=status)
    return Template(
        "error.html", context={"status": status, "message": message}, status_code=status
    )


def http_exception_handler(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    return _respond(request, exc.status_code, _message(exc))


def upload_error_handler(request: Request[Any, Any, Any], exc: UploadError) -> Response[Any]:
    return _respond(request, exc.status, exc.message)


def internal_error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return _respond(request, 500, "internal server error (see the service log)")


EXCEPTION_HANDLERS: dict[Any, Any] = {
    HTTPException: http_exception_handler,
    UploadError: upload_error_handler,
    Exception: internal_error_handler,
}
