"""The compare view in headless Chromium: from the run list's form to the verdict, no errors.

Runs the real ``tracelens serve`` on a free loopback port, as ``test_web_browser.py`` does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from web_helpers import ARTIFACTS, watch

from tracelens.testing import write_chrome_trace
from tracelens.testing.planted_pair import decode_naive, decode_tuned

pytestmark = pytest.mark.browser


def test_compare_two_uploaded_runs(server: str, browser: object, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    naive = write_chrome_trace(decode_naive(tokens=32), tmp_path / "naive.pt.trace.json.gz")
    tuned = write_chrome_trace(decode_tuned(tokens=32), tmp_path / "tuned.pt.trace.json.gz")
    context = browser.new_context(  # type: ignore[attr-defined]
        viewport={"width": 1300, "height": 900}, permissions=["clipboard-read", "clipboard-write"]
    )
    page = context.new_page()
    errors = watch(page)

    ids = {}
    for name, trace in (("naive", naive), ("tuned", tuned)):
        page.goto(server + "/")
        page.fill("#run-name", name)
        page.set_input_files("#file-input", str(trace))
        page.wait_for_url("**/runs/*", timeout=90_000)
        page.wait_for_selector("#compare-link")
        ids[name] = page.url.rstrip("/").rsplit("/", 1)[1]

    page.goto(server + "/")
    page.select_option("#compare-form select[name=base]", ids["naive"])
    page.select_option("#compare-form select[name=cand]", ids["tuned"])
    page.click("#compare-form button[type=submit]")
    page.wait_for_selector("#verdict")
    assert page.get_attribute("#verdict", "data-status") == "faster"
    assert page.inner_text("#verdict").startswith("FASTER:")
    link = page.locator(f"a.finding-link[href^='/runs/{ids['naive']}/findings/']").first
    page.screenshot(path=str(ARTIFACTS / "browser-compare.png"), full_page=True)

    page.click("#copy-markdown")
    page.wait_for_function(
        "() => document.getElementById('copy-markdown').dataset.copied === 'yes'"
    )
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert copied.startswith("# tracelens diff") and "FASTER" in copied

    # A resolved finding links to its page in the baseline run.
    link.click()
    page.wait_for_url(f"**/runs/{ids['naive']}/findings/*")
    assert page.locator("h1").count() == 1
    assert not errors, errors
    context.close()
