"""Kernels launched before the host side of the trace began, and what the report says of
them.

Their launch calls precede every recorded runtime call, so their operators are unknown.
Where the host's first recorded call is a synchronize that waits for them (a benchmark
harness syncing before each measured pass: corpus MI300X Qwen, 463 kernels behind
`hipDeviceSynchronize`), they are an earlier pass's tail queued before the profiler
started, not recorded work; elsewhere the profiler's host side started late.
"""

from __future__ import annotations

from tracelens.testing import Scenario
from tracelens.testing.scenario import Kernel

US = 1_000


def _earlier_pass(sync: bool) -> Scenario:
    """Three kernels of an earlier pass (correlation ids below every recorded call) run
    0-300 µs; the host's first recorded call, a device synchronize (or a host-side call),
    returns as they end; then the recorded pass launches one kernel."""
    sc = Scenario(name="synced" if sync else "late_host")
    for i in range(3):
        sc.kernels.append(Kernel("gemm_kernel", i * 100 * US, 100 * US, sc.next_id()))
    sc.api("cudaDeviceSynchronize" if sync else "cudaGetDevice", 10 * US, 295 * US)
    sc.launch(None, "gemm_kernel", 400 * US, 420 * US, 100 * US)
    return sc


def test_kernels_a_first_sync_waits_for_are_an_earlier_pass(scenario_notes) -> None:
    (note,) = scenario_notes(_earlier_pass(sync=True), "before the host side")
    assert note.startswith("3 kernels (300 µs, 75.0% of kernel time) were launched before")
    assert "work queued before the profiler started (an earlier pass)" in note
    assert "`cudaDeviceSynchronize`, waits for until 305 µs into the window" in note
    assert "synchronize the device before starting the profiler" in note


def test_kernels_nothing_waits_for_have_unknown_operators(scenario_notes) -> None:
    (note,) = scenario_notes(_earlier_pass(sync=False), "before the host side")
    assert "their operators are unknown; record CPU and GPU activities over the same" in note
    assert "earlier pass" not in note
