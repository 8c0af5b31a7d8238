"""The kept copies of ready runs never outlive a change to the run's row.

Every catalog write a server process can see is made through a second ``Catalog`` on the
same database, as another server process (or a queue worker) would make it: the copy
kept by the first must give way at once to the row as it is now. PostgreSQL where the
suite has one, else SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

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


@dataclass
class Served:
    """A ready run ``r1``, the server's kept copies of it, the full reads they made, and a
    second catalog on the same database (another process)."""

    kept: ReadyRuns
    reads: _Reads
    other: Catalog


@pytest.fixture
def served(catalog_url: str) -> Iterator[Served]:
    server, other = Catalog(catalog_url), Catalog(catalog_url, upgrade=False)
    try:
        with server.session() as s:
            catalog_runs.create_run(
                s,
                catalog_runs.NewRun(
                    id="r1",
                    sha256="r1" * 8,
                    name="first",
                    tags=",",
                    original_filename="t.json",
                    size_bytes=1,
                    source_file="t.json",
                ),
            )
        _publish(server, "r1")
        reads = _Reads(server)
        yield Served(ReadyRuns(server.engine, reads), reads, other)
    finally:
        server.dispose()
        other.dispose()


def _publish(catalog: Catalog, run_id: str) -> None:
    """Ingest ``run_id`` as a worker does: claimed, then marked ready."""
    with catalog.session() as s:
        generation = catalog_runs.claim(s, run_id)
        assert generation is not None
        assert catalog_runs.mark_ready(s, run_id, generation, "kineto", {"trace": {}}, [])


def test_a_ready_run_is_read_once_while_unchanged(served: Served) -> None:
    first = served.kept.get("r1")
    assert first is not None and first.status == RunStatus.READY
    for _ in range(5):
        assert served.kept.get("r1") is first
    assert served.reads.count == 1


def test_edits_elsewhere_are_seen_at_once(served: Served) -> None:
    kept, other = served.kept, served.other
    assert kept.get("r1").name == "first"  # type: ignore[union-attr]
    with other.session() as s:
        assert catalog_runs.describe_run(s, "r1", {"name": "renamed"})
    assert kept.get("r1").name == "renamed"  # type: ignore[union-attr]
    with other.session() as s:
        assert catalog_runs.set_slo(s, "r1", "ttft=200ms")
    assert kept.get("r1").slo == "ttft=200ms"  # type: ignore[union-attr]


def test_reingest_and_deletion_are_seen_at_once(served: Served) -> None:
    kept, other = served.kept, served.other
    ready = kept.get("r1")
    assert ready is not None
    with other.session() as s:
        assert catalog_runs.requeue(s, "r1")
    queued = kept.get("r1")
    assert queued is not None and queued.status == RunStatus.QUEUED
    # a run that is not ready is read afresh every time: its progress moves
    before = served.reads.count
    kept.get("r1")
    assert served.reads.count == before + 1
    _publish(other, "r1")
    again = kept.get("r1")
    assert again is not None and again.status == RunStatus.READY
    assert again.generation == ready.generation + 1
    with other.session() as s:
        assert catalog_runs.delete_run(s, "r1")
    assert kept.get("r1") is None
    assert kept.get("r1") is None
