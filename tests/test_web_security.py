"""Security of the web service: tokens, origins, CSRF, rate limits, CSP, escaping, secrets."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from web_helpers import client_for, make_settings, upload, wait_done, write_planted

from web.catalog import Catalog
from web.catalog.tokens import create_token
from web.uploads import clean_filename

HTML = {"accept": "text/html"}


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    return write_planted(tmp_path / "planted.pt.trace.json.gz")


def test_tokens_guard_uploads_and_deletes_but_not_reads(tmp_path: Path, planted: Path) -> None:
    settings = make_settings(tmp_path / "data", api_tokens=frozenset({"env-token-1"}))
    with client_for(settings) as client:
        none = upload(client, planted)
        assert none.status_code == 401 and "API token" in none.json()["error"]
        wrong = upload(client, planted, headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"] == "unknown API token"
        assert client.get("/api/runs").json()["total"] == 0

        ok = upload(client, planted, headers={"authorization": "Bearer env-token-1"})
        assert ok.status_code == 201
        run = wait_done(client, ok.json()["id"])
        assert client.get(f"/api/runs/{run['id']}/findings").status_code == 200  # reads are open

        assert client.delete(f"/api/runs/{run['id']}").status_code == 401
        with Catalog(settings.database_url).session() as s:
            stored = create_token(s, "ci")  # tokens in the catalog work as well
        deleted = client.delete(
            f"/api/runs/{run['id']}", headers={"authorization": f"Bearer {stored}"}
        )
        assert deleted.status_code == 204
        assert client.get(f"/api/runs/{run['id']}").status_code == 404
        assert not (settings.runs_dir / run["id"]).exists()


def test_cross_origin_writes_are_refused(tmp_path: Path, planted: Path) -> None:
    with client_for(make_settings(tmp_path / "data")) as client:
        evil = upload(client, planted, headers={"origin": "https://evil.example"})
        assert evil.status_code == 403 and "cross-origin" in evil.json()["error"]
        same = upload(client, planted, headers={"origin": "http://testserver.local"})
        assert same.status_code == 201
        run_id = same.json()["id"]
        wait_done(client, run_id)
        refused = client.delete(f"/api/runs/{run_id}", headers={"origin": "https://evil.example"})
        assert refused.status_code == 403
        assert client.get(f"/api/runs/{run_id}").status_code == 200


def test_html_delete_form_needs_the_csrf_token(tmp_path: Path, planted: Path) -> None:
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, planted).json()["id"])
        page = client.get(f"/runs/{run['id']}", headers=HTML)
        token = re.search(r'name="_csrf_token" value="([^"]+)"', page.text).group(1)
        forged = client.post(f"/runs/{run['id']}/delete", data={}, headers=HTML)
        assert forged.status_code == 403
        assert client.get(f"/api/runs/{run['id']}").status_code == 200
        done = client.post(
            f"/runs/{run['id']}/delete",
            data={"_csrf_token": token, "confirm": "yes"},
            headers=HTML,
            follow_redirects=False,
        )
        assert done.status_code == 303 and done.headers["location"].startswith("/?deleted=")
        assert client.get(f"/api/runs/{run['id']}").status_code == 404


def _rate_limited(client, planted: Path, tmp_path: Path) -> None:
    codes = []
    for i in range(3):
        variant = tmp_path / f"v{i}.pt.trace.json.gz"
        variant.write_bytes(planted.read_bytes() + b"\0" * (i + 1))  # distinct sha256
        codes.append(upload(client, variant))
    assert [r.status_code for r in codes[:2]] == [201, 201]
    assert codes[2].status_code == 429 and codes[2].json()["error"]
    assert int(codes[2].headers["retry-after"]) > 0
    assert client.get("/api/runs").status_code == 200  # reading is not throttled
    for r in codes[:2]:
        wait_done(client, r.json()["id"])


def test_uploads_are_rate_limited_in_memory(tmp_path: Path, planted: Path) -> None:
    with client_for(make_settings(tmp_path / "data", uploads_per_minute=2)) as client:
        _rate_limited(client, planted, tmp_path)


def test_uploads_are_rate_limited_in_redis(tmp_path: Path, planted: Path) -> None:
    redis = pytest.importorskip("redis")
    url = "redis://127.0.0.1:6379/0"
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    except Exception as exc:
        pytest.skip(f"no Redis server at {url}: {exc}")
    settings = make_settings(
        tmp_path / "data",
        uploads_per_minute=2,
        redis_url=url,
        redis_namespace=f"tracelens-test-{uuid.uuid4().hex[:8]}",
    )
    with client_for(settings) as client:
        _rate_limited(client, planted, tmp_path)
    keys = redis.Redis.from_url(url).keys(f"{settings.redis_namespace}*")
    assert keys  # the counters really lived in Redis
    redis.Redis.from_url(url).delete(*keys)


def test_pages_escape_kernel_names_and_send_a_strict_csp(tmp_path: Path) -> None:
    nasty = "<script>alert('x')</script> void gemm<float, 4>&"
    trace = write_planted(tmp_path / "nasty.pt.trace.json.gz", kernel_name=nasty)
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, trace).json()["id"])
        page = client.get(f"/runs/{run['id']}", headers=HTML)
        assert "&lt;script&gt;alert(" in page.text
        assert "<script>alert(" not in page.text
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert "frame-ancestors 'none'" in csp
        # No inline script: every <script> has a src, or is inert JSON data.
        for tag in re.findall(r"<script[^>]*>", page.text):
            assert "src=" in tag or 'type="application/json"' in tag, tag
        findings = client.get(f"/api/runs/{run['id']}/findings").json()
        for f in findings:
            fp = client.get(f"/runs/{run['id']}/findings/{f['id']}", headers=HTML)
            assert "<script>alert(" not in fp.text
        assert client.get("/api/runs").headers["x-content-type-options"] == "nosniff"


def test_only_the_pages_that_open_perfetto_relax_the_opener_policy(
    tmp_path: Path, planted: Path
) -> None:
    coop = "cross-origin-opener-policy"
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, planted).json()["id"])
        assert run["status"] == "ready", run
        page = client.get(f"/runs/{run['id']}", headers=HTML)
        assert 'id="open-perfetto"' in page.text
        # it posts the trace to the Perfetto window it opens: that window must stay reachable
        assert page.headers[coop] == "same-origin-allow-popups"
        finding = client.get(f"/api/runs/{run['id']}/findings").json()[0]["id"]
        for path in (
            "/",
            f"/runs/{run['id']}/findings/{finding}",
            f"/api/runs/{run['id']}",
            "/api/runs",
            "/no/such/page",
        ):
            answer = client.get(path, headers=HTML)
            assert 'id="open-perfetto"' not in answer.text, path
            assert answer.headers[coop] == "same-origin", path


def test_secrets_in_trace_metadata_are_never_stored_or_shown(tmp_path: Path) -> None:
    secret = "hf_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2"
    trace = write_planted(tmp_path / "leaky.pt.trace.json.gz", host=f"gpu-07 HF_TOKEN={secret}")
    settings = make_settings(tmp_path / "data")
    with client_for(settings) as client:
        run = wait_done(
            client, upload(client, trace, filename=f"run-{secret}.json.gz").json()["id"]
        )
        assert run["status"] == "ready"
        shown = [
            client.get(f"/api/runs/{run['id']}").text,
            client.get(f"/api/runs/{run['id']}/report").text,
            client.get("/api/runs").text,
            client.get(f"/runs/{run['id']}", headers=HTML).text,
            client.get("/", headers=HTML).text,
        ]
        for text in shown:
            assert secret not in text
        assert run["facts"]["trace"]["host"] == "gpu-07 HF_TOKEN=[REDACTED]"
    catalog_files = list((tmp_path / "data").glob("catalog.sqlite*"))  # with its WAL
    assert catalog_files
    for f in catalog_files:
        assert secret.encode() not in f.read_bytes()
    for report in (settings.runs_dir / run["id"]).glob("report.*.json"):
        assert secret not in report.read_text()


def test_api_token_command_creates_lists_and_revokes(tmp_path: Path, planted: Path) -> None:
    from click.testing import CliRunner

    from tracelens.cli import main

    data_dir = tmp_path / "data"
    runner = CliRunner()
    created = runner.invoke(main, ["api-token", "create", "ci", "--data-dir", str(data_dir)])
    assert created.exit_code == 0, created.output
    token = created.output.strip()
    again = runner.invoke(main, ["api-token", "create", "ci", "--data-dir", str(data_dir)])
    assert again.exit_code != 0 and "exists already" in again.output
    listed = runner.invoke(main, ["api-token", "list", "--data-dir", str(data_dir)])
    assert listed.output.startswith("ci\t") and token not in listed.output
    with client_for(make_settings(data_dir)) as client:
        assert upload(client, planted).status_code == 401
        ok = upload(client, planted, headers={"authorization": f"Bearer {token}"})
        assert ok.status_code == 201
        wait_done(client, ok.json()["id"])
    revoked = runner.invoke(main, ["api-token", "revoke", "ci", "--data-dir", str(data_dir)])
    assert revoked.exit_code == 0
    listed = runner.invoke(main, ["api-token", "list", "--data-dir", str(data_dir)])
    assert "revoked" in listed.output
    # Revoking the last token locks writes; it never opens them (that was a bug: an
    # operator revoking a leaked token turned authentication off).
    with client_for(make_settings(data_dir)) as client:
        assert client.delete(f"/api/runs/{ok.json()['id']}").status_code == 401
        assert (
            upload(client, planted, headers={"authorization": f"Bearer {token}"}).status_code == 401
        )
    # Running without tokens again is an explicit choice.
    with client_for(make_settings(data_dir, open_access=True)) as client:
        assert client.delete(f"/api/runs/{ok.json()['id']}").status_code == 204
    # A revoked name can be given to a new token.
    again = runner.invoke(main, ["api-token", "create", "ci", "--data-dir", str(data_dir)])
    assert again.exit_code == 0 and again.output.strip() != token


def test_uploaded_file_names_never_reach_the_filesystem(tmp_path: Path, planted: Path) -> None:
    data_dir = tmp_path / "data"
    with client_for(make_settings(data_dir)) as client:
        r = upload(client, planted, filename="../../outside/evil<b>.json.gz")
        assert r.status_code == 201, r.text
        run = wait_done(client, r.json()["id"])
        assert run["original_filename"] == "evil<b>.json.gz"
        page = client.get("/", headers=HTML).text
        assert "evil&lt;b&gt;.json.gz" in page and "evil<b>" not in page
    assert not (tmp_path / "outside").exists()
    assert clean_filename("..\\..\\x\x07\x00y.json") == "xy.json"
    stored = sorted(p.name for p in (data_dir / "runs" / run["id"]).iterdir())
    assert "source.json.gz" in stored and all("evil" not in name for name in stored)
