"""Helpers for the web tests: an app on a fresh data directory, and waiting for runs."""

from __future__ import annotations

import gzip
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from tracelens.testing import training_steps
from tracelens.testing.chrome_writer import header_for, iter_events, write_events
from tracelens.testing.chromium import CHROMIUM, CHROMIUM_ARGS
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


def wait_generation(client: TestClient, run_id: str, past: str) -> dict[str, Any]:
    """Wait for a re-ingest: the run is ready again, later than ``past`` (its ready_at)."""
    deadline = time.monotonic() + 60
    while True:
        run = client.get(f"/api/runs/{run_id}").json()
        if run["status"] == "ready" and run["ready_at"] != past:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} not re-ingested: {run['status']}")
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve_process(
    data_dir: Path, *extra: str, env_vars: dict[str, str] | None = None
) -> Iterator[str]:
    """``tracelens serve`` in a child process on a free loopback port; yields its base URL.
    ``env_vars``: TRACELENS_* settings it gets (none of the caller's own reach it)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELENS_")}
    env.update(env_vars or {})
    cmd = [sys.executable, "-m", "tracelens.cli", "serve", "--port", str(port)]
    log_path = data_dir.parent / f"{data_dir.name}-serve.log"
    log = log_path.open("wb")  # a file, not a pipe: a chatty server must never block on it
    proc = subprocess.Popen(
        [*cmd, "--data-dir", str(data_dir), *extra], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/health", timeout=1)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                log.close()
                out = log_path.read_text(errors="replace")
                raise AssertionError(f"tracelens serve did not start:\n{out}") from None
            time.sleep(0.2)
    try:
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        log.close()


ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


@contextmanager
def chromium() -> Iterator[Any]:
    """Debian's Chromium under Playwright; skips the test, saying why, where either is missing."""
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium (install Debian's chromium package)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


# Every CSP violation a page causes, recorded by the page itself (an init script runs
# before the page's own and is not subject to its policy); csp_violations() reads them.
RECORD_CSP = (
    "window.__csp = []; document.addEventListener('securitypolicyviolation',"
    " e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"
)


def watch(page: Any, errors: list[str] | None = None) -> list[str]:
    """Collect ``page``'s uncaught errors and console errors (into ``errors``, if given, so
    several pages can share one list) and record its CSP violations; returns the list."""
    found: list[str] = [] if errors is None else errors
    page.on("pageerror", lambda e: found.append(str(e)))
    page.on("console", lambda m: found.append(m.text) if m.type == "error" else None)
    page.add_init_script(RECORD_CSP)
    return found


def csp_violations(page: Any) -> list[str]:
    """The CSP violations a page :func:`watch` set up has recorded so far."""
    return list(page.evaluate("() => window.__csp"))
