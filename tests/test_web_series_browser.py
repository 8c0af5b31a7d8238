"""The series page in headless Chromium at 1440 and 800 px: a chart per metric with the
band, the change point and the outlier marked and linked, nothing wider than the window,
no script errors or CSP violations. Screenshots go to test-artifacts/."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator

import pytest
from web_helpers import ARTIFACTS, serve_process, watch

from tracelens.cli.server import Server
from tracelens.testing import write_chrome_trace
from tracelens.testing.planted_series import OUTLIER_RUN, REGRESSION_RUN, SERIES, series_run

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    d = tmp_path_factory.mktemp("series-browser")
    with serve_process(d / "data") as base:
        client = Server(base, None)
        ids = {}
        for r in SERIES:
            path = write_chrome_trace(
                series_run(r.gemm_us, r.loader, r.recorded_s), d / f"{r.label}.json.gz"
            )
            ids[r.label] = client.upload(path, {"series": "nightly", "label": r.label})["id"]
        deadline = time.monotonic() + 180
        while any(client.get(f"/api/runs/{i}")["status"] != "ready" for i in ids.values()):
            assert time.monotonic() < deadline, "the series did not ingest in time"
            time.sleep(0.5)
        client.put("/api/series/nightly", {"limits": "step=+10%"})
        yield base, ids


@pytest.mark.parametrize("width", [1440, 800])
def test_series_page(server: tuple[str, dict[str, str]], browser: object, width: int) -> None:
    base, ids = server
    ARTIFACTS.mkdir(exist_ok=True)
    context = browser.new_context(viewport={"width": width, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    errors = watch(page)
    page.goto(f"{base}/series/nightly")
    page.wait_for_selector("#metric-step svg.series-chart")
    assert page.locator("#series-red").count() == 1
    assert page.locator("svg.series-chart").count() >= 3
    step = page.locator("#metric-step")
    assert step.locator("polygon.band").count() == 1
    change = step.locator("a.point[data-kind=change]")
    assert change.count() == 1
    assert change.get_attribute("data-run") == ids[SERIES[REGRESSION_RUN].label]
    outlier = step.locator("a.point[data-kind=outlier]")
    assert outlier.get_attribute("data-run") == ids[SERIES[OUTLIER_RUN].label]
    # Charts fit the window: nothing scrolls sideways but the run table's own box.
    box = step.locator("svg").bounding_box()
    assert box is not None and 200 < box["width"] <= width
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(ARTIFACTS / f"browser-series-{width}.png"), full_page=True)

    # The change point opens the diff of the runs on either side.
    change.locator("rect").click()
    page.wait_for_url("**/compare?*")
    page.wait_for_selector("#verdict")
    assert ids[SERIES[REGRESSION_RUN].label] in page.url
    assert not errors, errors
    context.close()


def test_home_page_lists_the_red_series(server: tuple[str, dict[str, str]]) -> None:
    base, _ = server
    home = urllib.request.urlopen(f"{base}/", timeout=30).read().decode()
    assert 'id="series-panel"' in home and 'class="red"' in home
