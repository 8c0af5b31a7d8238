"""Every corpus trace: each millisecond counted once, and the same file gives the same
findings every time it is analysed.

Both run the analysis in fresh processes (``python -m tracelens.testing.checks``): loading
every corpus trace would otherwise grow the test session, and separate processes hash
strings differently, so an order that depends on a set or dict shows up as a difference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MINE = "variance,memory,h2d_transfers,communication,steps"


def _traces(corpus: Path) -> list[Path]:
    found = sorted(
        p for p in corpus.rglob("*") if p.name.endswith((".json.gz", ".sqlite")) and p.is_file()
    )
    assert found, "empty corpus"
    return found


def _checks(*args: str, seed: str = "0") -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "tracelens.testing.checks", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": seed},
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


@pytest.mark.corpus
def test_impacts_never_add_up_past_what_they_explain(corpus: Path) -> None:
    """A report that claims more time than the window (or more than the copies or NCCL
    kernels took) counts something twice: no corpus trace may do that."""
    results = _checks(*(str(p) for p in _traces(corpus)))
    assert len(results) == len(_traces(corpus))
    assert {r["trace"]: r["problems"] for r in results if r["problems"]} == {}


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
    runs = {
        json.dumps(_checks("--findings", MINE, str(corpus / name), seed=seed))
        for seed in ("1", "2", "3")
    }
    assert len(runs) == 1
