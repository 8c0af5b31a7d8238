"""Shared fixtures: the real-trace corpus and generated synthetic traces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def corpus_root() -> Path | None:
    env = os.environ.get("TRACELENS_CORPUS")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "corpus")
    for c in candidates:
        if c.is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def corpus() -> Path:
    root = corpus_root()
    if root is None:
        pytest.skip(
            "real-trace corpus not found: set TRACELENS_CORPUS or place it at ../shared/corpus"
        )
    return root


@pytest.fixture(scope="session")
def planted_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    from tracelens.synthetic import training_steps, write_chrome_trace

    sc = training_steps()
    path = tmp_path_factory.mktemp("planted") / "planted.pt.trace.json.gz"
    write_chrome_trace(sc, path)
    return path, sc.expected
