"""What keeps a shared trace service safe: tokens, origins, CSRF, rate limits, headers.

- Uploads and deletes need an API token (``Authorization: Bearer <token>``) once tokens
  exist, from ``TRACELENS_API_TOKENS`` or the catalog. Reading stays open.
- Browsers send ``Origin`` with every cross-site POST; a state-changing API request whose
  Origin is not this service is refused, so another site cannot upload or delete through
  a visitor's browser. HTML forms also carry Litestar's double-submit CSRF token.
- Uploads are rate limited per client address (memory store, or Redis when configured).
- Every response carries a strict Content-Security-Policy: scripts, styles and requests
  only from this origin, no inline script or style, no framing. Opening the Perfetto UI
  and posting it a trace (window.open, postMessage) is no request CSP governs; the
  opener policy is ``same-origin`` except on the pages with "Open in Perfetto" (a run's
  or a job's page), whose own pop-ups it lets stay reachable for them.
"""

from __future__ import annotations

import hmac
import re
import time
from typing import Any

from litestar import Request
from litestar.config.csrf import CSRFConfig
from litestar.connection import ASGIConnection
from litestar.datastructures import MutableScopeHeaders
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.middleware.rate_limit import RateLimitConfig
from litestar.stores.registry import StoreRegistry
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from web.catalog import Catalog
from web.catalog.tokens import has_tokens, token_known
from web.settings import Settings

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
}
# The pages that open the Perfetto UI (a run's page, a job's page: /runs/{id}) and post it
# the trace: "same-origin" would sever the window they open on another site. Only they
# get the looser policy; a page that opens one of them still gets a context of its own.
PERFETTO_OPENER_POLICY = "same-origin-allow-popups"
_PERFETTO_PAGE = re.compile(r"/runs/[^/]+/?")
UPLOAD_PATH = "/api/runs"


def reject_nul_middleware(app: ASGIApp) -> ASGIApp:
    """A NUL byte in a path or query is never meaningful, and PostgreSQL cannot store one.

    Answer 400 at once instead of letting it reach a query (which would fail with a 500).
    """
    message = b'{"error":"NUL bytes are not allowed in paths or query parameters"}'

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = (
                bytes(scope.get("raw_path") or b"") + b"?" + bytes(scope.get("query_string") or b"")
            )
            if b"\x00" in raw or b"%00" in raw or "\x00" in scope.get("path", ""):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 400,
                        "headers": [
                            (b"content-type", b"application/json"),
                            *((k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": message, "more_body": False})
                return
        await app(scope, receive, send)

    return middleware


async def security_headers_hook(message: Message, scope: Scope) -> None:
    """The same headers on every response, unrouted 404/405 answers included (route
    middleware only sees requests a route matched)."""
    if message["type"] == "http.response.start":
        headers = MutableScopeHeaders.from_message(message)
        for name, value in SECURITY_HEADERS.items():
            headers[name] = value
        if _PERFETTO_PAGE.fullmatch(scope.get("path", "")):
            headers["cross-origin-opener-policy"] = PERFETTO_OPENER_POLICY


def _own_origin(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    host = connection.headers.get("host", "")
    return f"{connection.url.scheme}://{host}"


def bearer_token(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    """The token of an ``Authorization: Bearer <token>`` header, or ""."""
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class AccessControl:
    """Token and origin checks, called by the handlers that change or hand out runs."""

    # Whether the catalog holds tokens is re-read at most this often (every page asks).
    TOKENS_TTL_S = 2.0

    def __init__(self, settings: Settings, catalog: Catalog) -> None:
        self.settings = settings
        self.catalog = catalog
        self._catalog_has_tokens: tuple[float, bool] = (-1e9, False)

    def tokens_required(self, fresh: bool = False) -> bool:
        """Whether writes need a token; pages may use a value a moment old, checks never do."""
        if self.settings.api_tokens:
            return True
        if self.settings.open_access:
            return False
        checked, value = self._catalog_has_tokens
        if not fresh and time.monotonic() - checked < self.TOKENS_TTL_S:
            return value
        with self.catalog.session() as s:
            value = has_tokens(s)
        self._catalog_has_tokens = (time.monotonic(), value)
        return value

    def token_valid(self, token: str) -> bool:
        if any(hmac.compare_digest(token, t) for t in self.settings.api_tokens):
            return True
        with self.catalog.session() as s:
            return token_known(s, token)

    def check(self, connection: ASGIConnection[Any, Any, Any, Any], form_token: str = "") -> None:
        origin = connection.headers.get("origin")
        if origin and origin != "null" and origin != _own_origin(connection):
            raise PermissionDeniedException(f"cross-origin request from {origin} refused")
        if origin == "null":
            raise PermissionDeniedException("request from an opaque origin refused")
        self._require_token(
            bearer_token(connection) or form_token,
            "this service requires an API token: send 'Authorization: Bearer <token>'",
        )

    def check_read(self, connection: ASGIConnection[Any, Any, Any, Any]) -> None:
        """Reads of kept originals: a valid token once the service has tokens."""
        self._require_token(
            bearer_token(connection),
            "the kept original needs an API token: send 'Authorization: Bearer <token>'",
        )

    def _require_token(self, token: str, missing: str) -> None:
        if not self.tokens_required(fresh=True):
            return
        if not token:
            raise NotAuthorizedException(missing)
        if not self.token_valid(token):
            raise NotAuthorizedException("unknown API token")


def csrf_config(settings: Settings) -> CSRFConfig:
    # The JSON API is for scripts (curl -F file=@...): it is protected by the Origin check
    # and tokens instead; HTML forms post to /runs/... and carry the CSRF token.
    return CSRFConfig(
        secret=settings.secret_key,
        cookie_name="tracelens_csrf",
        cookie_samesite="strict",
        header_name="x-csrftoken",
        exclude=["/api"],
    )


def _is_upload(request: Request[Any, Any, Any]) -> bool:
    """Uploads count against the rate limit, but only those the service would accept: a
    request refused for its token (401) must not use up a real client's allowance."""
    if request.method != "POST" or request.url.path != UPLOAD_PATH:
        return False
    access: AccessControl = request.app.state.services.access
    if not access.tokens_required():
        return True
    token = bearer_token(request)
    return bool(token) and access.token_valid(token)


def rate_limit_config(settings: Settings) -> RateLimitConfig:
    return RateLimitConfig(
        rate_limit=("minute", settings.uploads_per_minute),
        check_throttle_handler=_is_upload,
        store="rate_limit",
    )


def store_registry(settings: Settings) -> StoreRegistry:
    if settings.redis_url:
        from litestar.stores.redis import RedisStore

        return StoreRegistry(
            {
                "rate_limit": RedisStore.with_client(
                    url=settings.redis_url, namespace=settings.redis_namespace
                )
            }
        )
    return StoreRegistry()
