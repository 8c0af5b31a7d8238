"""A job of several ranks uploaded to the service: several files at once, or one archive,
become one run whose report is the CLI's job report, on SQLite and PostgreSQL catalogs."""

from __future__ import annotations

import io
import json
import re
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from web_helpers import client_for, make_settings, wait_done, wait_generation

from tracelens.cli import main as cli_main
from tracelens.testing.planted_ranks import PlantedJob, write_job


@pytest.fixture
def job(tmp_path: Path) -> PlantedJob:
    """Four ranks on clocks 1.23 s apart; rank 2 reads its batches in the training process."""
    return write_job(tmp_path / "job", ranks=4, slow_rank=2)


def _cli_job(folder: Path) -> dict[str, Any]:
    res = CliRunner().invoke(cli_main, ["analyze", str(folder), "--format", "json", "-q"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def _upload_files(client: Any, paths: list[Path], **fields: str) -> Any:
    return client.post(
        "/api/runs",
        files=[("file", (p.name, p.read_bytes(), "application/octet-stream")) for p in paths],
        data=fields,
    )


def _upload_bytes(client: Any, name: str, data: bytes) -> Any:
    return client.post("/api/runs", files={"file": (name, data, "application/octet-stream")})


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _tar_gz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _same_as_cli(report: dict[str, Any], cli: dict[str, Any]) -> None:
    assert report["schema"] == "tracelens.job/1"
    assert report["clock"] == cli["clock"]
    assert report["stragglers"] == cli["stragglers"]
    assert [(f["id"], f.get("rank"), f["impact_ns"]) for f in report["findings"]] == [
        (f["id"], f.get("rank"), f["impact_ns"]) for f in cli["findings"]
    ]


def _check_job_run(client: Any, run_id: str, job: PlantedJob, cli: dict[str, Any]) -> None:
    run = wait_done(client, run_id)
    assert run["status"] == "ready", run["error"]
    assert run["kind"] == "job" and run["facts"]["job"]["ranks"] == [0, 1, 2, 3]
    report = client.get(f"/api/runs/{run_id}/report").json()
    _same_as_cli(report, cli)
    offsets = {o["rank"]: o["offset_ns"] for o in report["clock"]["offsets"]}
    for r, expected in job.offsets_ns.items():
        assert abs(offsets[r] - expected) <= 2_000
    findings = client.get(f"/api/runs/{run_id}/findings").json()
    assert findings == report["findings"] and run["finding_count"] == len(findings)
    top = findings[0]
    assert (top["analyzer"], top["rank"], top["impact_ns"]) == ("ranks", 2, 20_000_000)
    one = client.get(f"/api/runs/{run_id}/findings/{top['id']}").json()
    assert one["rank"] == 2 and one["finding"]["title"] == top["title"]
    assert one["permalink"].endswith(f"/runs/{run_id}/findings/{top['id']}")
    md = client.get(f"/api/runs/{run_id}/findings/{top['id']}/markdown").text
    assert "rank 2" in md and one["permalink"] in md
    # every rank's finding has an id of its own: each permalink names one
    mine = [f for f in findings if f["analyzer"] != "ranks"]
    assert len({f["id"] for f in findings}) == len(findings) and mine
    page = client.get(f"/runs/{run_id}/findings/{mine[0]['id']}")
    assert page.status_code == 200 and f"rank {mine[0]['rank']}" in page.text
    # each rank's original, as kept
    src = client.get(f"/api/runs/{run_id}/source", params={"rank": 3})
    assert src.status_code == 200 and src.content == job.files[3].read_bytes()
    whole = client.get(f"/api/runs/{run_id}/source")
    assert whole.status_code == 400 and "?rank=" in whole.json()["error"]
    # a job is analyzed whole
    part = client.get(f"/api/runs/{run_id}/report", params={"steps": "1:3"})
    assert part.status_code == 400 and "job of several ranks" in part.json()["error"]
    # objectives and compare take single traces, and say so
    slo = client.put(f"/api/runs/{run_id}/slo", json={"slo": "ttft=200ms"})
    assert slo.status_code == 400 and "job of several ranks" in slo.json()["error"]
    cmp = client.get("/api/compare", params={"base": run_id, "cand": run_id})
    assert cmp.status_code == 400 and "comparing jobs" in cmp.json()["error"]
    _check_job_page(client, run_id, report)


def _check_job_page(client: Any, run_id: str, report: dict[str, Any]) -> None:
    """The run page: a row and a heat cell per rank and metric, offsets, the findings."""
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200
    html = page.text
    rows = re.findall(
        r'<tr data-rank="(\d+)">', html.split('id="rank-table"')[1].split("</table>")[0]
    )
    assert rows == ["0", "1", "2", "3"]
    strips = re.findall(r'<svg class="heat-strip"[^>]*aria-label="([^"]+) by rank"', html)
    assert strips[:3] == ["window", "busy %", "idle"] and "exposed communication" in strips
    for strip in html.split('<svg class="heat-strip"')[1:]:
        cells = re.findall(r'<rect [^>]*data-rank="(\d+)"', strip.split("</svg>")[0])
        assert cells == ["0", "1", "2", "3"]
    # the slow rank's GPU idles while its data loader runs: its idle cell is the darkest
    idle = html.split('aria-label="idle by rank"')[1].split("</svg>")[0]
    fills = {r: f for f, r in re.findall(r'fill="(#[0-9a-f]{6})" data-rank="(\d+)"', idle)}
    assert fills["2"] == "#163f86" and all(fills[r] != "#163f86" for r in "013")
    clock = html.split('id="clock-table"')[1].split("</table>")[0]
    for o in report["clock"]["offsets"]:
        assert f'<tr data-rank="{o["rank"]}">' in clock
    assert "1.23 s" in clock or "1.235 s" in clock
    shown = re.findall(r'data-finding-id="([^"]+)"', html)
    assert sorted(shown) == sorted(f["id"] for f in report["findings"])
    assert "The timeline shows every rank on rank 0" in html  # all ranks, by default
    assert "style=" not in html  # the CSP allows no inline style
    _check_rank_timelines(client, run_id, report)


def _check_rank_timelines(client: Any, run_id: str, report: dict[str, Any]) -> None:
    """Each rank's timeline, on its own clock: its own GPU's kernels, the straggler's
    ranges highlighted on the straggler's page; a rank the job lacks is a 404."""
    lanes = {}
    for rank in (0, 2):
        tl = client.get(f"/api/runs/{run_id}/timeline", params={"rank": rank, "width_px": 400})
        assert tl.status_code == 200, tl.text
        lanes[rank] = {f"{lane['key']} {lane['label']}" for lane in tl.json()["lanes"]}
        assert any(f"GPU {rank}" in lane for lane in lanes[rank]), lanes
    assert lanes[0] != lanes[2]
    page = client.get(f"/runs/{run_id}", params={"rank": 2}).text
    assert "The timeline shows rank 2 on its own clock" in page and 'id="rank-picker"' in page
    data = json.loads(page.split('id="page-data">', 1)[1].split("</script>", 1)[0])
    late = next(f for f in report["findings"] if f["analyzer"] == "ranks" and f["rank"] == 2)
    assert data["rank"] == 2 and data["highlights"][late["id"]], "the straggler's ranges"
    assert client.get(f"/api/runs/{run_id}/timeline", params={"rank": 9}).status_code == 404
    # each rank's flame graph is of its own kernels: all of them, as its timeline sums them
    totals = {}
    for rank in (0, 2):
        fg = client.get(f"/api/runs/{run_id}/flamegraph", params={"rank": rank}).json()
        whole = client.get(
            f"/api/runs/{run_id}/timeline/range",
            params={"rank": rank, "start_ns": 0, "end_ns": 2**62},
        ).json()
        assert fg["gpu_total_ns"] == whole["kernel_ns"] > 0
        totals[rank] = fg["gpu_total_ns"]
    assert totals[0] != totals[2]
    assert client.get(f"/api/runs/{run_id}/flamegraph", params={"rank": 9}).status_code == 404


def test_several_files_are_one_job_run(tmp_path: Path, job: PlantedJob) -> None:
    cli = _cli_job(tmp_path / "job")
    with client_for(make_settings(tmp_path / "data")) as client:
        r = _upload_files(client, list(reversed(job.files)), tags="ddp")
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["kind"] == "job" and body["name"] == "job of 4 ranks"
        _check_job_run(client, body["id"], job, cli)
        # every rank has its own database, the reference rank's being the run's
        dbs = sorted(p.name for p in (tmp_path / "data" / "runs" / body["id"]).glob("*.duckdb"))
        assert dbs == ["trace.1.duckdb"] + [f"trace.1.rank-{r}.duckdb" for r in (1, 2, 3)]
        # the same traces again, zipped: the same job
        zipped = _zip({f"prof/{p.name}": p.read_bytes() for p in job.files})
        again = _upload_bytes(client, "job.zip", zipped)
        assert again.status_code == 200 and again.json()["duplicate"], again.text
        assert again.json()["id"] == body["id"]
        assert client.get("/api/runs").json()["total"] == 1
    assert list((tmp_path / "data" / "uploads").iterdir()) == []


def test_archive_upload_is_one_job_run_on_postgres(
    tmp_path: Path, job: PlantedJob, postgres_url: str
) -> None:
    cli = _cli_job(tmp_path / "job")
    settings = make_settings(tmp_path / "data", database_url=postgres_url)
    with client_for(settings) as client:
        archive = _tar_gz({f"out/{p.name}": p.read_bytes() for p in job.files})
        r = _upload_bytes(client, "ddp-run.tar.gz", archive)
        assert r.status_code == 201, r.text
        assert r.json()["name"] == "ddp-run" and r.json()["original_filename"] == "ddp-run.tar.gz"
        _check_job_run(client, r.json()["id"], job, cli)


def test_archive_upload_on_sqlite_and_one_trace_archives(tmp_path: Path, job: PlantedJob) -> None:
    cli = _cli_job(tmp_path / "job")
    with client_for(make_settings(tmp_path / "data")) as client:
        r = _upload_bytes(client, "job.zip", _zip({p.name: p.read_bytes() for p in job.files}))
        assert r.status_code == 201, r.text
        _check_job_run(client, r.json()["id"], job, cli)
        # an archive of one trace is that trace's run, as the file alone would be
        one = _upload_bytes(client, "one.zip", _zip({"rank-1.json": job.files[1].read_bytes()}))
        assert one.status_code == 201 and one.json()["kind"] == "trace", one.text
        assert (
            one.json()["name"] == "one" and one.json()["original_filename"] == "one.zip:rank-1.json"
        )
        alone = _upload_files(client, [job.files[1]])
        assert alone.status_code == 200 and alone.json()["id"] == one.json()["id"]


def test_bad_job_uploads_are_refused_in_one_line(tmp_path: Path, job: PlantedJob) -> None:
    data_dir = tmp_path / "data"
    with client_for(make_settings(data_dir, max_decompressed_bytes=4 * 1024 * 1024)) as client:
        cases = [
            (_upload_bytes(client, "evil.zip", _zip({"../evil.json": b"{}"})), 400, "leaves"),
            # inflated while it arrives, as any gzip upload is
            (
                _upload_bytes(client, "big.tar.gz", _tar_gz({"r.json": b" " * (5 << 20)})),
                413,
                "big.tar.gz: decompresses to more than 4,194,304 bytes",
            ),
            # a zip's members are counted as they are extracted
            (
                _upload_bytes(client, "big.zip", _zip({"r.json": b" " * (5 << 20)})),
                413,
                "big.zip: uncompressed members exceed the limit of 4,194,304 bytes",
            ),
            (
                _upload_bytes(client, "bad.zip", _zip({"a.json": b"{}", "b.json": b"hello"})),
                400,
                "bad.zip:b.json",
            ),
            (_upload_bytes(client, "none.zip", _zip({"notes.txt": b"x"})), 400, "no trace files"),
            (_upload_files(client, [job.files[0], job.files[0]]), 400, "two files"),
            (
                client.post(
                    "/api/runs",
                    files=[
                        ("file", ("a.zip", _zip({"rank-0.json": b"{}"}), "application/zip")),
                        ("file", ("rank-1.json", job.files[1].read_bytes(), "text/plain")),
                    ],
                ),
                400,
                "an archive is uploaded alone",
            ),
        ]
        dup = tmp_path / "dup"
        dup.mkdir()
        (dup / "rank-0-copy.json").write_bytes(job.files[0].read_bytes())
        cases.append(
            (_upload_files(client, [job.files[0], dup / "rank-0-copy.json"]), 400, "claims rank 0")
        )
        for res, status, text in cases:
            assert res.status_code == status, res.text
            error = res.json()["error"]
            assert text in error and "\n" not in error, error
        assert client.get("/api/runs").json()["total"] == 0
    assert list((data_dir / "uploads").iterdir()) == []
    assert not (data_dir / "evil.json").exists()


HF = "hf_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2"


def _with_secret(path: Path) -> bytes:
    """The rank's trace with a (fake) Hugging Face token in an environment dump."""
    doc = json.loads(path.read_text())
    doc["environment"] = {"HF_TOKEN": HF, "PATH": "/usr/bin"}
    return json.dumps(doc).encode()


@pytest.mark.parametrize("as_archive", [False, True])
def test_secrets_in_a_jobs_ranks_are_never_kept(
    tmp_path: Path, job: PlantedJob, as_archive: bool
) -> None:
    data_dir = tmp_path / "data"
    ranks = {p.name: _with_secret(p) for p in job.files}
    with client_for(make_settings(data_dir)) as client:
        if as_archive:
            r = _upload_bytes(client, "job.zip", _zip(ranks))
        else:
            r = client.post(
                "/api/runs",
                files=[("file", (n, d, "application/json")) for n, d in ranks.items()],
            )
        assert r.status_code == 201, r.text
        run = wait_done(client, r.json()["id"])
        assert run["status"] == "ready", run["error"]
        for rank in range(4):
            kept = client.get(f"/api/runs/{run['id']}/source", params={"rank": rank}).content
            assert HF.encode() not in kept and b"[REDACTED]" in kept
        report = client.get(f"/api/runs/{run['id']}/report").text
        assert HF not in report
    for p in data_dir.rglob("*"):
        if p.is_file():
            assert HF.encode() not in p.read_bytes(), p


def test_a_rank_that_cannot_be_ingested_fails_the_run_naming_it(
    tmp_path: Path, job: PlantedJob
) -> None:
    broken = tmp_path / "rank-3.json"
    # a trace's start, cut off: accepted at upload, refused by ingest
    broken.write_bytes(job.files[3].read_bytes()[:4000])
    with client_for(make_settings(tmp_path / "data")) as client:
        r = _upload_files(client, [*job.files[:3], broken])
        assert r.status_code == 201, r.text
        run = wait_done(client, r.json()["id"])
        assert run["status"] == "failed"
        assert "rank 3 (rank-3.json)" in run["error"] and "\n" not in run["error"]


@pytest.mark.corpus
def test_corpus_two_ranks_as_an_archive(tmp_path: Path, corpus: Path) -> None:
    """Two sampled ranks of a real 128-rank job, uploaded as one .tar.gz: the run's report
    is the CLI's for their folder (rank 1 the straggler, the clocks already agreeing)."""
    folder = corpus / "torch" / "sampled_2rank"
    cli = _cli_job(folder)
    archive = _tar_gz({f"sampled_2rank/{p.name}": p.read_bytes() for p in sorted(folder.iterdir())})
    with client_for(make_settings(tmp_path / "data")) as client:
        r = _upload_bytes(client, "sampled_2rank.tar.gz", archive)
        assert r.status_code == 201, r.text
        run = wait_done(client, r.json()["id"])
        assert run["status"] == "ready", run["error"]
        report = client.get(f"/api/runs/{run['id']}/report").json()
    _same_as_cli(report, cli)
    assert [s["rank"] for s in report["stragglers"]] == [1]
    assert report["world_size"] == 128 and run["facts"]["job"]["world_size"] == 128


def test_job_reingest_and_originals_kept_before_redaction(tmp_path: Path, job: PlantedJob) -> None:
    """Re-ingesting a job keeps its finding ids; ranks an older version kept unredacted are
    redacted, each of them, when the service starts."""
    from sqlalchemy import update

    from web.catalog import Catalog, Run

    settings = make_settings(tmp_path / "data")
    with client_for(settings) as client:
        run = wait_done(client, _upload_files(client, job.files).json()["id"])
        ids = [f["id"] for f in client.get(f"/api/runs/{run['id']}/findings").json()]
        assert client.post(f"/api/runs/{run['id']}/reingest").status_code == 202
        again = wait_generation(client, run["id"], run["ready_at"])
        assert [f["id"] for f in client.get(f"/api/runs/{run['id']}/findings").json()] == ids
    # as an older version would have left them: the raw uploads, no redaction recorded
    kept = sorted((settings.runs_dir / run["id"] / "ranks").iterdir())
    assert [p.name for p in kept] == [f"rank-{r}.json" for r in range(4)]
    for p in kept:
        p.write_bytes(_with_secret(job.files[int(p.name[5])]))
    with Catalog(settings.database_url).session() as s:
        s.execute(update(Run).where(Run.id == run["id"]).values(source_redaction=0))
    with client_for(settings) as client:
        done = wait_generation(client, run["id"], again["ready_at"])
        assert done["status"] == "ready"
        for r in range(4):
            served = client.get(f"/api/runs/{run['id']}/source", params={"rank": r}).content
            assert HF.encode() not in served and b"[REDACTED]" in served
    for p in kept:
        assert HF.encode() not in p.read_bytes()
