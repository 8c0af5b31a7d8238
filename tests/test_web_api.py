"""The web service's JSON API through Litestar's test client, on real catalogs and files."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from web_helpers import client_for, make_settings, upload, wait_done, write_planted

from ingest.schema import SCHEMA_VERSION, stored_schema_version
from tracelens.cli import main as cli_main
from web.catalog import Catalog, RunStatus
from web.catalog import runs as catalog_runs


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    return write_planted(tmp_path / "planted.pt.trace.json.gz")


def _cli_report(path: Path) -> dict:
    result = CliRunner().invoke(cli_main, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_upload_ingest_and_findings_in_the_cli_json_shape(tmp_path: Path, planted: Path) -> None:
    with client_for(make_settings(tmp_path / "data")) as client:
        r = upload(client, planted, tags="llm, A100", name="planted run")
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["status"] in ("queued", "ingesting", "ready") and not body["duplicate"]
        run = wait_done(client, body["id"])
        assert run["status"] == "ready", run["error"]
        assert run["name"] == "planted run" and run["tags"] == ["llm", "a100"]

        findings = client.get(f"/api/runs/{run['id']}/findings").json()
        assert findings == _cli_report(planted)["findings"]
        assert run["finding_count"] == len(findings) > 0
        report = client.get(f"/api/runs/{run['id']}/report").json()
        assert report["findings"] == findings and report["source"]["path"] == planted.name

        one = client.get(f"/api/runs/{run['id']}/findings/{findings[0]['id']}").json()
        assert one["finding"] == findings[0]
        assert one["permalink"].endswith(f"/runs/{run['id']}/findings/{findings[0]['id']}")
        md = client.get(f"/api/runs/{run['id']}/findings/{findings[0]['id']}/markdown")
        assert md.headers["content-type"].startswith("text/markdown")
        assert one["permalink"] in md.text and findings[0]["id"] in md.text

        # The original is kept byte for byte.
        assert client.get(f"/api/runs/{run['id']}/source").content == planted.read_bytes()
        listed = client.get("/api/runs", params={"tag": "a100"}).json()
        assert [x["id"] for x in listed["runs"]] == [run["id"]] and listed["tags"] == [
            "a100",
            "llm",
        ]
        assert client.get("/api/runs", params={"q": "nothing-like-this"}).json()["total"] == 0


def test_same_file_twice_is_one_run(tmp_path: Path, planted: Path) -> None:
    with client_for(make_settings(tmp_path / "data")) as client:
        first = upload(client, planted).json()
        again = upload(client, planted, filename="renamed.json.gz")
        assert again.status_code == 200 and again.json()["duplicate"]
        assert again.json()["id"] == first["id"]
        assert client.get("/api/runs").json()["total"] == 1
        wait_done(client, first["id"])
    assert len(list((tmp_path / "data" / "runs").iterdir())) == 1


def _assert_nothing_stored(client, data_dir: Path, runs_before: int) -> None:
    assert client.get("/api/runs").json()["total"] == runs_before
    assert list((data_dir / "uploads").iterdir()) == []


def test_bad_uploads_fail_cleanly_with_the_reason(tmp_path: Path, planted: Path) -> None:
    data_dir = tmp_path / "data"
    settings = make_settings(data_dir, max_upload_bytes=200_000, max_decompressed_bytes=2_000_000)
    wrong = tmp_path / "notes.txt"
    wrong.write_text("hello, not a trace")
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    big = tmp_path / "big.json"
    big.write_bytes(b"[" + b" " * 200_100 + b"]")  # over the cap by less than the slack
    huge = tmp_path / "huge.json"
    huge.write_bytes(b"[" + b" " * 400_000 + b"]")  # refused from its Content-Length
    truncated_gz = tmp_path / "cut.json.gz"
    truncated_gz.write_bytes(planted.read_bytes()[:3000])
    report = tmp_path / "profile.nsys-rep"
    report.write_bytes(b"\x00binary nsys report")
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * 5_000_000 + b"]}"))
    with client_for(settings) as client:
        good = upload(client, planted).json()
        wait_done(client, good["id"])
        cases = [
            (wrong, 400, "notes.txt: unrecognised format"),
            (empty, 400, "empty.json: empty file"),
            (big, 413, "big.json: larger than the upload limit of 200,000 bytes"),
            (huge, 413, "upload of 400,"),
            (report, 400, "profile.nsys-rep: this is an Nsight Systems report"),
            (truncated_gz, 400, "cut.json.gz: truncated gzip file"),
            (bomb, 413, "bomb.json.gz: decompresses to more than 2,000,000 bytes"),
        ]
        for path, status, message in cases:
            r = upload(client, path)
            assert r.status_code == status, (path.name, r.text)
            assert r.json()["error"].startswith(message), r.json()
            assert "Traceback" not in r.text
            _assert_nothing_stored(client, data_dir, 1)

        no_file = client.post("/api/runs", files={"other": ("x", b"1")})
        assert no_file.status_code == 400 and "field named 'file'" in no_file.json()["error"]
        not_multipart = client.post(
            "/api/runs", content=b"{}", headers={"content-type": "application/json"}
        )
        assert (
            not_multipart.status_code == 415
            and "multipart/form-data" in not_multipart.json()["error"]
        )
        _assert_nothing_stored(client, data_dir, 1)

        # A trace whose JSON is cut mid-event is only found out by ingest: the run fails and
        # says why; the good run is untouched.
        raw = gzip.decompress(planted.read_bytes())
        cut = tmp_path / "cut.json"
        cut.write_bytes(raw[: len(raw) // 2 + 17][:150_000])
        r = upload(client, cut)
        assert r.status_code == 201, r.text
        failed = wait_done(client, r.json()["id"])
        assert failed["status"] == "failed" and failed["error"].startswith("cut.json: ")
        page = client.get(f"/runs/{failed['id']}", headers={"accept": "text/html"})
        assert failed["error"].split(": ", 1)[1][:40] in page.text
        assert client.get(f"/api/runs/{failed['id']}/findings").status_code == 409
        assert client.get(f"/api/runs/{good['id']}").json()["status"] == "ready"
        assert client.get(f"/api/runs/{good['id']}/findings").status_code == 200


def test_permalinks_survive_restart_and_reingestion(tmp_path: Path, planted: Path) -> None:
    settings = make_settings(tmp_path / "data")
    with client_for(settings) as client:
        run = wait_done(client, upload(client, planted).json()["id"])
        fid = client.get(f"/api/runs/{run['id']}/findings").json()[0]["id"]
        url = f"/runs/{run['id']}/findings/{fid}"
        before = client.get(url)
        assert before.status_code == 200
    with client_for(settings) as client:  # a restart: new process state, same data dir
        after = client.get(url)
        assert after.status_code == 200
        title = re.search(r'<h1 class="finding-page-title">(.*?)</h1>', after.text, re.S)
        assert title and title.group(1) in before.text
        r = client.post(f"/api/runs/{run['id']}/reingest")
        assert r.status_code == 202, r.text
        assert client.post(f"/api/runs/{run['id']}/reingest").status_code in (202, 409)
        again = wait_done(client, run["id"])
        assert again["status"] == "ready"
        assert client.get(url).status_code == 200
        ids_after = [f["id"] for f in client.get(f"/api/runs/{run['id']}/findings").json()]
        assert fid in ids_after
    # Only the newest ingest generation is kept on disk.
    files = sorted(p.name for p in (tmp_path / "data" / "runs" / run["id"]).iterdir())
    assert [f for f in files if f.startswith("trace.")] == ["trace.2.duckdb"]


def test_restart_mid_ingest_retries_the_run_and_never_shows_partial_data(
    tmp_path: Path, planted: Path
) -> None:
    settings = make_settings(tmp_path / "data")
    with client_for(settings, start_worker=False) as client:
        # The upload is accepted and queued, but no worker is running: we play the worker
        # that took the run and died half-way (status ingesting, a partial database left).
        run_id = upload(client, planted).json()["id"]
    catalog = Catalog(settings.database_url)
    with catalog.session() as s:
        generation = catalog_runs.claim(s, run_id)
    run_dir = settings.runs_dir / run_id
    partial = run_dir / f".trace.{generation}.duckdb.4242.partial"
    partial.write_bytes(b"half a database")
    catalog.dispose()
    with client_for(settings, start_worker=False) as client:
        shown = client.get(f"/api/runs/{run_id}").json()
        assert shown["status"] == "ingesting"
        assert client.get(f"/api/runs/{run_id}/findings").status_code == 409
    with client_for(settings) as client:  # the restart that recovers
        run = wait_done(client, run_id)
        assert run["status"] == "ready"
        assert client.get(f"/api/runs/{run_id}/findings").json() == _cli_report(planted)["findings"]
    assert not partial.exists()
    with Catalog(settings.database_url).session() as s:
        assert catalog_runs.get_run(s, run_id).attempts == 2


def test_timeline_aggregates_dense_windows_and_returns_events_in_small_ones(
    tmp_path: Path, corpus: Path
) -> None:
    trace = corpus / "torch" / "v100_train_single_rank_ns.pt.trace.json.gz"
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, trace).json()["id"])
        assert run["status"] == "ready", run["error"]
        full = client.get(f"/api/runs/{run['id']}/timeline", params={"width_px": 400}).json()
        gpu = next(lane for lane in full["lanes"] if lane["key"] == "gpu:0:7")
        assert gpu["buckets"] is not None and len(gpu["buckets"]) <= 400
        assert sum(b[1] for b in gpu["buckets"]) == gpu["count"]
        assert all(0 <= b[0] < 400 and 0 < b[2] <= 1 for b in gpu["buckets"])

        # A 1 ms window: plain events, exactly those of the canonical tables that overlap it.
        db = duckdb.connect(
            str(next((tmp_path / "data" / "runs" / run["id"]).glob("*.duckdb"))), read_only=True
        )
        t0 = full["t0_ns"]
        start = db.execute("SELECT min(start_ns) FROM kernels").fetchone()[0] - t0 + 50_000_000
        end = start + 1_000_000
        expected = db.execute(
            """SELECT count(*) FROM (SELECT start_ns, end_ns FROM kernels WHERE device_id = 0
                 AND stream_id = 7 UNION ALL SELECT start_ns, end_ns FROM memcpys
                 WHERE device_id = 0 AND stream_id = 7 AND kind NOT LIKE 'UVM%'
                 UNION ALL SELECT start_ns, end_ns FROM memsets
                 WHERE device_id = 0 AND stream_id = 7)
               WHERE start_ns < ? AND end_ns > ?""",
            [end + t0, start + t0],
        ).fetchone()[0]
        db.close()
        small = client.get(
            f"/api/runs/{run['id']}/timeline",
            params={"start_ns": start, "end_ns": end, "width_px": 1000},
        ).json()
        lane = next(lane for lane in small["lanes"] if lane["key"] == "gpu:0:7")
        assert lane["buckets"] is None
        assert len(lane["events"]) == expected > 0
        assert all(e[0] < end and e[1] > start for e in lane["events"])
        assert all(small["names"][e[2]] for e in lane["events"])

        bad = client.get(f"/api/runs/{run['id']}/timeline", params={"width_px": 0})
        assert bad.status_code == 400 and "width_px" in bad.json()["error"]

        # One event in full, from the kind and ref the window gave it; refusals are 4xx JSON.
        api = f"/api/runs/{run['id']}/timeline"
        s, _end, _, kind, ref = lane["events"][0]
        got = client.get(f"{api}/event", params={"kind": small["kinds"][kind], "ref": ref})
        assert got.status_code == 200 and got.json()["start_ns"] == s and got.json()["lane"] == 0
        assert (
            client.get(f"{api}/event", params={"kind": "kernel", "ref": 10**9}).status_code == 404
        )
        wrong = client.get(f"{api}/event", params={"kind": "nothing", "ref": 1})
        assert wrong.status_code == 400 and "kind" in wrong.json()["error"]
        found = client.get(f"{api}/search", params={"q": "cudaLaunchKernel"}).json()
        assert found["count"] > 0 and len(found["matches"]) == min(found["count"], 10_000)
        bad_re = client.get(f"{api}/search", params={"q": "(x", "regex": "true"})
        assert bad_re.status_code == 400 and "regular expression" in bad_re.json()["error"]
        stretch = client.get(f"{api}/range", params={"start_ns": start, "end_ns": end}).json()
        assert stretch["length_ns"] == end - start and stretch["kernels"] > 0


def test_postgres_catalog_serves_the_same_run(
    tmp_path: Path, planted: Path, postgres_url: str
) -> None:
    with client_for(make_settings(tmp_path / "data", database_url=postgres_url)) as client:
        run = wait_done(client, upload(client, planted).json()["id"])
        assert run["status"] == "ready", run["error"]
        assert (
            client.get(f"/api/runs/{run['id']}/findings").json() == _cli_report(planted)["findings"]
        )
        assert upload(client, planted).json()["duplicate"]
    with Catalog(postgres_url).session() as s:
        assert catalog_runs.get_run(s, run["id"]).status == RunStatus.READY


def test_openapi_schema_lists_the_api(tmp_path: Path) -> None:
    with client_for(make_settings(tmp_path / "data")) as client:
        paths = client.get("/schema/openapi.json").json()["paths"]
        for p in (
            "/api/runs",
            "/api/runs/{run_id}",
            "/api/runs/{run_id}/findings",
            "/api/runs/{run_id}/timeline",
        ):
            assert p in paths
        assert client.get("/api/runs/0123456789ab").json() == {"error": "no run '0123456789ab'"}


def _response_properties(spec: dict, path: str, method: str, status: int) -> set[str]:
    """The property names the OpenAPI document gives one response's JSON body."""
    body = spec["paths"][path][method]["responses"][str(status)]["content"]["application/json"]
    schema = body["schema"]
    if "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return set(schema.get("properties", {}))


