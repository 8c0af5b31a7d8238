"""The kept original is the redacted one: no secret of a trace is stored or served.

Secrets are planted in every place a trace can hold text (metadata before and after the
event array, event names, thread names, args under secret-looking keys, command lines,
URLs, escaped characters); the copy must hide all of them, change nothing else, and still
ingest to the same tables. The web tests use the corpus's MI300X traces, whose metadata
carries a (fake) Hugging Face token in an environment dump.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from web_helpers import client_for, make_settings, upload, wait_done, write_planted

from ingest import load_trace
from ingest.redacted_copy import REDACTION_VERSION, write_redacted_copy
from ingest.redaction import REDACTED

HF = "hf_" + "Qq1Ww2Ee3Rr4Tt5Yy6Uu7Ii8"
GH = "ghp_" + "A" * 36
AWS = "AKIA" + "ABCDEFGHIJKLMNOP"
PASSWORD = "hunter2-" + "x9"
FLAG_SECRET = "fl4g-s3cret-value"
URL_SECRET = "p4ssw0rd-in-url"
KEY_SECRET = "value-under-a-secret-key"
ESCAPED = "hf_" + "EscapedEscapedEscaped99"
SECRETS = (HF, GH, AWS, PASSWORD, FLAG_SECRET, URL_SECRET, KEY_SECRET, ESCAPED)
FAKE_HF = b"hf_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"


def _leaky_trace(tmp: Path, indent: int | None) -> Path:
    """The planted training trace with secrets in every place a trace holds text."""
    base = write_planted(tmp / "base.pt.trace.json.gz")
    doc = json.loads(gzip.decompress(base.read_bytes()))
    events = doc["traceEvents"]
    doc = {
        "schemaVersion": doc.get("schemaVersion", 1),
        "environment": {"HF_TOKEN": HF, "PATH": "/usr/bin", "pip": ["tiktoken==0.9.0"]},
        "traceEvents": events,
        **{k: v for k, v in doc.items() if k not in ("traceEvents", "schemaVersion")},
        "cmdline": f"python serve.py --api-key {FLAG_SECRET} --port 8000",
        "index_url": f"https://bob:{URL_SECRET}@pypi.example.com/simple",
    }
    kernel = next(e for e in events if e.get("cat") == "kernel")
    kernel["name"] = f"sgemm_{GH}"  # no word boundary before the token
    op = next(e for e in events if e.get("cat") == "cpu_op")
    op["name"] = f"aten::mm password={PASSWORD}"
    op.setdefault("args", {})["db_secret"] = KEY_SECRET
    events.append(
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 99, "args": {"name": f"w {AWS}"}}
    )
    text = json.dumps(doc, indent=indent)
    # the same token spelled with an escaped character must not slip through
    text = text.replace('"schemaVersion"', f'"note": "\\u0068{ESCAPED[1:]}", "schemaVersion"', 1)
    path = tmp / f"leaky-{indent}.pt.trace.json.gz"
    path.write_bytes(gzip.compress(text.encode()))
    return path


def _facts(path: Path) -> tuple[int, int, int, list[str]]:
    loaded = load_trace(path)
    try:
        con = loaded.con
        kernels = con.execute("SELECT count(*) FROM kernels").fetchone()[0]
        ops = con.execute("SELECT count(*) FROM cpu_ops").fetchone()[0]
        busy = con.execute("SELECT sum(end_ns - start_ns) FROM kernels").fetchone()[0]
        names = [
            r[0] for r in con.execute("SELECT DISTINCT name FROM cpu_ops ORDER BY 1").fetchall()
        ]
    finally:
        loaded.close()
    return kernels, ops, busy, names


@pytest.mark.parametrize("indent", [None, 1])
def test_redacted_copy_hides_every_planted_secret_and_changes_nothing_else(
    tmp_path: Path, indent: int | None
) -> None:
    src = _leaky_trace(tmp_path, indent)
    dst = tmp_path / "kept.json.gz"
    assert write_redacted_copy(src, dst, "torch_chrome", 1 << 30) >= len(SECRETS)
    kept = gzip.decompress(dst.read_bytes())
    for secret in SECRETS:
        assert secret.encode() not in kept, secret
    before = json.loads(gzip.decompress(src.read_bytes()))
    after = json.loads(kept)
    assert after["environment"] == {
        "HF_TOKEN": REDACTED,
        "PATH": "/usr/bin",
        "pip": ["tiktoken==0.9.0"],  # a package pin is not a secret
    }
    assert after["cmdline"] == f"python serve.py --api-key {REDACTED} --port 8000"
    assert len(after["traceEvents"]) == len(before["traceEvents"])
    changed = [
        (a, b) for a, b in zip(before["traceEvents"], after["traceEvents"], strict=True) if a != b
    ]
    assert len(changed) == 3  # the kernel, the operator and the thread name, nothing else
    # still the same trace: it ingests to the same tables
    k0, o0, b0, names0 = _facts(src)
    k1, o1, b1, names1 = _facts(dst)
    assert (k0, o0, b0) == (k1, o1, b1)
    assert f"aten::mm password={REDACTED}" in names1 and len(names0) == len(names1)


def test_a_trace_without_secrets_is_kept_byte_for_byte(tmp_path: Path) -> None:
    src = write_planted(tmp_path / "clean.pt.trace.json.gz")
    dst = tmp_path / "kept.json.gz"
    assert write_redacted_copy(src, dst, "torch_chrome", 1 << 30) == 0
    assert not dst.exists()  # nothing to rewrite: the upload itself is the kept copy


def test_nsys_export_text_is_redacted_in_the_copy(tmp_path: Path, corpus: Path) -> None:
    src = tmp_path / "leaky.sqlite"
    shutil.copyfile(corpus / "nsys" / "rtx3060_vecadd_nsys2025.5.sqlite", src)
    con = sqlite3.connect(src)
    con.execute(
        "UPDATE StringIds SET value = value || ? WHERE id = (SELECT min(id) FROM StringIds)",
        [f" HF_TOKEN={HF}"],
    )
    con.execute("CREATE TABLE env_dump (name TEXT, value TEXT)")
    con.execute(
        "INSERT INTO env_dump VALUES ('WANDB_API_KEY', ?), ('PATH', '/usr/bin')", [KEY_SECRET]
    )
    con.commit()
    con.close()
    dst = tmp_path / "kept.sqlite"
    # the export's own environment dumps (VSCODE_CLI_REQUIRE_TOKEN=...) are rewritten too
    assert write_redacted_copy(src, dst, "nsys_sqlite", 1 << 30) > 2
    raw = dst.read_bytes()
    assert HF.encode() not in raw and KEY_SECRET.encode() not in raw  # not even in free pages
    kept = sqlite3.connect(dst)
    assert kept.execute("SELECT value FROM env_dump ORDER BY name").fetchall() == [
        ("/usr/bin",),
        (REDACTED,),
    ]
    kept.close()
    loaded = load_trace(dst)
    assert loaded.con.execute("SELECT count(*) FROM kernels").fetchone()[0] > 0
    loaded.close()


@pytest.mark.corpus
def test_served_original_of_an_mi300_trace_has_no_token(tmp_path: Path, corpus: Path) -> None:
    trace = corpus / "engines" / "mi300_bert_small.json.gz"
    assert FAKE_HF in gzip.decompress(trace.read_bytes())  # the fixture holds it
    settings = make_settings(tmp_path / "data")
    with client_for(settings) as client:
        answer = upload(client, trace)
        assert answer.status_code == 201, answer.text
        run = wait_done(client, answer.json()["id"])
        assert run["status"] == "ready", run
        # de-duplication still compares the upload's own bytes
        assert run["sha256"] == hashlib.sha256(trace.read_bytes()).hexdigest()
        assert upload(client, trace).json()["duplicate"] is True
        source = client.get(f"/api/runs/{run['id']}/source")
        assert source.status_code == 200
        served = gzip.decompress(source.content)
        assert FAKE_HF not in served and b'"HF_TOKEN": "[REDACTED]"' in served
        assert json.loads(served)["traceEvents"]  # still a trace
        for path in ("", "/report", "/findings", "/timeline"):
            assert b"hf_XXXX" not in client.get(f"/api/runs/{run['id']}{path}").content
    for f in (settings.runs_dir / run["id"]).iterdir():
        data = f.read_bytes()
        if f.suffix == ".gz":
            data = gzip.decompress(data)
        assert b"hf_XXXX" not in data, f.name


def test_reading_the_original_needs_a_token_where_tokens_are_configured(tmp_path: Path) -> None:
    planted = write_planted(tmp_path / "p.pt.trace.json.gz")
    settings = make_settings(tmp_path / "data", api_tokens=frozenset({"tok-1"}))
    auth = {"authorization": "Bearer tok-1"}
    with client_for(settings) as client:
        run = wait_done(client, upload(client, planted, headers=auth).json()["id"])
        assert client.get(f"/api/runs/{run['id']}/source").status_code == 401
        bad = client.get(f"/api/runs/{run['id']}/source", headers={"authorization": "Bearer x"})
        assert bad.status_code == 401
        assert client.get(f"/api/runs/{run['id']}/source", headers=auth).status_code == 200


def test_originals_kept_before_redaction_are_redacted_on_start(tmp_path: Path) -> None:
    """An upgrade: a run stored by an older tracelens kept its upload unredacted."""
    from sqlalchemy import update

    from web.catalog import Catalog, Run

    secret = "hf_" + "OldUploadOldUpload12345"
    trace = write_planted(tmp_path / "old.pt.trace.json.gz", host=f"h HF_TOKEN={secret}")
    settings = make_settings(tmp_path / "data")
    with client_for(settings) as client:
        run = wait_done(client, upload(client, trace).json()["id"])
    run_dir = settings.runs_dir / run["id"]
    kept = next(run_dir.glob("source.*"))
    assert secret.encode() not in gzip.decompress(kept.read_bytes())
    # as an older version left it: the raw upload, and no redaction recorded
    shutil.copyfile(trace, kept)
    with Catalog(settings.database_url).session() as s:
        s.execute(update(Run).where(Run.id == run["id"]).values(source_redaction=0))
    with client_for(settings) as client:
        assert client.get(f"/api/runs/{run['id']}/source").status_code in (200, 409)
        again = wait_done(client, run["id"])
        assert again["status"] == "ready"
        assert again["facts"]["trace"]["host"] == "h HF_TOKEN=[REDACTED]"
        served = client.get(f"/api/runs/{run['id']}/source")
        assert served.status_code == 200 and secret.encode() not in gzip.decompress(served.content)
    with Catalog(settings.database_url).session() as s:
        assert s.get(Run, run["id"]).source_redaction == REDACTION_VERSION
