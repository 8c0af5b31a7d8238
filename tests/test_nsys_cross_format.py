"""The same planted scenario gives the same findings from a Chrome trace and from nsys exports."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from ingest import load_trace
from tracelens.report import build_report
from tracelens.testing import training_steps, write_chrome_trace
from tracelens.testing.nsys_writer import write_nsys_sqlite

FORMATS = ("chrome", "nsys-current", "nsys-legacy")


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    sc = training_steps()
    d = tmp_path_factory.mktemp("cross_format")
    paths = {
        "chrome": write_chrome_trace(sc, d / "planted.pt.trace.json.gz"),
        "nsys-current": write_nsys_sqlite(sc, d / "planted_current.sqlite", "current"),
        "nsys-legacy": write_nsys_sqlite(sc, d / "planted_legacy.sqlite", "legacy"),
    }
    out = {}
    for fmt, path in paths.items():
        loaded = load_trace(path)
        try:
            report = build_report(loaded)
            report["_gaps"] = dict(
                loaded.con.execute(
                    "SELECT cause, sum(end_ns - start_ns) FROM gaps GROUP BY cause"
                ).fetchall()
            )
            report["_expected"] = sc.expected
        finally:
            loaded.close()
        out[fmt] = report
    return out


def test_nsys_exports_are_detected_as_nsys(reports: dict[str, dict]) -> None:
    assert reports["chrome"]["source"]["format"] == "torch_chrome"
    assert reports["nsys-current"]["source"]["format"] == "nsys_sqlite"
    assert reports["nsys-legacy"]["source"]["format"] == "nsys_sqlite"
    assert reports["nsys-current"]["trace"]["format_version"] == "3.24.18"
    assert "format_version" not in reports["nsys-legacy"]["trace"]


@pytest.mark.parametrize("fmt", FORMATS[1:])
def test_same_findings_same_impacts(reports: dict[str, dict], fmt: str) -> None:
    ref = {f["id"]: f for f in reports["chrome"]["findings"]}
    got = {f["id"]: f for f in reports[fmt]["findings"]}
    assert len(ref) >= 5
    assert got.keys() == ref.keys()
    for fid, f in ref.items():
        assert got[fid]["analyzer"] == f["analyzer"]
        if _from_shapes(f):
            continue
        assert got[fid]["impact_ns"] == pytest.approx(f["impact_ns"], rel=0.01, abs=1), fid
    # Same ranking among the findings whose impact neither format took from shapes.
    same = {fid for fid, f in ref.items() if not _from_shapes(f)}
    assert [f["id"] for f in reports[fmt]["findings"] if f["id"] in same] == [
        f["id"] for f in reports["chrome"]["findings"] if f["id"] in same
    ]


@pytest.mark.parametrize("fmt", FORMATS)
def test_planted_numbers_hold_in_every_format(reports: dict[str, dict], fmt: str) -> None:
    r = reports[fmt]
    exp = r["_expected"]
    m = r["metrics"]
    assert m["kernel_count"] == exp["kernel_count"]
    assert m["memcpy_count"] == exp["memcpy_count"]
    assert m["h2d_bytes"] == exp["h2d_bytes"]
    assert m["h2d_pageable_bytes"] == exp["h2d_pageable_bytes"]
    assert m["window_ns"] == exp["window_ns"]
    assert r["devices"][0]["busy_ns"] == exp["busy_ns"]
    assert r["_gaps"] == exp["gap_ns_by_cause"]
    assert r["top_kernels"][0]["name"] == exp["hot_kernel"]
    assert r["top_kernels"][0]["total_ns"] == exp["hot_kernel_ns"]
    assert r["devices"][0]["name"] == "NVIDIA A100-SXM4-80GB"


def test_hot_operator_found_through_nvtx_ranges(reports: dict[str, dict]) -> None:
    # nsys has no operator records: attribution goes through emit_nvtx-style ranges,
    # whose ", seq = N, op_id = M, sizes = [...]" decorations the reader removes.
    for fmt in FORMATS:
        hot = [f for f in reports[fmt]["findings"] if f["analyzer"] == "hot_ops"]
        assert "aten::mm" in hot[0]["title"], fmt


def test_unknown_schema_era_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown nsys schema"):
        write_nsys_sqlite(training_steps(steps=1), tmp_path / "x.sqlite", "2019")


# Every planted scenario, nsys current layout (and the 2020 layout for the host-side ones,
# where the eras differ most: sync and NVTX tables).
SCENARIOS = {
    "planted_device.memory_pressure": ("current",),
    "planted_device.exposed_allreduce": ("current",),
    "planted_device.occupancy_problems": ("current",),
    "planted_host.launch_bound": ("current",),
    "planted_host.sync_stalls": ("current", "legacy"),
    "planted_host.uneven_steps": ("current",),
    "planted_llm.static_launch_bound": ("current",),
    "planted_llm.kv_growth_decode": ("current",),
    "planted_pair.decode_naive": ("current", "legacy"),
    "planted_pair.decode_tuned": ("current",),
}


def _only_from_profiler_data(finding: dict) -> bool:
    """Findings that need what only the PyTorch profiler records: caching-allocator events
    (nsys sees driver allocations only) and its estimated achieved occupancy."""
    evidence = finding["evidence"]
    return "memory_events" in evidence or "est_occupancy_pct" in evidence


def _from_shapes(finding: dict) -> bool:
    """Impacts from the cost model need the operators' recorded input shapes, which the
    PyTorch profiler writes and an nsys export does not: the finding is in both, its impact
    only comparable where neither used shapes."""
    return "cost" in finding["evidence"]


def _findings(path: Path) -> list[dict]:
    loaded = load_trace(path)
    try:
        return build_report(loaded)["findings"]
    finally:
        loaded.close()


@pytest.mark.parametrize("target", sorted(SCENARIOS))
def test_every_planted_scenario_agrees_across_formats(tmp_path: Path, target: str) -> None:
    module, fn = target.split(".")
    sc = getattr(importlib.import_module(f"tracelens.testing.{module}"), fn)()
    chrome = _findings(write_chrome_trace(sc, tmp_path / f"{fn}.pt.trace.json"))
    ref = {f["id"]: f for f in chrome if not _only_from_profiler_data(f)}
    assert ref
    for schema in SCENARIOS[target]:
        got = {
            f["id"]: f
            for f in _findings(write_nsys_sqlite(sc, tmp_path / f"{fn}_{schema}.sqlite", schema))
        }
        assert got.keys() == ref.keys(), schema
        for fid, f in ref.items():
            if _from_shapes(f):
                continue
            assert got[fid]["impact_ns"] == pytest.approx(f["impact_ns"], rel=0.01, abs=1), (
                schema,
                f["title"],
            )
