"""The kept copies of ready runs never outlive a change to the run's row.

Every catalog write a server process can see is made through a second ``Catalog`` on the
same database, as another server process (or a queue worker) would make it: the copy
kept by the first must give way at once to the row as it is now. PostgreSQL where the
suite has one, else SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from web.catalog import Catalog, Run, RunStatus
from web.catalog import runs as catalog_runs
from web.catalog.ready_runs import ReadyRuns


class _Reads:
    """Counts the full reads of a run's row the kept copies save."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.count = 0

    def __call__(self, run_id: str) -> Run | None:
        self.count += 1
        return catalog_runs.fresh_run(self.catalog, run_id)


@pytest.fixture
def catalogs(catalog_url: str) -> Iterator[tuple[Catalog, Catalog]]:
    server, other = Catalog(catalog_url), Catalog(catalog_url, upgrade=False)
    try:
        yield server, other
    finally:
        server.dispose()
        other.dispose()


def _ready_run(catalog: Catalog, run_id: str = "r1") -> None:
    with catalog.session() as s:
        catalog_runs.create_run(
            s,
            catalog_runs.NewRun(
                id=run_id,
                sha256=run_id * 8,
                name="first",
                tags=",",
                original_filename="t.json",
                size_bytes=1,
                source_file="t.json",
            ),
        )
    with catalog.session() as s:
        generation = catalog_runs.claim(s, run_id)
        assert generation is not None
        assert catalog_runs.mark_ready(s, run_id, generation, "kineto", {"trace": {}}, [])


def test_a_ready_run_is_read_once_while_unchanged(catalogs: tuple[Catalog, Catalog]) -> None:
    server, _ = catalogs
    _ready_run(server)
    reads = _Reads(server)
    kept = ReadyRuns(server.engine, reads)
    first = kept.get("r1")
    assert first is not None and first.status == RunStatus.READY
    for _ in range(5):
        assert kept.get("r1") is first
    assert reads.count == 1


def test_edits_elsewhere_are_seen_at_once(catalogs: tuple[Catalog, Catalog]) -> None:
    server, other = catalogs
    _ready_run(server)
    kept = ReadyRuns(server.engine, _Reads(server))
    assert kept.get("r1").name == "first"  # type: ignore[union-attr]
    with other.session() as s:
        assert catalog_runs.describe_run(s, "r1", {"name": "renamed"})
    assert kept.get("r1").name == "renamed"  # type: ignore[union-attr]
    with other.session() as s:
        assert catalog_runs.set_slo(s, "r1", "ttft=200ms")
    assert kept.get("r1").slo == "ttft=200ms"  # type: ignore[union-attr]


def test_reingest_and_deletion_are_seen_at_once(catalogs: tuple[Catalog, Catalog]) -> None:
    server, other = catalogs
    _ready_run(server)
    reads = _Reads(server)
    kept = ReadyRuns(server.engine, reads)
    ready = kept.get("r1")
    assert ready is not None
    with other.session() as s:
        assert catalog_runs.requeue(s, "r1")
    queued = kept.get("r1")
    assert queued is not None and queued.status == RunStatus.QUEUED
    # a run that is not ready is read afresh every time: its progress moves
    before = reads.count
    kept.get("r1")
    assert reads.count == before + 1
    with other.session() as s:
        generation = catalog_runs.claim(s, "r1")
        assert generation is not None
        assert catalog_runs.mark_ready(s, "r1", generation, "kineto", {"trace": {}}, [])
    again = kept.get("r1")
    assert again is not None and again.status == RunStatus.READY
    assert again.generation == ready.generation + 1
    with other.session() as s:
        assert catalog_runs.delete_run(s, "r1")
    assert kept.get("r1") is None
    assert kept.get("r1") is None
