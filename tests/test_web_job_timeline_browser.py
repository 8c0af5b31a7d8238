"""A job's ranks on one timeline in headless Chromium: the job page's "all ranks" view,
one collapsible group per rank, a rank's host lanes fetched when its group is opened, and
the straggler finding drawn on the late rank (its time before each collective) and on the
others (their waits inside it), stepped through like any finding's ranges. At 1440 and
800 px, screenshots into ``test-artifacts/``; no console error or CSP violation.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
import urllib.request
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from test_web_job_timeline import SLOW_RANK, planted_job
from web_helpers import ARTIFACTS, csp_violations, watch

from tracelens.testing.planted_ranks import write_job

pytestmark = pytest.mark.browser
WIDTHS = (1440, 800)


def _api(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=20) as r:
        return json.loads(r.read())


def _upload(base: str, files: list[Path]) -> str:
    """The job's files in one multipart POST, as `tracelens upload` sends them."""
    boundary = "----tracelens-test-boundary"
    body = b""
    for p in files:
        body += (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                f'filename="{p.name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
            ).encode()
            + p.read_bytes()
            + b"\r\n"
        )
    body += f"--{boundary}--\r\n".encode()
    req = urllib.request.Request(
        base + "/api/runs",
        data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}", "Origin": base},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return str(json.loads(r.read())["id"])


@pytest.fixture(scope="module")
def run_id(server: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    job = planted_job(tmp_path_factory.mktemp("job"))
    rid = _upload(server, job.files)
    _wait_ready(server, rid)
    return rid


def _wait_ready(server: str, rid: str) -> None:
    deadline = time.monotonic() + 120
    while (run := _api(server, f"/api/runs/{rid}"))["status"] not in ("ready", "failed"):
        assert time.monotonic() < deadline, run
        time.sleep(0.2)
    assert run["status"] == "ready", run


def _state(page: Any, key: str) -> Any:
    return page.locator("#tl-canvas").evaluate(f"c => c.dataset.{key}")


def _loads(page: Any) -> int:
    return int(_state(page, "loads"))


def _wait_loads(page: Any, n: int) -> None:
    page.wait_for_function(
        f"() => Number(document.getElementById('tl-canvas').dataset.loads) >= {n}"
    )


def _groups(page: Any) -> dict[str, tuple[bool, float]]:
    return {k: (open_, y) for k, open_, y in json.loads(_state(page, "groups"))}


def _rank_lanes(page: Any) -> dict[int, int]:
    return {int(k): v for k, v in json.loads(_state(page, "rankLanes")).items()}


def _click_header(page: Any, key: str) -> None:
    page.locator("#tl-canvas").click(position={"x": 40, "y": _groups(page)[key][1] + 9})


@pytest.mark.parametrize("width", WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def test_all_ranks_view_groups_ranks_and_draws_the_straggler(
    server: str, browser: Any, run_id: str, width: int
) -> None:
    report = _api(server, f"/api/runs/{run_id}/report")
    late = next(
        f for f in report["findings"] if f["analyzer"] == "ranks" and f["rank"] == SLOW_RANK
    )
    context = browser.new_context(viewport={"width": width, "height": 1000})
    page = context.new_page()
    errors = watch(page)

    # a job's page opens on every rank; the picker goes to one rank and back to all
    page.goto(f"{server}/runs/{run_id}?rank=1")
    _wait_loads(page, 1)
    assert "rank 1 on its own clock" in page.inner_text("#timeline-rank-note")
    page.click("#all-ranks-link")
    page.wait_for_url("**ranks=all**")
    _wait_loads(page, 1)
    assert "every rank on rank 0's clock" in page.inner_text("#timeline-rank-note")
    groups = _groups(page)
    for r in range(4):
        assert groups[f"r{r}"][0] is True and groups[f"r{r}/host"][0] is False, groups
    lanes = _rank_lanes(page)
    assert lanes == {0: 2, 1: 2, 2: 2, 3: 2}, lanes  # two GPU streams a rank, host closed

    # a rank's group closes and opens again
    _click_header(page, "r1")
    assert _rank_lanes(page)[1] == 0 and _groups(page)["r1"][0] is False
    assert "r1/host" not in _groups(page)
    page.wait_for_function("() => location.search.includes('tlg=r1')")
    _click_header(page, "r1")
    assert _rank_lanes(page) == lanes

    # opening the late rank's host group fetches its threads
    before = _loads(page)
    _click_header(page, f"r{SLOW_RANK}/host")
    _wait_loads(page, before + 1)
    page.wait_for_function(
        f"() => JSON.parse(document.getElementById('tl-canvas').dataset.rankLanes)[{SLOW_RANK}] > 2"
    )
    assert _groups(page)[f"r{SLOW_RANK}/host"][0] is True
    assert any(k.startswith(f"r{SLOW_RANK}/") and ":" in k for k in _groups(page))  # a thread

    # a search runs over every rank; a match's details come from its own rank
    page.fill("#tl-search", "expert_gemm")
    page.click("#tl-search-form button[type=submit]")
    page.wait_for_function("() => !document.getElementById('tl-details').hidden")
    page.wait_for_function("() => document.getElementById('tl-canvas').dataset.detailsMs")
    count = int(page.locator("#tl-search-count").evaluate("e => e.dataset.count"))
    assert count == 4 * 10 - 1  # a compute kernel a step, the late-starting rank one less
    details = page.inner_text("#tl-details")
    assert "expert_gemm" in details and "rank" in details, details
    page.wait_for_function(r"() => /event=kernel%3A\d+%40\d/.test(location.search)")
    page.click("#tl-details .tl-close")

    # the straggler finding: the late rank's time before the collective, the others' waits
    page.locator(f".finding[data-finding-id='{late['id']}']").click()
    page.wait_for_function("() => document.getElementById('tl-canvas').dataset.highlightRanks")
    page.wait_for_function(
        "() => JSON.parse(document.getElementById('tl-canvas').dataset.highlightRanks || '{}').wait"
        "?.length === 3"
    )
    drawn = json.loads(_state(page, "highlightRanks"))
    assert drawn == {"own": [SLOW_RANK], "wait": [0, 1, 3]}, drawn
    assert int(_state(page, "highlights")) == len(late["time_ranges"])
    pos = page.inner_text("#tl-finding-pos")
    assert pos.startswith("range 1 of ") and f"rank {SLOW_RANK}" in pos, pos
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".timeline-panel").screenshot(
        path=str(ARTIFACTS / f"job-timeline-aligned-{width}.png")
    )
    page.click("#tl-finding-next")
    pos2 = page.inner_text("#tl-finding-pos")
    assert pos2.startswith("range 2 of ") and "waiting" in pos2, pos2
    page.wait_for_function("() => location.search.includes('fr=2')")
    if width == WIDTHS[0]:
        page.screenshot(
            path=str(ARTIFACTS / f"job-timeline-aligned-page-{width}.png"), full_page=True
        )

    # the view's address opens the same view
    again = context.new_page()
    watch(again, errors)
    again.goto(page.url)
    _wait_loads(again, 1)
    again.wait_for_function(
        f"() => JSON.parse(document.getElementById('tl-canvas').dataset.rankLanes)[{SLOW_RANK}] > 2"
    )
    assert "range 2 of" in again.inner_text("#tl-finding-pos")

    for p in (page, again):
        assert csp_violations(p) == []
    assert errors == []
    context.close()


def test_a_trace_of_two_processes_groups_lanes_per_process(
    server: str, browser: Any, tmp_path: Path
) -> None:
    """One trace holding two processes (two ranks' events in one file, as a profiler of
    several workers writes it): a group per process around its threads, closed and
    opened from its header, kept closed in the address."""
    job = write_job(tmp_path / "two", ranks=2, slow_rank=None, offsets_ns={0: 0, 1: 0})
    docs = [json.loads(p.read_text(), parse_float=Decimal) for p in job.files]
    docs[0]["traceEvents"] += docs[1]["traceEvents"]
    text = json.dumps(docs[0], default=lambda d: f"{d:.3f}")
    trace = tmp_path / "two-processes.json"
    trace.write_text(re.sub(r'"(ts|dur)": "([0-9-]+\.[0-9]{3})"', r'"\1": \2', text))
    rid = _upload(server, [trace])
    _wait_ready(server, rid)
    lanes = _api(server, f"/api/runs/{rid}/timeline?width_px=800")["lanes"]
    assert {lane["thread"] for lane in lanes if lane["thread"]} == {"1000:1", "1001:1"}

    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    errors = watch(page)
    page.goto(f"{server}/runs/{rid}")
    _wait_loads(page, 1)
    groups = _groups(page)
    assert groups["p1000"][0] and groups["p1001"][0] and groups["1000:1"][0], groups
    first = {lane["id"] for lane in lanes if lane["thread"] == "1000:1" and lane["row"] != "py"}

    def shown() -> set[int]:
        return {lane for lane, _, _ in json.loads(_state(page, "lanes"))}

    assert first <= shown()
    _click_header(page, "p1000")
    assert not first & shown() and "1000:1" not in _groups(page)
    assert _groups(page)["p1001"][0] and "1001:1" in _groups(page)
    page.wait_for_function("() => location.search.includes('tlg=p1000')")
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".timeline-panel").screenshot(path=str(ARTIFACTS / "timeline-processes-1440.png"))
    again = context.new_page()
    again.goto(page.url)
    _wait_loads(again, 1)
    assert _groups(again)["p1000"][0] is False
    _click_header(again, "p1000")
    assert first <= {lane for lane, _, _ in json.loads(_state(again, "lanes"))}
    assert csp_violations(page) == []
    assert errors == []
    context.close()


