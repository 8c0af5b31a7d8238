"""Which file of a profiler output folder is which rank, as the engines name them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest import TraceInputError
from ingest.loader import ranks_of, resolve_input
from tracelens.testing import write_chrome_trace
from tracelens.testing.planted import training_steps


def _folder(tmp: Path, names: list[str]) -> list[Path]:
    """Traces that say nothing of their rank inside (``distributedInfo.rank`` is null)."""
    sc = training_steps()
    sc.rank = None  # type: ignore[assignment]
    return [write_chrome_trace(sc, tmp / n) for n in names]


def test_vllm_and_generic_rank_names(tmp_path: Path) -> None:
    files = _folder(
        tmp_path,
        [
            "host_12.rank0.1773709742341309550.pt.trace.json.gz",
            "dp0_pp0_tp1_dcp0_ep1_rank1.1773709742.pt.trace.json.gz",
            "worker-rank_2.json",
            "trace_rank[3].json",
        ],
    )
    assert sorted(ranks_of(files).values()) == [0, 1, 2, 3]
    chosen, notes = resolve_input(tmp_path, rank=3)
    assert chosen.name == "trace_rank[3].json" and "analyzing rank 3" in notes[0]


def test_sglang_grid_names_become_global_ranks(tmp_path: Path) -> None:
    # TP 2 x PP 2 x DP 2: data-parallel replicas outermost, tensor parallel innermost
    names = [
        f"1712345-TP-{tp}-DP-{dp}-PP-{pp}-EP-{tp}.trace.json.gz"
        for dp in range(2)
        for pp in range(2)
        for tp in range(2)
    ]
    ranks = ranks_of(_folder(tmp_path, names))
    assert [ranks[tmp_path / n] for n in names] == list(range(8))
    chosen, _ = resolve_input(tmp_path, rank=5)
    assert chosen.name == "1712345-TP-1-DP-1-PP-0-EP-1.trace.json.gz"
    with pytest.raises(TraceInputError, match=r"ranks found: \[0, 1, 2, 3, 4, 5, 6, 7\]"):
        resolve_input(tmp_path, rank=9)


def test_sglang_tensor_parallel_only(tmp_path: Path) -> None:
    names = ["abc-TP-0.trace.json.gz", "abc-TP-1.trace.json.gz"]
    ranks = ranks_of(_folder(tmp_path, names))
    assert [ranks[tmp_path / n] for n in names] == [0, 1]
