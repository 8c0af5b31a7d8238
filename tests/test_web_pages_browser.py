"""The pages around the timeline at 1440 and 800 px: nothing wider than the window, badges
and numbers on one line, evidence in units, deleting only once confirmed, a bad compare
field answered on the form. Screenshots go to ``test-artifacts/`` (kept by CI); no console
errors and no Content-Security-Policy violations."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web_helpers import ARTIFACTS, csp_violations, watch, write_planted

pytestmark = pytest.mark.browser
WIDTHS = (1440, 800)


def _upload(browser: Any, server: str, path: Path) -> str:
    page = browser.new_page()
    page.goto(server + "/")
    page.set_input_files("#file-input", str(path))
    page.wait_for_url("**/runs/*", timeout=120_000)
    page.wait_for_selector(".finding")
    rid = urllib.parse.urlsplit(page.url).path.rsplit("/", 1)[1]
    page.close()
    return rid


@pytest.fixture(scope="module")
def runs(server: str, browser: Any, corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    planted = write_planted(tmp_path_factory.mktemp("t") / "planted.pt.trace.json.gz")
    return {
        "v100": _upload(
            browser, server, corpus / "torch" / "v100_train_single_rank_ns.pt.trace.json.gz"
        ),
        "planted": _upload(browser, server, planted),
    }


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def page(request: pytest.FixtureRequest, browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": request.param, "height": 900})
    p = context.new_page()
    errors = watch(p)
    p.width = request.param
    p.errors = errors
    yield p
    csp = csp_violations(p)
    context.close()
    assert not csp, csp
    # A page answered 400 on purpose logs that status; anything else is a defect.
    assert not [e for e in errors if "400" not in e], errors


def _fits(page: Any) -> None:
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= page.width, f"page {width} px wide in a {page.width} px window"


def _one_line(page: Any, selector: str) -> None:
    lines = page.locator(selector).evaluate_all(
        "els => els.map(e => [e.textContent.trim(), e.getClientRects().length,"
        " e.getBoundingClientRect().height])"
    )
    assert lines, selector
    for text, rects, height in lines:
        assert rects == 1 and height < 26, (selector, text, rects, height)


def test_run_page_holds_at_any_width(server: str, runs: dict, page: Any) -> None:
    page.goto(f"{server}/runs/{runs['v100']}")
    page.wait_for_function("() => Number(document.getElementById('tl-canvas').dataset.loads) >= 1")
    _fits(page)
    _one_line(page, ".finding .sev")
    _one_line(page, ".finding .impact")
    # Hot tables scroll inside their panel.
    scrollers = page.locator(".table-scroll").evaluate_all(
        "els => els.map(e => e.getBoundingClientRect().right"
        " <= document.documentElement.clientWidth)"
    )
    assert scrollers and all(scrollers)
    page.screenshot(path=str(ARTIFACTS / f"pages-run-{page.width}.png"), full_page=True)

    # A finding's evidence: durations in units (the exact nanoseconds on hover), no number
    # broken across lines, nothing wider than the window.
    with urllib.request.urlopen(f"{server}/api/runs/{runs['v100']}/findings", timeout=10) as r:
        top = json.loads(r.read())[0]
    page.goto(f"{server}/runs/{runs['v100']}/findings/{top['id']}")
    _fits(page)
    durations = page.locator(".evidence span.num[title$=' ns']").all_inner_texts()
    assert durations and all(t.split(" ")[-1] in ("ns", "µs", "ms", "s") for t in durations)
    _one_line(page, ".evidence span.num")
    page.screenshot(path=str(ARTIFACTS / f"pages-finding-{page.width}.png"), full_page=True)


def test_run_list_dates_and_upload_hint(server: str, runs: dict, page: Any) -> None:
    page.goto(server + "/")
    _fits(page)
    _one_line(page, ".runs-table td.date time")
    hint = page.inner_text(".upload-panel .hint")
    assert f"{server}/api/runs" in hint and "HOST:PORT" not in hint
    page.screenshot(path=str(ARTIFACTS / f"pages-run-list-{page.width}.png"), full_page=True)


def test_compare_page_fits_and_a_bad_limit_keeps_the_form(
    server: str, runs: dict, page: Any
) -> None:
    q = f"base={runs['planted']}&cand={runs['v100']}"
    page.goto(f"{server}/compare?{q}")
    _fits(page)
    page.screenshot(path=str(ARTIFACTS / f"pages-compare-{page.width}.png"), full_page=True)
    answer = page.goto(f"{server}/compare?{q}&max_regression=five")
    assert answer.status == 400
    assert "max_regression must be a number" in page.inner_text("#compare-error")
    assert page.input_value("input[name=max_regression]") == "five"
    assert page.locator(".compare-form select[name=base]").count() == 1
    page.screenshot(path=str(ARTIFACTS / f"pages-compare-bad-{page.width}.png"), full_page=True)


def test_delete_needs_a_confirmation_and_says_it_is_done(
    server: str, browser: Any, page: Any, tmp_path: Path
) -> None:
    rid = _upload(
        browser,
        server,
        write_planted(tmp_path / f"doomed{page.width}.pt.trace.json.gz", host=f"h{page.width}"),
    )
    page.goto(f"{server}/runs/{rid}")
    page.click("#delete-button")  # unticked: the browser keeps the form
    assert urllib.parse.urlsplit(page.url).path == f"/runs/{rid}"
    assert page.locator("#delete-confirm:invalid").count() == 1
    with urllib.request.urlopen(f"{server}/api/runs/{rid}", timeout=10) as r:
        name = json.loads(r.read())["name"]
    page.check("#delete-confirm")
    page.click("#delete-button")
    page.wait_for_selector("#deleted-notice")
    assert name in page.inner_text("#deleted-notice")
    assert page.locator(f"tr[data-run-id='{rid}']").count() == 0
    page.screenshot(path=str(ARTIFACTS / f"pages-deleted-{page.width}.png"))


def test_api_reference_is_a_page(page: Any, server: str) -> None:
    """The header's API link opens the reference as a page (not raw OpenAPI JSON): every
    operation by tag with its parameters and answers, drawn without any script."""
    page.goto(server + "/")
    page.click("header >> text=API")
    page.wait_for_url("**/api-reference")
    text = page.inner_text("main")
    assert "POST" in text and "/api/runs" in text and "PATCH" in text
    assert page.locator(".api-op").count() >= 20
    upload = page.locator("#post--api-runs")
    assert "multipart" in upload.inner_text() and "201" in upload.inner_text()
    assert page.locator("script").count() == 0 or all(
        s.get_attribute("src") for s in page.locator("script").all()
    )
    _fits(page)
    page.screenshot(path=str(ARTIFACTS / f"pages-api-reference-{page.width}.png"), full_page=False)
