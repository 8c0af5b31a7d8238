"""The web compare view: ``/api/compare`` and ``/compare`` show ``tracelens diff`` of two runs."""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient
from web_helpers import client_for, make_settings, upload, wait_done, write_planted

from tracelens.core.findings import finding_id
from tracelens.testing import training_steps, write_chrome_trace
from tracelens.testing.planted_pair import decode_naive, decode_tuned

EVIL = "<script>alert('k')</script>_gemm"


def _write_wide(path: Path) -> Path:
    """The training trace with more kernel names than a stored report lists."""
    sc = training_steps()
    for i, k in enumerate(sc.kernels):
        k.name = f"wide_kernel_{i % 14:02d}"
    return write_chrome_trace(sc, path)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str]]]:
    d = tmp_path_factory.mktemp("compare")
    traces = {
        "naive": write_chrome_trace(decode_naive(tokens=32), d / "naive.pt.trace.json.gz"),
        "tuned": write_chrome_trace(decode_tuned(tokens=32), d / "tuned.pt.trace.json.gz"),
        "planted": write_planted(d / "planted.pt.trace.json.gz"),
        "evil": write_planted(d / "evil.pt.trace.json.gz", kernel_name=EVIL),
        "wide": _write_wide(d / "wide.pt.trace.json.gz"),
    }
    with client_for(make_settings(d / "data")) as client:
        ids = {}
        for key, path in traces.items():
            r = upload(client, path)
            assert r.status_code == 201, r.text
            ids[key] = r.json()["id"]
        for run_id in ids.values():
            assert wait_done(client, run_id)["status"] == "ready"
        yield client, ids


def _compare(client: TestClient, **params: Any) -> Any:
    return client.get("/api/compare", params=params)


def test_naive_to_tuned_is_faster_and_resolves_findings(
    site: tuple[TestClient, dict[str, str]],
) -> None:
    client, ids = site
    r = _compare(client, base=ids["naive"], cand=ids["tuned"], max_regression=5)
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["schema"] == "tracelens.report.diff/1"
    assert d["runs"] == {"baseline": ids["naive"], "candidate": ids["tuned"]}
    v = d["verdict"]
    assert v["status"] == "faster" and v["change_pct"] < 0 and not v["regression"]
    resolved = {f["id"] for f in d["findings"]["resolved"]}
    assert finding_id("launch_overhead", 0) in resolved
    assert [f["title"].split("`")[1] for f in d["findings"]["appeared"]] == ["CUDA graph replay"]
    # Both reports list every kernel: no note, and total kernel time is comparable.
    assert d["notes"] == [] and "kernel_ns" in {m["key"] for m in d["metrics"]}

    back = _compare(client, base=ids["tuned"], cand=ids["naive"], max_regression=5).json()
    assert back["verdict"]["status"] == "regression" and back["verdict"]["regression"]
    assert finding_id("launch_overhead", 0) in {f["id"] for f in back["findings"]["appeared"]}


def test_cut_off_kernel_lists_are_noted(site: tuple[TestClient, dict[str, str]]) -> None:
    client, ids = site
    report = client.get(f"/api/runs/{ids['wide']}/report").json()
    assert len(report["top_kernels"]) == 10 < report["metrics"]["kernel_count"]
    d = _compare(client, base=ids["planted"], cand=ids["wide"]).json()
    # A name below the cut-off looks "gone": the diff says so, and sums no kernel time.
    assert d["notes"] and "cut-off" in d["notes"][0]
    kernel_ns = next(m for m in d["metrics"] if m["key"] == "kernel_ns")
    assert kernel_ns["baseline"] > 0 and kernel_ns["candidate"] is None
    page = client.get("/compare", params={"base": ids["planted"], "cand": ids["wide"]}).text
    assert "cut-off" in page


def test_a_run_against_itself_is_empty(site: tuple[TestClient, dict[str, str]]) -> None:
    client, ids = site
    d = _compare(client, base=ids["naive"], cand=ids["naive"], max_regression=0).json()
    assert d["empty"] and d["verdict"]["status"] == "unchanged"
    assert d["kernels"] == [] and d["operators"] == []
    assert not any(d["findings"][k] for k in ("appeared", "resolved", "changed"))
    page = client.get("/compare", params={"base": ids["naive"], "cand": ids["naive"]})
    assert page.status_code == 200 and 'id="no-differences"' in page.text


