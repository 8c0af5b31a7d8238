"""LLM latency metrics from annotated synthetic traces with known per-request times.

Every scenario goes through both writers (Chrome trace and Nsight SQLite export) and the
real ingest, so the metrics are checked on what each reader puts in ``ranges``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ingest import load_trace
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.llm.section import llm_section
from tracelens.report import build_report
from tracelens.testing import Scenario, write_chrome_trace
from tracelens.testing.nsys_writer import write_nsys_sqlite

US = 1_000
MS = 1_000_000

WRITERS: dict[str, Callable[[Scenario, Path], Path]] = {
    "chrome": lambda sc, d: write_chrome_trace(sc, d / "t.pt.trace.json.gz"),
    "nsys": lambda sc, d: write_nsys_sqlite(sc, d / "t.sqlite"),
}


@pytest.fixture(params=sorted(WRITERS))
def section_of(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[Scenario], dict]:
    writer = WRITERS[request.param]

    def run(sc: Scenario) -> dict:
        loaded = load_trace(writer(sc, tmp_path))
        try:
            section = llm_section(TraceDB(loaded.con), Thresholds())
        finally:
            loaded.close()
        assert section is not None
        return section

    return run


def by_rid(section: dict) -> dict[str, dict]:
    return {r["rid"]: r for r in section["per_request"]}


def interleaved() -> Scenario:
    """Continuous batching: b arrives while a decodes and joins its batch.

    a: request 0-10 ms, prefill[a] 2-4, decode[a] 4-5, prefill[b] 5-6, decode[a,b] 6-6.5,
    decode[a] 6.5-7. Tokens of a at 4, 5, 6.5, 7 ms; of b at 6, 6.5 ms; b's request 1-8 ms.
    All inside one ProfilerStep range, as a server loop under torch.profiler records them.
    """
    sc = Scenario("llm_interleaved")
    sc.range("ProfilerStep#0", 0, 11 * MS)
    sc.range("llm.request[a]", 0, 10 * MS)
    sc.range("llm.request[b]", 1 * MS, 7 * MS)
    sc.range("llm.prefill[a]", 2 * MS, 2 * MS)
    sc.range("llm.decode[a]", 4 * MS, 1 * MS)
    sc.range("llm.prefill[b]", 5 * MS, 1 * MS)
    sc.range("llm.decode[a,b]", 6 * MS, 500 * US)
    sc.range("llm.decode[a]", 6500 * US, 500 * US)
    return sc


def test_interleaved_continuous_batching_exact(section_of: Callable[[Scenario], dict]) -> None:
    s = section_of(interleaved())
    r = by_rid(s)
    assert r["a"]["ttft_ns"] == 4 * MS
    assert r["a"]["output_tokens"] == 4
    assert r["a"]["tpot_ns"] == pytest.approx(1 * MS)  # (7 - 4) / 3
    assert r["a"]["e2e_ns"] == 10 * MS
    assert r["a"]["queue_ns"] == 2 * MS
    assert r["a"]["prefill_ns"] == 2 * MS
    assert r["b"]["ttft_ns"] == 5 * MS
    assert r["b"]["tpot_ns"] == pytest.approx(500 * US)
    assert r["b"]["e2e_ns"] == 7 * MS
    assert r["b"]["queue_ns"] == 4 * MS
    assert s["requests"] == 2
    assert s["output_tokens"] == 6
    # ITL over all gaps: a: 1, 1.5, 0.5 ms; b: 0.5 ms.
    itl = s["itl_ns"]
    assert itl["count"] == 4
    assert itl["mean"] == pytest.approx(875 * US)
    assert itl["p50"] == pytest.approx(750 * US)  # linear interpolation of 0.5, 0.5, 1, 1.5
    assert itl["p90"] == pytest.approx(1350 * US)
    assert itl["p99"] == pytest.approx(1485 * US)
    ttft = s["ttft_ns"]
    assert (ttft["mean"], ttft["p50"], ttft["p95"]) == pytest.approx(
        (4.5 * MS, 4.5 * MS, 4.95 * MS)
    )
    assert s["e2e_ns"]["p99"] == pytest.approx(9.97 * MS)
    # Span: first request start (0) to last token (7 ms).
    assert s["span_ns"] == 7 * MS
    assert s["output_tokens_per_s"] == pytest.approx(6 / 7e-3)
    assert s["requests_per_s"] == pytest.approx(2 / 7e-3)
    assert s["ttft_breakdown"]["queue_share_pct"] == pytest.approx(100 * 6 / 9)
    # The 5 -> 6.5 ms gap of a holds b's whole prefill: one stalled gap of 1.5 ms against
    # a median unstalled decode gap of 0.5 ms (a: 1, 0.5; b: 0.5).
    st = s["prefill_stalls"]
    assert (st["stalled_gaps"], st["baseline_itl_ns"]) == (1, 500 * US)
    assert st["excess_ns"] == 1 * MS
    assert s["steps"]["decode"]["steps"] == 3
    assert s["steps"]["decode"]["max_batch"] == 2
    assert s["warnings"] == []


def test_one_token_request_has_no_tpot_or_itl(section_of: Callable[[Scenario], dict]) -> None:
    sc = Scenario("llm_one_token")
    sc.range("llm.request[solo]", 0, 3 * MS)
    sc.range("llm.prefill[solo]", 1 * MS, 1500 * US)
    s = section_of(sc)
    r = by_rid(s)["solo"]
    assert r["output_tokens"] == 1
    assert r["ttft_ns"] == 2500 * US
    assert r["tpot_ns"] is None
    assert r["e2e_ns"] == 3 * MS
    assert s["tpot_ns"]["count"] == 0 and s["tpot_ns"]["mean"] is None
    assert s["itl_ns"]["count"] == 0 and s["itl_ns"]["p99"] is None
    assert s["span_ns"] == 2500 * US
    assert s["warnings"] == []


def test_missing_request_range(section_of: Callable[[Scenario], dict]) -> None:
    sc = Scenario("llm_missing_request")
    sc.range("llm.request[x]", 0, 4 * MS)
    sc.range("llm.prefill[x,y]", 1 * MS, 1 * MS)
    sc.range("llm.decode[x,y]", 2 * MS, 1 * MS)
    sc.range("llm.decode[y]", 3 * MS, 2 * MS)
    s = section_of(sc)
    r = by_rid(s)
    assert r["x"]["ttft_ns"] == 2 * MS
    assert r["y"]["ttft_ns"] is None and r["y"]["e2e_ns"] is None
    assert r["y"]["output_tokens"] == 3
    assert r["y"]["tpot_ns"] == pytest.approx(1.5 * MS)  # tokens at 2, 3, 5 ms
    assert s["ttft_ns"]["count"] == 1
    assert s["itl_ns"]["count"] == 3  # x: 1 ms; y: 1 ms, 2 ms
    assert any("no llm.request range" in w and "'y'" in w for w in s["warnings"])


def test_bad_annotations_warn_and_keep_what_is_usable(
    section_of: Callable[[Scenario], dict],
) -> None:
    sc = Scenario("llm_bad")
    sc.range("llm.request[ok]", 0, 5 * MS)
    sc.range("llm.request[ok]", 1 * MS, 1 * MS)  # duplicate id
    sc.range("llm.request[a,b]", 0, 1 * MS)  # a request range naming two requests
    sc.range("llm.prefill[ok", 1 * MS, 1 * MS)  # unterminated
    sc.range("llm.decode[]", 2 * MS, 1 * MS)  # nobody
    sc.range("llm.decode", 2 * MS, 1 * MS)  # no list at all
    sc.range("llm.forward", 2 * MS, 1 * MS)  # someone else's name: silently ignored
    sc.range("llm.decode[ok]", 1 * MS, 1 * MS)  # decode before any prefill
    sc.range("llm.prefill[ok]", 2 * MS, 1 * MS)
    sc.range("llm.decode[ok,,ok]", 4 * MS, 2 * MS)  # empty id, repeated id, ends after range
    sc.range("llm.request[idle]", 0, 1 * MS)  # never served
    s = section_of(sc)
    r = by_rid(s)
    # Token times: decode 2 ms, prefill 3 ms, decode 6 ms.
    assert r["ok"]["output_tokens"] == 3
    assert r["ok"]["ttft_ns"] == 3 * MS
    assert r["ok"]["e2e_ns"] == 5 * MS
    assert r["idle"]["output_tokens"] == 0 and r["idle"]["ttft_ns"] is None
    text = "\n".join(s["warnings"])
    for expected in (
        "do not follow",
        "more than one llm.request range",
        "a list of ids",
        "empty request ids",
        "list no request id",
        "same request id twice",
        "decode token before their first prefill",
        "outside their llm.request range",
        "no prefill/decode step lists them",
    ):
        assert expected in text, expected
    assert "llm.forward" not in text


def test_report_and_cli_outputs_carry_the_section(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tracelens.cli import main

    path = write_chrome_trace(interleaved(), tmp_path / "i.pt.trace.json.gz")
    loaded = load_trace(path)
    try:
        report = build_report(loaded)
    finally:
        loaded.close()
    llm = report["llm"]
    for key in ("requests", "output_tokens", "output_tokens_per_s", "requests_per_s"):
        assert key in llm
    for key in ("ttft_ns", "tpot_ns", "itl_ns", "e2e_ns"):
        assert set(llm[key]) >= {"mean", "p50", "p90", "p95", "p99"}
    assert [r["rid"] for r in llm["per_request"]] == ["a", "b"]
    runner = CliRunner()
    text = runner.invoke(main, ["analyze", str(path)], terminal_width=160)
    assert text.exit_code == 0, text.output
    assert "LLM serving latency" in text.output and "TTFT" in text.output
    md = runner.invoke(main, ["analyze", str(path), "--format", "markdown"])
    assert "## LLM serving latency" in md.output
    assert "| ITL | 4 |" in md.output


def test_no_annotations_no_section(planted_trace: tuple[Path, dict]) -> None:
    loaded = load_trace(planted_trace[0])
    try:
        report = build_report(loaded)
    finally:
        loaded.close()
    assert "llm" not in report
    assert not any(f["analyzer"] == "llm_latency" for f in report["findings"])


def test_analyzing_an_annotated_trace_never_imports_torch(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = write_chrome_trace(interleaved(), tmp_path / "i.pt.trace.json.gz")
    code = (
        "import sys, json\n"
        "from click.testing import CliRunner\n"
        "from tracelens.cli import main\n"
        f"r = CliRunner().invoke(main, ['analyze', {str(path)!r}, '--format', 'json'])\n"
        "assert 'llm' in json.loads(r.output)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'nvtx')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"


def test_annotate_domain_wins_over_emit_nvtx_duplicates(tmp_path: Path) -> None:
    """Under nsys with emit_nvtx, the same step also appears in the default NVTX domain."""
    sc = Scenario("llm_two_domains")
    for shift, domain in ((0, "tracelens"), (3 * US, None)):
        sc.range("llm.request[a]", shift, 5 * MS, domain)
        sc.range("llm.prefill[a]", 1 * MS + shift, 1 * MS, domain)
        sc.range("llm.decode[a]", 2 * MS + shift, 1 * MS, domain)
    loaded = load_trace(write_nsys_sqlite(sc, tmp_path / "d.sqlite"))
    try:
        s = llm_section(TraceDB(loaded.con), Thresholds())
    finally:
        loaded.close()
    assert s is not None
    (r,) = s["per_request"]
    assert (r["output_tokens"], r["ttft_ns"], r["tpot_ns"]) == (2, 2 * MS, 1 * MS)


def test_request_ranges_without_steps(section_of: Callable[[Scenario], dict]) -> None:
    sc = Scenario("llm_requests_only")
    sc.range("llm.request[u]", 0, 2 * MS)
    sc.range("llm.request[v]", 1 * MS, 2 * MS)
    s = section_of(sc)
    assert (s["requests"], s["output_tokens"]) == (2, 0)
    assert s["output_tokens_per_s"] is None and s["span_ns"] is None
    assert s["ttft_ns"]["count"] == 0 and s["e2e_ns"]["count"] == 2
    assert any("no prefill/decode step lists them" in w for w in s["warnings"])
