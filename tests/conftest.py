"""Shared fixtures: the real-trace corpus and generated synthetic traces."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


def corpus_root() -> Path | None:
    env = os.environ.get("TRACELENS_CORPUS")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "corpus")
    for c in candidates:
        if c.is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def corpus() -> Path:
    root = corpus_root()
    if root is None:
        pytest.skip(
            "real-trace corpus not found: set TRACELENS_CORPUS or place it at ../shared/corpus"
        )
    return root


@pytest.fixture(scope="session")
def planted_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    from tracelens.testing import training_steps, write_chrome_trace

    sc = training_steps()
    path = tmp_path_factory.mktemp("planted") / "planted.pt.trace.json.gz"
    write_chrome_trace(sc, path)
    return path, sc.expected


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A SQLAlchemy URL on the PostgreSQL server, confined to a fresh schema dropped after."""
    url = os.environ.get("TRACELENS_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("TRACELENS_TEST_POSTGRES_URL is not set (no PostgreSQL server to test on)")
    import uuid

    from sqlalchemy import create_engine, text

    schema = f"tl_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(url)
    try:
        with admin.begin() as con:
            con.execute(text(f"CREATE SCHEMA {schema}"))
    except Exception as exc:  # server down or refusing: say so rather than fail obscurely
        admin.dispose()
        pytest.skip(f"PostgreSQL at TRACELENS_TEST_POSTGRES_URL is unreachable: {exc!s:.120}")
    sep = "&" if "?" in url else "?"
    try:
        yield f"{url}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as con:
            con.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture(scope="session")
def scenario_db(tmp_path_factory: pytest.TempPathFactory):
    """Load a synthetic Scenario through the Chrome writer and the real ingest: a TraceDB."""
    from ingest import load_trace
    from tracelens.core.tracedb import TraceDB
    from tracelens.testing import write_chrome_trace

    opened = []

    def load(sc):
        path = tmp_path_factory.mktemp(sc.name) / f"{sc.name}.pt.trace.json.gz"
        write_chrome_trace(sc, path)
        loaded = load_trace(path)
        opened.append(loaded)
        return TraceDB(loaded.con)

    yield load
    for loaded in opened:
        loaded.close()


@pytest.fixture(scope="session")
def scenario_notes(tmp_path_factory: pytest.TempPathFactory):
    """The report notes of a synthetic Scenario (through the Chrome writer, the real ingest
    and the report) that contain a phrase: what a note-writing module says of it."""
    from ingest import load_trace
    from tracelens.report import build_report
    from tracelens.testing import write_chrome_trace

    def notes(sc, containing: str) -> list[str]:
        path = tmp_path_factory.mktemp(sc.name) / f"{sc.name}.pt.trace.json"
        loaded = load_trace(write_chrome_trace(sc, path))
        try:
            return [n for n in build_report(loaded)["notes"] if containing in n]
        finally:
            loaded.close()

    return notes


@pytest.fixture(scope="module")
def planted_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted training trace as a Chrome trace file, once per test module."""
    from tracelens.testing import training_steps, write_chrome_trace

    path = tmp_path_factory.mktemp("planted") / "planted.pt.trace.json.gz"
    write_chrome_trace(training_steps(), path)
    return path


@pytest.fixture(scope="module")
def trace(planted_path: Path):
    """That trace opened with the Python API (``tracelens.load``)."""
    import tracelens

    t = tracelens.load(planted_path)
    yield t
    t.close()


# The scale-out mode's tests (tests/queue_stack.py has the deployment they start).


@pytest.fixture
def queue_name() -> Iterator[str]:
    """A queue of this test's own on the real Redis; its keys are removed afterwards."""
    import uuid

    import redis
    from queue_stack import REDIS_URL, drop_queue_keys

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        client.ping()
    except Exception as exc:
        pytest.skip(f"no Redis at {REDIS_URL} ({exc!s:.80})")
    name = f"tl-test-{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        drop_queue_keys(client, name)
        client.close()


@pytest.fixture
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """PostgreSQL (a fresh schema) where the suite has one, else a SQLite file."""
    if os.environ.get("TRACELENS_TEST_POSTGRES_URL"):
        return str(request.getfixturevalue("postgres_url"))
    return f"sqlite:///{tmp_path / 'catalog.sqlite'}"


@pytest.fixture
def stack(tmp_path: Path, queue_name: str, catalog_url: str) -> Iterator[Any]:
    """The scale-out deployment on this machine (:class:`queue_stack.Stack`)."""
    from queue_stack import Stack

    s = Stack(tmp=tmp_path, queue=queue_name, catalog=catalog_url)
    try:
        yield s
    finally:
        s.stop()


# The browser tests' shared fixtures: one `tracelens serve` child process and one Chromium
# per module (a module needing a differently set-up server defines its own `server`).
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from web_helpers import serve_process

    with serve_process(tmp_path_factory.mktemp("serve")) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from web_helpers import chromium

    with chromium() as b:
        yield b
