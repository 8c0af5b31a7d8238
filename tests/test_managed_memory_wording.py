"""Unified memory and WSL2 hosts, on synthetic Nsight exports: the report header counts
migrations, the page-fault and grid findings keep stall time apart from idle SMs, the
migrations back to the host are split into the avoidable ones before the faulting kernels
and the results read after them, a late first launch claims a module load only where one
ran, and sync advice warns where managed memory has no concurrent CPU/GPU access."""

from __future__ import annotations

import sqlite3
from io import StringIO
from pathlib import Path
from typing import Any

from rich.console import Console

from tracelens.report.model import Report
from tracelens.report.render.html import render_html
from tracelens.report.render.markdown import render_markdown
from tracelens.report.render.text import render_text
from tracelens.testing.nsys_writer import write_nsys_sqlite
from tracelens.testing.reports import report_of_file
from tracelens.testing.scenario import DeviceSpec, Memcpy, Scenario

US = 1_000
MS = 1_000_000
MIB = 1 << 20
WSL_KERNEL = "5.15.146.1-microsoft-standard-WSL2"


def _report(tmp_path: Path, sc: Scenario, host_kernel: str | None = None) -> dict[str, Any]:
    path = write_nsys_sqlite(sc, tmp_path / f"{sc.name}.sqlite")
    if host_kernel:
        # the export's host facts: Nsight writes the OS kernel release here
        with sqlite3.connect(path) as con:
            con.execute(
                "INSERT INTO TARGET_INFO_SYSTEM_ENV (devStateName, name, nameEnum, value) "
                "VALUES ('Local (CLI)', 'SoftwareReleaseVersion', 620, ?)",
                [host_kernel],
            )
    return report_of_file(path)


def _faulting_softmax() -> Scenario:
    """A T4 kernel of 32 blocks of 1024 threads (one row each) faulting its 40 MiB in
    while it runs, then the host reading 20 MiB back."""
    sc = Scenario("uvm_softmax", devices=[DeviceSpec(0, "Tesla T4", 40, 16 << 30, 7, 5)])
    sc.launch(None, "softmax_rows(const float *, float *)", 0, 100 * US, 10 * MS,
              grid=(32, 1, 1), block=(1024, 1, 1))  # fmt: skip
    for i in range(20):  # migrations carry no launching call (correlation id 0)
        sc.memcpys.append(Memcpy("UVM_HtoD", "unknown", "unknown", 2 * MIB,
                                 200 * US + i * 480 * US, 200 * US, 0))  # fmt: skip
    for i in range(10):
        sc.memcpys.append(Memcpy("UVM_DtoH", "unknown", "unknown", 2 * MIB,
                                 20 * MS + i * 300 * US, 150 * US, 0))  # fmt: skip
    return sc


def test_the_header_counts_migrations_and_the_stall_is_not_idle_sms(tmp_path: Path) -> None:
    r = _report(tmp_path, _faulting_softmax())
    m = r["metrics"]
    assert m["memcpy_count"] == 0 and m["uvm_migration_count"] == 30
    assert m["uvm_bytes"] == 60 * MIB
    assert m["uvm_htod_bytes"] == 40 * MIB and m["uvm_dtoh_bytes"] == 20 * MIB
    assert m["uvm_time_ns"] == 20 * 200 * US + 10 * 150 * US
    said = "unified memory 60 MiB in 30 migrations (40 MiB to the device, 20 MiB to the host)"
    typed = Report.of(r)
    assert said in render_markdown(typed)
    console = Console(file=StringIO(), width=400)
    render_text(typed, console)
    assert said in console.file.getvalue()  # type: ignore[attr-defined]
    assert said[1:] in render_html(r)  # capitalised in its own row there

    (uvm,) = [f for f in r["findings"] if f["title"].startswith("GPU page faults")]
    # summed copy time is not elapsed time: both are said, apart
    assert uvm["summary"].startswith(
        "Unified memory moved 60 MiB in 30 migrations taking 5.5 ms of copying, spread over "
        "22.6 ms;"
    )
    assert uvm["evidence"]["span_ns"] == 20 * MS + 9 * 300 * US + 150 * US - 200 * US

    (grid,) = [f for f in r["findings"] if f["analyzer"] == "occupancy"]
    stalled = grid["evidence"]["idle_sm_ns_in_fault_stalls"]
    assert stalled > 0
    # the SMs wait on page faults for most of the kernel: only the rest is idle for want of
    # blocks, and the title says so
    assert "idle for 10 ms" not in grid["title"]
    assert "it stalled on page faults" in grid["title"]
    assert "waited on page faults" in grid["summary"]
    # 1024-thread blocks: a grid-stride loop keeps the same 32 blocks; splitting rows does not
    assert "split each block's work across several blocks" in grid["advice"]
    assert "sized to the SM count" not in grid["advice"] and "larger batches" not in grid["advice"]
    assert "on this GPU, all one SM runs at once" in grid["advice"]  # Turing: 1024 per SM