def test_openapi_schema_describes_the_json_answers(tmp_path: Path, planted: Path) -> None:
    """The documented response bodies are the ones the service sends, errors included."""
    with client_for(make_settings(tmp_path / "data"), start_worker=False) as client:
        spec = client.get("/schema/openapi.json").json()
        uploaded = upload(client, planted)
        assert uploaded.status_code == 201
        again = upload(client, planted)
        assert again.status_code == 200 and again.json()["duplicate"]
        run_id = uploaded.json()["id"]
        answers = [
            ("/api/runs", "post", 201, uploaded.json()),
            ("/api/runs", "post", 200, again.json()),
            ("/api/runs", "get", 200, client.get("/api/runs").json()),
            ("/api/runs/{run_id}", "get", 200, client.get(f"/api/runs/{run_id}").json()),
            ("/api/runs/{run_id}", "get", 404, client.get("/api/runs/0123456789ab").json()),
            ("/api/runs", "get", 400, client.get("/api/runs", params={"limit": 0}).json()),
            (
                "/api/runs/{run_id}/report",
                "get",
                409,
                client.get(f"/api/runs/{run_id}/report").json(),
            ),
            ("/api/health", "get", 200, client.get("/api/health").json()),
        ]
        for path, method, status, answer in answers:
            documented = _response_properties(spec, path, method, status)
            assert set(answer) <= documented, (path, method, status)
            assert documented, (path, method, status)
        listed = client.get("/api/runs").json()["runs"][0]
        run_schema = spec["components"]["schemas"]["RunView"]
        assert set(listed) == set(run_schema["properties"]) == set(run_schema["required"])
        assert set(listed["links"]) == set(spec["components"]["schemas"]["RunLinks"]["properties"])
        # every API refusal is documented with the service's own error body
        for path, item in spec["paths"].items():
            for method, op in item.items():
                for status in op["responses"]:
                    if status.startswith(("4", "5")):
                        props = _response_properties(spec, path, method, int(status))
                        assert props == {"error"}, (path, method, status)


