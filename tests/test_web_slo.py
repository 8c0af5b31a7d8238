"""Serving objectives on the web: an upload field, an API parameter, a field on the run page.

The planted static-batching trace (tracelens.testing.planted_llm) has 8 requests: with
ttft=5ms,tpot=1ms the 4 of the second batch miss TTFT (12 ms), so attainment is 50 %.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from web_helpers import client_for, make_settings, upload, wait_done, wait_generation

from tracelens.testing import write_chrome_trace
from tracelens.testing.planted_llm import static_launch_bound

HTML = {"accept": "text/html"}


@pytest.fixture
def served(tmp_path: Path) -> Path:
    return write_chrome_trace(static_launch_bound(), tmp_path / "serve.pt.trace.json.gz")


def test_upload_with_objectives_judges_the_trace(tmp_path: Path, served: Path) -> None:
    with client_for(make_settings(tmp_path / "data")) as client:
        res = upload(client, served, slo="ttft=5ms, tpot:1ms")
        assert res.status_code == 201, res.text
        run = wait_done(client, res.json()["id"])
        assert run["status"] == "ready" and run["slo"] == "ttft=5ms,tpot=1ms"
        slo = client.get(f"/api/runs/{run['id']}/report").json()["llm"]["slo"]
        assert slo["attainment_pct"] == {"ttft": 50.0, "tpot": 100.0, "all": 50.0}
        findings = client.get(f"/api/runs/{run['id']}/findings").json()
        (f,) = [f for f in findings if f["analyzer"] == "llm_slo"]
        assert f["impact_ns"] == 3_500_000
        page = client.get(f"/runs/{run['id']}", headers=HTML).text
        panel = page.split('data-section="llm"', 1)[1].split("</section>", 1)[0]
        assert "SLO attainment" in panel and "≤ 5 ms" in panel and "50.0%" in panel
        assert 'value="ttft=5ms,tpot=1ms"' in page  # the run page's field shows them


def test_bad_objectives_refuse_the_upload(tmp_path: Path, served: Path) -> None:
    settings = make_settings(tmp_path / "data")
    with client_for(settings) as client:
        res = upload(client, served, slo="ttft=soon")
        assert res.status_code == 400
        assert res.json()["error"].startswith("form field 'slo': ttft: expected a duration")
        assert client.get("/api/runs").json()["total"] == 0
    assert not list(settings.uploads_dir.glob("*.part"))


def test_api_sets_and_removes_objectives_and_reanalyzes(tmp_path: Path, served: Path) -> None:
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, served).json()["id"])
        assert run["slo"] is None
        assert "slo" not in client.get(f"/api/runs/{run['id']}/report").json()["llm"]

        bad = client.put(f"/api/runs/{run['id']}/slo", json={"slo": "speed=1ms"})
        assert bad.status_code == 400 and "unknown objective 'speed'" in bad.json()["error"]

        res = client.put(f"/api/runs/{run['id']}/slo", json={"slo": "ttft=12ms,e2e=0.01s"})
        assert res.status_code == 202 and res.json()["slo"] == "ttft=12ms,e2e=10ms"
        again = wait_generation(client, run["id"], run["ready_at"])
        slo = client.get(f"/api/runs/{run['id']}/report").json()["llm"]["slo"]
        # every TTFT is at most 12 ms; e2e is 4, 6, 8, 10 ms for q0-q3 and 13 ms for q4-q7
        assert slo["attainment_pct"] == {"ttft": 100.0, "e2e": 50.0, "all": 50.0}

        cleared = client.put(f"/api/runs/{run['id']}/slo", json={"slo": None})
        assert cleared.status_code == 202 and cleared.json()["slo"] is None
        wait_generation(client, run["id"], again["ready_at"])
        assert "slo" not in client.get(f"/api/runs/{run['id']}/report").json()["llm"]
        assert client.put("/api/runs/0123456789ab/slo", json={"slo": "ttft=1ms"}).status_code == 404


def test_run_page_form_sets_objectives(tmp_path: Path, served: Path) -> None:
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, served).json()["id"])
        page = client.get(f"/runs/{run['id']}", headers=HTML)
        token = re.search(r'name="_csrf_token" value="([^"]+)"', page.text).group(1)
        forged = client.post(f"/runs/{run['id']}/slo", data={"slo": "ttft=5ms"}, headers=HTML)
        assert forged.status_code == 403
        done = client.post(
            f"/runs/{run['id']}/slo",
            data={"_csrf_token": token, "slo": "ttft=5ms"},
            headers=HTML,
            follow_redirects=False,
        )
        assert done.status_code == 303 and done.headers["location"] == f"/runs/{run['id']}"
        wait_generation(client, run["id"], run["ready_at"])
        slo = client.get(f"/api/runs/{run['id']}/report").json()["llm"]["slo"]
        assert slo["attainment_pct"] == {"ttft": 50.0, "all": 50.0}
