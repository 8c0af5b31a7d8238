"""Service settings: command-line options over environment variables over defaults.

Environment variables:

- ``TRACELENS_HOME``: data directory (catalog, run databases, originals); ``~/.tracelens``.
- ``TRACELENS_DATABASE_URL``: catalog SQLAlchemy URL; a SQLite file in the data directory.
- ``TRACELENS_API_TOKENS``: comma-separated tokens required to upload and delete.
- ``TRACELENS_REDIS_URL``: keep upload rate-limit counters in Redis (shared by processes).
- ``TRACELENS_MAX_UPLOAD_BYTES`` (2 GiB), ``TRACELENS_MAX_DECOMPRESSED_BYTES`` (half the
  machine's memory, between 2 and 16 GiB); ``TRACELENS_MEMORY_LIMIT``,
  ``TRACELENS_MAX_EVENTS``, ``TRACELENS_TEMP_DIR`` and ``TRACELENS_MAX_SPILL_BYTES`` bound
  each ingest (``ingest.limits``).
- ``TRACELENS_UPLOAD_RATE``: uploads per client per minute (60).
- ``TRACELENS_INGEST_WORKERS``: traces ingested at once (2).
- ``TRACELENS_SECRET_KEY``: CSRF signing key; generated once into the data directory.
- ``TRACELENS_PUBLIC_URL``: base of permalinks when behind a proxy (default: request's host).
- ``TRACELENS_ALLOWED_HOSTS``: comma-separated host names requests may address (others
  answer 400); ``tracelens serve`` defaults it to the bind address, ``localhost`` and the
  host of ``TRACELENS_PUBLIC_URL`` (any host when binding all interfaces without it).
- ``TRACELENS_QUEUE_URL``: a Redis URL: ingest jobs go on this queue and ``tracelens worker``
  processes (any machine sharing the data directory and the catalog) run them; without it
  the web process ingests in its own thread pool. ``TRACELENS_QUEUE_NAME`` (``tracelens``)
  names the queue; ``TRACELENS_QUEUE_MAX_DEPTH`` (1000): jobs waiting beyond which uploads
  answer 503; ``TRACELENS_QUEUE_VISIBILITY_S`` (60): a job whose worker has not reported for
  this long is given to another; ``TRACELENS_QUEUE_ATTEMPTS`` (3): tries before the run is
  failed; ``TRACELENS_QUEUE_RETRY_DELAY_S`` (5): the first retry's delay, doubling after;
  ``TRACELENS_QUEUE_JOB_TIMEOUT_S`` (14400): the longest one job may run.
- ``TRACELENS_PERFETTO_URL``: the Perfetto UI the run page's "Open in Perfetto" opens
  (``https://ui.perfetto.dev``; a self-hosted copy's address where browsers cannot reach
  the public one). The service itself never contacts it: the visitor's browser does.
- ``TRACELENS_OPEN_ACCESS``: ``1`` accepts writes without a token even though catalog tokens
  exist or existed (``tracelens serve --open``); without it, revoking every token locks
  writes rather than opening them.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingest.limits import default_max_decompressed
from web.catalog import default_database_url

GIB = 1024**3
DEFAULT_PERFETTO_URL = "https://ui.perfetto.dev"


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        raise SystemExit(f"{name} must be an integer, got {raw!r}") from None


@dataclass
class Settings:
    data_dir: Path
    database_url: str
    api_tokens: frozenset[str] = frozenset()
    redis_url: str | None = None
    # Prefix of this service's keys in Redis (several services may share one server).
    redis_namespace: str = "tracelens"
    max_upload_bytes: int = 2 * GIB
    max_decompressed_bytes: int = field(default_factory=default_max_decompressed)
    uploads_per_minute: int = 60
    ingest_workers: int = 2
    secret_key: str = field(default="", repr=False)
    # The service's address as users see it (behind a proxy), for permalinks.
    public_url: str | None = None
    # Writes without a token although catalog tokens exist or existed (an explicit choice).
    open_access: bool = False
    # Host names requests may address (the Host header); None accepts any. The Origin check
    # compares against the Host header, so this is what makes it trustworthy.
    allowed_hosts: tuple[str, ...] | None = None
    # The scale-out mode (web.queue): None ingests in this process.
    queue_url: str | None = field(default=None, repr=False)
    queue_name: str = "tracelens"
    queue_max_depth: int = 1000
    queue_visibility_s: int = 60
    queue_attempts: int = 3
    queue_retry_delay_s: float = 5.0
    queue_job_timeout_s: int = 4 * 3600
    # Where the run page's "Open in Perfetto" sends a trace, from the visitor's browser.
    perfetto_url: str = DEFAULT_PERFETTO_URL

    @classmethod
    def from_env(cls, data_dir: Path | str | None = None, **overrides: object) -> Settings:
        home = Path(
            data_dir or os.environ.get("TRACELENS_HOME") or Path.home() / ".tracelens"
        ).expanduser()
        home.mkdir(parents=True, exist_ok=True)
        tokens = frozenset(
            t.strip() for t in os.environ.get("TRACELENS_API_TOKENS", "").split(",") if t.strip()
        )
        values: dict[str, Any] = {
            "data_dir": home,
            "database_url": os.environ.get("TRACELENS_DATABASE_URL") or default_database_url(home),
            "api_tokens": tokens,
            "redis_url": os.environ.get("TRACELENS_REDIS_URL") or None,
            "redis_namespace": os.environ.get("TRACELENS_REDIS_NAMESPACE") or "tracelens",
            "max_upload_bytes": _int_env("TRACELENS_MAX_UPLOAD_BYTES", 2 * GIB),
            "max_decompressed_bytes": _int_env(
                "TRACELENS_MAX_DECOMPRESSED_BYTES", default_max_decompressed()
            ),
            "uploads_per_minute": _int_env("TRACELENS_UPLOAD_RATE", 60),
            "ingest_workers": max(1, _int_env("TRACELENS_INGEST_WORKERS", 2)),
            "secret_key": os.environ.get("TRACELENS_SECRET_KEY") or _stored_secret(home),
            "public_url": os.environ.get("TRACELENS_PUBLIC_URL") or None,
            "open_access": os.environ.get("TRACELENS_OPEN_ACCESS", "").strip().lower()
            in ("1", "true", "yes"),
            "allowed_hosts": tuple(
                h.strip()
                for h in os.environ.get("TRACELENS_ALLOWED_HOSTS", "").split(",")
                if h.strip()
            )
            or None,
            "queue_url": os.environ.get("TRACELENS_QUEUE_URL") or None,
            "queue_name": os.environ.get("TRACELENS_QUEUE_NAME") or "tracelens",
            "queue_max_depth": max(1, _int_env("TRACELENS_QUEUE_MAX_DEPTH", 1000)),
            "queue_visibility_s": max(2, _int_env("TRACELENS_QUEUE_VISIBILITY_S", 60)),
            "queue_attempts": max(1, _int_env("TRACELENS_QUEUE_ATTEMPTS", 3)),
            "queue_retry_delay_s": float(max(0, _int_env("TRACELENS_QUEUE_RETRY_DELAY_S", 5))),
            "queue_job_timeout_s": max(60, _int_env("TRACELENS_QUEUE_JOB_TIMEOUT_S", 4 * 3600)),
            "perfetto_url": _perfetto_url(os.environ.get("TRACELENS_PERFETTO_URL", "")),
        }
        values.update(overrides)
        return cls(**values)

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"

    @property
    def uploads_dir(self) -> Path:
        return self.data_dir / "uploads"


def _perfetto_url(raw: str) -> str:
    """The Perfetto UI's address: an http(s) URL (the page opens it and posts to its
    origin), without a trailing slash."""
    from urllib.parse import urlsplit

    url = raw.strip() or DEFAULT_PERFETTO_URL
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SystemExit(f"TRACELENS_PERFETTO_URL must be an http(s) URL, got {raw!r}")
    return url.rstrip("/")


def _stored_secret(home: Path) -> str:
    """A signing key kept in the data directory, so CSRF cookies survive restarts."""
    path = home / "secret_key"
    if path.exists():
        return path.read_text().strip()
    key = secrets.token_hex(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process of this service wrote it first
        time.sleep(0.1)
        return path.read_text().strip()
    with os.fdopen(fd, "w") as f:
        f.write(key)
    return key


def default_allowed_hosts(
    bind: str, port: int | None, public_url: str | None
) -> tuple[str, ...] | None:
    """The names this server answers to, as Host headers carry them (with the port): its
    bind address, loopback names and the public URL's host. Binding every interface
    without a public URL cannot know its names: any."""
    from urllib.parse import urlsplit

    hosts: list[str] = []
    if public_url:
        parts = urlsplit(public_url)
        if parts.hostname:
            hosts.append(parts.netloc.rsplit("@", 1)[-1])
            hosts.append(parts.hostname)
    if bind not in ("0.0.0.0", "::", ""):
        for name in (bind, "localhost", "127.0.0.1", "[::1]"):
            hosts.append(name)
            if port is not None:
                hosts.append(f"{name}:{port}")
    return tuple(dict.fromkeys(hosts)) or None
