"""Benchmark clients' per-request results (`--bench`): vLLM JSON and SGLang JSONL.

The fixtures are written here in the clients' public formats: what `vllm bench serve
--save-result --save-detailed` writes (one object; `--append-result` adds lines) and what
`python -m sglang.bench_serving --output-file F --output-details` appends (one line per
run). Every expected number is worked out by hand from the per-request lists.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracelens.cli import main
from tracelens.llm.bench_results import BenchInputError, client_summary, load_bench_results
from tracelens.testing import Scenario, write_chrome_trace

MS = 1_000_000
S = 1_000_000_000

# Four requests, in seconds as the clients write them:
#   r0: TTFT 0.10, ITLs 0.02 0.03 0.04, 4 tokens -> e2e 0.19, TPOT 0.09 / 3 = 0.03
#   r1: TTFT 0.30, ITLs 0.05 0.05,      3 tokens -> e2e 0.40, TPOT 0.10 / 2 = 0.05
#   r2: TTFT 0.15, no ITL,              1 token  -> e2e 0.15, TPOT none (0 for goodput)
#   r3: failed (the client's error text), TTFT 0, no tokens
TTFTS = [0.10, 0.30, 0.15, 0.0]
ITLS: list[list[float]] = [[0.02, 0.03, 0.04], [0.05, 0.05], [], []]
OUTPUT_LENS = [4, 3, 1, 0]
ERRORS = ["", "", "", "Bad Request"]
DURATION_S = 2.0
# The per-request lists both clients write when asked for details.
DETAILS: dict[str, Any] = {
    "input_lens": [32, 32, 16, 16],
    "output_lens": OUTPUT_LENS,
    "ttfts": TTFTS,
    "itls": ITLS,
    "generated_texts": ["a b c d", "e f g", "h", ""],
    "errors": ERRORS,
}


def vllm_result(detailed: bool = True) -> dict[str, Any]:
    """A `vllm bench serve` result, top-level keys as it writes them."""
    rec: dict[str, Any] = {
        "date": "20250601-120000",
        "endpoint_type": "vllm",
        "backend": "vllm",
        "label": None,
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": 4,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": None,
        "duration": DURATION_S,
        "completed": 3,
        "failed": 1,
        "total_input_tokens": 96,
        "total_output_tokens": 8,
        "request_throughput": 1.5,
        "request_goodput": None,
        "output_throughput": 4.0,
        "total_token_throughput": 52.0,
        "max_output_tokens_per_s": 8.0,
        "max_concurrent_requests": 4,
        "mean_ttft_ms": 183.33,
        "median_ttft_ms": 150.0,
        "std_ttft_ms": 85.0,
        "p99_ttft_ms": 297.0,
    }
    return rec | DETAILS if detailed else rec


def sglang_line(detailed: bool = True) -> dict[str, Any]:
    """One line of `sglang.bench_serving` JSONL, keys as it writes them."""
    rec: dict[str, Any] = {
        "backend": "sglang",
        "dataset_name": "random",
        "request_rate": float("inf"),
        "max_concurrency": None,
        "sharegpt_output_len": None,
        "random_input_len": 32,
        "random_output_len": 4,
        "random_range_ratio": 0.0,
        "duration": DURATION_S,
        "completed": 3,
        "total_input_tokens": 96,
        "total_output_tokens": 8,
        "total_output_tokens_retokenized": 8,
        "request_throughput": 1.5,
        "input_throughput": 48.0,
        "output_throughput": 4.0,
        "mean_e2e_latency_ms": 246.67,
        "median_ttft_ms": 150.0,
        "mean_itl_ms": 38.0,
        "concurrency": 0.37,
        "accept_length": None,
    }
    return rec | DETAILS if detailed else rec


def write_vllm(path: Path, *records: dict[str, Any]) -> Path:
    # json.dump of one result; --append-result separates further ones with a newline
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    return path


def write_sglang(path: Path, *lines: dict[str, Any]) -> Path:
    # json.dumps never writes Infinity as valid JSON, but Python's json reads it back
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def analyze_json(runner: CliRunner, trace: Path, *options: str) -> dict[str, Any]:
    res = runner.invoke(main, ["analyze", str(trace), *options, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture
def plain_trace(tmp_path: Path) -> Path:
    """A trace without LLM annotations: only the client knows the requests."""
    sc = Scenario("kernels_only")
    sc.launch(None, "ampere_sgemm_128x64_tn", 0, 10_000, 5 * MS)
    return write_chrome_trace(sc, tmp_path / "plain.pt.trace.json.gz")


def test_vllm_result_read_as_the_client_measured(tmp_path: Path) -> None:
    run = load_bench_results(write_vllm(tmp_path / "vllm.json", vllm_result()))
    assert run.tool == "vllm bench serve" and run.duration_ns == 2 * S and run.notes == []
    r0, r1, r2, r3 = run.requests
    assert r0.ok and r0.ttft_ns == pytest.approx(0.10 * S)
    assert r0.e2e_ns == pytest.approx(0.19 * S) and r0.tpot_ns == pytest.approx(0.03 * S)
    assert r1.tpot_ns == pytest.approx(0.05 * S) and r1.e2e_ns == pytest.approx(0.40 * S)
    assert r2.tpot_ns is None and r2.e2e_ns == pytest.approx(0.15 * S)
    assert not r3.ok and r3.ttft_ns is None
    c = client_summary(run)
    assert (c["requests"], c["completed"], c["failed"], c["output_tokens"]) == (4, 3, 1, 8)
    # TTFT over 0.10, 0.15, 0.30 s: p90 at rank 1.8 = 0.15 + 0.8 * 0.15 = 0.27 s
    assert c["ttft_ns"]["count"] == 3
    assert c["ttft_ns"]["mean"] == pytest.approx(0.55 / 3 * S)
    assert c["ttft_ns"]["p50"] == pytest.approx(0.15 * S)
    assert c["ttft_ns"]["p90"] == pytest.approx(0.27 * S)
    assert c["ttft_ns"]["max"] == pytest.approx(0.30 * S)
    assert c["tpot_ns"]["count"] == 2 and c["tpot_ns"]["mean"] == pytest.approx(0.04 * S)
    # ITL pooled over 0.02 0.03 0.04 0.05 0.05
    assert c["itl_ns"]["count"] == 5 and c["itl_ns"]["mean"] == pytest.approx(0.038 * S)
    assert c["itl_ns"]["p50"] == pytest.approx(0.04 * S)
    assert c["e2e_ns"]["mean"] == pytest.approx(0.74 / 3 * S)
    # vLLM's own: completed / duration and all output tokens / duration
    assert c["requests_per_s"] == pytest.approx(1.5) and c["output_tokens_per_s"] == 4.0


def test_vllm_goodput_as_vllm_defines_it(
    runner: CliRunner, plain_trace: Path, tmp_path: Path
) -> None:
    """ttft=200ms,tpot=40ms: r0 and r2 are good (r2's one token counts as TPOT 0), r1 misses
    both, failed r3 meets none. vLLM's request_goodput would be 2 / 2 s = 1.0."""
    bench = write_vllm(tmp_path / "vllm.json", vllm_result())
    r = analyze_json(runner, plain_trace, "--bench", str(bench), "--slo", "ttft=200ms,tpot=40ms")
    llm = r["llm"]
    assert set(llm) == {"client", "slo"}  # no annotations: only the client's view
    assert llm["client"]["tool"] == "vllm bench serve"
    slo = llm["slo"]
    assert slo["applies_to"] == "client"
    assert (slo["requests"], slo["judged"], slo["failed"]) == (4, 4, 1)
    assert slo["attainment_pct"] == {"ttft": 50.0, "tpot": 50.0, "all": 50.0}
    assert slo["missed"] == {"ttft": 2, "tpot": 2}
    assert slo["good_requests"] == 2 and slo["good_output_tokens"] == 5
    assert slo["goodput_requests_per_s"] == pytest.approx(1.0)
    assert slo["goodput_output_tokens_per_s"] == pytest.approx(2.5)
    assert slo["worst_objective"] == "ttft"  # tied with tpot: the first listed
    cause = slo["cause"]
    assert cause["phase"] is None and "no llm.request/llm.prefill annotations" in cause["text"]
    assert cause["basis"] == "the client's 1 request that misses it"
    (f,) = [f for f in r["findings"] if f["analyzer"] == "llm_slo"]
    # r1 misses TTFT by 0.1 s; over the 4 judged requests, 25 ms each, at most the 5 ms window
    assert f["evidence"]["excess_ns"] == pytest.approx(0.1 * S)
    assert f["impact_ns"] == 5 * MS
    assert f["time_ranges"] == []
    assert "tracelens.annotate" in f["advice"]
    assert "failed and meet none" in f["summary"]


def test_sglang_jsonl_uses_the_last_detailed_line(
    runner: CliRunner, plain_trace: Path, tmp_path: Path
) -> None:
    """Two appended runs, a later summary-only one: the detailed line is used and said.

    itl=45ms,e2e=300ms: r0 (longest gap 40 ms, e2e 190 ms) and r2 (no gap, 150 ms) meet
    both; r1 (50 ms gaps, e2e 400 ms) misses both; r3 failed.
    """
    first = sglang_line() | {
        "duration": 9.0,
        "ttfts": [9.0],
        "itls": [[]],
        "output_lens": [1],
        "errors": [""],
        "input_lens": [1],
        "generated_texts": ["x"],
    }
    bench = write_sglang(tmp_path / "sglang.jsonl", first, sglang_line(), sglang_line(False))
    r = analyze_json(runner, plain_trace, "--bench", str(bench), "--slo", "itl=45ms,e2e=300ms")
    assert r["llm"]["client"]["tool"] == "sglang bench_serving"
    assert r["llm"]["client"]["duration_ns"] == 2 * S
    slo = r["llm"]["slo"]
    assert slo["attainment_pct"] == {"itl": 50.0, "e2e": 50.0, "all": 50.0}
    assert slo["good_requests"] == 2
    assert slo["goodput_output_tokens_per_s"] == pytest.approx(2.5)
    assert any("holds 3 benchmark results; the one on line 2" in n for n in r["notes"])
    # e2e without annotations: TTFT against decode of r1 (0.30 s vs 0.10 s)
    slo_e2e = analyze_json(runner, plain_trace, "--bench", str(bench), "--slo", "e2e=300ms")
    slo_e2e = slo_e2e["llm"]["slo"]
    assert slo_e2e["cause"]["ttft_ns"] == pytest.approx(0.30 * S)
    assert slo_e2e["cause"]["decode_ns"] == pytest.approx(0.10 * S)
    assert slo_e2e["cause"]["phase"] is None


def test_client_requests_are_explained_by_the_traces_phases(
    runner: CliRunner, tmp_path: Path
) -> None:
    """With an annotated trace, the client's TTFT misses are explained by the trace's own
    requests that miss the same objective: here one that queued 150 of its 250 ms."""
    sc = Scenario("llm_queued")
    sc.range("llm.request[a]", 0, 300 * MS)
    sc.range("llm.prefill[a]", 150 * MS, 100 * MS)
    sc.range("llm.decode[a]", 250 * MS, 10 * MS)
    trace = write_chrome_trace(sc, tmp_path / "serve.pt.trace.json.gz")
    bench = write_vllm(tmp_path / "vllm.json", vllm_result())
    r = analyze_json(runner, trace, "--bench", str(bench), "--slo", "ttft=200ms")
    assert r["llm"]["requests"] == 1  # the trace's own view stays
    slo = r["llm"]["slo"]
    assert slo["applies_to"] == "client" and slo["attainment_pct"]["ttft"] == 50.0
    cause = slo["cause"]
    assert cause["basis"] == "the trace's 1 annotated request that misses it too"
    assert (cause["queue_ns"], cause["prefill_ns"]) == (150 * MS, 100 * MS)
    assert cause["phase"] == "queueing"


def test_bench_without_slo_and_every_format(
    runner: CliRunner, plain_trace: Path, tmp_path: Path
) -> None:
    bench = str(write_vllm(tmp_path / "vllm.json", vllm_result()))
    r = analyze_json(runner, plain_trace, "--bench", bench)
    assert set(r["llm"]) == {"client"}
    assert not [f for f in r["findings"] if f["analyzer"] == "llm_slo"]
    args = ["analyze", str(plain_trace), "--bench", bench, "--slo", "ttft=200ms,tpot=40ms"]
    for fmt, markers in (
        (
            "text",
            [
                "client side (vllm bench serve",
                "SLO attainment (the client's 4 requests)",
                "all objectives",
                "goodput 1.00 requests/s, 2.50 output tokens/s",
            ],
        ),
        (
            "markdown",
            [
                "## LLM serving latency, client side",
                "| TTFT | ≤ 200 ms | 50.0% | 2 |",
                "| all objectives |  | 50.0% | 2 |",
                "TTFT fails most.",
            ],
        ),
        ("html", ['data-subsection="client"', 'data-subsection="slo"', "≤ 200 ms"]),
    ):
        res = runner.invoke(main, [*args, "--format", fmt])
        assert res.exit_code == 0, res.output
        for m in markers:
            assert m in res.stdout, (fmt, m)
        assert "(from llm.* annotations)" not in res.stdout


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _bad(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda d: d / "missing.json", "no such file"),
        (lambda d: _bad(d, "x.json", "{not json\nat all"), "not JSON or JSON lines"),
        (lambda d: _bad(d, "s.json", json.dumps(vllm_result(False))), "no per-request results"),
        (
            lambda d: _bad(d, "n.json", json.dumps(vllm_result() | {"itls": [[]]})),
            "per-request lists differ in length",
        ),
        (
            lambda d: _bad(d, "d.json", json.dumps(vllm_result() | {"duration": 0})),
            "no positive 'duration'",
        ),
        (
            lambda d: _bad(d, "t.json", json.dumps(vllm_result() | {"ttfts": ["a", 1, 1, 1]})),
            "request 0: ttft/itls are not numbers",
        ),
        (
            lambda d: _bad(
                d,
                "e.json",
                json.dumps(
                    vllm_result() | {k: [] for k in ("ttfts", "itls", "output_lens", "errors")}
                ),
            ),
            "the result lists no requests",
        ),
    ],
)
def test_bad_bench_files_are_refused_by_name(tmp_path: Path, make: Any, says: str) -> None:
    path = make(tmp_path)
    with pytest.raises(BenchInputError, match=says) as exc:
        load_bench_results(path)
    assert str(exc.value).startswith(str(path)) and "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--slo", "ttft=fast"], "--slo 'ttft=fast': ttft: expected a duration"),
        (["--slo", "goodput=3"], "unknown objective 'goodput'"),
        (["--bench", "nope.json"], "--bench nope.json: no such file"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    tmp_path: Path, plain_trace: Path, extra: list[str], says: str
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tracelens.cli", "analyze", str(plain_trace), *extra],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and says in lines[0], proc.stderr
