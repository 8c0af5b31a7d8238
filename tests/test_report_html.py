"""One HTML rendering of the report: the standalone page and the web run page share it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape
from web_helpers import client_for, make_settings, upload, wait_done, write_planted

from tracelens.report import build as report_module
from tracelens.report.build import CORE_KEYS, optional_sections
from tracelens.report.render.html import STATIC_DIR, render_html
from tracelens.testing.reports import report_of_file


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_planted(tmp_path_factory.mktemp("html") / "planted.pt.trace.json.gz")


def _report(path: Path) -> dict[str, Any]:
    return report_of_file(path)


def _panel(page: str, heading: str) -> str:
    """The ``<section>`` whose heading starts with ``heading``, as rendered."""
    m = re.search(
        rf'<section class="panel"[^>]*>\s*<h2>{re.escape(heading)}.*?</section>', page, re.S
    )
    assert m, heading
    return m.group(0)


def test_the_standalone_page_is_one_file_that_requests_nothing(planted: Path) -> None:
    report = _report(planted)
    page = render_html(report)
    assert "<script" not in page and "<link" not in page
    assert not re.search(r"""\b(src|href)\s*=""", page)
    assert (STATIC_DIR / "report.css").read_text(encoding="utf-8") in page
    shown = re.findall(r'data-finding-id="([0-9a-f]+)"', page)
    assert shown == [f["id"] for f in report["findings"]]
    for f in report["findings"]:  # evidence stands beside each finding, no web page needed
        assert str(escape(f["impact_basis"])) in page


def test_the_run_page_shows_the_report_parts_the_standalone_page_shows(
    tmp_path: Path, planted: Path
) -> None:
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, planted).json()["id"])
        assert run["status"] == "ready", run["error"]
        report = client.get(f"/api/runs/{run['id']}/report").json()
        page = client.get(f"/runs/{run['id']}", headers={"accept": "text/html"}).text
        css = client.get("/static/report.css")
        assert css.status_code == 200
        assert css.text == (STATIC_DIR / "report.css").read_text(encoding="utf-8")
    standalone = render_html(report)
    for heading in ("Trace", "Hot kernels", "Hot operators"):
        assert _panel(page, heading) == _panel(standalone, heading), heading
    # the findings in the same order (their cards; the page's buttons also name findings)
    card = r'<li class="finding" id="f-[0-9a-f]+" data-finding-id="([0-9a-f]+)"'
    assert re.findall(card, page) == re.findall(card, standalone)
    assert re.findall(card, page)


def test_optional_sections_are_what_follows_the_core_keys(
    planted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(
        report_module.SECTIONS, "llm_latency", lambda db, t: {"requests": [{"id": "r<1>"}]}
    )
    report = _report(planted)
    assert list(report)[: len(CORE_KEYS)] == list(CORE_KEYS)
    assert list(optional_sections(report)) == ["llm_latency"]
    page = render_html(report)
    panel = page.split('data-section="llm_latency"', 1)[1].split("</section>", 1)[0]
    assert "<h2>LLM latency</h2>" in panel and "r&lt;1&gt;" in panel