def _late_first_launch(module_load: bool) -> Scenario:
    """A copy, then a kernel whose launch call takes 0.6 ms and which starts 1.5 ms after
    the call returned, then a copy back; each copy starts 100-200 µs after its call."""
    sc = Scenario("late_first", devices=[DeviceSpec(0, "NVIDIA GeForce RTX 3060", 28,
                                                    12 << 30, 8, 6)])  # fmt: skip
    sc.copy(None, "HtoD", "pinned", "device", 4 * MIB, 0, 100 * US, 1200 * US,
            api_dur_ns=1300 * US, api_name="cudaMemcpy")  # fmt: skip
    if module_load:
        sc.api("cuLibraryLoadData", 2100 * US, 600 * US)
    sc.launch(None, "vec_add(float *)", 1400 * US, 3500 * US, 50 * US, api_dur_ns=600 * US)
    sc.copy(None, "DtoH", "device", "pinned", 4 * MIB, 3600 * US, 3800 * US, 400 * US,
            api_dur_ns=700 * US, api_name="cudaMemcpy")  # fmt: skip
    return sc


def _first_launch(r: dict[str, Any]) -> dict[str, Any]:
    (f,) = [
        f
        for f in r["findings"]
        if any(k["kind"] == "first_launch" for k in f["evidence"].get("gpu_side_kinds", []))
    ]
    return f


def test_a_late_first_launch_claims_a_module_load_only_where_one_ran(tmp_path: Path) -> None:
    late = _first_launch(_report(tmp_path, _late_first_launch(module_load=False)))
    (kind,) = late["evidence"]["gpu_side_kinds"]
    assert kind["module_load_ns"] == 0
    assert kind["launch_call_ns"] == 600 * US and kind["after_call_ns"] == 1500 * US
    assert "first launch started late" in late["title"] and "module" not in late["title"]
    assert "EAGER" not in late["advice"] and "no module load ran" in late["advice"]
    assert "other_work" not in kind  # not a WSL2 host

    loaded = _first_launch(_report(tmp_path, _late_first_launch(module_load=True)))
    (kind,) = loaded["evidence"]["gpu_side_kinds"]
    assert kind["module_load_ns"] == 600 * US
    assert "waited for its module to load" in loaded["title"]
    assert "`CUDA_MODULE_LOADING=EAGER`" in loaded["advice"]


def test_under_wsl2_a_late_first_launch_is_not_the_first_launch_alone(tmp_path: Path) -> None:
    late = _first_launch(_report(tmp_path, _late_first_launch(False), WSL_KERNEL))
    (kind,) = late["evidence"]["gpu_side_kinds"]
    assert kind["other_work"] == 2 and kind["other_work_min_start_after_call_ns"] == 100 * US
    assert "under WSL2 all work starts long after its call" in late["title"]
    assert "none of the other 2 launches and copies started sooner than 100 µs" in late["advice"]
    assert "EAGER" not in late["advice"]


def _synchronizing(managed: bool) -> Scenario:
    """A loop of kernels each waited on with cudaDeviceSynchronize, then host work."""
    sc = Scenario("sync_loop")
    if managed:
        for i in range(3):
            sc.api("cudaMallocManaged", i * 10 * US, 5 * US)
    for i in range(20):
        s = 100 * US + i * 2 * MS
        sc.launch(None, "step_kernel(float *)", s, s + 20 * US, MS, api_dur_ns=10 * US)
        sc.api("cudaDeviceSynchronize", s + 10 * US, MS + 20 * US)
    return sc


def _sync_advice(r: dict[str, Any]) -> dict[str, Any]:
    (f,) = [
        f
        for f in r["findings"]
        if f["analyzer"] == "sync_stalls" and f["evidence"]["pattern"] == "device_synchronize"
    ]
    return f


def test_sync_advice_warns_where_managed_memory_has_no_concurrent_access(tmp_path: Path) -> None:
    wsl = _sync_advice(_report(tmp_path, _synchronizing(managed=True), WSL_KERNEL))
    assert wsl["evidence"]["wsl_managed_allocations"] == 3
    assert "Caveat: this host is WSL2" in wsl["advice"]
    assert "3 `cudaMallocManaged` calls" in wsl["advice"]
    # Without concurrent access the GPU keeps every managed page from a launch until a
    # synchronize shows it idle: not only while a kernel runs, and not only a device-wide
    # synchronize; a stream-attached buffer waits on its own stream alone
    assert (
        "after any kernel launch the host may not touch a managed allocation until a "
        "synchronize guarantees the GPU is idle, even if the kernel has already finished"
    ) in wsl["advice"]
    assert (
        "a `cudaStreamSynchronize` or `cudaEventSynchronize` when that stream or event is the "
        "last work queued on the GPU"
    ) in wsl["advice"]
    assert (
        "a buffer attached to a stream (`cudaStreamAttachMemAsync`) needs only that stream's "
        "synchronize"
    ) in wsl["advice"]
    assert "while any kernel runs" not in wsl["advice"]
    assert "keep a device-wide synchronize" not in wsl["advice"]
    # the GPU's work is recorded: the waits are not put down to launch migrations
    assert "migrates the managed memory the host touched" not in wsl["advice"]
    # native Linux has concurrent access (Pascal on), and a program without managed memory
    # has nothing to fault
    for sc, host in ((_synchronizing(True), None), (_synchronizing(False), WSL_KERNEL)):
        plain = _sync_advice(_report(tmp_path, sc, host))
        assert "Caveat" not in plain["advice"]
        assert "wsl_managed_allocations" not in plain["evidence"]


