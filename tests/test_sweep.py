"""`tracelens sweep`: runs at rising concurrency, p95 TTFT against throughput, the knee.

Each run's client results are written here in `vllm bench serve --save-result
--save-detailed` format with planted numbers: every request of a run has the same TTFT
and inter-token gap, so p50 = p95 = that value, and output tokens/s is the run's 40 output
tokens over its duration:

| run | concurrency | TTFT  | TPOT  | tok/s | TTFT × / tok/s × to the next run |
|-----|-------------|-------|-------|-------|----------------------------------|
| c1  | 1           | 50 ms | 10 ms | 100   | 1.10 / 4.50                      |
| c5  | 5           | 55 ms | 12 ms | 450   | 1.27 / 1.78                      |
| c10 | 10          | 70 ms | 20 ms | 800   | 10.0 / 1.50  <- the knee         |
| c50 | 50          | 700ms | 30 ms | 1200  |                                  |
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracelens.cli import main
from tracelens.llm.bench_results import client_summary, load_bench_results
from tracelens.llm.slo import parse_slo
from tracelens.report.sweep import SweepInputError, build_sweep
from tracelens.testing import Scenario, write_chrome_trace

MS = 1_000_000
REQUESTS = 4
TOKENS = 10
# concurrency -> (TTFT s, inter-token gap s, output tokens/s)
PLANTED = {1: (0.050, 0.010, 100.0), 5: (0.055, 0.012, 450.0), 10: (0.070, 0.020, 800.0)}
PLANTED[50] = (0.700, 0.030, 1200.0)


def vllm_result(concurrency: int) -> dict[str, Any]:
    ttft, gap, tokens_per_s = PLANTED[concurrency]
    return {
        "date": "20250601-120000",
        "endpoint_type": "vllm",
        "backend": "vllm",
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": REQUESTS,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": concurrency,
        "duration": REQUESTS * TOKENS / tokens_per_s,
        "completed": REQUESTS,
        "input_lens": [32] * REQUESTS,
        "output_lens": [TOKENS] * REQUESTS,
        "ttfts": [ttft] * REQUESTS,
        "itls": [[gap] * (TOKENS - 1) for _ in range(REQUESTS)],
        "generated_texts": ["x"] * REQUESTS,
        "errors": [""] * REQUESTS,
    }


@pytest.fixture
def results(tmp_path: Path) -> dict[int, Path]:
    out = {}
    for c in PLANTED:
        path = tmp_path / f"bench-c{c}.json"
        path.write_text(json.dumps(vllm_result(c)), encoding="utf-8")
        out[c] = path
    return out


@pytest.fixture
def traces(tmp_path: Path) -> dict[int, Path]:
    """One plain trace per run: the client's results carry the latencies."""
    out = {}
    for c in PLANTED:
        sc = Scenario(f"serve_c{c}")
        sc.launch(None, "ampere_sgemm_128x64_tn", 0, 10_000, 5 * MS)
        out[c] = write_chrome_trace(sc, tmp_path / f"c{c}.pt.trace.json.gz")
    return out


def client_reports(results: dict[int, Path], order: list[int]) -> list[tuple[str, dict]]:
    return [
        (f"c{c}", {"llm": {"client": client_summary(load_bench_results(results[c]))}})
        for c in order
    ]


def test_knee_is_where_ttft_outgrows_throughput(results: dict[int, Path]) -> None:
    d = build_sweep(client_reports(results, [50, 1, 10, 5]))
    assert d["order"] == "param"
    assert [r["label"] for r in d["runs"]] == ["c1", "c5", "c10", "c50"]
    assert [r["param"] for r in d["runs"]] == [1, 5, 10, 50]
    assert {r["param_source"] for r in d["runs"]} == {"max_concurrency"}
    c10 = d["runs"][2]
    assert c10["ttft_p95_ns"] == pytest.approx(70 * MS)
    assert c10["tpot_p50_ns"] == pytest.approx(20 * MS)
    assert c10["output_tokens_per_s"] == pytest.approx(800.0)
    assert c10["ttft_growth"] == pytest.approx(10.0)
    assert c10["throughput_growth"] == pytest.approx(1.5)
    assert d["runs"][1]["ttft_growth"] < d["runs"][1]["throughput_growth"]
    assert d["runs"][3]["ttft_growth"] is None
    assert d["knee"] == "c10"
    assert d["best"] is None


