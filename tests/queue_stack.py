"""The scale-out deployment on this machine, for the tests that run it: a queue of the
test's own on the real Redis, the real catalog (PostgreSQL where
TRACELENS_TEST_POSTGRES_URL names one), and real ``tracelens serve`` and
``tracelens worker`` processes, killed at the end.

Each test has a queue of its own (its name, so its Redis keys, are unique) and removes
its keys afterwards. The fixtures (``queue_name``, ``catalog_url``, ``stack``) are in
``conftest.py``; this module is loaded only by the tests that use them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import httpx
from web_helpers import free_port

REDIS_URL = os.environ.get("TRACELENS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
# Generous: on a loaded 2-core machine a process's start (imports, migrations) alone can
# take tens of seconds; on an idle one nothing waits this long.
START_TIMEOUT_S = 120.0


def drop_queue_keys(client: Any, name: str) -> None:
    for pattern in (f"saq:{name}:*", f"saq:job:{name}:*"):
        keys = list(client.scan_iter(match=pattern, count=500))
        if keys:
            client.delete(*keys)


def worker_command() -> list[str]:
    """``tracelens worker`` as installed; from the source tree where the installed
    metadata predates the command (an editable install of an older checkout)."""
    if list(entry_points(group="tracelens.commands", name="worker")):
        return [sys.executable, "-m", "tracelens.cli", "worker"]
    return [
        sys.executable,
        "-c",
        "from web.cli import worker; worker(prog_name='tracelens worker')",
    ]


@dataclass
class Stack:
    """The deployment on this machine: a web process and workers, one data directory,
    one catalog, one queue; every process it starts is killed at the end."""

    tmp: Path
    queue: str
    catalog: str
    env_extra: dict[str, str] = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    base: str = ""

    @property
    def data_dir(self) -> Path:
        return self.tmp / "data"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELENS_")}
        env.update(
            TRACELENS_QUEUE_URL=REDIS_URL,
            TRACELENS_QUEUE_NAME=self.queue,
            TRACELENS_DATABASE_URL=self.catalog,
            TRACELENS_QUEUE_VISIBILITY_S="2",
            TRACELENS_QUEUE_RETRY_DELAY_S="1",
        )
        env.update(self.env_extra)
        env.update(extra)
        return env

    def _start(self, cmd: list[str], log_name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.tmp / f"{log_name}.log").open("ab")
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(proc)
        return proc

    def web(self, **extra: str) -> subprocess.Popen[bytes]:
        port = free_port()
        cmd = [sys.executable, "-m", "tracelens.cli", "serve", "--port", str(port)]
        proc = self._start([*cmd, "--data-dir", str(self.data_dir)], "web", self.env(**extra))
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            with suppress(httpx.HTTPError):
                if httpx.get(f"{self.base}/api/health", timeout=1).status_code == 200:
                    return proc
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("web did not start:\n" + self.log("web"))
            time.sleep(0.2)

    def worker(self, name: str, **extra: str) -> subprocess.Popen[bytes]:
        cmd = [*worker_command(), "--data-dir", str(self.data_dir), "--concurrency", "1"]
        return self._start([*cmd, "--name", name], name, self.env(**extra))

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=30)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)


def wait_for(what: str, check: Callable[[], Any], timeout: float = 40.0, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


def job_record(queue: str, key: str) -> dict[str, Any]:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        raw = client.get(f"saq:job:{queue}:{key}")
    finally:
        client.close()
    assert raw is not None, f"no job record for {key}"
    return dict(json.loads(raw))
