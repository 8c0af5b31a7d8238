"""The enriched trace: the kept original's events plus the findings as slices and counters.

It must be a Chrome trace (JSON, gzip) with every original event, a slice per finding
range at the range's times, GPU busy counters, no secret of the upload, and read back
by tracelens's own reader into the same kernels, calls and operators.
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from test_kept_original_redaction import SECRETS, _leaky_trace
from web_helpers import client_for, make_settings, upload, wait_done

from ingest import load_trace
from web.trace_annotations import COUNTER_CATEGORY, FINDING_CATEGORY, FINDINGS_PID


def _tables(path: Path) -> dict[str, Any]:
    loaded = load_trace(path)
    try:
        con = loaded.con
        return {
            t: con.execute(
                f"SELECT count(*), sum(end_ns - start_ns), min(start_ns) FROM {t}"
            ).fetchone()
            for t in ("kernels", "memcpys", "api_calls", "cpu_ops", "ranges")
        }
    finally:
        loaded.close()


def _enriched(client: Any, run_id: str, tmp: Path, query: str = "") -> tuple[Path, dict]:
    answer = client.get(f"/api/runs/{run_id}/trace/enriched{query}")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/gzip")
    assert (
        f"{run_id}{'-rank-' + query.split('=')[1] if query else ''}-enriched.json.gz"
        in (answer.headers["content-disposition"])
    )
    path = tmp / f"{run_id}-enriched.json.gz"
    path.write_bytes(answer.content)
    return path, json.loads(gzip.decompress(answer.content))


def _check_findings(doc: dict, findings: list[dict]) -> None:
    slices = [e for e in doc["traceEvents"] if e.get("cat") == FINDING_CATEGORY]
    expected = sorted(
        (f["id"], r["start_ns"], r["end_ns"]) for f in findings for r in f["time_ranges"]
    )
    assert expected, "the planted trace has findings with time ranges"
    got = sorted(
        (
            e["args"]["id"],
            round(e["ts"] * 1000),
            round(e["ts"] * 1000) + round(e["dur"] * 1000),
        )
        for e in slices
    )
    # times as floats of µs: within a nanosecond or two of the ranges at epoch scale
    assert len(got) == len(expected)
    for (gid, gs, ge), (eid, es, ee) in zip(got, expected, strict=True):
        assert gid == eid and abs(gs - es) <= 256 and abs(ge - ee) <= 512
    titles = {f["id"]: f["title"] for f in findings}
    for e in slices:
        assert e["pid"] == FINDINGS_PID and e["name"] == titles[e["args"]["id"]]
        assert e["args"]["permalink"].endswith(f"/findings/{e['args']['id']}")
        assert e["args"]["severity"] and e["ph"] == "X"
    # a thread's slices never overlap without nesting (viewers would drop them)
    by_tid: dict[int, list[tuple[float, float]]] = {}
    for e in slices:
        by_tid.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_tid.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    names = [e for e in doc["traceEvents"] if e.get("ph") == "M" and e.get("pid") == FINDINGS_PID]
    assert {"name": "tracelens findings"} in [e["args"] for e in names]


def test_chrome_original_with_findings_counters_and_no_secret(tmp_path: Path) -> None:
    src = _leaky_trace(tmp_path, None)
    original = json.loads(gzip.decompress(src.read_bytes()))
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, src).json()["id"])
        assert run["status"] == "ready", run
        findings = client.get(f"/api/runs/{run['id']}/findings").json()
        path, doc = _enriched(client, run["id"], tmp_path)
    text = gzip.decompress(path.read_bytes())
    for secret in SECRETS:
        assert secret.encode() not in text, secret
    ours = [e for e in doc["traceEvents"] if e.get("pid") == FINDINGS_PID]
    assert len(doc["traceEvents"]) - len(ours) == len(original["traceEvents"])
    # the metadata around the event array is the kept original's
    assert doc["environment"]["HF_TOKEN"] == "[REDACTED]"
    _check_findings(doc, findings)
    busy = [e for e in doc["traceEvents"] if e.get("cat") == COUNTER_CATEGORY]
    assert busy and all(e["ph"] == "C" for e in busy)
    gpu_busy = [e["args"]["%"] for e in busy if e["name"].endswith(" busy")]
    assert max(gpu_busy) > 0 and all(0 <= v <= 100 for v in gpu_busy)
    # round trip: tracelens reads the download into the same tables as the original
    assert _tables(path) == _tables(src)


def test_nsys_original_written_from_its_database_reads_back(tmp_path: Path, corpus: Path) -> None:
    src = corpus / "nsys" / "rtx3090_tensorrt_nvtx_textid_nsys2023.1.sqlite"
    with client_for(make_settings(tmp_path / "data")) as client:
        run = wait_done(client, upload(client, src).json()["id"])
        assert run["status"] == "ready", run
        findings = client.get(f"/api/runs/{run['id']}/findings").json()
        path, doc = _enriched(client, run["id"], tmp_path)
    if any(f["time_ranges"] for f in findings):
        _check_findings(doc, findings)
    before, after = _tables(src), _tables(path)
    for table in ("kernels", "memcpys", "api_calls", "ranges"):
        assert after[table] == before[table], table
    assert before["kernels"][0] > 0


def test_a_token_is_needed_where_configured_and_one_trace_has_no_ranks(
    tmp_path: Path, corpus: Path
) -> None:
    settings = make_settings(tmp_path / "data", api_tokens=frozenset({"tok-1"}))
    auth = {"authorization": "Bearer tok-1"}
    src = corpus / "torch" / "a100_alexnet_inference.json.gz"
    with client_for(settings) as client:
        run = wait_done(client, upload(client, src, headers=auth).json()["id"])
        assert client.get(f"/api/runs/{run['id']}/trace/enriched").status_code == 401
        ok = client.get(f"/api/runs/{run['id']}/trace/enriched", headers=auth)
        assert ok.status_code == 200
        assert (
            client.get(f"/api/runs/{run['id']}/trace/enriched?rank=0", headers=auth).status_code
            == 400
        )


@pytest.mark.parametrize("empty", [True, False])
def test_splice_keeps_the_original_bytes(tmp_path: Path, empty: bool) -> None:
    from ingest.chrome.event_splice import splice_events

    events = "" if empty else '{"ph":"X","name":"a","ts":1,"dur":2,"pid":1,"tid":1}'
    text = f'{{"meta": {{"traceEvents": "no"}}, "traceEvents" : [ {events} ], "after": [1]}}'
    ours = [b'{"ph":"i","name":"ours","ts":0,"pid":9,"tid":9}']
    # chunks cut everywhere, so the bracket and the lookahead cross chunk boundaries
    for size in (1, 3, 7, 1000):
        chunks = [text[i : i + size].encode() for i in range(0, len(text), size)]
        out = b"".join(splice_events(tmp_path / "t.json", chunks, ours))
        doc = json.loads(out)
        assert doc["traceEvents"][0]["name"] == "ours"
        assert len(doc["traceEvents"]) == (1 if empty else 2)
        assert doc["after"] == [1] and doc["meta"] == {"traceEvents": "no"}
    bare = b'[{"ph":"X","name":"a","ts":1,"dur":2,"pid":1,"tid":1}]'
    assert len(json.loads(b"".join(splice_events(tmp_path / "t.json", [bare], ours)))) == 2


def test_a_jobs_download_is_one_ranks_with_that_ranks_findings(tmp_path: Path) -> None:
    from tracelens.testing.planted_ranks import write_job

    paths = write_job(tmp_path / "job", ranks=2, slow_rank=1).files
    with client_for(make_settings(tmp_path / "data")) as client:
        answer = client.post(
            "/api/runs",
            files=[("file", (p.name, p.read_bytes(), "application/octet-stream")) for p in paths],
        )
        run = wait_done(client, answer.json()["id"], timeout=120)
        assert run["status"] == "ready", run
        findings = client.get(f"/api/runs/{run['id']}/findings").json()
        no_rank = client.get(f"/api/runs/{run['id']}/trace/enriched")
        assert no_rank.status_code == 400 and "?rank=" in no_rank.json()["error"]
        assert client.get(f"/api/runs/{run['id']}/trace/enriched?rank=7").status_code == 404
        # the job page offers the rank its timeline shows
        page = client.get(f"/runs/{run['id']}?rank=1").text
        assert f"/api/runs/{run['id']}/trace/enriched?rank=1" in page
        assert "Open rank 1 in Perfetto" in page
        slices = 0
        waits: dict[int, int] = {}
        for rank in (0, 1):
            _, doc = _enriched(client, run["id"], tmp_path, f"?rank={rank}")
            # every range on this rank's clock, whichever finding holds it: a straggler's
            # finding is the late rank's, but the other ranks' waits in it are on theirs
            mine = [
                {**f, "time_ranges": on_rank}
                for f in findings
                if (on_rank := [r for r in f["time_ranges"] if r.get("rank", f["rank"]) == rank])
            ]
            if mine:
                _check_findings(doc, mine)
                slices += len(mine)
                waits[rank] = sum(1 for f in mine for r in f["time_ranges"] if f["rank"] != rank)
            else:
                assert not [e for e in doc["traceEvents"] if e.get("cat") == FINDING_CATEGORY]
            kept = client.get(f"/api/runs/{run['id']}/source?rank={rank}").content
            original = json.loads(gzip.decompress(kept) if kept[:2] == b"\x1f\x8b" else kept)
            ours = [e for e in doc["traceEvents"] if e.get("pid") == FINDINGS_PID]
            assert len(doc["traceEvents"]) - len(ours) == len(original["traceEvents"])
        assert slices, "the planted job has findings with time ranges"
        # rank 0 waited for the slow rank 1: those waits are in rank 0's download
        assert waits.get(0), "the planted straggler makes rank 0 wait"
