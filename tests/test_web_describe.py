"""A run renamed and re-filed after upload: its name, tags, series and label change (by the
API or the run page's form), its analysis does not, and its pages show the change at once."""

from __future__ import annotations

import re
from pathlib import Path

from web_helpers import client_for, make_settings, upload, wait_done

from tracelens.testing import write_chrome_trace
from tracelens.testing.planted_llm import static_launch_bound

HTML = {"accept": "text/html"}


def test_api_renames_and_refiles_a_run(tmp_path: Path) -> None:
    trace = write_chrome_trace(static_launch_bound(), tmp_path / "serve.pt.trace.json.gz")
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, trace, name="first", tags="a").json()["id"])
        rid = run["id"]
        before_page = client.get(f"/runs/{rid}", headers=HTML).text
        assert "first" in before_page
        report = client.get(f"/api/runs/{rid}/report").json()
        res = client.patch(
            f"/api/runs/{rid}",
            json={"name": "llama decode, fixed", "tags": "gpu=h100, nightly", "series": "nightly",
                  "label": "abc123"},
        )  # fmt: skip
        assert res.status_code == 200, res.text
        got = res.json()
        assert (got["name"], got["tags"], got["series"], got["label"]) == (
            "llama decode, fixed",
            ["gpu=h100", "nightly"],
            "nightly",
            "abc123",
        )
        assert got["ready_at"] == run["ready_at"], "renaming analyses nothing again"
        # the cached run page and list show the new name at once
        assert "llama decode, fixed" in client.get(f"/runs/{rid}", headers=HTML).text
        assert client.get("/api/runs", params={"tag": "nightly"}).json()["total"] == 1
        assert client.get(f"/api/runs/{rid}/report").json() == report
        # a field left out is kept; an empty series leaves the series
        kept = client.patch(f"/api/runs/{rid}", json={"series": ""}).json()
        assert kept["series"] is None and kept["name"] == "llama decode, fixed"
        for body, says in (
            ({"name": "  "}, "'name' must not be empty"),
            ({"series": "no/slash"}, "form field 'series'"),
            ({"label": "a\x00b"}, "NUL"),
            ({"colour": "red"}, "colour"),
        ):
            bad = client.patch(f"/api/runs/{rid}", json=body)
            assert bad.status_code == 400 and says in bad.json()["error"], (body, bad.text)
        assert client.patch("/api/runs/0123456789ab", json={"name": "x"}).status_code == 404


def test_run_page_form_renames_a_run(tmp_path: Path) -> None:
    trace = write_chrome_trace(static_launch_bound(), tmp_path / "serve.pt.trace.json.gz")
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, trace).json()["id"])
        page = client.get(f"/runs/{run['id']}", headers=HTML)
        assert 'id="describe-form"' in page.text
        token = re.search(r'name="_csrf_token" value="([^"]+)"', page.text).group(1)
        forged = client.post(f"/runs/{run['id']}/describe", data={"name": "x"}, headers=HTML)
        assert forged.status_code == 403
        done = client.post(
            f"/runs/{run['id']}/describe",
            data={"_csrf_token": token, "name": "renamed", "tags": "t1", "series": "", "label": ""},
            headers=HTML,
            follow_redirects=False,
        )
        assert done.status_code == 303 and done.headers["location"] == f"/runs/{run['id']}"
        got = client.get(f"/api/runs/{run['id']}").json()
        assert (got["name"], got["tags"], got["series"], got["label"]) == (
            "renamed",
            ["t1"],
            None,
            None,
        )
        assert 'value="renamed"' in client.get(f"/runs/{run['id']}", headers=HTML).text
