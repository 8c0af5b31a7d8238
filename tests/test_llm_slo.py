"""SLO attainment and goodput of a trace's annotated requests, with hand-computed answers.

Each planted trace goes through both writers (Chrome trace, Nsight SQLite export) and the
real ingest; objectives are judged as vLLM's benchmark judges them (``value <= bound``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ingest import load_trace
from tracelens.core.thresholds import Thresholds
from tracelens.llm.slo import Objectives, parse_slo
from tracelens.report import ReportInputs, build_report
from tracelens.testing import Scenario, write_chrome_trace
from tracelens.testing.nsys_writer import write_nsys_sqlite
from tracelens.testing.planted_llm import static_launch_bound

US = 1_000
MS = 1_000_000

WRITERS: dict[str, Callable[[Scenario, Path], Path]] = {
    "chrome": lambda sc, d: write_chrome_trace(sc, d / "t.pt.trace.json.gz"),
    "nsys": lambda sc, d: write_nsys_sqlite(sc, d / "t.sqlite"),
}


@pytest.fixture(params=sorted(WRITERS))
def report_of(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., dict]:
    writer = WRITERS[request.param]

    def run(sc: Scenario, slo: str | None, thresholds: Thresholds | None = None) -> dict:
        loaded = load_trace(writer(sc, tmp_path))
        try:
            inputs = ReportInputs(slo=parse_slo(slo) if slo else None)
            return build_report(loaded, thresholds, inputs=inputs)
        finally:
            loaded.close()

    return run


def slo_findings(report: dict) -> list[dict]:
    return [f for f in report["findings"] if f["analyzer"] == "llm_slo"]


def test_parse_slo_units_aliases_and_canonical_text() -> None:
    o = parse_slo("ttft=200ms, tpot:50ms,itl=0.1s,e2el=2500000us")
    assert o == Objectives(ttft_ns=200 * MS, tpot_ns=50 * MS, itl_ns=100 * MS, e2e_ns=2500 * MS)
    assert o.spec() == "ttft=200ms,tpot=50ms,itl=100ms,e2e=2500ms"
    assert parse_slo(o.spec()) == o
    # a bare number is milliseconds, as in vLLM's --goodput
    assert parse_slo("ttft=150") == Objectives(ttft_ns=150 * MS)
    assert parse_slo("e2e=1.5s").spec() == "e2e=1500ms"
    assert parse_slo("itl=1500ns").spec() == "itl=1500ns"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no objective"),
        ("ttft", "expected NAME=VALUE"),
        ("latency=1ms", "unknown objective 'latency'"),
        ("ttft=fast", "expected a duration"),
        ("ttft=5min", "expected a duration"),
        ("ttft=0ms", "positive"),
        ("ttft=-3ms", "expected a duration"),
        ("ttft=1ms,ttft=2ms", "given twice"),
    ],
)
def test_parse_slo_refuses_with_the_reason(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_slo(text)


def test_static_batching_misses_ttft_by_queueing(report_of: Callable[..., dict]) -> None:
    """Batch 2 (q4-q7) waits 10 ms and prefills 2 ms: TTFT 12 ms > 5 ms; batch 1 meets it.

    TPOT is 1 ms for every request, exactly the bound (met). Good: q0-q3 with 3+5+7+9 = 24
    output tokens, over the 13 ms span from the first request start to the last token.
    """
    r = report_of(static_launch_bound(), "ttft=5ms,tpot=1ms")
    slo = r["llm"]["slo"]
    assert slo["applies_to"] == "trace"
    assert slo["objectives"] == {"ttft_ns": 5 * MS, "tpot_ns": 1 * MS}
    assert (slo["requests"], slo["judged"], slo["unjudged"], slo["failed"]) == (8, 8, 0, 0)
    assert slo["attainment_pct"] == {"ttft": 50.0, "tpot": 100.0, "all": 50.0}
    assert slo["missed"] == {"ttft": 4, "tpot": 0}
    assert slo["good_requests"] == 4 and slo["good_output_tokens"] == 24
    assert slo["duration_ns"] == 13 * MS
    assert slo["goodput_requests_per_s"] == pytest.approx(4 / 0.013)
    assert slo["goodput_output_tokens_per_s"] == pytest.approx(24 / 0.013)
    assert slo["worst_objective"] == "ttft"
    cause = slo["cause"]
    assert cause["phase"] == "queueing"
    assert cause["queue_ns"] == 4 * 10 * MS and cause["prefill_ns"] == 4 * 2 * MS
    assert cause["basis"] == "the 4 requests that miss it"

    (f,) = slo_findings(r)
    # each of the 4 misses TTFT by 12 - 5 = 7 ms: 28 ms over 8 judged requests
    assert f["impact_ns"] == 3_500_000
    assert f["evidence"]["excess_ns"] == pytest.approx(28 * MS)
    assert f["title"].startswith("SLO attainment 50% (target 90%): TTFT ≤ 5 ms fails most")
    assert f["title"].endswith("mostly queueing")
    assert "continuous batching" in f["advice"]
    assert {tr["label"] for tr in f["time_ranges"]} == {f"q{i} misses ttft" for i in range(4, 8)}
    assert {w["rid"] for w in f["evidence"]["worst_requests"]} == {"q4", "q5", "q6", "q7"}


def itl_spikes() -> Scenario:
    """Continuous batching where b's prefill freezes a's decode.

    a: request 0-10 ms, prefill[a] 2-4, decode[a] 4-5, prefill[b] 5-6, decode[a,b] 6-6.5,
    decode[a] 6.5-7: tokens of a at 4, 5, 6.5, 7 ms (gaps 1, 1.5, 0.5 ms; TPOT 1 ms), b's
    at 6 and 6.5 ms (gap 0.5 ms); b's request 1-8 ms. a's 5-6.5 ms gap holds b's whole
    1 ms prefill.
    """
    sc = Scenario("llm_itl_spikes")
    sc.range("llm.request[a]", 0, 10 * MS)
    sc.range("llm.request[b]", 1 * MS, 7 * MS)
    sc.range("llm.prefill[a]", 2 * MS, 2 * MS)
    sc.range("llm.decode[a]", 4 * MS, 1 * MS)
    sc.range("llm.prefill[b]", 5 * MS, 1 * MS)
    sc.range("llm.decode[a,b]", 6 * MS, 500 * US)
    sc.range("llm.decode[a]", 6500 * US, 500 * US)
    return sc


def test_itl_objective_judges_every_gap_and_blames_prefill_stalls(
    report_of: Callable[..., dict],
) -> None:
    """a's longest gap (1.5 ms) breaks itl=1.2ms though its TPOT (1 ms) meets tpot=1ms."""
    r = report_of(itl_spikes(), "tpot=1ms,itl=1.2ms,e2e=9ms")
    slo = r["llm"]["slo"]
    # a: TPOT 1 ms met, ITL 1.5 ms missed, e2e 10 ms missed; b: all met (0.5, 0.5, 7 ms)
    assert slo["attainment_pct"] == {"tpot": 100.0, "itl": 50.0, "e2e": 50.0, "all": 50.0}
    assert slo["missed"] == {"tpot": 0, "itl": 1, "e2e": 1}
    assert slo["good_requests"] == 1 and slo["good_output_tokens"] == 2
    assert slo["duration_ns"] == 7 * MS
    assert slo["goodput_requests_per_s"] == pytest.approx(1 / 0.007)
    # a tie between itl and e2e goes to the one listed first (ttft, tpot, itl, e2e)
    assert slo["worst_objective"] == "itl"
    cause = slo["cause"]
    assert cause["phase"] == "decode"
    assert cause["decode_ns"] == 3 * MS  # a's first to last token: 4 -> 7 ms
    assert cause["decode_stalled_ns"] == 1 * MS  # b's prefill inside a's 5 -> 6.5 ms gap
    assert "33% of it" in cause["text"]
    (f,) = slo_findings(r)
    assert f["impact_ns"] == 150 * US  # a's gap exceeds 1.2 ms by 0.3 ms; 2 judged requests
    (tr,) = f["time_ranges"]
    assert tr["label"] == "a misses itl" and tr["end_ns"] - tr["start_ns"] == 10 * MS
    assert "chunked prefill" in f["advice"]


