"""``/api-reference``: the API as a page (see :mod:`web.api_reference`)."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.response import Template

from web.api_reference import reference
from web.routes.blocking import blocking_get


@blocking_get("/api-reference", include_in_schema=False)
def api_reference(request: Request[Any, Any, Any]) -> Template:
    schema = request.app.openapi_schema.to_schema()
    return Template(
        "api_reference.html",
        context={"tags": reference(schema), "title": schema["info"]["title"],
                 "version": schema["info"]["version"]},
    )  # fmt: skip
