"""Processes started together on a new catalog all come up.

A web process and its workers (or ``serve --processes N``) each upgrade the catalog's
schema as they start. On PostgreSQL an advisory lock makes them take turns; on SQLite they
once raced to create the same tables, and the losers died at start ("table api_tokens
already exists"), leaving a deployment one worker short without a word in the web UI.
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from sqlalchemy import inspect


def _start(url: str, barrier: mp.synchronize.Barrier, errors: mp.Queue) -> None:
    from web.catalog import Catalog

    barrier.wait()
    try:
        Catalog(url).dispose()
    except Exception as exc:
        errors.put(f"{type(exc).__name__}: {exc}"[:200])


def test_processes_starting_together_on_a_new_sqlite_catalog_all_start(tmp_path: Path) -> None:
    from web.catalog import Catalog

    url = f"sqlite:///{tmp_path / 'catalog.sqlite'}"
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(6)
    errors: mp.Queue = ctx.Queue()
    procs = [ctx.Process(target=_start, args=(url, barrier, errors)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    failed = []
    while not errors.empty():
        failed.append(errors.get())
    assert not failed, failed
    assert all(p.exitcode == 0 for p in procs)
    catalog = Catalog(url, upgrade=False)
    try:
        assert "runs" in inspect(catalog.engine).get_table_names()
    finally:
        catalog.dispose()
