"""In Chromium: "Open in Perfetto" opens the configured Perfetto UI, waits for its PONG and
posts it the enriched trace at the finding's range.

The Perfetto UI is stood in for by a page this test serves on another origin
(``TRACELENS_PERFETTO_URL`` points at it): it answers PING with PONG, as Perfetto's
``post_message_handler`` does, and keeps what it is posted for the test to read. The
run page must do it without a console error or a CSP violation.
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from web_helpers import csp_violations, free_port, serve_process, watch, write_planted

pytestmark = pytest.mark.browser

STAND_IN = b"""<!doctype html><html><head><title>stand-in UI</title></head><body>
<script>
window.__pings = 0;
window.__posted = null;
window.addEventListener("message", (e) => {
  if (e.data === "PING") {
    window.__pings++;
    e.source.postMessage("PONG", e.origin);
    return;
  }
  if (e.data && e.data.perfetto) {
    const p = e.data.perfetto;
    const bytes = new Uint8Array(p.buffer);
    let bin = "";
    for (let i = 0; i < bytes.length; i += 8192) {
      bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192));
    }
    window.__posted = { title: p.title, fileName: p.fileName, url: p.url,
                        origin: e.origin, b64: btoa(bin) };
  }
});
</script></body></html>"""


class _StandIn(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(STAND_IN)))
        self.end_headers()
        self.wfile.write(STAND_IN)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def stand_in() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), _StandIn)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, stand_in: str) -> Iterator[str]:
    data = tmp_path_factory.mktemp("serve")
    with serve_process(data, env_vars={"TRACELENS_PERFETTO_URL": stand_in}) as base:
        yield base


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as r:
        return bytes(r.read())


@pytest.fixture(scope="module")
def run_id(server: str, browser: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    trace = write_planted(tmp_path_factory.mktemp("trace") / "planted.pt.trace.json.gz")
    page = browser.new_page()
    page.goto(server + "/")
    page.set_input_files("#file-input", str(trace))
    page.wait_for_url("**/runs/*", timeout=120_000)
    page.wait_for_selector(".finding")
    rid = urllib.parse.urlsplit(page.url).path.rstrip("/").rsplit("/", 1)[1]
    page.close()
    return rid


def _padded(start: int, end: int) -> tuple[int, int]:
    pad = (end - start) // 20 + 1000
    return start - pad, end + pad


def _open(
    browser: Any, url: str, click: str, select: str | None = None
) -> tuple[dict[str, Any], str, str]:
    """Open ``url``, click ``select`` (if any) then ``click``; what the stand-in was
    posted, its address, and the page's status line."""
    context = browser.new_context()
    page = context.new_page()
    errors = watch(page)
    page.goto(url)
    if select:  # a finding's own button shows once its card is selected, as a reader does
        unfold = (
            "s => { const d = document.querySelector(s).closest('details'); if (d) d.open = true; }"
        )
        page.evaluate(unfold, select)
        page.click(select)
    with page.expect_popup() as popup_info:
        page.click(click)
    popup = popup_info.value
    # `!= null`: before the stand-in page loads the popup is about:blank, where
    # `__posted` is undefined, and `!== null` would let the wait pass at once
    popup.wait_for_function("() => window.__posted != null", timeout=60_000)
    posted = popup.evaluate("() => window.__posted")
    assert popup.evaluate("() => window.__pings") >= 1
    page.wait_for_function(
        "() => document.getElementById('perfetto-status').dataset.state === 'sent'"
    )
    status = page.inner_text("#perfetto-status")
    popup_url = popup.url
    csp = csp_violations(page)
    context.close()
    assert not csp, csp
    assert not errors, errors
    return posted, popup_url, status


def test_open_in_perfetto_posts_the_enriched_trace_at_the_findings_range(
    server: str, stand_in: str, browser: Any, run_id: str
) -> None:
    findings = json.loads(_get(f"{server}/api/runs/{run_id}/findings"))
    ranged = [f for f in findings if len(f["time_ranges"]) >= 2]
    assert ranged, "the planted trace has a finding with several ranges"
    f = ranged[0]
    page_url = f"{server}/runs/{run_id}?finding={f['id']}&fr=2"
    posted, popup_url, status = _open(browser, page_url, "#open-perfetto")
    assert status == "Sent to Perfetto."
    # the buffer is the enriched trace the API serves
    served = gzip.decompress(_get(f"{server}/api/runs/{run_id}/trace/enriched"))
    assert gzip.decompress(base64.b64decode(posted["b64"])) == served
    assert posted["fileName"] == f"{run_id}-enriched.json.gz"
    assert posted["url"] == page_url and posted["title"].startswith("tracelens ")
    # the range: the finding's second range (fr=2), as visStart/visEnd in trace-clock ns
    r = f["time_ranges"][1]
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(popup_url).query)
    assert popup_url.startswith(stand_in + "/")
    assert (int(q["visStart"][0]), int(q["visEnd"][0])) == _padded(r["start_ns"], r["end_ns"])


