"""--window / --steps / --range: the analysis of a part of a trace, on planted traces whose
every number is known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import tracelens
from tracelens.api.trace import Trace
from tracelens.cli import main
from tracelens.core.restriction import Restriction, RestrictionError, parse_duration
from tracelens.testing import write_chrome_trace
from tracelens.testing.planted import STEP_NS, US
from tracelens.testing.planted_warmup import jit_capture

MS = 1_000_000


def _by_analyzer(t: Trace, analyzer: str) -> int:
    return sum(f.impact_ns for f in t.findings if f.analyzer == analyzer)


def test_steps_keep_the_work_those_steps_issued(trace: Trace) -> None:
    part = trace.restrict(steps="2:5")
    assert part.kernels.height == 3 * 22
    assert part.memcpys.height == 3
    assert part.steps["step_no"].to_list() == [2, 3, 4]
    # The window runs from step 2's copy to step 4's optimizer kernel.
    assert part.db.window_ns == 3 * STEP_NS - 2_050 * US
    assert any("profiler steps 2:5" in n for n in part.report()["notes"])


def test_steps_change_the_findings_by_the_planted_amounts(trace: Trace) -> None:
    part = trace.restrict(steps="2:5")
    # Whole trace: a 2,050 us data-loading gap before every step's copy but the first,
    # and a 1,030 us host-compute gap in each step.
    assert _by_analyzer(trace, "data_loading") == 9 * 2_050 * US
    # In steps 2-4 the gap before step 2's copy is before the window: two remain.
    assert _by_analyzer(part, "data_loading") == 2 * 2_050 * US
    idle = [f for f in part.findings if f.analyzer == "idle_gpu"]
    assert [f.impact_ns for f in idle] == [3 * 1_030 * US]
    variance = [f for f in part.findings if f.analyzer == "variance"]
    assert [f.impact_ns for f in variance] == [3 * 2 * 90 * US]
    # Shares are of the part's window, not the whole trace's.
    loader = next(f for f in part.findings if f.analyzer == "data_loading")
    assert loader.impact_pct == pytest.approx(100 * 2 * 2_050 * US / part.db.window_ns)


def test_one_step_is_the_instances_of_its_range(trace: Trace) -> None:
    by_steps = trace.restrict(steps="3")
    by_range = trace.restrict(range="ProfilerStep#3@user_annotation")
    assert [(f.id, f.impact_ns) for f in by_steps.findings] == [
        (f.id, f.impact_ns) for f in by_range.findings
    ]
    assert by_range.kernels.height == 22


def test_a_range_with_many_instances_keeps_each(trace: Trace) -> None:
    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    part = trace.restrict(range=loader)
    # Only the loader ranges: no kernel is issued while the loader runs.
    assert part.kernels.height == 0
    assert part.ranges.filter(part.ranges["name"] == loader).height == 10
    assert not [f for f in part.findings if f.analyzer == "data_loading"]


def test_a_window_is_offsets_from_the_first_gpu_activity(trace: Trace) -> None:
    t0 = trace.db.window[0]
    # Step k's copy is issued at k * STEP_NS + 2,010 us, i.e. (k * 9 - 0.04) ms after t0.
    part = trace.restrict(window="8.9ms:26.9ms")
    assert part.memcpys.height == 2  # steps 1 and 2
    same = trace.window(t0 + 8_900_000, t0 + 26_900_000)
    # Rows come out of the copy's joins in no particular order.
    assert same.memcpys.sort("start_ns").equals(part.memcpys.sort("start_ns"))
    assert [f.id for f in same.findings] == [f.id for f in part.findings]


def test_leaving_out_the_warmup_removes_the_warmup_finding(tmp_path: Path) -> None:
    path = tmp_path / "jit.pt.trace.json.gz"
    write_chrome_trace(jit_capture(), path)
    with tracelens.load(path) as whole:
        assert whole.findings[0].analyzer == "warmup"
        steady = whole.restrict(window="300ms:")
        assert not [f for f in steady.findings if f.analyzer == "warmup"]
        assert steady.kernels.height == 8
        # Eight 1 ms kernels every 2 ms: 15 ms from the first start to the last end.
        assert steady.db.window_ns == 15 * MS


def test_restrictions_that_select_nothing_say_what_the_trace_has(trace: Trace) -> None:
    with pytest.raises(RestrictionError, match="steps 0 to 9"):
        trace.restrict(steps="40:50")
    with pytest.raises(RestrictionError, match="no range named"):
        trace.restrict(range="nope@nvtx")
    with pytest.raises(RestrictionError, match="starts after the trace ends"):
        trace.restrict(window="5s:")


@pytest.mark.parametrize(
    ("kind", "spec"),
    [("window", "5:1"), ("window", "1x:2"), ("window", "12"), ("steps", "a:b"), ("steps", "5:5")],
)
def test_malformed_restrictions_fail_before_reading(kind: str, spec: str) -> None:
    with pytest.raises(RestrictionError):
        Restriction(kind, spec)  # type: ignore[arg-type]


def test_durations_take_units() -> None:
    assert [parse_duration(s) for s in ("1500", "1.5us", "2ms", "0.5s", "3µs")] == [
        1500,
        1500,
        2 * MS,
        500 * MS,
        3000,
    ]


def test_analyze_cli_restricts_and_reports_it(planted_path: Path) -> None:
    runner = CliRunner()
    out = runner.invoke(main, ["analyze", str(planted_path), "--steps", "2:5", "--format", "json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    assert report["metrics"]["kernel_count"] == 66
    assert any("profiler steps 2:5" in n for n in report["notes"])
    bad = runner.invoke(main, ["analyze", str(planted_path), "--steps", "40:"])
    assert bad.exit_code == 2 and "no such steps" in bad.output
    both = runner.invoke(main, ["analyze", str(planted_path), "--steps", "1", "--window", ":1ms"])
    assert both.exit_code == 2 and "at most one" in both.output


def test_sql_and_export_cli(planted_path: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    q = "SELECT count(*) AS n FROM kernels"
    out = runner.invoke(main, ["sql", str(planted_path), q, "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output) == [{"n": 220}]
    csv = runner.invoke(main, ["sql", str(planted_path), q, "--format", "csv", "--steps", "0:2"])
    assert csv.output == "n\n44\n"
    table = runner.invoke(main, ["sql", str(planted_path), "SELECT name FROM kernels"])
    assert "ampere_sgemm_128x64_tn" in table.output and "120 more rows" in table.output
    bad = runner.invoke(main, ["sql", str(planted_path), "SELECT nope FROM kernels"])
    assert bad.exit_code == 2 and "query failed" in bad.output
    exported = runner.invoke(main, ["export", str(planted_path), "--parquet", str(tmp_path)])
    assert exported.exit_code == 0, exported.output
    assert (tmp_path / "kernels.parquet").is_file() and (tmp_path / "gaps.parquet").is_file()
    neither = runner.invoke(main, ["export", str(planted_path)])
    assert neither.exit_code == 2


def test_sql_prints_names_as_written_and_nested_values_as_csv(planted_path: Path) -> None:
    """Range names such as ``[param|clear_cache]`` were taken for console markup and
    printed empty, and a list or struct column (``args``, ``list()``) made ``--format
    csv`` end in a traceback: polars has no CSV for nested values."""
    runner = CliRunner()
    q = "SELECT '[param|clear_cache]' AS name, [1, 2] AS ids, {'a': 'x'} AS args, 3 AS n"
    table = runner.invoke(main, ["sql", str(planted_path), q])
    assert table.exit_code == 0, table.output
    assert "[param|clear_cache]" in table.output
    csv = runner.invoke(main, ["sql", str(planted_path), q, "--format", "csv"])
    assert csv.exit_code == 0, csv.output
    assert csv.output == 'name,ids,args,n\n[param|clear_cache],"[1, 2]","{""a"": ""x""}",3\n'
