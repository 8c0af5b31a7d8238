"""Secret redaction: unit rules, and the CLI's JSON output of a trace whose metadata leaks."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from click.testing import CliRunner

from ingest.redaction import REDACTED, is_secret_key, redact, redact_text

HF = "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2"


def test_secret_keys_are_recognised_and_token_counts_are_not() -> None:
    for key in ("HF_TOKEN", "db_password", "AWS_SECRET_ACCESS_KEY", "X-Api-Key", "auth"):
        assert is_secret_key(key), key
    for key in ("max_tokens", "output_tokens", "tokenizer", "host_name", "rank"):
        assert not is_secret_key(key), key


def test_redact_replaces_values_under_secret_keys_but_keeps_numbers() -> None:
    out = redact({"env": {"GITHUB_TOKEN": "ghp_x", "PATH": "/usr/bin"}, "max_tokens": 128})
    assert out == {"env": {"GITHUB_TOKEN": REDACTED, "PATH": "/usr/bin"}, "max_tokens": 128}


def test_redact_text_hides_assignments_urls_bearer_and_known_formats() -> None:
    text = (
        f"HF_TOKEN={HF} PATH=/usr/bin WANDB_API_KEY=abc123 --api-key s3cr3t "
        "pip index https://bob:hunter2@pypi.example.com/simple Authorization: Bearer abcdefghijkl "
        "time per output token: 20 ms"
    )
    out = redact_text(text)
    for secret in (HF, "abc123", "s3cr3t", "hunter2", "abcdefghijkl"):
        assert secret not in out
    assert "PATH=/usr/bin" in out
    assert "https://bob:[REDACTED]@pypi.example.com" in out
    assert "time per output token: 20 ms" in out


def test_cli_json_output_never_shows_metadata_secrets(tmp_path: Path) -> None:
    from tracelens.cli import main
    from tracelens.testing import training_steps
    from tracelens.testing.chrome_writer import header_for, iter_events, write_events

    sc = training_steps()
    header = header_for(sc)
    header["host_name"] = "ci-runner password=hunter2"
    path = tmp_path / "leaky.pt.trace.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        write_events(out, iter_events(sc), header)
    # The trace name is written after the events by write_events; put a token in it too.
    raw = gzip.decompress(path.read_bytes()).decode()
    raw = raw.replace('"traceName": "tracelens-synthetic"', f'"traceName": "run HF_TOKEN={HF}"')
    path.write_bytes(gzip.compress(raw.encode()))

    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert HF not in result.output and "hunter2" not in result.output
    assert report["trace"]["host"] == "ci-runner password=[REDACTED]"
