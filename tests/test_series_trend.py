"""The pure parts of a series: bands, change points against outliers, limits, and the
recording time a series is ordered by."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tracelens.core.recorded_at import recorded_at_ns
from tracelens.series.limits import Limit, limits_spec, parse_limits
from tracelens.series.metrics import run_metrics
from tracelens.series.trend import MIN_BASELINE, band_of, judge

LEVEL = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8]


def test_a_sustained_move_is_one_change_point_and_a_spike_an_outlier() -> None:
    values: list[float | None] = [*LEVEL[:5], 130.0, *LEVEL[5:], 120.0, 121.0, 119.5, 120.5]
    kinds = [j.kind for j in judge(values, window=10)]
    assert kinds[:MIN_BASELINE] == [None] * MIN_BASELINE  # too few runs before for a band
    assert kinds[5] == "outlier"
    assert kinds[9] == "change" and kinds[10:] == ["shifted"] * 3
    assert kinds.count("change") == 1 and kinds.count("outlier") == 1


def test_a_move_down_a_missing_value_and_the_latest_run() -> None:
    values: list[float | None] = [*LEVEL, None, 80.0]
    judged = judge(values)
    assert [j.index for j in judged] == [*range(len(LEVEL)), len(LEVEL) + 1]
    last = judged[-1]
    assert last.side == -1 and last.kind == "pending"  # the next run will tell
    assert judge([*LEVEL, 80.0, 80.5])[-2].kind == "change"
    assert judge([*LEVEL, 80.0, 100.1])[-2].kind == "outlier"
    with pytest.raises(ValueError, match="window"):
        judge(LEVEL, window=2)


def test_the_band_is_robust_and_never_zero_wide() -> None:
    band = band_of([100.0, 100.0, 100.0, 100.0])
    assert band is not None and band.low == 99.0 and band.high == 101.0  # ±1 % floor
    wild = band_of([100.0, 101.0, 99.0, 100.0, 10_000.0])
    assert wild is not None and wild.median == 100.0 and wild.high < 105.0
    assert band_of([1.0, 2.0]) is None


def test_limits_parse_to_a_canonical_text() -> None:
    limits = parse_limits("ttft_p95=+10%, busy=5pt,tokens_per_s=3%")
    assert limits == [
        Limit("ttft_p95", 1, 10.0, "%"),
        Limit("busy", -1, 5.0, "pt"),  # without a sign: the worse direction
        Limit("tokens_per_s", -1, 3.0, "%"),
    ]
    assert limits_spec(limits) == "ttft_p95=+10%,busy=-5pt,tokens_per_s=-3%"
    assert limits_spec(parse_limits("")) is None
    step = parse_limits("step=+10%")[0]
    assert step.bound(200.0) == pytest.approx(220.0)
    assert step.broken_by(221.0, 200.0) and not step.broken_by(219.0, 200.0)
    busy = parse_limits("busy=-5pt")[0]
    assert busy.broken_by(79.0, 85.0) and not busy.broken_by(81.0, 85.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ttft=+10%", "unknown metric 'ttft'"),
        ("step=+10pt", "points (pt) apply to percentages only"),
        ("step=10", "METRIC=[+|-]NUMBER(%|pt)"),
        ("step=+1%,step=+2%", "limited twice"),
    ],
)
def test_bad_limits_say_which_item(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_limits(text)


def test_recording_time_from_each_clock() -> None:
    epoch_t0 = 1_712_195_495_505_583_000
    assert recorded_at_ns({}, epoch_t0) == epoch_t0  # Kineto's epoch microseconds
    assert (
        recorded_at_ns({"base_time_ns": "1700000000000000000"}, 5_000) == 1_700_000_000_000_005_000
    )
    nsys = {"session_start_utc": "2023-07-30T09:30:32"}
    assert recorded_at_ns(nsys, 1_000) == 1_690_709_432_000_001_000
    assert recorded_at_ns({"session_start_utc": "not a time"}, 1_000) is None
    assert recorded_at_ns({}, 1_000) is None


def test_run_metrics_read_the_llm_latencies(tmp_path: Path) -> None:
    from ingest import load_trace
    from tracelens.llm.slo import parse_slo
    from tracelens.report import ReportInputs, build_report
    from tracelens.testing import write_chrome_trace
    from tracelens.testing.planted_llm import static_launch_bound

    path = write_chrome_trace(static_launch_bound(), tmp_path / "serve.pt.trace.json.gz")
    report = build_report(load_trace(path))
    m = run_metrics(report)
    llm = report["llm"]
    assert m["ttft_p50"] == llm["ttft_ns"]["p50"] and m["ttft_p95"] == llm["ttft_ns"]["p95"]
    assert m["itl_p95"] == llm["itl_ns"]["p95"] and m["tpot_p95"] == llm["tpot_ns"]["p95"]
    assert m["tokens_per_s"] == llm["output_tokens_per_s"] and m["goodput"] is None
    assert m["busy"] == report["metrics"]["gpu_busy_pct"]
    assert m["top_impact"] == report["findings"][0]["impact_pct"]
    judged = build_report(load_trace(path), inputs=ReportInputs(slo=parse_slo("ttft=10s")))
    goodput = judged["llm"]["slo"]["goodput_output_tokens_per_s"]
    assert goodput and run_metrics(judged)["goodput"] == goodput
