"""The remaining hardening: every failure is one line, nothing stored holds a secret.

Each test here failed before its fix: NUL bytes answered 500 on PostgreSQL and left orphan
run directories, an unreachable Redis answered 500, deep JSON nesting and ``-o`` into a
missing directory printed tracebacks, ``--db`` overwrote any file (the input trace too),
and operator names with secrets were stored verbatim in ``--db`` files.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from web_helpers import client_for, make_settings, upload, wait_done, write_planted

SECRET = "hf_" + "NameSecretNameSecret1234"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracelens.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )


def _one_line_exit_2(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_deep_nesting_and_unwritable_output_are_one_line_errors(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"traceEvents": [], "meta": ' + "[" * 5000 + "]" * 5000 + "}")
    _one_line_exit_2(_cli("analyze", str(deep)), str(deep), "nested too deeply")
    _one_line_exit_2(_cli("diff", str(deep), str(deep)), "nested too deeply")
    sample = write_planted(tmp_path / "p.pt.trace.json.gz")
    missing = tmp_path / "no" / "such" / "dir" / "r.txt"
    _one_line_exit_2(_cli("analyze", str(sample), "-o", str(missing)), "does not exist")


def test_db_never_overwrites_the_input_or_a_foreign_file(tmp_path: Path) -> None:
    trace = write_planted(tmp_path / "p.pt.trace.json.gz")
    before = trace.read_bytes()
    _one_line_exit_2(_cli("analyze", str(trace), "--db", str(trace)), "input trace itself")
    assert trace.read_bytes() == before
    notes = tmp_path / "notes.txt"
    notes.write_text("precious")
    _one_line_exit_2(_cli("analyze", str(trace), "--db", str(notes)), "--force")
    assert notes.read_text() == "precious"
    db = tmp_path / "t.duckdb"
    assert _cli("analyze", str(trace), "--db", str(db)).returncode == 0
    assert _cli("analyze", str(trace), "--db", str(db)).returncode == 0  # ours: replaced
    assert _cli("analyze", str(trace), "--db", str(notes), "--force").returncode == 0


def test_secrets_in_names_are_redacted_in_the_stored_database(tmp_path: Path) -> None:
    trace = write_planted(tmp_path / "p.pt.trace.json.gz", kernel_name=f"gemm --token {SECRET}")
    raw = gzip.decompress(trace.read_bytes()).decode()
    raw = raw.replace('"aten::mm"', f'"aten::mm password={SECRET}"', 1)
    trace.write_bytes(gzip.compress(raw.encode()))
    db = tmp_path / "t.duckdb"
    proc = _cli("analyze", str(trace), "--db", str(db), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout
    assert SECRET.encode() not in db.read_bytes()
    report = json.loads(proc.stdout)
    assert any("[REDACTED]" in k["name"] for k in report["top_kernels"])


def test_a_large_trace_leaves_no_secret_in_the_database_file(tmp_path: Path) -> None:
    """More rows than one DuckDB row group: a database built in the file got its kernels
    in one direct append, and the blocks redaction freed still held the names (6 copies
    of the secret in a 200 k-kernel trace). Built in memory and copied, none is left."""
    from ingest import load_trace

    events = []
    for i in range(130_000):
        ts = 1000 + i * 10
        events.append(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": ts, "dur": 2, "args": {"correlation": i}}
        )  # fmt: skip
        events.append(
            {"ph": "X", "cat": "kernel", "name": f"gemm --token {SECRET} {i % 3}", "pid": 0,
             "tid": 7, "ts": ts + 3, "dur": 5, "args": {"correlation": i, "device": 0,
                                                       "stream": 7}}
        )  # fmt: skip
    trace = tmp_path / "big.pt.trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    db = tmp_path / "big.duckdb"
    loaded = load_trace(trace, db_path=db, find_captures=False)
    try:
        assert loaded.con.execute("SELECT count(*) FROM kernels").fetchone() == (130_000,)
        names = loaded.con.execute("SELECT DISTINCT name FROM kernels").fetchall()
        assert all(SECRET not in n for (n,) in names)
    finally:
        loaded.close()
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".big.duckdb")]
    assert not leftovers
    stored = [p for p in tmp_path.iterdir() if p.name.startswith("big.duckdb")]  # and .wal
    assert db in stored and all(SECRET.encode() not in p.read_bytes() for p in stored)


@pytest.mark.postgres
def test_nul_bytes_answer_400_on_postgresql_and_leave_no_orphans(
    tmp_path: Path, postgres_url: str
) -> None:
    settings = make_settings(tmp_path / "data", database_url=postgres_url)
    trace = write_planted(tmp_path / "p.pt.trace.json.gz")
    with client_for(settings) as client:
        for url in ("/api/runs?q=a%00b", "/api/runs/ab%00cd", "/runs/x%00y", "/api/runs?tag=%00"):
            r = client.get(url)
            assert r.status_code == 400, (url, r.status_code, r.text)
            assert "NUL" in r.json()["error"]
        bad = upload(client, trace, name="evil\x00name")
        assert bad.status_code == 400 and "NUL" in bad.json()["error"]
        assert client.get("/api/runs").json()["total"] == 0
    assert not list(settings.runs_dir.iterdir())


def test_orphan_run_directories_are_removed_on_start(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data")
    with client_for(settings) as client:
        run = wait_done(client, upload(client, write_planted(tmp_path / "p.json.gz")).json()["id"])
    orphan = settings.runs_dir / "0123456789ab"
    orphan.mkdir()
    (orphan / "source.json.gz").write_bytes(b"x")
    old = time.time() - 3600
    os.utime(orphan, (old, old))
    fresh = settings.runs_dir / "ba9876543210"  # may be an upload in flight: kept
    fresh.mkdir()
    with client_for(settings) as client:
        assert client.get(f"/api/runs/{run['id']}").json()["status"] == "ready"
    assert not orphan.exists() and fresh.exists()
    assert (settings.runs_dir / run["id"]).exists()


def test_unreachable_redis_answers_503_with_retry_after(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", redis_url="redis://127.0.0.1:1/0")
    with client_for(settings) as client:
        r = upload(client, write_planted(tmp_path / "p.pt.trace.json.gz"))
        assert r.status_code == 503 and r.headers["retry-after"] == "30"
        assert "Redis" in r.json()["error"]
        health = client.get("/api/health").json()
        assert health["status"] == "degraded" and health["redis"].startswith("unreachable")


def test_serve_with_a_malformed_redis_url_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "TRACELENS_REDIS_URL": "not-a-url"}
    proc = subprocess.run(
        [sys.executable, "-m", "tracelens.cli", "serve", "--data-dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    _one_line_exit_2(proc, "TRACELENS_REDIS_URL", "invalid Redis URL")


def test_markdown_output_escapes_names_from_the_trace() -> None:
    from tracelens.report.model import Finding
    from tracelens.report.render.markdown import finding_markdown

    f = Finding(
        severity="high",
        title="`aten::mm\n# pwned` launches <script>alert(1)</script> [x](javascript:alert(1))",
        impact_ns=1,
        impact_pct=1.0,
        impact_basis="b",
        summary="line one\n## heading",
        evidence={"operator": "a|b\nc"},
        advice="use `k<4>`",
        analyzer="hot_ops",
        id="abc",
        time_ranges=[],
        supersedes=[],
        subject_ns=1,
        costed=True,
        impact_share_of="the analysed window",
    )
    md = finding_markdown(f)
    assert "\n# pwned" not in md and "\n## heading" not in md
    assert "<script>" not in md and "[x](javascript:" not in md
    assert "`k<4>`" in md  # code spans are shown as they are


def test_small_inputs_the_service_used_to_mishandle(tmp_path: Path) -> None:
    trace = write_planted(tmp_path / "p.pt.trace.json.gz")
    with client_for(make_settings(tmp_path / "data")) as client:
        for url in ("/nope", "/api/nope"):  # unrouted answers carry the security headers
            assert "default-src" in client.get(url).headers["content-security-policy"]
        assert client.get("/api/runs?offset=99999999999999999999999").status_code == 400
        nofile = client.post(
            "/api/runs",
            content=b'--b\r\nContent-Disposition: form-data; name="file"\r\n\r\nxx\r\n--b--\r\n',
            headers={"content-type": "multipart/form-data; boundary=b"},
        )
        assert nofile.status_code == 400 and "no filename" in nofile.json()["error"]
        run = wait_done(client, upload(client, trace).json()["id"])
        fid = client.get(f"/api/runs/{run['id']}/findings").json()[0]["id"]
        md = client.get(f"/api/runs/{run['id']}/findings/{fid}/markdown")
        assert md.headers["content-type"].count("charset") == 1


def test_nan_never_disables_a_ci_gate(tmp_path: Path) -> None:
    trace = write_planted(tmp_path / "p.pt.trace.json.gz")
    _one_line_exit_2(_cli("diff", str(trace), str(trace), "--max-regression", "nan"), "finite")
    _one_line_exit_2(_cli("analyze", str(trace), "--threshold", "severity_low_pct=nan"), "finite")


def test_utf8_bom_and_whitespace_only_files(tmp_path: Path) -> None:
    trace = write_planted(tmp_path / "p.pt.trace.json.gz")
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + gzip.decompress(trace.read_bytes()))
    assert _cli("analyze", str(bom)).returncode == 0
    blank = tmp_path / "blank.json.gz"
    blank.write_bytes(gzip.compress(b" " * (64 * 1024 * 1024), compresslevel=9))
    _one_line_exit_2(_cli("analyze", str(blank)), "only whitespace")
    with client_for(make_settings(tmp_path / "data")) as client:
        started = time.monotonic()
        answer = upload(client, blank)
        assert answer.status_code == 400 and "only whitespace" in answer.json()["error"]
        assert time.monotonic() - started < 30


def test_unknown_hosts_are_refused_and_rejected_uploads_spare_the_rate_limit(
    tmp_path: Path,
) -> None:
    from web.settings import default_allowed_hosts

    local = default_allowed_hosts("127.0.0.1", 8000, None) or ()
    assert "127.0.0.1:8000" in local and "localhost:8000" in local
    assert default_allowed_hosts("0.0.0.0", 8000, None) is None
    assert default_allowed_hosts("0.0.0.0", 8000, "https://trace.example.com/") == (
        "trace.example.com",
    )

    settings = make_settings(
        tmp_path / "data",
        allowed_hosts=("testserver.local",),
        api_tokens=frozenset({"tok"}),
        uploads_per_minute=2,
    )
    trace = write_planted(tmp_path / "p.pt.trace.json.gz")
    with client_for(settings) as client:
        # the Origin check compares with the Host header: a forged one must not pass
        forged = client.get("/api/runs", headers={"host": "evil.example"})
        assert forged.status_code == 400
        for _ in range(4):  # refused for their token: they must not use up the allowance
            assert upload(client, trace).status_code == 401
        ok = upload(client, trace, headers={"authorization": "Bearer tok"})
        assert ok.status_code == 201, ok.text


def test_no_connection_draws_a_progress_bar(tmp_path: Path) -> None:
    """DuckDB's progress bar, drawn on stdout for long queries, would corrupt JSON output."""
    from ingest import load_trace

    trace = write_planted(tmp_path / "t.json")
    for db in (None, tmp_path / "t.duckdb"):
        loaded = load_trace(trace, db_path=db)
        assert loaded.con.execute("SELECT current_setting('enable_progress_bar')").fetchone() == (
            False,
        )
