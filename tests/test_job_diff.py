"""``tracelens diff`` of two jobs: rank by rank, with the job's verdict from its slowest rank."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tracelens.cli import main
from tracelens.testing.planted_ranks import write_job


def _diff(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["diff", *args])
    return r.exit_code, r.output


def test_a_slow_data_loader_rank_is_a_job_regression(tmp_path: Path) -> None:
    """The baseline job is balanced; in the candidate rank 2 reads its batch in the
    training process, so every rank's step, and the job, take 2 ms longer."""
    write_job(tmp_path / "base", ranks=4, slow_rank=None)
    write_job(tmp_path / "cand", ranks=4, slow_rank=2)
    code, out = _diff(str(tmp_path / "base"), str(tmp_path / "cand"), "--format", "json",
                      "--max-regression", "5")  # fmt: skip
    assert code == 1, out
    d = json.loads(out)
    assert d["schema"] == "tracelens.job.diff/1"
    assert [r["rank"] for r in d["ranks"]] == [0, 1, 2, 3]
    v = d["verdict"]
    assert v["status"] == "regression" and v["metric"] == "window_ns"
    assert v["baseline"] == 42_300_000 and v["candidate"] == 62_300_000
    assert d["stragglers"]["baseline"] == []
    assert [(s["rank"], s["cause"]) for s in d["stragglers"]["candidate"]] == [(2, "data_loading")]
    appeared = [f["title"] for f in d["findings"]["appeared"]]
    assert any(t.startswith("Rank 2 arrives last") for t in appeared)
    text_code, text = _diff(str(tmp_path / "base"), str(tmp_path / "cand"))
    assert text_code == 0 and "Stragglers: none -> rank 2" in text
    assert "Rank 0, which changed most" in text
    md_code, md = _diff(str(tmp_path / "base"), str(tmp_path / "cand"), "--format", "markdown")
    assert md_code == 0 and "| rank | status |" in md


def test_a_job_against_itself_is_unchanged(tmp_path: Path) -> None:
    write_job(tmp_path / "job", ranks=3, slow_rank=1)
    code, out = _diff(str(tmp_path / "job"), str(tmp_path / "job"), "--format", "json",
                      "--max-regression", "0")  # fmt: skip
    assert code == 0, out
    d = json.loads(out)
    assert d["empty"] and d["verdict"]["status"] == "unchanged"


def test_a_job_and_one_trace_are_not_compared(tmp_path: Path) -> None:
    planted = write_job(tmp_path / "job", ranks=2)
    code, out = _diff(str(tmp_path / "job"), str(planted.files[0]))
    assert code == 2 and "compare one rank of the job with --rank R" in out
    one, _ = _diff(str(tmp_path / "job"), str(tmp_path / "job"), "--rank", "1")
    assert one == 0
