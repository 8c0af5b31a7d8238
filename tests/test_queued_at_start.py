"""A recording that opens on a GPU still busy with work issued before it: the report says
the host was that far ahead (corpus: a vLLM decode step's first copy runs 7.8 ms after
its call, tests/test_corpus_diagnoses.py)."""

from __future__ import annotations

from tracelens.testing.scenario import Scenario

US = 1_000


def test_a_first_launch_far_ahead_of_its_work_is_noted(scenario_notes) -> None:
    sc = Scenario(name="ahead")
    # launched at 0, runs 5 ms later with nothing recorded before it; then a second kernel
    sc.launch(None, "gemm_kernel", 0, 5_005 * US, 100 * US)
    sc.launch(None, "gemm_kernel", 10 * US, 5_105 * US, 100 * US)
    (note,) = scenario_notes(sc, "first recorded work")
    assert note.startswith("GPU 0's first recorded work (a kernel, from `cudaLaunchKernel`)")
    assert "started 5 ms after its call returned" in note


def test_a_first_launch_one_latency_ahead_is_not(scenario_notes) -> None:
    sc = Scenario(name="prompt")
    sc.launch(None, "gemm_kernel", 0, 30 * US, 100 * US)
    assert scenario_notes(sc, "first recorded work") == []