def test_opening_one_host_group_too_many_closes_the_longest_open(
    server: str, browser: Any, run_id: str
) -> None:
    """The server sends a few ranks' host lanes at once (``max_host_ranks``; lowered to two
    here in the page as served, the planted job having four ranks): opening a third host
    group closes the one opened first, and the window asked for names two ranks."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/timeline?" in r.url else None)

    def lowered(route: Any) -> None:
        res = route.fetch()
        body = res.text()
        assert '"max_host_ranks":' in body.replace(" ", "")
        body = re.sub(r'"max_host_ranks":\s*\d+', '"max_host_ranks": 2', body)
        route.fulfill(response=res, body=body)

    page.route(re.compile(r".*/runs/[0-9a-f]+\?ranks=all$"), lowered)
    page.goto(f"{server}/runs/{run_id}?ranks=all")
    _wait_loads(page, 1)
    for n, r in enumerate((2, 0, 3), start=1):
        before = _loads(page)
        _click_header(page, f"r{r}/host")
        _wait_loads(page, before + 1)
        page.wait_for_function(
            f"() => JSON.parse(document.getElementById('tl-canvas').dataset.rankLanes)[{r}] > 2"
        )
        assert _groups(page)[f"r{r}/host"][0] is True, n
    groups = _groups(page)
    assert [groups[f"r{r}/host"][0] for r in (2, 0, 3)] == [False, True, True], groups
    last = urllib.parse.parse_qs(urllib.parse.urlsplit(asked[-1]).query)
    assert sorted(last["host_ranks"][0].split(",")) == ["0", "3"], asked[-1]
    assert _rank_lanes(page)[2] == 2  # its GPU streams only again
    assert errors == []
    context.close()
