"""A job dropped on the upload page in headless Chromium: two rank files dropped at once
become one job run, whose page shows the rank table, heat strips, clock offsets and the
straggler finding, at a wide and a narrow width, with no script error or CSP violation.

Runs the real ``tracelens serve`` on a free loopback port, as ``test_web_browser.py`` does;
screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from web_helpers import ARTIFACTS, csp_violations, watch

from tracelens.testing.planted_ranks import write_job

pytestmark = pytest.mark.browser

# A drop of files, as the browser delivers it when files are dragged onto the form.
_DROP = """([files]) => {
  const dt = new DataTransfer();
  for (const [name, text] of files) dt.items.add(new File([text], name));
  const form = document.getElementById('upload-form');
  const opts = {dataTransfer: dt, bubbles: true, cancelable: true};
  form.dispatchEvent(new DragEvent('dragenter', opts));
  form.dispatchEvent(new DragEvent('drop', opts));
}"""


def _api(base: str, path: str) -> object:
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return json.loads(r.read())


def test_two_dropped_rank_files_are_one_job_run(
    server: str, browser: object, tmp_path: Path
) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    job = write_job(tmp_path / "job", ranks=2, slow_rank=1)
    context = browser.new_context(viewport={"width": 1440, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    errors = watch(page)

    page.goto(server + "/")
    page.evaluate(_DROP, [[[p.name, p.read_text()] for p in job.files]])
    page.wait_for_url("**/runs/*", timeout=90_000)
    page.wait_for_selector("#rank-table")
    run_id = page.url.rstrip("/").rsplit("/", 1)[1]

    runs = _api(server, "/api/runs")
    assert runs["total"] == 1  # type: ignore[index]
    run = _api(server, f"/api/runs/{run_id}")
    assert run["kind"] == "job" and run["facts"]["job"]["ranks"] == [0, 1]  # type: ignore[index]
    report = _api(server, f"/api/runs/{run_id}/report")

    assert page.inner_text("#job-kind").startswith("job of 2 ranks")
    rows = page.locator("#rank-table tbody tr").evaluate_all("els => els.map(e => e.dataset.rank)")
    assert rows == ["0", "1"]
    strips = page.locator("#heat-strips svg.heat-strip")
    assert strips.count() >= 4
    for i in range(strips.count()):
        assert strips.nth(i).locator("rect").count() == 2
        assert strips.nth(i).bounding_box()["width"] > 0  # type: ignore[index]
    offset = page.inner_text("#clock-table tbody tr[data-rank='1'] td:nth-child(2)")
    assert offset.strip() == "1.23 s", offset
    assert report["clock"]["offsets"][1]["offset_ns"] == job.offsets_ns[1]  # type: ignore[index]
    straggler = page.inner_text("#straggler-table tbody tr[data-rank='1']")
    assert "10 of 10" in straggler and "data loading" in straggler
    top = report["findings"][0]  # type: ignore[index]
    first = page.locator(".finding").first
    assert first.get_attribute("data-finding-id") == top["id"]
    first.click()  # opened: its body (advice, rank) shows
    assert "names rank 1" in first.inner_text() and "Rank 1 arrives last" in first.inner_text()
    assert "every rank on rank 0's clock" in page.inner_text("#timeline-rank-note")
    page.wait_for_function("() => Number(document.getElementById('tl-canvas').dataset.loads) >= 1")
    page.screenshot(path=str(ARTIFACTS / "browser-job-run-1440.png"), full_page=True)

    # The straggler finding's permalink page names its rank.
    first.locator("a.permalink").click()
    page.wait_for_selector("#finding-rank")
    assert page.inner_text("#finding-rank") == "across this job, naming rank 1"

    narrow = context.new_page()
    watch(narrow, errors)
    narrow.set_viewport_size({"width": 800, "height": 900})
    narrow.goto(f"{server}/runs/{run_id}")
    narrow.wait_for_selector("#rank-table")
    # the table scrolls inside its panel rather than widening the page
    width = narrow.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 800, width
    narrow.screenshot(path=str(ARTIFACTS / "browser-job-run-800.png"), full_page=True)

    for p in (page, narrow):
        assert csp_violations(p) == []
    assert errors == []
    context.close()
