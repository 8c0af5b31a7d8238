"""The web app in headless Chromium: upload, follow, read findings, permalink, copy, zoom.

The timeline's own interactions are tested in ``test_web_timeline_browser.py``.

Runs the real ``tracelens serve`` on a free loopback port. Screenshots are written to
``test-artifacts/`` for a human to look at.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from web_helpers import ARTIFACTS, watch

pytestmark = pytest.mark.browser


def _api(base: str, path: str) -> object:
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return json.loads(r.read())


def test_upload_follow_findings_permalink_copy_and_zoom(
    server: str, browser: object, corpus: Path
) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    trace = corpus / "torch" / "v100_train_single_rank_ns.pt.trace.json.gz"
    context = browser.new_context(  # type: ignore[attr-defined]
        viewport={"width": 1300, "height": 900}, permissions=["clipboard-read", "clipboard-write"]
    )
    page = context.new_page()
    errors = watch(page)

    page.goto(server + "/")
    page.fill("#run-tags", "v100, training")
    page.set_input_files("#file-input", str(trace))
    page.wait_for_url("**/runs/*", timeout=90_000)  # the page follows ingestion, then opens it
    page.wait_for_selector(".finding")
    run_id = page.url.rstrip("/").rsplit("/", 1)[1]
    page.screenshot(path=str(ARTIFACTS / "browser-run-page.png"), full_page=True)

    # Ranked findings as the API has them (the CLI's order: by impact).
    api_findings = _api(server, f"/api/runs/{run_id}/findings")
    shown_ids = page.locator(".finding").evaluate_all("els => els.map(e => e.dataset.findingId)")
    assert shown_ids == [f["id"] for f in api_findings]
    impacts = [f["impact_ns"] for f in api_findings]
    assert impacts == sorted(impacts, reverse=True)
    first_badge = page.locator(".finding .sev").first.inner_text().lower()
    assert first_badge == api_findings[0]["severity"]

    # Timeline: loaded, zooms with the button and the wheel, pans by dragging.
    canvas = page.locator("#tl-canvas")
    page.wait_for_function("() => Number(document.getElementById('tl-canvas').dataset.loads) >= 1")

    def window() -> tuple[int, int, int]:
        d = canvas.evaluate("c => [c.dataset.startNs, c.dataset.endNs, c.dataset.loads]")
        return int(d[0]), int(d[1]), int(d[2])

    s0, e0, loads0 = window()
    page.click("#tl-zoom-in")
    canvas.scroll_into_view_if_needed()  # the mouse below acts where the canvas is shown
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 40)
    page.mouse.wheel(0, -300)
    page.wait_for_function(
        f"() => Number(document.getElementById('tl-canvas').dataset.loads) > {loads0}"
    )
    s1, e1, _ = window()
    assert e1 - s1 < (e0 - s0) / 2
    # Dragging the time axis pans (a drag among the lanes measures a stretch instead).
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 10)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + 10, steps=5)
    page.mouse.up()
    s2, e2, _ = window()
    assert s2 > s1 and abs((e2 - s2) - (e1 - s1)) <= 2
    page.locator(".timeline-panel").screenshot(path=str(ARTIFACTS / "browser-timeline-zoomed.png"))

    # Clicking a finding with time ranges highlights them on the timeline.
    with_ranges = next(f for f in api_findings if f["time_ranges"])
    page.click(f".finding[data-finding-id='{with_ranges['id']}'] .finding-summary")
    page.wait_for_function(
        "() => Number(document.getElementById('tl-canvas').dataset.highlights) > 0"
    )
    assert int(canvas.evaluate("c => c.dataset.highlights")) == len(with_ranges["time_ranges"])
    page.locator(".timeline-panel").screenshot(
        path=str(ARTIFACTS / "browser-timeline-highlight.png")
    )

    # The permalink page, and its Markdown copied for a ticket.
    top = api_findings[0]
    page.click(f".finding[data-finding-id='{top['id']}'] a.permalink")
    page.wait_for_url(f"**/runs/{run_id}/findings/{top['id']}")
    assert top["impact_basis"] in page.inner_text("main")
    page.click("#copy-markdown")
    page.wait_for_function(
        "() => document.getElementById('copy-markdown').dataset.copied === 'yes'"
    )
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert page.url in copied and top["id"] in copied and "**What to do:**" in copied
    page.screenshot(path=str(ARTIFACTS / "browser-finding-permalink.png"), full_page=True)

    # A permalink opened cold (new page, as from a ticket) shows the same finding.
    fresh = context.new_page()
    fresh.goto(page.url)
    assert fresh.inner_text("h1") == page.inner_text("h1")
    fresh.close()

    # The run list finds it by tag.
    page.goto(server + "/?tag=v100")
    assert page.locator(f"tr[data-run-id='{run_id}']").count() == 1
    page.screenshot(path=str(ARTIFACTS / "browser-run-list.png"), full_page=True)
    assert not errors, errors
    context.close()


def test_bad_upload_shows_the_reason(server: str, browser: object, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    bad = tmp_path / "notes.txt"
    bad.write_text("this is not a trace")
    page = browser.new_page(viewport={"width": 1300, "height": 700})  # type: ignore[attr-defined]
    page.goto(server + "/")
    page.set_input_files("#file-input", str(bad))
    page.wait_for_selector("#upload-status.error")
    text = page.inner_text("#upload-status")
    assert "notes.txt: unrecognised format" in text
    page.screenshot(path=str(ARTIFACTS / "browser-bad-upload.png"))

    # A truncated trace is accepted, fails in ingestion, and the page says why.
    cut = tmp_path / "cut.json"
    cut.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur"')
    page.set_input_files("#file-input", str(cut))
    page.wait_for_function(
        "() => document.getElementById('upload-status').textContent.includes('failed')",
        timeout=60_000,
    )
    assert page.inner_text("#upload-status").startswith("Ingestion failed: cut.json: ")
    page.screenshot(path=str(ARTIFACTS / "browser-failed-ingest.png"))
    page.close()


def test_restrict_the_run_page_with_its_form(
    server: str, browser: object, planted_path: Path
) -> None:
    """Fill the run page's form, see the report of that part with the restriction in the
    address, follow a finding's link with it, open the pasted link cold, clear it."""
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1300, "height": 900})  # type: ignore[attr-defined]
    errors = watch(page)
    page.goto(server + "/")
    page.set_input_files("#file-input", str(planted_path))
    page.wait_for_url("**/runs/*", timeout=90_000)
    page.wait_for_selector(".finding")
    run_id = page.url.rstrip("/").rsplit("/", 1)[1]
    whole = _api(server, f"/api/runs/{run_id}/findings")
    assert "this trace has steps 0 to 9" in page.inner_text("#restrict")

    def shown() -> list[str]:
        return page.locator(".finding").evaluate_all("els => els.map(e => e.dataset.findingId)")

    page.fill("#restrict-steps", "2:5")
    page.click("#restrict-form button[type=submit]")
    page.wait_for_url(f"**/runs/{run_id}?steps=2:5")
    assert page.url == f"{server}/runs/{run_id}?steps=2:5"  # the empty fields left out
    assert "analysed only profiler steps 2:5 (27 ms)" in page.inner_text("#restrict-active")
    assert page.input_value("#restrict-steps") == "2:5"
    part = _api(server, f"/api/runs/{run_id}/findings?steps=2:5")
    assert isinstance(part, list) and shown() == [f["id"] for f in part]
    loader = next(f for f in part if f["analyzer"] == "data_loading")
    card = page.locator(f".finding[data-finding-id='{loader['id']}'] .impact")
    assert card.inner_text().startswith("4.1 ms")  # two loader gaps, not the whole trace's nine
    # The timeline opens on the part analysed: steps 2 to 4 of a ten-step trace.
    page.wait_for_function("() => Number(document.getElementById('tl-canvas').dataset.loads) >= 1")
    start, end = page.locator("#tl-canvas").evaluate("c => [c.dataset.startNs, c.dataset.endNs]")
    assert int(start) > 0 and int(end) - int(start) < 40_000_000
    page.screenshot(path=str(ARTIFACTS / "browser-restricted-run-page.png"), full_page=True)

    # A finding's permalink keeps the restriction, and its page says so.
    page.click(f".finding[data-finding-id='{loader['id']}'] a.permalink")
    page.wait_for_url(f"**/runs/{run_id}/findings/{loader['id']}?steps=2:5")
    assert "analysed only profiler steps 2:5" in page.inner_text("#restrict-active")
    assert "**Scope:** analysed only profiler steps 2:5" in page.inner_text("#finding-markdown")

    # The address pasted into a ticket opens the same restricted page.
    fresh = browser.new_page()  # type: ignore[attr-defined]
    fresh.goto(f"{server}/runs/{run_id}?steps=2:5")
    assert fresh.locator(".finding").evaluate_all("els => els.map(e => e.dataset.findingId)") == [
        f["id"] for f in part
    ]
    fresh.close()

    page.goto(f"{server}/runs/{run_id}?steps=2:5")
    page.click("#restrict-clear")
    page.wait_for_url(f"{server}/runs/{run_id}")
    assert isinstance(whole, list) and shown() == [f["id"] for f in whole]
    assert page.locator("#restrict-active").count() == 0
    assert not errors, errors

    # A range the trace does not have: the page says why and shows the whole trace.
    page.fill("#restrict-range", "nope@nvtx")
    page.click("#restrict-form button[type=submit]")
    page.wait_for_selector("#restrict-error")
    assert "no range named 'nope' in domain 'nvtx'" in page.inner_text("#restrict-error")
    assert page.input_value("#restrict-range") == "nope@nvtx"
    assert shown() == [f["id"] for f in whole]
    page.screenshot(path=str(ARTIFACTS / "browser-restriction-refused.png"), full_page=True)
    # The browser reports the page's 400 status; nothing else may have gone wrong.
    assert all("status of 400" in e for e in errors), errors
    page.close()
