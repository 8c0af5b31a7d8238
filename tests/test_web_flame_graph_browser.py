"""The run page's flame graph in headless Chromium: GPU and CPU time, zooming into a
frame and back, and the link with the hot operators table. Each step is checked at 1440
and 800 px wide and screenshotted into ``test-artifacts/``; no console errors and no
Content-Security-Policy violations are allowed."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web_helpers import ARTIFACTS, csp_violations, watch

pytestmark = pytest.mark.browser
WIDTHS = (1440, 800)
TRACE = "torch/v100_train_single_rank_ns.pt.trace.json.gz"
ROW_H = 18  # flamegraph.js draws a frame per 18 px row


def _api(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=20) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def run_id(server: str, browser: Any, corpus: Path) -> str:
    page = browser.new_page()
    page.goto(server + "/")
    page.set_input_files("#file-input", str(corpus / TRACE))
    page.wait_for_url("**/runs/*", timeout=120_000)
    page.wait_for_selector("#fg-canvas")
    rid = urllib.parse.urlsplit(page.url).path.rstrip("/").rsplit("/", 1)[1]
    page.close()
    return rid


class Watched:
    """A page with its console errors and CSP violations collected."""

    def __init__(self, browser: Any, width: int) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": 1000})
        self.page = self.context.new_page()
        self.width = width
        self.errors = watch(self.page)

    def state(self, key: str) -> str:
        return str(self.page.locator("#fg-canvas").evaluate(f"c => c.dataset.{key} || ''"))

    def wait_loads(self, n: int) -> None:
        self.page.wait_for_function(
            f"() => Number(document.getElementById('fg-canvas').dataset.loads) >= {n}"
        )

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.page.locator("#flame-graph").screenshot(
            path=str(ARTIFACTS / f"flamegraph-{name}-{self.width}.png")
        )

    def close(self) -> None:
        csp = csp_violations(self.page)
        self.context.close()
        assert not csp, csp
        assert not self.errors, self.errors


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def watched(request: pytest.FixtureRequest, browser: Any) -> Iterator[Watched]:
    w = Watched(browser, request.param)
    yield w
    w.close()


def _largest_root(answer: dict) -> tuple[dict, float, float]:
    """The widest frame below `all` and its left edge and width as fractions of the width."""
    boxes = _boxes(answer)
    top = max((f for f in answer["frames"] if f["parent"] == 0), key=lambda f: f["value_ns"])
    left, width, _ = boxes[top["id"]]
    return top, left, width


def _click_frame(w: Watched, left: float, width: float, row: int) -> None:
    # A mouse click lands only inside the viewport: bring the canvas there first (a click
    # on a hot-operator row below it may have scrolled it out).
    canvas = w.page.locator("#fg-canvas")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    w.page.mouse.click(box["x"] + (left + width / 2) * box["width"], box["y"] + row * ROW_H + 9)


def test_switch_zoom_and_back(server: str, run_id: str, watched: Watched) -> None:
    w = watched
    page = w.page
    page.goto(f"{server}/runs/{run_id}")
    w.wait_loads(1)
    assert w.state("metric") == "gpu" and w.state("focus") == ""
    page.locator("#flame-graph").scroll_into_view_if_needed()
    gpu = _api(server, f"/api/runs/{run_id}/flamegraph?metric=gpu")
    # the total as the page writes it (4 significant digits, in ms for this trace)
    assert (
        f"GPU time {gpu['total_ns'] / 1e6:.4g} ms in all" in page.locator("#fg-status").inner_text()
    )
    w.shot("gpu")

    # Hovering the widest top-level frame names its path and its share of the total.
    top, left, width = _largest_root(gpu)
    box = page.locator("#fg-canvas").bounding_box()
    page.mouse.move(box["x"] + (left + width / 2) * box["width"], box["y"] + ROW_H + 9)
    tip = page.locator("#fg-tooltip")
    assert tip.is_visible()
    assert top["name"] in tip.inner_text() and "% of all" in tip.inner_text()

    # A click zooms into it: the path shows above the canvas, its subtree fills the width.
    _click_frame(w, left, width, 1)
    assert w.state("focus") == top["name"]
    assert page.locator("#fg-crumbs button").count() == 2
    assert top["name"] in page.locator("#fg-status").inner_text()
    w.shot("zoomed")
    # Clicking the root row (an ancestor, drawn full width) zooms back out.
    _click_frame(w, 0.0, 1.0, 0)
    assert w.state("focus") == ""

    # Zoom in again, then switch to CPU time: the same path stays in focus if it has time.
    _click_frame(w, left, width, 1)
    page.locator("#fg-cpu").click()
    w.wait_loads(2)
    assert w.state("metric") == "cpu"
    assert page.locator("#fg-cpu").get_attribute("aria-pressed") == "true"
    cpu = _api(server, f"/api/runs/{run_id}/flamegraph?metric=cpu")
    assert cpu["total_ns"] != gpu["total_ns"]
    has_path = any(f["parent"] == 0 and f["name"] == top["name"] for f in cpu["frames"])
    assert w.state("focus") == (top["name"] if has_path else "")
    w.shot("cpu")
    page.locator("#fg-crumbs button").first.click()
    assert w.state("focus") == ""
    page.locator("#fg-gpu").click()
    w.wait_loads(3)
    assert w.state("metric") == "gpu"


def test_hot_operator_rows_highlight_their_frames(
    server: str, run_id: str, watched: Watched
) -> None:
    w = watched
    page = w.page
    page.goto(f"{server}/runs/{run_id}")
    w.wait_loads(1)
    gpu = _api(server, f"/api/runs/{run_id}/flamegraph?metric=gpu")
    rows = page.locator("#hot-ops tbody tr")
    assert rows.count() > 0
    name = rows.first.locator("td.name").get_attribute("title")
    rows.first.click()
    assert w.state("highlight") == name
    frames = [f for f in gpu["frames"] if f["name"] == name]
    assert frames, "the hottest operator has frames"
    assert int(w.state("highlighted")) >= 1
    assert "fg-marked" in (rows.first.get_attribute("class") or "")
    assert f"{name}: {len(frames)} frame" in page.locator("#fg-status").inner_text()
    w.shot("highlight")
    # Clicking the marked row again clears it.
    rows.first.click()
    assert w.state("highlight") == "" and "fg-marked" not in (
        rows.first.get_attribute("class") or ""
    )

    # Clicking a frame (the widest of another hot operator) zooms into it and marks its row.
    names = [r.locator("td.name").get_attribute("title") for r in rows.all()]
    boxes = _boxes(gpu)
    target = max((f for f in gpu["frames"] if f["name"] in names[1:]), key=lambda f: f["value_ns"])
    left, width, row = boxes[target["id"]]
    _click_frame(w, left, width, row)
    assert w.state("focus").endswith(target["name"])
    marked = page.locator("#hot-ops tbody tr.fg-marked")
    assert marked.count() == 1
    assert marked.locator("td.name").get_attribute("title") == target["name"]
    assert w.state("highlight") == target["name"]
    w.shot("frame-marks-row")
    # Escape zooms out and clears the mark.
    page.locator("#fg-canvas").press("Escape")
    assert w.state("focus") == "" and w.state("highlight") == ""
    assert page.locator("#hot-ops tbody tr.fg-marked").count() == 0


def _boxes(answer: dict) -> dict[int, tuple[float, float, int]]:
    """Each frame's left edge and width (fractions of the canvas) and row, unzoomed."""
    out: dict[int, tuple[float, float, int]] = {}
    used: dict[int, float] = {}
    total = answer["total_ns"]
    for f in answer["frames"]:
        if f["parent"] < 0:
            out[f["id"]] = (0.0, 1.0, 0)
            continue
        left, _, row = out[f["parent"]]
        start = left + used.get(f["parent"], 0.0)
        used[f["parent"]] = used.get(f["parent"], 0.0) + f["value_ns"] / total
        out[f["id"]] = (start, f["value_ns"] / total, row + 1)
    return out