def test_optional_report_sections_get_a_panel_on_the_run_page(
    tmp_path: Path, planted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sections added by analyzers (the LLM latency panel) are shown without page changes."""
    from tracelens.report import build as report_module

    def llm_latency(db, thresholds):  # a section computed from the trace, as real ones are
        n = db.scalar("SELECT count(*) FROM kernels")
        return {"ttft_ms": {"p50": 12.5, "p95": 40.0}, "requests": [{"id": "r<1>", "kernels": n}]}

    monkeypatch.setitem(report_module.SECTIONS, "llm_latency", llm_latency)
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, planted).json()["id"])
        report = client.get(f"/api/runs/{run['id']}/report").json()
        assert report["llm_latency"]["ttft_ms"] == {"p50": 12.5, "p95": 40.0}
        page = client.get(f"/runs/{run['id']}", headers={"accept": "text/html"}).text
        panel = page.split('data-section="llm_latency"', 1)[1].split("</section>", 1)[0]
        assert "<h2>LLM latency</h2>" in panel and "ttft_ms" in panel and "40.0" in panel
        assert (
            "r&lt;1&gt;" in panel and str(report["llm_latency"]["requests"][0]["kernels"]) in panel
        )


def _rewrite_run_database(run_dir: Path, *statements: str) -> None:
    """Make a stored run's database what an older tracelens would have left."""
    con = duckdb.connect(str(next(run_dir.glob("trace.*.duckdb"))))
    for statement in statements:
        con.execute(statement)
    con.close()


def test_run_ingested_by_an_older_version_is_reingested_on_first_use(
    tmp_path: Path, planted: Path
) -> None:
    settings = make_settings(tmp_path / "data")
    with client_for(settings) as client:
        run = wait_done(client, upload(client, planted).json()["id"])
        fids = [f["id"] for f in client.get(f"/api/runs/{run['id']}/findings").json()]
    _rewrite_run_database(  # what an older tracelens left: no versioned tl_meta
        settings.runs_dir / run["id"],
        "DROP TABLE tl_meta",
        "CREATE TABLE tl_meta AS SELECT 0::BIGINT AS t0_ns, 1::BIGINT AS span_ns",
    )
    with client_for(settings) as client:
        r = client.get(f"/api/runs/{run['id']}/timeline")
        assert r.status_code == 409 and "older tracelens" in r.json()["error"]
        page = client.get(f"/runs/{run['id']}", headers={"accept": "text/html"})
        assert page.status_code == 200
        again = wait_done(client, run["id"])
        assert again["status"] == "ready"
        assert client.get(f"/api/runs/{run['id']}/timeline").status_code == 200
        assert [f["id"] for f in client.get(f"/api/runs/{run['id']}/findings").json()] == fids


def test_run_of_an_older_table_schema_is_reingested_on_first_use(
    tmp_path: Path, planted: Path
) -> None:
    """A database whose tables an older tracelens wrote (here: schema 3, before
    cpu_ops.concrete_inputs) is never analyzed as it is: a restricted report would read
    the column it lacks. It is ingested again from the kept original."""
    settings = make_settings(tmp_path / "data")
    with client_for(settings) as client:
        run = wait_done(client, upload(client, planted).json()["id"])
    _rewrite_run_database(
        settings.runs_dir / run["id"],
        "ALTER TABLE cpu_ops DROP COLUMN concrete_inputs",
        "UPDATE trace_info SET value = '3' WHERE key = 'tracelens_schema_version'",
    )
    with client_for(settings) as client:
        r = client.get(f"/api/runs/{run['id']}/timeline")
        assert r.status_code == 409 and "older tracelens" in r.json()["error"]
        again = wait_done(client, run["id"])
        assert again["status"] == "ready"
        assert client.get(f"/api/runs/{run['id']}/timeline").status_code == 200
    # read-only, as the service's own connection to it may still be open in this process
    newest = max(
        (settings.runs_dir / run["id"]).glob("trace.*.duckdb"), key=lambda p: p.stat().st_mtime
    )
    con = duckdb.connect(str(newest), read_only=True)
    version = stored_schema_version(con)
    con.close()
    assert version == SCHEMA_VERSION


def test_a_stored_report_of_another_shape_is_rebuilt_on_first_use(
    tmp_path: Path, planted: Path
) -> None:
    """A report file an older tracelens wrote (here: without a metrics field this version
    declares) is not served: the run is ingested again, and then it is."""
    settings = make_settings(tmp_path / "data")
    with client_for(settings) as client:
        run = wait_done(client, upload(client, planted).json()["id"])
        report = client.get(f"/api/runs/{run['id']}/report").json()
    report_path = next((settings.runs_dir / run["id"]).glob("report.*.json"))
    older = json.loads(report_path.read_text(encoding="utf-8"))
    del older["metrics"]["uvm_migration_count"]
    report_path.write_text(json.dumps(older), encoding="utf-8")
    with client_for(settings) as client:
        r = client.get(f"/api/runs/{run['id']}/report")
        assert r.status_code == 409 and "older tracelens" in r.json()["error"]
        again = wait_done(client, run["id"])
        assert again["status"] == "ready", again["error"]
        rebuilt = client.get(f"/api/runs/{run['id']}/report").json()
        assert rebuilt["metrics"] == report["metrics"]
        assert rebuilt["findings"] == report["findings"]


def test_openapi_schema_describes_the_report_and_its_findings(
    tmp_path: Path, planted: Path
) -> None:
    """The report endpoints are documented with the core's report model, field for field."""
    with client_for(make_settings(tmp_path / "data")) as client:
        spec = client.get("/schema/openapi.json").json()
        run = wait_done(client, upload(client, planted).json()["id"])
        report = client.get(f"/api/runs/{run['id']}/report").json()
        findings = client.get(f"/api/runs/{run['id']}/findings").json()
        one = client.get(f"/api/runs/{run['id']}/findings/{findings[0]['id']}").json()
    schemas = spec["components"]["schemas"]
    report_schema = schemas["Report"]
    assert set(report) <= set(report_schema["properties"])
    assert set(report_schema["required"]) <= set(report)
    finding = schemas["Finding"]
    assert set(findings[0]) == set(finding["properties"]) == set(finding["required"])
    assert set(one["finding"]) == set(finding["properties"])
    listed = spec["paths"]["/api/runs/{run_id}/findings"]["get"]["responses"]["200"]
    assert listed["content"]["application/json"]["schema"]["items"] == {
        "$ref": "#/components/schemas/Finding"
    }
    assert set(finding["properties"]["severity"]["enum"]) == {
        "critical",
        "high",
        "medium",
        "low",
        "info",
    }


def test_llm_serving_trace_gets_the_latency_panel(tmp_path: Path) -> None:
    from tracelens.core.units import fmt_ns

    trace = Path(__file__).resolve().parent.parent / "sample_traces"
    trace = trace / "serve_continuous_naive_cpu.pt.trace.json.gz"
    if not trace.exists():
        pytest.skip("sample_traces/ holds no serving trace")
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, trace).json()["id"])
        assert run["status"] == "ready", run["error"]
        llm = client.get(f"/api/runs/{run['id']}/report").json()["llm"]
        page = client.get(f"/runs/{run['id']}", headers={"accept": "text/html"}).text
        panel = page.split('data-section="llm"', 1)[1].split("</section>", 1)[0]
        assert "<h2>LLM latency</h2>" in panel
        for metric in ("ttft_ns", "tpot_ns", "itl_ns", "e2e_ns"):
            assert fmt_ns(llm[metric]["p95"]) in panel, metric
        assert f"{llm['output_tokens_per_s']:.1f}" in panel


def test_page_and_findings_answer_304_to_their_etag_until_a_reingest(
    tmp_path: Path, planted: Path
) -> None:
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, planted).json()["id"])
        urls = (f"/api/runs/{run['id']}/findings", f"/runs/{run['id']}")
        first = {}
        for url in urls:
            r = client.get(url)
            assert r.status_code == 200 and r.content
            etag = r.headers["etag"]
            assert etag.startswith('"') and "no-cache" in r.headers["cache-control"]
            again = client.get(url, headers={"If-None-Match": etag})
            assert again.status_code == 304 and again.content == b""
            assert again.headers["etag"] == etag
            # another tag, or none, gets the bytes
            other = client.get(url, headers={"If-None-Match": '"1-other"'})
            assert other.status_code == 200 and other.content == r.content
            first[url] = (etag, r.content)

        assert client.post(f"/api/runs/{run['id']}/reingest").status_code == 202
        assert wait_done(client, run["id"])["status"] == "ready"
        for url in urls:
            old_etag, old_body = first[url]
            r = client.get(url, headers={"If-None-Match": old_etag})
            assert r.status_code == 200, url
            assert r.headers["etag"] != old_etag
            if url.endswith("/findings"):  # same trace, same findings: only the tag moved
                assert r.content == old_body