def test_errors(site: tuple[TestClient, dict[str, str]], tmp_path: Path) -> None:
    client, ids = site
    unknown = _compare(client, base=ids["naive"], cand="no-such-run")
    assert unknown.status_code == 404 and "no-such-run" in unknown.json()["error"]
    for params in ({"base": ids["naive"]}, {"cand": ids["naive"]}, {}):
        r = _compare(client, **params)
        assert r.status_code == 400 and r.json()["error"], params
    for bad in ("lots", "nan", "inf"):
        r = _compare(client, base=ids["naive"], cand=ids["tuned"], max_regression=bad)
        assert r.status_code == 400 and "max_regression" in r.json()["error"], bad
    page = client.get(
        "/compare",
        params={"base": ids["naive"], "cand": ids["tuned"], "max_regression": "lots"},
        headers={"accept": "text/html"},
    )
    assert page.status_code == 400 and "text/html" in page.headers["content-type"]

    # A run still queued (no worker in this app) cannot be compared yet.
    with client_for(make_settings(tmp_path / "data"), start_worker=False) as idle:
        queued = upload(idle, write_planted(tmp_path / "q.pt.trace.json.gz")).json()["id"]
        r = _compare(idle, base=queued, cand=queued)
        assert r.status_code == 409 and "not ready" in r.json()["error"]


def test_page_shows_verdict_tables_and_finding_links(
    site: tuple[TestClient, dict[str, str]],
) -> None:
    client, ids = site
    params = {"base": ids["naive"], "cand": ids["tuned"], "max_regression": ""}
    r = client.get("/compare", params=params)
    assert r.status_code == 200, r.text
    d = _compare(client, base=ids["naive"], cand=ids["tuned"]).json()
    assert 'data-status="faster"' in r.text and html.escape(d["verdict"]["line"]) in r.text
    resolved = d["findings"]["resolved"][0]["id"]
    appeared = d["findings"]["appeared"][0]["id"]
    # Each finding links to its page in the run that has it.
    assert f'href="/runs/{ids["naive"]}/findings/{resolved}"' in r.text
    assert f'href="/runs/{ids["tuned"]}/findings/{appeared}"' in r.text
    assert client.get(f"/runs/{ids['naive']}/findings/{resolved}").status_code == 200
    assert 'id="metrics"' in r.text and "ampere_sgemm_64x64_nn" in r.text
    assert 'id="copy-markdown"' in r.text and "# tracelens diff" in r.text
    assert '<script src="/static/finding.js"' in r.text
    # The Markdown a ticket gets leads back: both runs, the comparison, each finding.
    md = html.unescape(
        r.text.split('id="finding-markdown" class="markdown">', 1)[1].split("</pre>", 1)[0]
    )
    root = "http://testserver.local"
    assert f"]({root}/runs/{ids['naive']})" in md and f"]({root}/runs/{ids['tuned']})" in md
    assert f"- comparison: {root}/compare?base={ids['naive']}&cand={ids['tuned']}" in md
    assert f"]({root}/runs/{ids['tuned']}/findings/{appeared})" in md
    assert f"]({root}/runs/{ids['naive']}/findings/{resolved})" in md

    # Without both runs the page is the chooser, listing the ready runs.
    chooser = client.get("/compare", params={"base": ids["naive"]})
    assert chooser.status_code == 200 and 'name="cand"' in chooser.text
    assert f'<option value="{ids["naive"]}" selected>' in chooser.text
    assert 'id="verdict"' not in chooser.text


def test_names_are_escaped(site: tuple[TestClient, dict[str, str]]) -> None:
    client, ids = site
    d = _compare(client, base=ids["planted"], cand=ids["evil"]).json()
    assert EVIL in {k["name"] for k in d["kernels"]}
    r = client.get("/compare", params={"base": ids["planted"], "cand": ids["evil"]})
    assert r.status_code == 200
    assert EVIL not in r.text and "&lt;script&gt;alert(" in r.text


def test_entry_points_from_the_run_list_and_run_page(
    site: tuple[TestClient, dict[str, str]],
) -> None:
    client, ids = site
    runs = client.get("/").text
    assert 'id="compare-form"' in runs and 'action="/compare"' in runs
    run_page = client.get(f"/runs/{ids['naive']}").text
    assert f'href="/compare?base={ids["naive"]}"' in run_page
