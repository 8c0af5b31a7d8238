"""A run's analysis restricted on the web: ``window=``, ``steps=`` and ``range=`` on the report
and findings API and the run page, links that keep the restriction, answers cached apart.

On the planted training trace (tracelens.testing.planted): ten 9 ms steps, each with a
2,050 us data-loading gap before its copy (all but the first step) and a 1,030 us
host-compute gap, so what a part of it gives is known. Each restricted answer is compared
with what ``tracelens analyze`` and ``tracelens.load(...)`` give for the same restriction.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from litestar.testing import TestClient
from web_helpers import client_for, make_settings, upload, wait_done, wait_generation

from tracelens.api.trace import Trace
from tracelens.cli import main as cli_main
from tracelens.testing import training_steps, write_chrome_trace
from tracelens.testing.chrome_writer import header_for, iter_events, write_events
from tracelens.testing.planted import US
from tracelens.testing.planted_llm import static_launch_bound
from web.run_lookup import load_ready_run
from web.run_restriction import analysis_of, parse_restriction

HTML = {"accept": "text/html"}
LOADER_GAP = 2_050 * US


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, planted_path: Path
) -> Iterator[tuple[TestClient, str]]:
    """The planted trace uploaded once to a real app, ingested: the client and the run id."""
    with client_for(make_settings(tmp_path_factory.mktemp("web") / "data")) as client:
        run = wait_done(client, upload(client, planted_path).json()["id"])
        assert run["status"] == "ready", run["error"]
        yield client, run["id"]


def _cli(path: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli_main, ["analyze", str(path), "--format", "json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _impact(findings: list[dict[str, Any]], analyzer: str) -> int:
    return sum(f["impact_ns"] for f in findings if f["analyzer"] == analyzer)


def test_steps_restrict_the_findings_as_the_cli_and_the_api_do(
    served: tuple[TestClient, str], planted_path: Path, trace: Trace
) -> None:
    client, run_id = served
    whole = client.get(f"/api/runs/{run_id}/findings").json()
    res = client.get(f"/api/runs/{run_id}/findings", params={"steps": "2:5"})
    assert res.status_code == 200, res.text
    part = res.json()
    # The loader gap before step 2's copy is before the part: two of the nine remain, and
    # one host-compute gap in each of the three steps.
    assert _impact(whole, "data_loading") == 9 * LOADER_GAP
    assert _impact(part, "data_loading") == 2 * LOADER_GAP
    assert [f["impact_ns"] for f in part if f["analyzer"] == "idle_gpu"] == [3 * 1_030 * US]
    cli = _cli(planted_path, "--steps", "2:5")
    assert part == cli["findings"]
    with trace.restrict(steps="2:5") as same:
        assert part == same.report()["findings"]

    report = client.get(f"/api/runs/{run_id}/report", params={"steps": "2:5"}).json()
    stored = client.get(f"/api/runs/{run_id}/report").json()
    assert report["findings"] == part and set(report) == set(stored)
    assert report["metrics"] == cli["metrics"] and report["metrics"]["kernel_count"] == 66
    # The restriction is recorded as the CLI records it: in the notes.
    assert report["notes"] == cli["notes"]
    assert any(n.startswith("analysed only profiler steps 2:5") for n in report["notes"])
    assert report["source"] == stored["source"]  # the upload's name and hash
    # The whole trace is still answered as the whole trace.
    assert client.get(f"/api/runs/{run_id}/findings").json() == whole
    assert whole == _cli(planted_path)["findings"]


def test_a_window_is_the_apis_window_and_a_range_its_instances(
    served: tuple[TestClient, str], planted_path: Path, trace: Trace
) -> None:
    client, run_id = served
    t0 = trace.db.window[0]
    report = client.get(f"/api/runs/{run_id}/report", params={"window": "8.9ms:26.9ms"}).json()
    # Offsets from the first GPU activity: the copies of steps 1 and 2.
    assert report["metrics"]["memcpy_count"] == 2
    with trace.window(t0 + 8_900_000, t0 + 26_900_000) as same:
        assert report["findings"] == same.report()["findings"]
    assert report["findings"] == _cli(planted_path, "--window", "8.9ms:26.9ms")["findings"]

    # A name with '#' and '@': the query carries it encoded, the restriction reads it whole.
    by_range = client.get(
        f"/api/runs/{run_id}/findings", params={"range": "ProfilerStep#3@user_annotation"}
    ).json()
    by_step = client.get(f"/api/runs/{run_id}/findings", params={"steps": "3"}).json()
    assert [(f["id"], f["impact_ns"]) for f in by_range] == [
        (f["id"], f["impact_ns"]) for f in by_step
    ]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"steps": "40:50"}, "--steps 40:50: no such steps (the trace has steps 0 to 9)"),
        (
            {"range": "nope@nvtx"},
            "--range nope@nvtx: no range named 'nope' in domain 'nvtx' in the trace",
        ),
        ({"window": "5s:"}, "--window 5s:: starts after the trace ends"),
        ({"window": "12"}, "expected START:END for --window, got '12'"),
        ({"window": "5ms:1ms"}, "--window 5ms:1ms: END must be after START"),
        ({"window": "1x:2"}, "expected a duration such as 1.5s, 200ms or 300us, got '1x'"),
        ({"steps": "a:b"}, "--steps a:b: step numbers are whole numbers"),
        ({"window": "1ms:2ms", "steps": "3"}, "give at most one of a window, steps or a range"),
    ],
)
def test_bad_restrictions_answer_400_with_the_clis_message(
    served: tuple[TestClient, str], params: dict[str, str], message: str
) -> None:
    client, run_id = served
    fid = client.get(f"/api/runs/{run_id}/findings").json()[0]["id"]
    for path in ("report", "findings", f"findings/{fid}", f"findings/{fid}/markdown"):
        res = client.get(f"/api/runs/{run_id}/{path}", params=params)
        assert res.status_code == 400, (path, res.text)
        error = res.json()["error"]
        assert error.startswith(message) and "\n" not in error, (path, error)
    page = client.get(f"/runs/{run_id}/findings/{fid}", params=params, headers=HTML)
    assert page.status_code == 400 and message in page.text.replace("&#39;", "'")


def test_a_range_that_matches_nothing_reads_as_on_the_command_line(
    served: tuple[TestClient, str], planted_path: Path
) -> None:
    client, run_id = served
    res = client.get(f"/api/runs/{run_id}/report", params={"range": "nope@nvtx"})
    cli = CliRunner().invoke(cli_main, ["analyze", str(planted_path), "--range", "nope@nvtx"])
    assert cli.exit_code == 2
    assert cli.output.strip() == f"tracelens: error: {res.json()['error']}"


def test_restricted_answers_are_cached_apart_and_revalidated(
    served: tuple[TestClient, str],
) -> None:
    client, run_id = served
    for path in ("findings", "report"):
        url = f"/api/runs/{run_id}/{path}"
        whole = client.get(url)
        part = client.get(url, params={"steps": "2:5"})
        assert whole.headers["etag"] != part.headers["etag"]
        assert whole.content != part.content
        # A client's copy of one is never taken for the other.
        assert client.get(url, headers={"if-none-match": part.headers["etag"]}).content == (
            whole.content
        )
        crossed = client.get(
            url, params={"steps": "2:5"}, headers={"if-none-match": whole.headers["etag"]}
        )
        assert crossed.status_code == 200 and crossed.content == part.content
        again = client.get(
            url, params={"steps": "2:5"}, headers={"if-none-match": part.headers["etag"]}
        )
        assert again.status_code == 304 and again.content == b""
        assert client.get(url, params={"steps": "2:6"}).headers["etag"] != part.headers["etag"]

    page = f"/runs/{run_id}"
    whole_page = client.get(page, headers=HTML)
    part_page = client.get(page, params={"steps": "2:5"}, headers=HTML)
    assert 'id="restrict-active"' not in whole_page.text
    assert 'id="restrict-active"' in part_page.text
    assert whole_page.headers["etag"] != part_page.headers["etag"]
    revalidated = client.get(
        page, params={"steps": "2:5"}, headers={**HTML, "if-none-match": part_page.headers["etag"]}
    )
    assert revalidated.status_code == 304
    assert client.get(page, headers=HTML).text == whole_page.text

    # Analysed once: every later request of the generation is answered from that analysis.
    svc = client.app.state.services
    run = load_ready_run(svc, run_id)
    restriction = parse_restriction(None, "2:5", None)
    assert restriction is not None
    first = analysis_of(svc, run, restriction)
    assert analysis_of(svc, run, restriction) is first
    served_report = client.get(f"/api/runs/{run_id}/report", params={"steps": "2:5"}).json()
    assert first.report == served_report


def test_finding_links_of_a_restricted_page_keep_the_restriction(
    served: tuple[TestClient, str],
) -> None:
    client, run_id = served
    part = client.get(f"/api/runs/{run_id}/findings", params={"steps": "2:5"}).json()
    loader = next(f for f in part if f["analyzer"] == "data_loading")
    page = client.get(f"/runs/{run_id}", params={"steps": "2:5"}, headers=HTML).text
    link = f"/runs/{run_id}/findings/{loader['id']}?steps=2:5"
    assert f'href="{link}"' in page
    assert f'href="/api/runs/{run_id}/report?steps=2:5"' in page
    assert f'id="restrict-clear" href="/runs/{run_id}"' in page

    one = client.get(f"/api/runs/{run_id}/findings/{loader['id']}", params={"steps": "2:5"})
    assert one.json()["finding"] == loader
    assert one.json()["permalink"].endswith(link)
    assert "**Scope:** analysed only profiler steps 2:5 (27 ms)" in one.json()["markdown"]
    md = client.get(f"/api/runs/{run_id}/findings/{loader['id']}/markdown?steps=2:5").text
    assert link in md and "**Scope:**" in md

    # The same finding in the whole trace: its own impact, and no scope.
    whole = client.get(f"/api/runs/{run_id}/findings/{loader['id']}").json()
    assert whole["finding"]["impact_ns"] == 9 * LOADER_GAP != loader["impact_ns"]
    assert "**Scope:**" not in whole["markdown"] and "?" not in whole["permalink"]

    finding_page = client.get(link, headers=HTML)
    assert finding_page.status_code == 200
    assert 'id="restrict-active"' in finding_page.text and "4.1 ms" in finding_page.text
    assert f'href="/runs/{run_id}?steps=2:5"' in finding_page.text
    assert link in finding_page.text  # the permalink shown and in the Markdown


def test_the_run_page_form_names_only_the_restriction_and_says_what_it_can_take(
    served: tuple[TestClient, str],
) -> None:
    client, run_id = served
    page = f"/runs/{run_id}"
    # The form sends its unused fields empty: the address keeps only the one filled in.
    sent = client.get(f"{page}?window=&steps=+2:5+&range=", follow_redirects=False)
    assert sent.status_code == 303 and sent.headers["location"] == f"{page}?steps=2:5"
    cleared = client.get(f"{page}?window=&steps=&range=", follow_redirects=False)
    assert cleared.status_code == 303 and cleared.headers["location"] == page

    whole = client.get(page, headers=HTML).text
    form = whole.split('id="restrict-form"', 1)[1].split("</form>", 1)[0]
    assert 'method="get"' in whole and 'name="window"' in form and 'name="range"' in form
    assert "this trace has steps 0 to 9" in whole
    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__@user_annotation"
    assert f'<option value="{loader}">10 instances, 20 ms in all</option>' in whole

    restricted = client.get(page, params={"range": loader}, headers=HTML)
    assert restricted.status_code == 200
    assert f'value="{loader}"' in restricted.text
    data = json.loads(
        re.search(r'id="page-data">([^<]*)<', restricted.text).group(1)  # type: ignore[union-attr]
    )
    assert data["view_ns"][0] < data["view_ns"][1] <= data["span_ns"]

    # A refused restriction: the whole trace, the form as sent, and why.
    bad = client.get(page, params={"steps": "40:"}, headers=HTML)
    assert bad.status_code == 400
    assert "--steps 40:: no such steps (the trace has steps 0 to 9)" in bad.text
    assert 'value="40:"' in bad.text and 'id="restrict-active"' not in bad.text
    assert bad.text.count('class="finding"') == whole.count('class="finding"')


def _with_a_broken_event(path: Path) -> Path:
    """The planted trace with one operator of negative duration, which ingest skips and
    notes."""
    sc = training_steps()
    broken = {"ph": "X", "cat": "cpu_op", "name": "broken", "pid": sc.pid, "tid": 1}

    def events() -> Iterator[str]:
        yield from iter_events(sc)
        yield json.dumps({**broken, "ts": 1_700_000_000_000.0, "dur": -3})

    with gzip.open(path, "wt", encoding="utf-8") as out:
        write_events(out, events(), header_for(sc))
    return path


def test_a_restricted_report_keeps_ingests_notes(tmp_path: Path) -> None:
    trace = _with_a_broken_event(tmp_path / "broken.pt.trace.json.gz")
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, trace).json()["id"])
        report = client.get(f"/api/runs/{run['id']}/report", params={"steps": "2:5"}).json()
    cli = _cli(trace, "--steps", "2:5")
    assert report["notes"] == cli["notes"]
    assert report["notes"][0] == "1 event with a negative duration skipped"


def test_a_restricted_report_judges_the_runs_objectives_of_its_generation(
    tmp_path: Path,
) -> None:
    served = write_chrome_trace(static_launch_bound(), tmp_path / "serve.pt.trace.json.gz")
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, served, slo="ttft=5ms,tpot=1ms").json()["id"])
        url = f"/api/runs/{run['id']}/report"
        before = client.get(url, params={"window": ":13ms"})
        cli = _cli(served, "--window", ":13ms", "--slo", "ttft=5ms,tpot=1ms")
        assert before.json()["llm"] == cli["llm"] and before.json()["findings"] == cli["findings"]
        assert before.json()["llm"]["slo"]["attainment_pct"]["ttft"] == 50.0

        # New objectives are a new generation: the restricted answer is computed again.
        client.put(f"/api/runs/{run['id']}/slo", json={"slo": "ttft=12ms"})
        wait_generation(client, run["id"], run["ready_at"])
        after = client.get(url, params={"window": ":13ms"})
        assert after.headers["etag"] != before.headers["etag"]
        assert after.json()["llm"]["slo"]["attainment_pct"] == {"ttft": 100.0, "all": 100.0}
        assert after.json()["llm"] == _cli(served, "--window", ":13ms", "--slo", "ttft=12ms")["llm"]
