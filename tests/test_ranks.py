"""A job of several ranks read together: aligned clocks, stragglers and their cause,
imbalance, and the CLI that takes a folder or several files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ingest import TraceInputError
from ingest.loader import rank_files
from tracelens.cli import main
from tracelens.ranks.job import analyze_job
from tracelens.testing.planted_ranks import write_job


def _job(folder: Path) -> dict:
    return analyze_job(rank_files([folder]))


def test_slow_data_loader_rank_is_the_straggler_on_aligned_clocks(tmp_path: Path) -> None:
    """Four ranks whose clocks are 1.23 s apart; rank 2 reads its batch in the training
    process for 2 ms each step, so every all-reduce waits for it."""
    planted = write_job(tmp_path / "job", ranks=4, slow_rank=2)
    job = _job(tmp_path / "job")
    offsets = {o["rank"]: o["offset_ns"] for o in job["clock"]["offsets"]}
    for r, expected in planted.offsets_ns.items():
        assert abs(offsets[r] - expected) <= 2_000, (r, offsets[r], expected)
    assert [s["rank"] for s in job["stragglers"]] == [2]
    (s,) = job["stragglers"]
    assert s["last_in"] == s["of"] == 10
    assert s["held_back_ns"] == planted.expected["held_back_ns"] == 20_000_000
    assert s["others_wait_ns"] == 3 * 20_000_000  # three ranks wait 2 ms, ten times
    assert s["cause"] == "data_loading"
    top = job["findings"][0]
    assert top["analyzer"] == "ranks" and top["rank"] == 2 and top["impact_ns"] == 20_000_000
    assert "DataLoader" in top["summary"] and "num_workers" in top["advice"]
    # the waiting ranks' communication findings keep only what is not the straggler's
    for f in job["findings"]:
        if f["analyzer"] == "communication" and f["rank"] != 2:
            assert f["impact_ns"] == 10_000_000 and "straggler" in f["impact_basis"]
    assert job["collectives"]["shared"] == 10
    assert [r["rank"] for r in job["ranks"]] == [0, 1, 2, 3]


def test_heavier_expert_rank_is_late_because_of_compute(tmp_path: Path) -> None:
    write_job(tmp_path / "job", ranks=4, slow_rank=None, heavy_rank=1)
    job = _job(tmp_path / "job")
    (s,) = job["stragglers"]
    assert (s["rank"], s["cause"], s["excess_compute_ns"]) == (1, "compute", 15_000_000)
    (imb,) = [f for f in job["findings"] if f["title"].startswith("Rank 1 runs")]
    assert imb["evidence"]["operators"][0] == {"operator": "aten::mm", "extra_ns": 15_000_000}
    assert imb["impact_ns"] == 0 and "straggler finding counts" in imb["impact_basis"]


def test_balanced_job_has_no_straggler(tmp_path: Path) -> None:
    write_job(tmp_path / "job", ranks=3, slow_rank=None)
    job = _job(tmp_path / "job")
    assert not [f for f in job["findings"] if f["analyzer"] == "ranks"]
    assert all(k["max_ns"] == 0 for k in job["collectives"]["skew"])


def test_ranks_from_files_and_duplicates(tmp_path: Path) -> None:
    planted = write_job(tmp_path / "job", ranks=2)
    first, second = planted.files
    assert rank_files([second, first]) == [(0, first), (1, second)]
    dup = tmp_path / "copy" / "rank-0-again.json"
    dup.parent.mkdir()
    shutil.copy(planted.files[0], dup)
    with pytest.raises(TraceInputError, match="claims rank 0"):
        rank_files([*planted.files, dup])


def test_cli_takes_a_folder_or_several_files(tmp_path: Path) -> None:
    planted = write_job(tmp_path / "job", ranks=3, slow_rank=1)
    runner = CliRunner()
    by_folder = runner.invoke(main, ["analyze", str(tmp_path / "job"), "--format", "json"])
    assert by_folder.exit_code == 0, by_folder.output
    by_files = runner.invoke(main, ["analyze", *map(str, planted.files), "--format", "json"])
    assert by_files.exit_code == 0, by_files.output
    a, b = json.loads(by_folder.output), json.loads(by_files.output)
    assert a["schema"] == "tracelens.job/1" and a["findings"] == b["findings"]
    text = runner.invoke(main, ["analyze", str(tmp_path / "job")])
    assert text.exit_code == 0 and "Rank 1 arrives last" in text.output
    md = runner.invoke(main, ["analyze", str(tmp_path / "job"), "--format", "markdown"])
    assert md.exit_code == 0 and "| rank |" in md.output
    one = runner.invoke(main, ["analyze", str(tmp_path / "job"), "--rank", "1", "--format", "json"])
    assert one.exit_code == 0 and json.loads(one.output)["trace"]["rank"] == 1
    gate = runner.invoke(main, ["analyze", str(tmp_path / "job"), "--fail-on", "low", "-q"])
    assert gate.exit_code == 1
    html = runner.invoke(main, ["analyze", str(tmp_path / "job"), "--format", "html"])
    assert html.exit_code == 2 and "HTML output takes one trace" in html.output
    db = runner.invoke(main, ["analyze", str(tmp_path / "job"), "--db", str(tmp_path / "x.db")])
    assert db.exit_code == 2 and "--rank R" in db.output


@pytest.mark.corpus
def test_corpus_two_sampled_ranks(corpus: Path) -> None:
    """Two of a 128-rank job's ranks, sampled (only some events kept).

    Expert reading: the two files' recorded clocks already agree (the shared SendRecv
    kernels end within tens of µs of each other), so the offset is near zero; four of the
    ten SendRecvs are the same exchange on both ranks (the others pair each rank with
    ranks not in the files). Rank 1 reaches all four last, having run more GPU compute
    before them (272 ms against 210 ms over the capture). With 126 ranks absent, "last"
    is among these two only, and the report says so.
    """
    job = _job(corpus / "torch/sampled_2rank")
    (o,) = [o for o in job["clock"]["offsets"] if o["rank"] == 1]
    assert abs(o["offset_ns"]) < 100_000 and o["matched_collectives"] == 4
    assert o["residual_ns"] is not None and o["residual_ns"] < 100_000
    (s,) = job["stragglers"]
    assert (s["rank"], s["last_in"], s["of"], s["cause"]) == (1, 4, 4, "compute")
    assert any("2 of the job's 128 ranks" in n for n in job["notes"])
    assert job["world_size"] == 128
    assert [r["compute_ns"] for r in job["ranks"]] == [210_320_000, 271_973_000]
