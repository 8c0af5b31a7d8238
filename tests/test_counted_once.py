"""Every corpus trace: each millisecond counted once, and the same file gives the same
findings every time it is analysed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_cache import _db

from ingest import load_trace
from tracelens.analyzers import communication, h2d_transfers, memory, run_all, steps, variance
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.testing.checks import counted_once_problems

MINE = (variance, memory, h2d_transfers, communication, steps)


def _traces(corpus: Path) -> list[Path]:
    found = sorted(
        p for p in corpus.rglob("*") if p.name.endswith((".json.gz", ".sqlite")) and p.is_file()
    )
    assert found, "empty corpus"
    return found


@pytest.mark.corpus
def test_impacts_never_add_up_past_what_they_explain(corpus: Path) -> None:
    """A report that claims more time than the window (or more than the copies or NCCL
    kernels took) counts something twice: no corpus trace may do that."""
    bad = {}
    for path in _traces(corpus):
        db = _db(path)
        problems = counted_once_problems(db, run_all(db, Thresholds()))
        if problems:
            bad[str(path.relative_to(corpus))] = problems
    assert bad == {}


@pytest.mark.corpus
@pytest.mark.parametrize(
    "name",
    [
        "torch/v100_resnet50_legacy2021.pt.trace.json.gz",
        "torch/sampled_2rank/rank-0.json.gz",
        "torch/a100_alexnet_inference.json.gz",
        "nsys/rtx3060_vecadd_nsys2025.5.sqlite",
        "engines/mi300_qwen_inference.json.gz",
    ],
)
def test_three_analyses_of_one_file_are_identical(corpus: Path, name: str) -> None:
    """Ties broken on unique keys: a self-diff must never show phantom findings."""
    runs = set()
    for _ in range(3):
        loaded = load_trace(corpus / name)
        try:
            db = TraceDB(loaded.con)
            found = [f.to_dict() for m in MINE for f in m.analyze(db, Thresholds())]
            runs.add(json.dumps(found, sort_keys=True))
        finally:
            loaded.close()
    assert len(runs) == 1
