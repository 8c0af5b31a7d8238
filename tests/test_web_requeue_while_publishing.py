"""A run queued again while its ingest is still finishing is ingested again.

A run is ``ready`` to clients from the UPDATE that publishes it; its ingest thread still
runs for a moment after (removing older generations, telling the page cache). New
objectives or a re-ingest asked for in that window queue the run again, and the worker once
dropped that submission as a duplicate of the thread still finishing: the run stayed
``queued`` for good. Here the window is held open on purpose, so the test fails every time
without the fix, not only on a loaded machine.
"""

from __future__ import annotations

import threading
from pathlib import Path

from web_helpers import client_for, make_settings, upload, wait_done, wait_generation

from tracelens.testing import write_chrome_trace
from tracelens.testing.planted_llm import static_launch_bound
from web.ingest_worker import IngestWorker


def test_objectives_set_while_the_ingest_finishes_are_applied(tmp_path: Path) -> None:
    trace = write_chrome_trace(static_launch_bound(), tmp_path / "serve.pt.trace.json.gz")
    with client_for(make_settings(tmp_path / "data")) as client:
        worker = client.app.state.services.worker
        assert isinstance(worker, IngestWorker)
        published = threading.Event()
        release = threading.Event()
        forget = worker.on_published

        def held_open(run_id: str) -> None:
            published.set()
            assert release.wait(30), "the test never released the ingest"
            if forget is not None:
                forget(run_id)

        worker.on_published = held_open
        run_id = upload(client, trace).json()["id"]
        assert published.wait(60), "the first ingest never published"
        run = client.get(f"/api/runs/{run_id}").json()
        assert run["status"] == "ready"  # published, its thread not yet done

        res = client.put(f"/api/runs/{run_id}/slo", json={"slo": "ttft=5ms"})
        assert res.status_code == 202 and res.json()["status"] == "queued"
        worker.on_published = forget
        release.set()

        again = wait_generation(client, run_id, run["ready_at"])
        assert again["slo"] == "ttft=5ms"
        slo = client.get(f"/api/runs/{run_id}/report").json()["llm"]["slo"]
        assert slo["attainment_pct"] == {"ttft": 50.0, "all": 50.0}
        assert wait_done(client, run_id)["status"] == "ready"
