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
from web_helpers import ARTIFACTS, csp_violations, watch

pytestmark = pytest.mark.browser
WIDTHS = (1440, 800)
TRACE = "torch/v100_train_single_rank_ns.pt.trace.json.gz"


def _api(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=20) as r:
        return json.loads(r.read())


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
        self.errors = watch(self.page)

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
        csp = csp_violations(self.page)
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


def _kernel_window(server: str, run_id: str) -> tuple[int, int, dict[str, Any]]:
    """A 2 ms window with plain kernel events, and one kernel in it with a launch call."""
    meta = _api(server, f"/api/runs/{run_id}/timeline?width_px=1000")
    start = meta["span_ns"] // 2
    end = start + 2_000_000
    small = _api(server, f"/api/runs/{run_id}/timeline?start_ns={start}&end_ns={end}&width_px=1000")
    gpu = next(lane for lane in small["lanes"] if lane["key"] == "gpu:0:7")
    kernel = next(
        e
        for e in sorted(gpu["events"], key=lambda e: e[0] - e[1])  # the longest first
        if small["kinds"][e[3]] == "kernel"
    )
    return start, end, {"lane": gpu["id"], "start": kernel[0], "end": kernel[1], "ref": kernel[4]}


def test_a_kernel_opens_its_details_and_its_flow_to_the_launch(
    server: str, run_id: str, watched: Watched
) -> None:
    w = watched
    start, end, k = _kernel_window(server, run_id)
    page = w.open(f"{server}/runs/{run_id}?tl={start}_{end}")
    assert w.window() == (start, end)
    canvas = page.locator("#tl-canvas")
    details = _api(server, f"/api/runs/{run_id}/timeline/event?kind=kernel&ref={k['ref']}")
    # The tooltip holds the whole name, inside the timeline however long the name is.
    canvas.hover(position=_point(w, k["lane"], (k["start"] + k["end"]) / 2))
    page.wait_for_selector("#tl-tooltip:not([hidden])")
    assert details["name"] in page.inner_text("#tl-tooltip")
    tip = page.locator("#tl-tooltip").bounding_box()
    frame = page.locator("#timeline").bounding_box()
    assert frame["x"] <= tip["x"] and tip["x"] + tip["width"] <= frame["x"] + frame["width"]
    canvas.click(position=_point(w, k["lane"], (k["start"] + k["end"]) / 2))
    page.wait_for_selector("#tl-details:not([hidden]) dl")
    assert w.state("selected") == f"kernel:{k['ref']}"
    text = page.inner_text("#tl-details")
    for label in ("grid", "block", "correlation id", "stream", "duration", "flows"):
        assert label in text.lower(), label
    assert "launch call: cudaLaunchKernel" in text and "launching operator" in text
    assert int(w.state("flows")) >= 2  # arrows to the call and its operator
    assert details["name"] in text
    w.shot("kernel-details")
    # Following the flow selects the launch call, whose flow leads back to the kernel.
    page.click("#tl-details .tl-flows button.linklike >> nth=0")
    page.wait_for_function(
        "() => document.getElementById('tl-canvas').dataset.selected.startsWith('api:')"
    )
    page.wait_for_function(
        "() => document.getElementById('tl-details').innerText.includes('launched')"
    )
    assert details["name"] in page.inner_text("#tl-details .tl-flows")
    w.shot("launch-call-details")
    # The selection is in the address: pasted into a new tab it opens on the same view.
    page.wait_for_function("() => location.search.includes('event=api')")
    fresh = w.context.new_page()
    fresh.goto(page.url)
    fresh.wait_for_selector("#tl-details:not([hidden]) dl")
    assert fresh.locator("#tl-canvas").evaluate("c => c.dataset.selected") == w.state("selected")
    fresh.close()


