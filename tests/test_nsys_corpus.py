"""Every Nsight Systems export in the real-trace corpus ingests and matches its README facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ingest import load_trace
from tracelens.cli import main
from tracelens.core.tracedb import TraceDB
from tracelens.report import build_report

pytestmark = pytest.mark.corpus

# file -> (kernels, explicit memcpys, UVM migration rows, memsets, H2D bytes,
#          pageable H2D bytes, {device: busy % of window}, nsys version, schema version)
FACTS = {
    "rtx3060_vecadd_nsys2025.5.sqlite": (
        1, 3, 0, 0, 8_388_608, 8_388_608, {0: 58.44}, "2025.5.2", "3.24.0"
    ),
    "rtxa4500_kernels_nsys2026.1.sqlite": (1, 0, 227, 0, 0, 0, {0: 56.28}, "2026.1.3", "3.24.18"),
    "rtx3090_tensorrt_nvtx_textid_nsys2023.1.sqlite": (
        36, 4, 0, 0, 0, 0, {0: 99.44}, "2023.1.2", "3.1.2"
    ),
    "t4_uvm_nsys2025.1.sqlite": (1, 0, 2370, 0, 0, 0, {0: 9.57}, "2025.1.3", "3.17.2"),
    "rtx4060l_no_kernel_table_nsys2023.3.sqlite": (0, 0, 0, 0, 0, 0, {}, "2023.3.3", "3.4.0"),
    "rtx4060_weatherbench_nsys2025.5.sqlite": (
        0, 0, 0, 1, 0, 0, {0: 100.0}, "2025.5.1", "3.23.3"
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def nsys_dir(corpus: Path) -> Path:
    d = corpus / "nsys"
    if not d.is_dir():
        pytest.skip("corpus has no nsys/ folder")
    return d


@pytest.mark.parametrize("name", sorted(FACTS))
def test_export_matches_readme_facts(nsys_dir: Path, name: str) -> None:
    kernels, memcpys, uvm, memsets, h2d, pageable, busy, nsys_version, schema = FACTS[name]
    loaded = load_trace(nsys_dir / name)
    try:
        assert loaded.format == "nsys_sqlite"
        db = TraceDB(loaded.con)
        report = build_report(loaded)
        m = report["metrics"]
        assert m["kernel_count"] == kernels
        assert m["memcpy_count"] == memcpys
        assert m["uvm_migration_count"] == uvm
        assert m["memset_count"] == memsets
        assert m["h2d_bytes"] == h2d
        assert m["h2d_pageable_bytes"] == pageable
        assert {d.device_id: d for d in db.devices}.keys() == busy.keys()
        for d in db.devices:
            assert d.busy_pct == pytest.approx(busy[d.device_id], abs=0.1)
        assert db.info["tool"] == "Nsight Systems"
        assert db.info["tool_version"].startswith(nsys_version)
        assert db.info["format_version"] == schema
    finally:
        loaded.close()


def test_api_names_lose_version_suffix_and_link_to_gpu_work(nsys_dir: Path) -> None:
    loaded = load_trace(nsys_dir / "rtx3060_vecadd_nsys2025.5.sqlite")
    try:
        names = {r[0] for r in loaded.con.execute("SELECT name FROM api_calls").fetchall()}
        assert "cudaLaunchKernel" in names and "cudaMemcpy" in names
        assert not [n for n in names if "_v" in n.rsplit("_", 1)[-1][:2]]
        linked = loaded.con.execute(
            """SELECT a.name, a.kind FROM kernels k
               JOIN api_calls a USING (correlation_id)"""
        ).fetchall()
        assert linked == [("cudaLaunchKernel", "runtime")]
        # The pageable copies are the two HtoD rows; the kernel's full demangled name is kept.
        assert loaded.con.execute("SELECT name FROM kernels").fetchone()[0] == (
            "kernVectorAdd(const float *, const float *, float *, int)"
        )
    finally:
        loaded.close()


def test_uvm_migrations_are_kept_apart_from_explicit_copies(nsys_dir: Path) -> None:
    loaded = load_trace(nsys_dir / "t4_uvm_nsys2025.1.sqlite")
    try:
        rows = loaded.con.execute(
            "SELECT kind, src_mem, dst_mem, count(*) FROM memcpys GROUP BY ALL ORDER BY 1"
        ).fetchall()
        assert rows == [
            ("UVM_DtoH", "unknown", "unknown", 1536),
            ("UVM_HtoD", "unknown", "unknown", 834),
        ]
        findings = build_report(loaded)["findings"]
        assert not [
            f for f in findings if f["analyzer"] == "h2d_transfers" and "pageable" in f["id"]
        ]
    finally:
        loaded.close()


def test_tensorrt_nvtx_text_from_string_ids_and_domain(nsys_dir: Path) -> None:
    loaded = load_trace(nsys_dir / "rtx3090_tensorrt_nvtx_textid_nsys2023.1.sqlite")
    try:
        c = loaded.con
        assert c.execute("SELECT count(*), count(DISTINCT domain) FROM ranges").fetchone() == (
            59,
            1,
        )
        assert c.execute("SELECT DISTINCT domain FROM ranges").fetchone()[0] == "TensorRT"
        outer = c.execute(
            "SELECT name, depth FROM ranges WHERE parent_id IS NULL ORDER BY start_ns"
        ).fetchall()
        assert outer == [("ExecutionContext::execute", 0)]
        assert c.execute("SELECT count(*) FROM ranges WHERE depth = 1").fetchone()[0] == 58
        assert c.execute("SELECT count(*) FROM ranges WHERE name = ''").fetchone()[0] == 0
        # Four RTX 3090s on the host, only device 0 ran work.
        assert c.execute("SELECT device_id, name FROM devices").fetchall() == [
            (0, "NVIDIA GeForce RTX 3090")
        ]
        idle = TraceDB(c).info["host_gpus_without_work"]
        assert idle.count("RTX 3090") == 3 and idle.startswith("1: ")
        # The stream synchronize record belongs to the thread that called it.
        sync = c.execute("SELECT pid, tid, kind FROM syncs WHERE kind = 'Stream Sync'").fetchall()
        assert sync == [(24129, 24129, "Stream Sync")]
    finally:
        loaded.close()


def test_export_without_kernel_table_reports_no_gpu_work(nsys_dir: Path) -> None:
    """The laptop export holds 16,842 kernel launch calls and 42.4 s of the host blocked in
    `cudaDeviceSynchronize` (29.5 s) and `cuEventSynchronize` (12.9 s) of a 45.8 s run, but
    no kernel table. CUDA tracing was on (META_DATA_CAPTURE: COLLECT_CUDA_TRACE=true; it
    recorded the calls), so GPU activity collection failed, under WSL 2 and `mpirun`; the
    program is most likely GPU-bound. An expert says exactly that; the sync findings
    must not read as time to win back by removing syncs (no GPU time is known)."""
    path = nsys_dir / "rtx4060l_no_kernel_table_nsys2023.3.sqlite"
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert "no GPU work recorded in this trace" in report["notes"]
    (note,) = [n for n in report["notes"] if n.startswith("no kernels recorded")]
    # CUDA tracing was on (it recorded the calls; the capture options say so too): telling
    # to record with `--trace=cuda` would give the same file
    assert note.startswith("no kernels recorded (this export has no kernel table); yet CUDA")
    assert "16,842 kernel launch calls" in note and "GPU activity was not collected" in note
    assert "--trace=cuda" not in note
    # the export has no DIAGNOSTIC_EVENT table: the note must not point at diagnostics it
    # does not hold
    assert "holds no Nsight Systems diagnostic that says why" in note
    syncs = report["findings"]
    assert [round(f["evidence"]["blocked_ns"] / 1e8) for f in syncs] == [295, 129]
    for f in syncs:
        assert f["impact_ns"] == 0 and f["title"].endswith("on GPU work the trace does not record")
        assert f["advice"].startswith("The host waited") and "GPU-bound" in f["advice"]
        assert "0 gaps" not in f["impact_basis"]
    assert report["devices"] == []
    assert report["metrics"]["kernel_count"] == 0
    loaded = load_trace(path)
    try:
        c = loaded.con
        assert c.execute("SELECT count(*) FROM api_calls").fetchone()[0] == 37334
        assert c.execute("SELECT count(*), count(tid) FROM syncs").fetchone() == (11311, 11311)
        assert TraceDB(c).info["host_gpus_without_work"] == "0: NVIDIA GeForce RTX 4060 Laptop GPU"
    finally:
        loaded.close()


def test_nearly_empty_export_gives_a_clean_report(nsys_dir: Path) -> None:
    path = nsys_dir / "rtx4060_weatherbench_nsys2025.5.sqlite"
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["findings"] == []
    # Nsight writes no kernel table where no kernel ran: the 23 runtime calls hold no
    # launch, so the program launched none (an earlier note blamed the export)
    assert (
        "no kernels recorded (the program launched none: its 23 runtime calls hold no "
        "launch); the GPU ran only 1 memset"
    ) in report["notes"]
    assert report["metrics"]["kernel_count"] == 0 and report["metrics"]["memset_count"] == 1
    text = CliRunner().invoke(main, ["analyze", str(path)])
    assert text.exit_code == 0 and "No findings" in text.output


def test_nsys_diagnostics_explain_missing_data(nsys_dir: Path) -> None:
    """The RTX 3060 export's DIAGNOSTIC_EVENT table has an error that unified memory cannot
    be traced on a GPU without peer-to-peer support: that is why the report has no
    migrations for it, and the report says so. Its CPU-sampling and OpenGL warnings say
    nothing about GPU data and stay out; the 2023.1 TensorRT export has no such table."""
    loaded = load_trace(nsys_dir / "rtx3060_vecadd_nsys2025.5.sqlite")
    try:
        notes = build_report(loaded)["notes"]
    finally:
        loaded.close()
    nsys_notes = [n for n in notes if n.startswith("Nsight Systems")]
    assert len(nsys_notes) == 1
    assert nsys_notes[0].startswith("Nsight Systems error: CUDA device 0: Unified Memory cannot")
    old = load_trace(nsys_dir / "rtx3090_tensorrt_nvtx_textid_nsys2023.1.sqlite")
    try:
        assert not [n for n in old.notes if n.startswith("Nsight Systems")]
    finally:
        old.close()