def test_best_run_is_the_fastest_whose_p95_meets_every_objective(
    results: dict[int, Path],
) -> None:
    reports = client_reports(results, [1, 5, 10, 50])
    assert build_sweep(reports, objectives=parse_slo("ttft=100ms"))["best"] == "c10"
    # TPOT 20 ms at c10 misses 15 ms: c5 is the fastest that meets both
    both = build_sweep(reports, objectives=parse_slo("ttft=100ms,tpot=15ms"))
    assert both["best"] == "c5"
    assert [r["meets_slo"] for r in both["runs"]] == [True, True, False, False]
    assert build_sweep(reports, objectives=parse_slo("ttft=10ms"))["best"] is None


def test_no_knee_while_throughput_keeps_pace(results: dict[int, Path]) -> None:
    reports = client_reports(results, [1, 5, 10])
    assert build_sweep(reports)["knee"] is None


def test_explicit_param_orders_runs_and_unknown_names_are_refused(
    results: dict[int, Path],
) -> None:
    reports = [
        (label, {"llm": {"client": {**r["llm"]["client"], "max_concurrency": None}}})
        for label, r in client_reports(results, [1, 5, 10, 50])
    ]
    # without a parameter the runs fall back to throughput order, which here is the same
    assert build_sweep(reports)["order"] == "throughput"
    d = build_sweep(reports, {"c1": 64, "c5": 32, "c10": 16, "c50": 8})
    assert d["order"] == "param"
    assert [r["label"] for r in d["runs"]] == ["c50", "c10", "c5", "c1"]
    with pytest.raises(SweepInputError, match="names no run: c7"):
        build_sweep(reports, {"c7": 4})
    with pytest.raises(SweepInputError, match="at least two runs"):
        build_sweep(reports[:1])


def test_cli_sweeps_traces_with_results_and_saved_reports(
    tmp_path: Path, traces: dict[int, Path], results: dict[int, Path]
) -> None:
    runner = CliRunner()
    saved = tmp_path / "c50.json"
    res = runner.invoke(
        main,
        [
            "analyze",
            str(traces[50]),
            "--bench",
            str(results[50]),
            "--format",
            "json",
            "-o",
            str(saved),
        ],
    )
    assert res.exit_code == 0, res.output
    runs = [f"{traces[c]}={results[c]}" for c in (10, 1, 5)] + [str(saved)]
    res = runner.invoke(main, ["sweep", *runs, "--slo", "ttft=100ms", "--format", "json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert [r["label"] for r in d["runs"]] == [
        "c1.pt.trace.json.gz",
        "c5.pt.trace.json.gz",
        "c10.pt.trace.json.gz",
        "c50.json",
    ]
    assert d["knee"] == "c10.pt.trace.json.gz"
    assert d["best"] == "c10.pt.trace.json.gz"
    assert {r["latency_source"] for r in d["runs"]} == {"client"}

    res = runner.invoke(main, ["sweep", *runs, "--slo", "ttft=100ms"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "knee: c10.pt.trace.json.gz" in res.stdout
    assert "best run c10.pt.trace.json.gz" in res.stdout
    row = next(line for line in res.stdout.splitlines() if "c50.json" in line)
    assert "700 ms" in row and "50 concurrent" in row and "misses SLO" in row


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["{c1}"], "at least two runs"),
        (["{c1}={missing}", "{c5}"], "no such results file"),
        (["{c1}", "{c5}", "--param", "c1=fast"], "expected RUN=VALUE"),
        (["{c1}", "{c5}", "--slo", "ttft=soon"], "--slo"),
        (["{c1}", "{missing}"], "no such file"),
    ],
)
def test_cli_refuses_with_one_line(
    tmp_path: Path, traces: dict[int, Path], args: list[str], says: str
) -> None:
    names = {"c1": traces[1], "c5": traces[5], "missing": tmp_path / "nope.json"}
    res = CliRunner().invoke(main, ["sweep", *(a.format(**names) for a in args)])
    assert res.exit_code == 2
    assert says in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