def test_a_findings_own_button_opens_at_its_first_range(
    server: str, browser: Any, run_id: str
) -> None:
    findings = json.loads(_get(f"{server}/api/runs/{run_id}/findings"))
    f = [f for f in findings if f["time_ranges"]][-1]
    click = f".perfetto-range[data-finding-id='{f['id']}']"
    card = f".finding[data-finding-id='{f['id']}'] .finding-title"
    posted, popup_url, _ = _open(browser, f"{server}/runs/{run_id}", click, card)
    r = f["time_ranges"][0]
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(popup_url).query)
    assert (int(q["visStart"][0]), int(q["visEnd"][0])) == _padded(r["start_ns"], r["end_ns"])
    doc = json.loads(gzip.decompress(base64.b64decode(posted["b64"])))
    ids = {e["args"]["id"] for e in doc["traceEvents"] if e.get("cat") == "tracelens.finding"}
    assert f["id"] in ids


TOKEN = "perfetto-test-token"


@pytest.fixture(scope="module")
def token_run(tmp_path_factory: pytest.TempPathFactory, stand_in: str) -> Iterator[str]:
    """A service with API tokens (the kept trace needs one) and a ready run on it: the
    page's address."""
    import time

    import httpx

    data = tmp_path_factory.mktemp("serve-tokens")
    trace = write_planted(tmp_path_factory.mktemp("trace") / "planted.pt.trace.json.gz")
    env = {"TRACELENS_PERFETTO_URL": stand_in, "TRACELENS_API_TOKENS": TOKEN}
    with serve_process(data, env_vars=env) as base:
        auth = {"authorization": f"Bearer {TOKEN}"}
        with trace.open("rb") as f:
            r = httpx.post(f"{base}/api/runs", files={"file": (trace.name, f)}, headers=auth)
        r.raise_for_status()
        rid = r.json()["id"]
        deadline = time.monotonic() + 120
        while httpx.get(f"{base}/api/runs/{rid}").json()["status"] != "ready":
            assert time.monotonic() < deadline, "the run did not become ready"
            time.sleep(0.3)
        yield f"{base}/runs/{rid}"


def test_with_api_tokens_perfetto_and_the_download_read_the_trace_with_the_typed_token(
    browser: Any, token_run: str
) -> None:
    """A link cannot send a header, so the trace (which needs the token once the service
    has tokens) was a 401 from both: each now asks for the token and sends it."""
    import httpx

    base, rid = token_run.split("/runs/")
    served = gzip.decompress(
        httpx.get(
            f"{base}/api/runs/{rid}/trace/enriched",
            headers={"authorization": f"Bearer {TOKEN}"},
        ).content
    )
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    errors = watch(page)
    page.goto(token_run)
    status = "#perfetto-status"
    # no token: said at once, and no window opened
    page.click("#open-perfetto")
    page.wait_for_function(f"() => document.querySelector('{status}').dataset.state === 'failed'")
    assert "API token" in page.inner_text(status)
    assert len(context.pages) == 1
    # a wrong one: the service's refusal, said on the page
    page.fill("#perfetto-token", "not-the-token")
    with page.expect_popup():
        page.click("#open-perfetto")
    page.wait_for_function(
        f"() => document.querySelector('{status}').textContent.includes('unknown API token')"
    )
    # the right one: Perfetto gets the enriched trace, and the link downloads it
    page.fill("#perfetto-token", TOKEN)
    with page.expect_popup() as popup_info:
        page.click("#open-perfetto")
    popup = popup_info.value
    # `!= null`: before the stand-in page loads the popup is about:blank, where
    # `__posted` is undefined, and `!== null` would let the wait pass at once
    popup.wait_for_function("() => window.__posted != null", timeout=60_000)
    posted = popup.evaluate("() => window.__posted")
    assert gzip.decompress(base64.b64decode(posted["b64"])) == served
    with page.expect_download() as download_info:
        page.click("#enriched-trace")
    download = download_info.value
    assert download.suggested_filename == f"{rid}-enriched.json.gz"
    path = download.path()
    with open(path, "rb") as f:
        assert gzip.decompress(f.read()) == served
    page.wait_for_function(
        f"() => document.querySelector('{status}').dataset.state === 'downloaded'"
    )
    # the kept original, which needs the token too, the same way
    original = httpx.get(
        f"{base}/api/runs/{rid}/source", headers={"authorization": f"Bearer {TOKEN}"}
    ).content
    with page.expect_download() as download_info:
        page.click("#source-link")
    with open(download_info.value.path(), "rb") as f:
        assert f.read() == original
    csp = csp_violations(page)
    context.close()
    assert not csp, csp
    # the refused read is the only console error (the browser logs the 401 it got)
    assert all("401" in e for e in errors), errors
