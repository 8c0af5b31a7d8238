"""A job's ranks in one .zip / .tar / .tar.gz: read as the folder they came from, and an
archive that would escape its folder, hold links or inflate past the limit is refused."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from ingest import TraceInputError
from ingest.archive import archive_kind, extract_traces
from tracelens.cli import main
from tracelens.testing.planted_ranks import write_job


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _tar(path: Path, members: dict[str, bytes], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _job_json(runner: CliRunner, *args: str) -> dict:
    res = runner.invoke(main, ["analyze", *args, "--format", "json", "-q"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def _strip_paths(job: dict) -> dict:
    """The job report without where its files were read from."""
    out = json.loads(json.dumps(job))
    for row in out["ranks"]:
        row.pop("file")
    for rep in out["rank_reports"].values():
        rep["source"].pop("path")
    return out


def test_zip_and_tar_gz_of_a_job_read_as_its_folder(tmp_path: Path) -> None:
    planted = write_job(tmp_path / "job", ranks=3, slow_rank=1)
    members = {f"profiler/{p.name}": p.read_bytes() for p in planted.files}
    members["profiler/README.txt"] = b"not a trace"
    members["__MACOSX/profiler/._rank-0.json"] = b"resource fork"
    zipped = _zip(tmp_path / "job.zip", members)
    tarred = _tar(tmp_path / "job.tar.gz", members)
    plain = _tar(tmp_path / "job.tar", members, mode="w")
    assert (archive_kind(zipped), archive_kind(tarred), archive_kind(plain)) == ("zip",) + (
        "tar",
    ) * 2
    assert archive_kind(planted.files[0]) is None
    runner = CliRunner()
    by_folder = _job_json(runner, str(tmp_path / "job"))
    for archive in (zipped, tarred, plain):
        job = _job_json(runner, str(archive))
        assert _strip_paths(job)["findings"] == _strip_paths(by_folder)["findings"]
        assert job["clock"] == by_folder["clock"]
        assert [s["rank"] for s in job["stragglers"]] == [1]
        # the report names each rank's file as the archive's member
        assert [r["file"] for r in job["ranks"]] == [
            f"{archive}:profiler/rank-{r}.json" for r in range(3)
        ]


def test_archive_of_one_trace_is_that_trace(tmp_path: Path) -> None:
    planted = write_job(tmp_path / "job", ranks=2)
    archive = _zip(tmp_path / "one.zip", {"rank-1.json": planted.files[1].read_bytes()})
    report = _job_json(CliRunner(), str(archive))
    assert report["schema"].startswith("tracelens.report")
    assert report["trace"]["rank"] == 1
    assert report["source"]["path"] == f"{archive}:rank-1.json"


@pytest.mark.parametrize(
    "name, problem",
    [
        ("../evil.json", "leaves the archive's folder"),
        ("a/../../evil.json", "leaves the archive's folder"),
        ("/etc/evil.json", "absolute path"),
    ],
)
def test_member_leaving_the_folder_is_refused(tmp_path: Path, name: str, problem: str) -> None:
    for archive in (
        _zip(tmp_path / "bad.zip", {name: b"{}"}),
        _tar(tmp_path / "bad.tar.gz", {name: b"{}"}),
    ):
        res = CliRunner().invoke(main, ["analyze", str(archive)])
        assert res.exit_code == 2, res.output
        (line,) = res.output.strip().splitlines()
        assert str(archive) in line and problem in line and "Traceback" not in line
    assert not (tmp_path.parent / "evil.json").exists()


def test_links_in_a_tar_are_refused(tmp_path: Path) -> None:
    archive = tmp_path / "link.tar"
    with tarfile.open(archive, "w") as tf:
        info = tarfile.TarInfo("rank-0.json")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tf.addfile(info)
    with pytest.raises(TraceInputError, match=r"'rank-0\.json' is a link"):
        extract_traces(archive, tmp_path / "out", max_bytes=1 << 20)


def test_archive_larger_than_the_limit_is_refused(tmp_path: Path) -> None:
    # 8 MiB of spaces deflate to a few kilobytes: the cap is on what they inflate to
    big = b"{" + b" " * (8 * 1024 * 1024) + b"}"
    for archive in (
        _zip(tmp_path / "big.zip", {"rank-0.json": big}),
        _tar(tmp_path / "big.tar.gz", {"rank-0.json": big}),
    ):
        assert archive.stat().st_size < 100_000
        res = CliRunner().invoke(
            main,
            ["analyze", str(archive)],
            env={"TRACELENS_MAX_DECOMPRESSED_BYTES": str(1024 * 1024)},
        )
        assert res.exit_code == 2, res.output
        (line,) = res.output.strip().splitlines()
        assert "exceed the limit of 1,048,576 bytes" in line and str(archive) in line


def test_too_many_members_and_damaged_archives_are_refused(tmp_path: Path) -> None:
    many = _zip(tmp_path / "many.zip", {f"f{i}.txt": b"" for i in range(30)})
    with pytest.raises(TraceInputError, match="more than 20 members"):
        extract_traces(many, tmp_path / "out", max_bytes=1 << 20, max_members=20)
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(_zip(tmp_path / "ok.zip", {"rank-0.json": b"{}" * 1000}).read_bytes()[:60])
    res = CliRunner().invoke(main, ["analyze", str(damaged)])
    assert res.exit_code == 2 and "damaged archive" in res.output
    empty = _zip(tmp_path / "empty.zip", {"notes.txt": b"hello"})
    res = CliRunner().invoke(main, ["analyze", str(empty)])
    assert res.exit_code == 2 and "archive holds no trace files" in res.output
