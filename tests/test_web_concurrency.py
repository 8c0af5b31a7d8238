"""20 uploads at once against the real server: all become ready, none lost or duplicated."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from web_helpers import serve_process, write_planted

UPLOADS = 20
REPEATED = 5  # these are sent twice, at the same time as the rest


def test_twenty_concurrent_uploads_all_ready_nothing_lost_or_duplicated(tmp_path: Path) -> None:
    traces = [
        write_planted(tmp_path / f"trace-{i:02d}.pt.trace.json.gz", host=f"node-{i:02d}")
        for i in range(UPLOADS)
    ]
    sends = traces + traces[:REPEATED]

    with serve_process(tmp_path / "data") as base:

        def send(path: Path) -> tuple[str, int, dict]:
            with httpx.Client(base_url=base, timeout=60) as c:
                r = c.post("/api/runs", files={"file": (path.name, path.read_bytes())})
                return path.name, r.status_code, r.json()

        with ThreadPoolExecutor(max_workers=len(sends)) as pool:
            answers = list(pool.map(send, sends))
        assert all(status in (200, 201) for _, status, _ in answers), answers
        ids_by_file: dict[str, set[str]] = {}
        for name, _, body in answers:
            ids_by_file.setdefault(name, set()).add(body["id"])
        # Same bytes -> the same run, whichever request got there first.
        assert all(len(ids) == 1 for ids in ids_by_file.values()), ids_by_file
        assert sum(1 for _, status, _ in answers if status == 201) == UPLOADS

        with httpx.Client(base_url=base, timeout=30) as c:
            deadline = time.monotonic() + 180
            while True:
                runs = c.get("/api/runs", params={"limit": 100}).json()
                statuses = [r["status"] for r in runs["runs"]]
                if all(s in ("ready", "failed") for s in statuses) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert runs["total"] == UPLOADS
            assert statuses == ["ready"] * UPLOADS, [r["error"] for r in runs["runs"]]
            assert {r["original_filename"] for r in runs["runs"]} == {p.name for p in traces}
            for r in runs["runs"]:
                assert c.get(f"/api/runs/{r['id']}/findings").json()
    stored = sorted(p.name for p in (tmp_path / "data" / "runs").iterdir())
    assert stored == sorted(next(iter(ids)) for ids in ids_by_file.values())
