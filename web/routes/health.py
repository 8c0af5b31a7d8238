"""Liveness for load balancers and monitors (``/api/health``)."""

from __future__ import annotations

from litestar.di import NamedDependency

from tracelens import __version__
from web.api_schema import Health
from web.redis_check import redis_status
from web.routes.blocking import blocking_get
from web.services import Services


@blocking_get(
    "/api/health",
    summary="Liveness; whether the configured Redis answers; the ingest queue's depth and workers",
    tags=["health"],
)
def health(svc: NamedDependency[Services]) -> Health:
    body = Health(status="ok", version=__version__)
    redis = redis_status(svc.settings.redis_url)
    if redis is not None:
        body.redis = redis
        if redis != "ok":
            body.status = "degraded"
    if svc.queue is not None:
        body.queue = svc.queue.health()
        if body.queue.status != "ok":
            body.status = "degraded"
    return body