def test_keys_wheel_drag_and_double_click_navigate(
    server: str, run_id: str, watched: Watched
) -> None:
    w = watched
    start, end, k = _kernel_window(server, run_id)
    page = w.open(f"{server}/runs/{run_id}?tl={start}_{end}")
    page.locator("#timeline").focus()

    def after(action: Any) -> tuple[int, int]:
        before = w.window()
        action()
        page.wait_for_function(
            f"() => document.getElementById('tl-canvas').dataset.startNs !== '{before[0]}'"
            f" || document.getElementById('tl-canvas').dataset.endNs !== '{before[1]}'"
        )
        return w.window()

    s, e = after(lambda: page.keyboard.press("w"))
    assert e - s < end - start  # W zooms in
    s2, e2 = after(lambda: page.keyboard.press("d"))
    assert s2 > s and e2 - s2 == pytest.approx(e - s, abs=2)  # D pans right
    s3, e3 = after(lambda: page.keyboard.press("ArrowLeft"))
    assert s3 < s2 and e3 - s3 == pytest.approx(e - s, abs=2)
    s4, e4 = after(lambda: page.keyboard.press("-"))
    assert e4 - s4 > e3 - s3
    # A sideways trackpad swipe pans, it does not zoom.
    canvas = page.locator("#tl-canvas")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 30)
    s5, e5 = after(lambda: page.mouse.wheel(120, 0))
    assert s5 > s4 and e5 - s5 == pytest.approx(e4 - s4, abs=2)

    # Dragging among the lanes measures a stretch: its length, kernel time, busy share.
    y = box["y"] + 30
    page.mouse.move(box["x"] + box["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.7, y, steps=6)
    page.mouse.up()
    page.wait_for_function("() => document.getElementById('tl-range').dataset.kernelNs")
    label = page.inner_text("#tl-range")
    assert "selected" in label and "kernel time" in label and "busy" in label
    assert w.window() == (s5, e5)  # measuring does not move the view
    w.shot("stretch")

    # Double-click zooms to an event; Escape clears the selection and the stretch.
    page.goto(f"{server}/runs/{run_id}?tl={start}_{end}")
    w.wait_loads(1)
    canvas.dblclick(position=_point(w, k["lane"], (k["start"] + k["end"]) / 2))
    page.wait_for_function(
        f"() => Number(document.getElementById('tl-canvas').dataset.endNs)"
        f" - Number(document.getElementById('tl-canvas').dataset.startNs) < {end - start}"
    )
    s6, e6 = w.window()
    assert (
        s6 <= k["start"] and k["end"] <= e6 and e6 - s6 <= max(1000, 1.3 * (k["end"] - k["start"]))
    )
    page.wait_for_selector("#tl-details:not([hidden])")
    page.keyboard.press("Escape")
    page.wait_for_selector("#tl-details", state="hidden")
    assert w.state("selected") == "" and page.inner_text("#tl-range") == ""


def test_search_counts_highlights_and_steps(server: str, run_id: str, watched: Watched) -> None:
    w = watched
    page = w.open(f"{server}/runs/{run_id}")
    expected = _api(server, f"/api/runs/{run_id}/timeline/search?q=cudaLaunchKernel")["count"]
    page.fill("#tl-search", "cudalaunchkernel")
    page.press("#tl-search", "Enter")
    page.wait_for_function(
        "() => document.getElementById('tl-search-count').textContent.includes(' of ')"
    )
    assert page.inner_text("#tl-search-count") == f"1 of {expected:,}"
    first = w.state("selected")
    assert first.startswith("api:")
    page.click("#tl-search-next")
    page.wait_for_function(
        "() => document.getElementById('tl-search-count').textContent.startsWith('2 of')"
    )
    assert w.state("selected") != first
    page.click("#tl-search-prev")
    page.wait_for_function(
        "() => document.getElementById('tl-search-count').textContent.startsWith('1 of')"
    )
    assert w.state("selected") == first
    w.shot("search")
    # A regular expression, and a bad one refused with the reason.
    page.check("#tl-regex")
    page.fill("#tl-search", "^aten::(add)?mm$")
    page.press("#tl-search", "Enter")
    regex = _api(
        server,
        f"/api/runs/{run_id}/timeline/search?regex=true&q="
        + urllib.parse.quote("^aten::(add)?mm$"),
    )["count"]
    page.wait_for_function(
        f"() => document.getElementById('tl-search-count').textContent === '1 of {regex:,}'"
    )
    page.fill("#tl-search", "(unclosed")
    page.press("#tl-search", "Enter")
    page.wait_for_function(
        "() => document.getElementById('tl-search-count').dataset.count === 'error'"
    )
    assert "regular expression" in page.inner_text("#tl-search-count")
    # The refusal is an answer (400), not a script error: drop it from the console check.
    w.errors = [e for e in w.errors if "400" not in e]


def test_step_through_a_findings_ranges_and_share_the_view(
    server: str, run_id: str, watched: Watched
) -> None:
    w = watched
    findings = _api(server, f"/api/runs/{run_id}/findings")
    f = max(findings, key=lambda x: len(x["time_ranges"]))
    n = len(f["time_ranges"])
    assert n >= 2
    page = w.open(f"{server}/runs/{run_id}")
    page.click(f".finding[data-finding-id='{f['id']}'] .finding-summary")
    page.wait_for_selector("#tl-finding-nav:not([hidden])")
    assert page.inner_text("#tl-finding-pos") == f"range 1 of {n}"
    assert int(w.state("highlights")) == n
    page.click("#tl-finding-next")
    assert page.inner_text("#tl-finding-pos") == f"range 2 of {n}"
    t0 = _api(server, f"/api/runs/{run_id}/timeline?width_px=10")["t0_ns"]
    second = sorted(f["time_ranges"], key=lambda r: r["start_ns"])[1]
    s, e = w.window()
    assert s <= second["start_ns"] - t0 and second["end_ns"] - t0 <= e
    w.shot("finding-range")
    # The address holds window, finding and range: opened cold it shows the same.
    page.wait_for_function("() => location.search.includes('fr=2')")
    assert f"finding={f['id']}" in page.url
    fresh = w.context.new_page()
    fresh.goto(page.url)
    fresh.wait_for_selector("#tl-finding-nav:not([hidden])")
    assert fresh.inner_text("#tl-finding-pos") == f"range 2 of {n}"
    got = fresh.locator("#tl-canvas").evaluate("c => [c.dataset.startNs, c.dataset.endNs]")
    assert (int(got[0]), int(got[1])) == (s, e)
    fresh.close()
    page.click("#tl-finding-all")
    page.keyboard.press("Escape")
    page.wait_for_selector("#tl-finding-nav", state="hidden")
    w.shot("run-page", full=True)


def test_counter_tracks_and_legend(
    server: str, browser: Any, watched: Watched, tmp_path: Path
) -> None:
    """GPU busy share and device memory as tracks under the streams, and a legend."""
    import gzip

    from tracelens.testing.chrome_writer import header_for, iter_events, write_events
    from tracelens.testing.planted_device import memory_pressure

    sc = memory_pressure()
    path = tmp_path / f"memory-{watched.width}.pt.trace.json.gz"
    header = {**header_for(sc), "host_name": f"mem{watched.width}"}  # a distinct upload
    with gzip.open(path, "wt", encoding="utf-8") as out:
        write_events(out, iter_events(sc), header)
    page = browser.new_page()
    page.goto(server + "/")
    page.set_input_files("#file-input", str(path))
    page.wait_for_url("**/runs/*", timeout=120_000)
    rid = urllib.parse.urlsplit(page.url).path.rsplit("/", 1)[1]
    page.close()

    answer = _api(server, f"/api/runs/{rid}/timeline?width_px=800")
    memory = answer["counters"][0]
    assert memory["points"] and memory["max_bytes"] == max(
        max(p[1], p[2]) for p in memory["points"]
    )
    w = watched
    p = w.open(f"{server}/runs/{rid}")
    counters = w.state("counters").split(",")
    assert "busy:0" in counters and "memory:0" in counters
    assert p.locator("#tl-legend li").count() >= 8
    # Hovering the memory track reads the allocator's numbers.
    rows = json.loads(w.state("lanes"))
    gpu_y = next(y for lane, y, h in rows if lane == 0)
    memory_y = gpu_y + 20 + 26 + 13  # under the stream and the busy track
    canvas = p.locator("#tl-canvas")
    canvas.hover(position={"x": canvas.bounding_box()["width"] * 0.9, "y": memory_y})
    p.wait_for_selector("#tl-tooltip:not([hidden])")
    assert "allocated" in p.inner_text("#tl-tooltip")
    w.shot("counters")


def test_a_finding_without_ranges_steps_through_its_subjects_instances(
    server: str, run_id: str, watched: Watched
) -> None:
    findings = _api(server, f"/api/runs/{run_id}/findings")
    hot = next(f for f in findings if f["analyzer"] == "hot_ops" and not f["time_ranges"])
    op = hot["evidence"]["operator"]
    calls = _api(
        server,
        f"/api/runs/{run_id}/timeline/search?regex=true&q="
        + urllib.parse.quote("^" + op.replace(":", "\\:") + "$"),
    )["count"]
    assert calls == hot["evidence"]["operator_calls"] > 1
    w = watched
    page = w.open(f"{server}/runs/{run_id}")
    if hot["severity"] == "info":  # folded into the minor findings: unfold them first
        page.click("#minor-findings > summary")
    page.click(f".finding[data-finding-id='{hot['id']}'] .finding-summary")
    page.wait_for_selector("#tl-finding-nav:not([hidden])")
    assert page.inner_text("#tl-finding-pos") == f"instance 1 of {calls:,}"
    page.click("#tl-finding-next")
    assert page.inner_text("#tl-finding-pos") == f"instance 2 of {calls:,}"
    assert int(w.state("highlights")) == calls
    w.shot("finding-instances")
