"""The run page's timeline in headless Chromium, as a performance engineer works in it.

Flame-chart rows per host thread, the details panel and the flow from a kernel to its
launch, keyboard / wheel / drag navigation, search, stepping through a finding's ranges,
and a view shared through its address. Each step is checked at 1440 and 800 px wide and
screenshotted into ``test-artifacts/`` (kept by CI); no console errors and no
Content-Security-Policy violations are allowed.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web_helpers import ARTIFACTS, chromium, serve_process

pytestmark = pytest.mark.browser
WIDTHS = (1440, 800)
TRACE = "torch/v100_train_single_rank_ns.pt.trace.json.gz"


def _api(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=20) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_process(tmp_path_factory.mktemp("serve")) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def run_id(server: str, browser: Any, corpus: Path) -> str:
    page = browser.new_page()
    page.goto(server + "/")
    page.set_input_files("#file-input", str(corpus / TRACE))
    page.wait_for_url("**/runs/*", timeout=120_000)
    page.wait_for_selector(".finding")
    rid = urllib.parse.urlsplit(page.url).path.rstrip("/").rsplit("/", 1)[1]
    page.close()
    return rid


class Watched:
    """A page with its console errors and CSP violations collected."""

    def __init__(self, browser: Any, width: int) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": 1000})
        self.page = self.context.new_page()
        self.width = width
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.add_init_script(
            "window.__csp = []; document.addEventListener('securitypolicyviolation',"
            " e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"
        )

    def open(self, url: str) -> Any:
        self.page.goto(url)
        self.wait_loads(1)
        return self.page

    def wait_loads(self, n: int) -> None:
        self.page.wait_for_function(
            f"() => Number(document.getElementById('tl-canvas').dataset.loads) >= {n}"
        )

    def state(self, key: str) -> str:
        return str(self.page.locator("#tl-canvas").evaluate(f"c => c.dataset.{key}"))

    def window(self) -> tuple[int, int]:
        return int(self.state("startNs")), int(self.state("endNs"))

    def shot(self, name: str, full: bool = False) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        path = str(ARTIFACTS / f"timeline-{name}-{self.width}.png")
        if full:
            self.page.screenshot(path=path, full_page=True)
        else:
            self.page.locator(".timeline-panel").screenshot(path=path)

    def close(self) -> None:
        csp = self.page.evaluate("() => window.__csp")
        self.context.close()
        assert not csp, csp
        assert not self.errors, self.errors


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def watched(request: pytest.FixtureRequest, browser: Any) -> Iterator[Watched]:
    w = Watched(browser, request.param)
    yield w
    w.close()


def _lane_rows(w: Watched) -> dict[int, tuple[int, int]]:
    return {lane: (y, h) for lane, y, h in json.loads(w.state("lanes"))}


def _point(w: Watched, lane: int, t_ns: float) -> dict[str, float]:
    """Canvas coordinates of time ``t_ns`` on ``lane`` in the current window."""
    box = w.page.locator("#tl-canvas").bounding_box()
    start, end = w.window()
    label = int(w.state("labelW"))
    y, h = _lane_rows(w)[lane]
    return {"x": label + (t_ns - start) / (end - start) * (box["width"] - label), "y": y + h / 2}


def test_host_threads_are_flame_charts_with_runtime_rows(
    server: str, run_id: str, watched: Watched
) -> None:
    meta = _api(server, f"/api/runs/{run_id}/timeline?width_px=1000")
    lanes = meta["lanes"]
    ops = [lane for lane in lanes if lane["row"] == "op"]
    # Every operator depth of each thread has its row, not only the outermost operators.
    assert {lane["depth"] for lane in ops} == {0, 1, 2, 3, 4}
    threads = {lane["thread"] for lane in ops}
    assert all(any(x["row"] == "api" and x["thread"] == t for x in lanes) for t in threads)
    # Host annotation ranges sit in their thread's group.
    host_ranges = [lane for lane in lanes if lane["row"] == "range" and lane["thread"]]
    assert host_ranges and all(lane["thread"] for lane in host_ranges)

    w = watched
    page = w.open(f"{server}/runs/{run_id}")
    shown = _lane_rows(w)
    assert {lane["id"] for lane in lanes if lane["row"] != "py"} <= set(shown)
    # Collapsing a thread's group hides its rows; clicking its header again shows them.
    thread_rows = [lane["id"] for lane in lanes if lane["thread"] == ops[0]["thread"]]
    header_y = min(shown[i][0] for i in thread_rows) - 9
    canvas = page.locator("#tl-canvas")
    canvas.click(position={"x": 40, "y": header_y})
    assert not set(thread_rows) & set(_lane_rows(w))
    w.shot("collapsed")
    canvas.click(position={"x": 40, "y": header_y}, delay=0)
    assert set(thread_rows) <= set(_lane_rows(w))
    w.shot("flame-chart")
