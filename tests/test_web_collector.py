"""The server keeps its start-up objects out of the cyclic collector's way while it runs.

A full collection walking every module, class and route of the app took 50-100 ms and
ran several times a second under load: it was the run page's p95 at 50 clients. The app
freezes what it built at start-up and gives it back to the collector when it stops.
"""

from __future__ import annotations

import gc
from pathlib import Path

from web_helpers import client_for, make_settings


def test_start_up_objects_are_frozen_while_the_app_runs(tmp_path: Path) -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    with client_for(make_settings(tmp_path / "data"), start_worker=False) as client:
        assert client.get("/api/health").status_code == 200
        # the framework, SQLAlchemy, DuckDB and our own modules: well over 50 k objects
        assert gc.get_freeze_count() > 50_000
    assert gc.get_freeze_count() == 0, "a stopped app leaves nothing frozen"
