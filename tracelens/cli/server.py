"""Talking to a ``tracelens serve`` from the command line: the server and token options,
JSON requests and a streamed multipart upload (the standard library's HTTP client, so
the commands need nothing beyond the core).

A refusal prints the server's one-line ``error`` and exits 2, as bad input does anywhere.
"""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from tracelens.cli.options import fail

_Command = TypeVar("_Command", bound=Callable[..., object])
DEFAULT_SERVER = "http://127.0.0.1:8000"
_CHUNK = 1024 * 1024
TIMEOUT_S = 60


def server_options(command: _Command) -> _Command:
    """``--server URL`` ($TRACELENS_URL) and ``--token`` ($TRACELENS_TOKEN), as ``server``."""
    command = click.option(
        "--token",
        envvar="TRACELENS_TOKEN",
        default=None,
        help="API token, where the service requires one ($TRACELENS_TOKEN).",
    )(command)
    return click.option(
        "--server",
        envvar="TRACELENS_URL",
        default=DEFAULT_SERVER,
        show_default=True,
        help="Base URL of the tracelens service ($TRACELENS_URL).",
    )(command)


class Server:
    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        self.token = token or None

    def _send(self, request: urllib.request.Request) -> Any:
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            fail(f"{request.full_url}: {exc.code} {_error_text(exc)}")
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            fail(f"{self.url}: cannot reach the tracelens service ({reason})")
        except ValueError:
            fail(f"{request.full_url}: the answer is not JSON (is this a tracelens service?)")

    def get(self, path: str, **params: object) -> Any:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        return self._send(
            urllib.request.Request(f"{self.url}{path}" + (f"?{query}" if query else ""))
        )

    def put(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            f"{self.url}{path}", data=json.dumps(body).encode(), method="PUT"
        )
        request.add_header("Content-Type", "application/json")
        return self._send(request)

    def upload(self, path: Path, fields: dict[str, str]) -> Any:
        """POST ``path`` as the multipart field ``file`` with ``fields``, streamed."""
        boundary = f"tracelens-{secrets.token_hex(12)}"
        head = b"".join(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n'.encode()
            + v.encode()
            + b"\r\n"
            for k, v in fields.items()
        )
        quoted = path.name.replace('"', "%22").replace("\r", "").replace("\n", "")
        head += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{quoted}"'
            "\r\nContent-Type: application/octet-stream\r\n\r\n"
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        size = path.stat().st_size

        def body() -> Iterator[bytes]:
            yield head
            with path.open("rb") as fh:
                while block := fh.read(_CHUNK):
                    yield block
            yield tail

        request = urllib.request.Request(f"{self.url}/api/runs", data=body(), method="POST")
        request.add_header("Content-Type", f"multipart/form-data; boundary={boundary}")
        request.add_header("Content-Length", str(len(head) + size + len(tail)))
        return self._send(request)


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read() or b"{}")
    except ValueError:
        return exc.reason if isinstance(exc.reason, str) else "refused"
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"]
    return exc.reason if isinstance(exc.reason, str) else "refused"
