"""The API reference page: the service's OpenAPI document rendered as HTML on the server.

``/schema/openapi.json`` is for tools; a person reading how to call the service wants the
operations by tag, with their parameters, body and answers. Rendering it here keeps the
page local and script-free (the usual viewers load JavaScript from a CDN, which this
service's CSP and offline installs forbid).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_METHODS = ("get", "post", "put", "patch", "delete")


@dataclass
class Operation:
    method: str
    path: str
    summary: str
    description: str
    parameters: list[dict[str, str]]
    body: str | None
    responses: list[tuple[str, str]]


@dataclass
class Tag:
    name: str
    operations: list[Operation] = field(default_factory=list)


def reference(schema: dict[str, Any]) -> list[Tag]:
    """The operations of an OpenAPI document, grouped by their first tag, in path order."""
    tags: dict[str, Tag] = {}
    for path, item in sorted(schema.get("paths", {}).items()):
        for method in _METHODS:
            op = item.get(method)
            if not op:
                continue
            name = (op.get("tags") or ["other"])[0]
            tags.setdefault(name, Tag(name)).operations.append(_operation(schema, method, path, op))
    return sorted(tags.values(), key=lambda t: t.name)


def _operation(schema: dict[str, Any], method: str, path: str, op: dict[str, Any]) -> Operation:
    params = [
        {
            "name": p.get("name", ""),
            "in": p.get("in", ""),
            "required": "required" if p.get("required") else "optional",
            "type": _type(schema, p.get("schema") or {}),
            "description": p.get("description") or "",
        }
        for p in op.get("parameters") or []
    ]
    body = None
    content = (op.get("requestBody") or {}).get("content") or {}
    for media, spec in content.items():
        body = f"{media}: {_type(schema, spec.get('schema') or {})}"
        break
    responses = [
        (code, (r.get("description") or "").strip())
        for code, r in sorted((op.get("responses") or {}).items())
    ]
    return Operation(
        method=method.upper(),
        path=path,
        summary=op.get("summary") or "",
        description=op.get("description") or "",
        parameters=params,
        body=body,
        responses=responses,
    )


def _type(schema: dict[str, Any], s: dict[str, Any]) -> str:
    """A short name for a JSON schema: its component's name, or its type."""
    if "$ref" in s:
        return str(s["$ref"]).rsplit("/", 1)[-1]
    if "oneOf" in s or "anyOf" in s:
        return " | ".join(_type(schema, x) for x in s.get("oneOf") or s.get("anyOf") or [])
    if s.get("type") == "array":
        return f"list of {_type(schema, s.get('items') or {})}"
    return str(s.get("type") or "object")
