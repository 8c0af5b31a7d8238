"""The type checker over ingest/, tracelens/ and web/, as CI runs it: the suite's one command
covers it. Its configuration is pyproject.toml's ``[tool.mypy]``."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_mypy_finds_no_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    api = pytest.importorskip("mypy.api", reason="mypy is not installed (the dev extra has it)")
    # The configured packages are found from the repository root; the cache there (ignored
    # by git) makes a second run take a second instead of most of a minute.
    monkeypatch.chdir(REPO)
    out, err, status = api.run(
        ["--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(REPO / ".mypy_cache")]
    )
    assert status == 0, out + err
    assert out.startswith("Success: no issues found"), out
