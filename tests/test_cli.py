"""`tracelens analyze` end to end: formats, exit codes, options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import duckdb
import pytest
from click.testing import CliRunner

from tracelens.cli import main


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_json_schema_keys(runner: CliRunner, planted_trace: tuple[Path, dict]) -> None:
    path, exp = planted_trace
    res = runner.invoke(main, ["analyze", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    assert r["tracelens_version"]
    assert set(r["source"]) >= {"path", "format", "sha256"}
    assert r["source"]["format"] == "torch_chrome"
    assert len(r["source"]["sha256"]) == 64
    assert set(r["devices"][0]) >= {
        "device_id",
        "name",
        "window_ns",
        "busy_ns",
        "busy_pct",
        "idle_pct",
    }
    assert set(r["metrics"]) >= {
        "kernel_count",
        "memcpy_count",
        "memset_count",
        "h2d_bytes",
        "h2d_pageable_bytes",
        "h2d_time_ns",
        "dtoh_bytes",
        "gpu_busy_pct",
    }
    f = r["findings"][0]
    assert set(f) >= {
        "id",
        "analyzer",
        "title",
        "severity",
        "impact_ns",
        "impact_pct",
        "impact_basis",
        "summary",
        "evidence",
        "advice",
        "time_ranges",
    }
    stats = {"name", "count", "total_ns", "mean_ns", "p50_ns", "p95_ns", "max_ns"}
    assert set(r["top_kernels"][0]) == stats
    cost = {"flops", "bytes", "achieved_tflops", "achieved_gbps", "bound"}
    assert set(r["top_ops"][0]) == stats | cost
    assert r["metrics"]["h2d_bytes"] == exp["h2d_bytes"]


def test_sha256_is_of_the_file(runner: CliRunner, planted_trace: tuple[Path, dict]) -> None:
    import hashlib

    path, _ = planted_trace
    r = json.loads(runner.invoke(main, ["analyze", str(path), "--format", "json"]).output)
    assert r["source"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_text_and_markdown(runner: CliRunner, planted_trace: tuple[Path, dict]) -> None:
    path, _ = planted_trace
    text = runner.invoke(main, ["analyze", str(path)])
    assert text.exit_code == 0
    assert "Findings, ranked" in text.output and "aten::mm" in text.output
    md = runner.invoke(main, ["analyze", str(path), "--format", "markdown"])
    assert md.exit_code == 0
    assert md.output.startswith("# tracelens report")
    assert "| # | severity | impact | finding |" in md.output
    assert "**What to do:**" in md.output


def test_header_counts_in_the_right_number(runner: CliRunner, tmp_path: Path) -> None:
    """One kernel and one copy read "1 kernel", "1 copy", not "1 kernels", "1 copies"."""
    events = [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
         "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0,
         "tid": 7, "ts": 20, "dur": 5, "args": {"device": 0, "stream": 7, "bytes": 64}},
    ]  # fmt: skip
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"traceEvents": events}))
    text = runner.invoke(main, ["analyze", str(path)], terminal_width=120)
    assert "1 kernel · 1 copy · 0 memsets" in text.output, text.output
    md = runner.invoke(main, ["analyze", str(path), "--format", "markdown"])
    assert "- 1 kernel, 1 copy, 0 memsets;" in md.output, md.output


def test_html_escapes(runner: CliRunner, tmp_path: Path) -> None:
    p = tmp_path / "angle.json"
    p.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": "k<script>alert(1)</script>&",
                        "pid": 0,
                        "tid": 7,
                        "ts": 1,
                        "dur": 2,
                        "args": {"device": 0},
                    }
                ]
            }
        )
    )
    res = runner.invoke(main, ["analyze", str(p), "--format", "html"])
    assert res.exit_code == 0
    assert "<script>" not in res.output
    assert "k&lt;script&gt;alert(1)&lt;/script&gt;&amp;" in res.output


@pytest.mark.parametrize(("level", "code"), [("critical", 1), ("high", 1), ("info", 1)])
def test_fail_on(
    runner: CliRunner, planted_trace: tuple[Path, dict], level: str, code: int
) -> None:
    path, _ = planted_trace
    res = runner.invoke(main, ["analyze", str(path), "--format", "json", "--fail-on", level])
    assert res.exit_code == code


def test_fail_on_passes_when_nothing_that_severe(runner: CliRunner, tmp_path: Path) -> None:
    p = tmp_path / "calm.json"
    p.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": "k",
                        "pid": 0,
                        "tid": 7,
                        "ts": t,
                        "dur": 10,
                        "args": {"device": 0},
                    }
                    for t in range(0, 1000, 10)
                ]
            }
        )
    )
    res = runner.invoke(main, ["analyze", str(p), "--format", "json", "--fail-on", "low"])
    assert res.exit_code == 0, res.output


def test_db_file_and_output(
    runner: CliRunner, planted_trace: tuple[Path, dict], tmp_path: Path
) -> None:
    path, exp = planted_trace
    db, out = tmp_path / "t.duckdb", tmp_path / "r.json"
    res = runner.invoke(
        main, ["analyze", str(path), "--db", str(db), "--format", "json", "-o", str(out)]
    )
    assert res.exit_code == 0 and res.output == ""
    assert json.loads(out.read_text())["metrics"]["kernel_count"] == exp["kernel_count"]
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
        assert {"kernels", "memcpys", "gaps", "trace_info", "cpu_ops", "ranges"} <= tables
        assert con.execute("SELECT count(*) FROM kernels").fetchone()[0] == exp["kernel_count"]
    finally:
        con.close()


def test_threshold_override(runner: CliRunner, planted_trace: tuple[Path, dict]) -> None:
    path, _ = planted_trace
    base = json.loads(runner.invoke(main, ["analyze", str(path), "--format", "json"]).output)
    assert any(f["analyzer"] == "variance" for f in base["findings"])
    res = runner.invoke(
        main, ["analyze", str(path), "--format", "json", "--threshold", "variance_min_cv=5"]
    )
    assert not any(f["analyzer"] == "variance" for f in json.loads(res.output)["findings"])
    bad = runner.invoke(main, ["analyze", str(path), "--threshold", "nonsense=1"])
    assert bad.exit_code == 2 and "unknown threshold" in bad.output


def test_thresholds_listing(runner: CliRunner) -> None:
    res = runner.invoke(main, ["thresholds"])
    assert res.exit_code == 0
    assert "variance_min_cv = 0.5" in res.output
    assert "coefficient of variation" in res.output
    # the gap-cause constants decided at ingest are listed too, and say so
    assert "gap_sync_min_gap_fraction = 0.5" in res.output
    assert "decided at ingest" in res.output


def test_bundled_sample(runner: CliRunner) -> None:
    res = runner.invoke(main, ["analyze", "--sample", "--format", "json"])
    assert res.exit_code == 0
    assert len(json.loads(res.output)["findings"]) >= 5


def test_usage_error_exits_2(runner: CliRunner) -> None:
    assert runner.invoke(main, ["analyze"]).exit_code == 2
    assert runner.invoke(main, ["analyze", "x.json", "--format", "pdf"]).exit_code == 2


def test_llm_section_in_every_format(runner: CliRunner, tmp_path: Path) -> None:
    from tracelens.testing import Scenario, write_chrome_trace

    sc = Scenario(name="llm")
    sc.range("llm.request[a]", 0, 10_000_000)
    sc.range("llm.prefill[a]", 1_000_000, 2_000_000)
    sc.range("llm.decode[a]", 3_000_000, 1_000_000)
    sc.range("llm.decode[a]", 5_000_000, 1_000_000)
    path = write_chrome_trace(sc, tmp_path / "llm.json")
    r = json.loads(runner.invoke(main, ["analyze", str(path), "--format", "json"]).output)
    assert r["llm"]["requests"] == 1 and r["llm"]["output_tokens"] == 3
    assert r["llm"]["ttft_ns"]["p50"] == 3_000_000
    for fmt, marker in (
        ("text", "LLM serving latency"),
        ("markdown", "## LLM serving latency"),
        ("html", "<h2>LLM latency</h2>"),
    ):
        out = runner.invoke(main, ["analyze", str(path), "--format", fmt]).output
        assert marker in out, fmt


def test_web_commands_without_the_web_extra_fail_cleanly(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util
    import sys

    from tracelens.cli.lazy_group import LazyGroup

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "litestar" else real(name, *a)
    )
    monkeypatch.delitem(sys.modules, "web.cli", raising=False)
    group = LazyGroup("tracelens", lazy_commands={})
    assert "serve" in group.list_commands(click.Context(group))
    res = runner.invoke(group, ["serve"])
    assert res.exit_code == 2
    assert "install tracelens[web]" in res.output
    assert "unavailable" in (group.commands["serve"].help or "")


def test_thresholds_doc_is_generated_and_current() -> None:
    """docs/thresholds.md lists every threshold: regenerate it with
    `tracelens thresholds --markdown > docs/thresholds.md` when one changes."""
    from tracelens.cli.thresholds import thresholds_markdown

    doc = Path(__file__).resolve().parent.parent / "docs" / "thresholds.md"
    assert doc.read_text() == thresholds_markdown()


def test_help_summaries_match_the_commands() -> None:
    """`tracelens --help` lists the core commands from SUMMARIES without importing them:
    each must shorten exactly as the command's own help does, at every width."""
    from tracelens.cli import COMMANDS, SUMMARIES
    from tracelens.cli.lazy_group import LazyGroup

    assert set(SUMMARIES) == set(COMMANDS)
    loaded = LazyGroup("tracelens", lazy_commands=COMMANDS)
    ctx = click.Context(loaded)
    for name in COMMANDS:
        real = loaded.get_command(ctx, name)
        assert real is not None
        stand_in = click.Command(name, help=SUMMARIES[name])
        assert (real.hidden, real.deprecated, real.short_help) == (False, False, None), name
        for limit in range(1, 200):
            assert stand_in.get_short_help_str(limit) == real.get_short_help_str(limit), name


def test_help_reads_the_same_as_with_every_command_imported(runner: CliRunner) -> None:
    from tracelens.cli import COMMANDS
    from tracelens.cli.lazy_group import LazyGroup

    imported = LazyGroup(
        main.name,
        lazy_commands=COMMANDS,
        help=main.help,
        params=main.params,
        context_settings=main.context_settings,
    )
    for width in (40, 80, 200):
        want = runner.invoke(imported, ["--help"], terminal_width=width, prog_name="tracelens")
        got = runner.invoke(main, ["--help"], terminal_width=width, prog_name="tracelens")
        assert got.exit_code == want.exit_code == 0
        assert got.output == want.output


@pytest.mark.parametrize(("given", "seen"), [(None, "1"), ("4", "4")])
def test_blas_threads_stay_off_unless_the_user_asks(given: str | None, seen: str) -> None:
    # NumPy's OpenBLAS would start a thread per core at import: ~0.1 CPU-s of a small
    # analysis, for no matrix work worth threads. A user's own setting wins.
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    probe = "import os, tracelens.cli; print(os.environ['OPENBLAS_NUM_THREADS'])"
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == seen
