"""Whether the configured Redis answers: said at start-up and in the health check."""

from __future__ import annotations


def redis_status(url: str | None, timeout_s: float = 1.0) -> str | None:
    """``"ok"``, a one-line reason it is not, or None when no Redis is configured."""
    if not url:
        return None
    try:
        import redis

        client = redis.Redis.from_url(
            url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s
        )
        try:
            client.ping()
        finally:
            client.close()
    except ValueError as exc:  # a malformed URL
        return f"invalid Redis URL ({exc})"
    except Exception as exc:  # any connection or protocol error: say it, never raise
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"unreachable ({first})"
    return "ok"