def _synchronizing_unrecorded() -> Scenario:
    """Two managed allocations, then 20 device synchronizes of 1 ms each whose GPU work
    the trace does not record (kernel tracing off)."""
    sc = Scenario("sync_unrecorded")
    for i in range(2):
        sc.api("cudaMallocManaged", i * 10 * US, 5 * US)
    for i in range(20):
        sc.api("cudaDeviceSynchronize", 100 * US + i * 1100 * US, MS)
    return sc


def test_unrecorded_waits_on_wsl2_may_hold_launch_migrations(tmp_path: Path) -> None:
    """Without concurrent managed access the GPU cannot fault pages in: each launch first
    moves what the host touched to the GPU, so with no kernel records a wait's time is not
    only the kernels' run time."""
    wsl = _sync_advice(_report(tmp_path, _synchronizing_unrecorded(), WSL_KERNEL))
    assert "most likely the kernels' own run time" in wsl["advice"]
    assert (
        "Without concurrent managed access (this WSL2 host; the program makes 2 "
        "`cudaMallocManaged` calls), each launch first migrates the managed memory the host "
        "touched to the GPU, so the waits may include those migrations too."
    ) in wsl["advice"]
    assert wsl["evidence"]["wsl_managed_allocations"] == 2
    native = _sync_advice(_report(tmp_path, _synchronizing_unrecorded()))
    assert "most likely the kernels' own run time" in native["advice"]
    assert "migrations" not in native["advice"]


def _host_touches_around_kernels() -> Scenario:
    """Two launches of a T4 kernel faulting 8 MiB in each; 4 MiB go back to the host
    before the first (host code touching memory an earlier kernel left on the GPU), 2 MiB
    between the two, and 6 MiB after the second (the results read)."""
    sc = Scenario("uvm_host_touch", devices=[DeviceSpec(0, "Tesla T4", 40, 16 << 30, 7, 5)])
    sc.launch(None, "init(float *)", 0, 50 * US, 100 * US)  # leaves its pages on the GPU
    for k_start in (5 * MS, 15 * MS):
        sc.launch(None, "scale(float *)", k_start - 100 * US, k_start, 4 * MS)
        for i in range(4):
            sc.memcpys.append(Memcpy("UVM_HtoD", "unknown", "unknown", 2 * MIB,
                                     k_start + 100 * US + i * 800 * US, 200 * US, 0))  # fmt: skip
    for start in (1 * MS, 2 * MS, 10 * MS, 30 * MS, 31 * MS, 32 * MS):
        sc.memcpys.append(Memcpy("UVM_DtoH", "unknown", "unknown", 2 * MIB, start, 150 * US, 0))
    return sc


def test_migrations_to_the_host_are_split_by_the_faulting_kernels(tmp_path: Path) -> None:
    """Migrations to the host before the first faulting kernel pulled back memory the
    kernel then faults in again (avoidable); those after the last one are the results
    being read (expected); those between launches are said apart from both."""
    r = _report(tmp_path, _host_touches_around_kernels())
    (uvm,) = [f for f in r["findings"] if f["title"].startswith("GPU page faults")]
    assert uvm["evidence"]["to_host_split"] == {
        "before_migrations": 2,
        "before_bytes": 4 * MIB,
        "during_migrations": 1,
        "during_bytes": 2 * MIB,
        "after_migrations": 3,
        "after_bytes": 6 * MIB,
    }
    s = uvm["summary"]
    assert "6 migrations (12 MiB) went back to the host. " in s
    assert (
        "2 (4 MiB) ran before the first faulting kernel started, the host touching managed "
        "memory the GPU already had, so the kernels fault it in again: avoidable"
    ) in s
    assert "1 (2 MiB) ran while the faulting kernels ran or between them" in s
    assert (
        "3 (6 MiB) ran after the last faulting kernel ended, the host reading the results "
        "back: expected"
    ) in s
    # no prefetch call: nothing is said to have been undone
    assert "undoing" not in s and "undone_prefetch" not in uvm["evidence"]


def test_results_read_after_the_kernel_are_not_called_avoidable(tmp_path: Path) -> None:
    (uvm,) = [
        f
        for f in _report(tmp_path, _faulting_softmax())["findings"]
        if f["title"].startswith("GPU page faults")
    ]
    assert uvm["summary"].endswith(
        "10 migrations (20 MiB) went back to the host, all after the last faulting kernel "
        "ended, the host reading the results back: expected (a prefetch to the host, "
        "`cudaCpuDeviceId`, moves them in bulk rather than on faults)."
    )
    assert "avoidable" not in uvm["summary"]
