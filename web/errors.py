"""Errors as the client expects them: JSON ``{"error": "..."}`` under /api, a page elsewhere.

Never a traceback: an unexpected exception is logged and answered with a generic 500.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from litestar import Request, Response
from litestar.exceptions import (
    ClientException,
    HTTPException,
    ServiceUnavailableException,
    ValidationException,
)
from litestar.response import Template

from web.api_schema import ErrorBody
from web.uploads import UploadError

log = logging.getLogger("tracelens.web")


class ConflictException(ClientException):
    """The run exists but cannot answer yet: not ready, or already being ingested."""

    status_code = 409


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
        return Response(ErrorBody(message), status_code=status)
    return Template(
        "error.html", context={"status": status, "message": message}, status_code=status
    )


def http_exception_handler(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    response = _respond(request, exc.status_code, _message(exc))
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    if exc.status_code == 429 and "retry-after" not in {k.lower() for k in response.headers}:
        # the rate limiter says when the window resets; a client should wait that long
        reset = (exc.headers or {}).get("RateLimit-Reset")
        response.headers["Retry-After"] = str(reset) if reset else "60"
    return response


def upload_error_handler(request: Request[Any, Any, Any], exc: UploadError) -> Response[Any]:
    return _respond(request, exc.status, exc.message)


def redis_down_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """The rate-limit store is unreachable: a clear, retryable refusal, not a 500."""
    log.warning("Redis unreachable on %s %s: %s", request.method, request.url.path, exc)
    response = _respond(
        request,
        503,
        "the service's Redis (rate-limit store) is unreachable; try again shortly",
    )
    response.headers["Retry-After"] = str(REDIS_RETRY_AFTER_S)
    return response


def internal_error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return _respond(request, 500, "internal server error (see the service log)")


REDIS_RETRY_AFTER_S = 30


class _HasBackpressure(Protocol):
    def backpressure(self) -> Any: ...


def refuse_when_queue_full(queue: _HasBackpressure) -> None:
    """Backpressure before an upload is read: 503 and ``Retry-After`` when the ingest queue
    holds its configured depth of waiting jobs, or does not answer."""
    try:
        full = queue.backpressure()
    except Exception as exc:
        log.warning("ingest queue unreachable: %s", exc)
        raise ServiceUnavailableException(
            "the ingest queue (Redis) is unreachable; try again shortly",
            headers={"Retry-After": str(REDIS_RETRY_AFTER_S)},
        ) from None
    if full is not None:
        raise ServiceUnavailableException(
            f"the ingest queue is full ({full.waiting:,} traces waiting); try again later",
            headers={"Retry-After": str(full.retry_after_s)},
        )


EXCEPTION_HANDLERS: dict[Any, Any] = {
    HTTPException: http_exception_handler,
    UploadError: upload_error_handler,
    Exception: internal_error_handler,
}
try:  # redis is part of the web extra, but the app runs without a Redis URL
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    EXCEPTION_HANDLERS[RedisConnectionError] = redis_down_handler
    EXCEPTION_HANDLERS[RedisTimeoutError] = redis_down_handler
except ImportError:  # pragma: no cover - redis not installed
    pass
