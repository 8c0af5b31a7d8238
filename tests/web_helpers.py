"""Helpers for the web tests: an app on a fresh data directory, and waiting for runs."""

from __future__ import annotations

import gzip
import time
from pathlib import Path
from typing import Any

from litestar.testing import TestClient

from tracelens.synthetic import training_steps
from tracelens.synthetic.chrome_writer import header_for, iter_events, write_events
from web.app import create_app
from web.settings import Settings


def make_settings(data_dir: Path, **overrides: Any) -> Settings:
    overrides.setdefault("api_tokens", frozenset())
    overrides.setdefault("redis_url", None)
    overrides.setdefault("database_url", f"sqlite:///{data_dir / 'catalog.sqlite'}")
    return Settings.from_env(data_dir, **overrides)


def client_for(settings: Settings, start_worker: bool = True) -> TestClient:
    return TestClient(create_app(settings, start_worker=start_worker))


def upload(
    client: TestClient,
    path: Path,
    filename: str | None = None,
    headers: dict[str, str] | None = None,
    **fields: str,
) -> Any:
    """POST ``path`` as the multipart field ``file``; ``fields`` are the other form fields."""
    return client.post(
        "/api/runs",
        files={"file": (filename or path.name, path.read_bytes(), "application/octet-stream")},
        data=fields,
        headers=headers or {},
    )


def wait_done(client: TestClient, run_id: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        run = client.get(f"/api/runs/{run_id}").json()
        if run["status"] in ("ready", "failed"):
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still {run['status']} after {timeout}s")
        time.sleep(0.1)


def write_planted(path: Path, host: str | None = None, kernel_name: str | None = None) -> Path:
    """The planted training trace, optionally with a given host name or first kernel name."""
    sc = training_steps()
    if kernel_name is not None:
        first = sc.kernels[0].name
        for k in sc.kernels:
            if k.name == first:
                k.name = kernel_name
    header = header_for(sc)
    if host is not None:
        header["host_name"] = host
    with gzip.open(path, "wt", encoding="utf-8") as out:
        write_events(out, iter_events(sc), header)
    return path
