"""``/metrics``: the series for Prometheus to scrape (:mod:`web.prometheus`)."""

from __future__ import annotations

from litestar import Response
from litestar.di import NamedDependency
from prometheus_client import CONTENT_TYPE_LATEST

from web.prometheus import exposition
from web.routes.blocking import blocking_get
from web.services import Services


@blocking_get("/metrics", include_in_schema=False)
def prometheus_metrics(svc: NamedDependency[Services]) -> Response[bytes]:
    return Response(exposition(svc), media_type=CONTENT_TYPE_LATEST)