def test_e2e_cause_is_the_largest_phase(report_of: Callable[..., dict]) -> None:
    """a misses e2e=9ms: queueing 2 ms, prefill 2 ms, decode 3 ms of its time: decode."""
    slo = report_of(itl_spikes(), "e2e=9ms")["llm"]["slo"]
    cause = slo["cause"]
    assert (cause["queue_ns"], cause["prefill_ns"], cause["decode_ns"]) == (2 * MS, 2 * MS, 3 * MS)
    assert cause["phase"] == "decode"


def test_all_met_means_no_finding_and_no_cause(report_of: Callable[..., dict]) -> None:
    r = report_of(static_launch_bound(), "ttft=12ms,tpot=1ms,e2e=13ms")
    slo = r["llm"]["slo"]
    assert slo["attainment_pct"]["all"] == 100.0
    assert slo["worst_objective"] is None and slo["cause"] is None
    assert slo_findings(r) == []


def test_the_attainment_target_is_a_threshold(report_of: Callable[..., dict]) -> None:
    t = Thresholds.with_overrides({"llm_slo_min_attainment_pct": "50"})
    r = report_of(static_launch_bound(), "ttft=5ms", t)
    assert r["llm"]["slo"]["attainment_pct"]["all"] == 50.0
    assert slo_findings(r) == []  # 50% is not below a 50% target


def test_requests_without_a_value_are_left_out_and_said(report_of: Callable[..., dict]) -> None:
    """c has steps but no request range: no TTFT, so a TTFT objective cannot judge it."""
    sc = Scenario("llm_partial")
    sc.range("llm.request[a]", 0, 5 * MS)
    sc.range("llm.prefill[a]", 0, 1 * MS)
    sc.range("llm.prefill[c]", 1 * MS, 1 * MS)
    sc.range("llm.decode[a,c]", 2 * MS, 1 * MS)
    r = report_of(sc, "ttft=2ms")
    slo = r["llm"]["slo"]
    assert (slo["requests"], slo["judged"], slo["unjudged"]) == (2, 1, 1)
    assert slo["attainment_pct"] == {"ttft": 100.0, "all": 100.0}
    assert any("1 of the trace's requests have no value" in n for n in r["notes"])
    # TPOT needs no request range: both are judged
    assert report_of(sc, "tpot=2ms")["llm"]["slo"]["judged"] == 2


def test_slo_without_requests_to_judge_is_a_note(report_of: Callable[..., dict]) -> None:
    sc = Scenario("no_llm")
    sc.launch(None, "ampere_sgemm_128x64_tn", 0, 10 * US, 1 * MS)
    r = report_of(sc, "ttft=200ms")
    assert "llm" not in r
    assert any(n.startswith("--slo ttft=200ms: nothing to judge") for n in r["notes"])
