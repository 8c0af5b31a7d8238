"""The report notes a long first runtime call before the GPU's first work: start-up.

The first CUDA runtime call of a process creates its context. In a short program that is
most of the run (corpus: an RTX 3060 vector add, 303 ms in its first `cudaMalloc` against
5.3 ms of GPU window; tests/test_corpus_diagnoses.py), and an expert says so without
ranking it: no change to the GPU work gives it back.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ingest import load_trace
from tracelens.report import build_report
from tracelens.testing.nsys_writer import insert_rows, write_nsys_sqlite
from tracelens.testing.scenario import Scenario

MS = 1_000_000
KERNEL = "void vector_add(float const*, float const*, float*, int)"


def _program(first_call_ns: int, name: str = "startup") -> Scenario:
    """A first `cudaMalloc` of ``first_call_ns``, then one 1 ms kernel."""
    sc = Scenario(name=name)
    sc.api("cudaMalloc", 0, first_call_ns)
    sc.launch(None, KERNEL, first_call_ns + MS, first_call_ns + 2 * MS, MS)
    return sc


def test_a_long_first_call_is_noted_as_start_up(scenario_notes) -> None:
    (note,) = scenario_notes(_program(250 * MS), "before the GPU's first work")
    assert note.startswith(
        "the host's first recorded CUDA runtime call, `cudaMalloc`, took 250 ms of the 252 ms"
    )
    assert "outside the 1 ms from the GPU's first work to its last" in note
    assert "persistence mode" in note and "far beyond" not in note


def test_a_first_call_beyond_context_creation_names_the_usual_causes(scenario_notes) -> None:
    (note,) = scenario_notes(_program(8_000 * MS, "slow_startup"), "before the GPU's first work")
    assert "8 s is far beyond what creating a context takes" in note
    assert "CUDA_CACHE_PATH" in note and "without persistence mode" in note
    # a CUDA program (no framework operators): eager module loading is a cause too
    assert "CUDA_MODULE_LOADING=LAZY" in note


def test_short_or_unrepresentative_first_calls_give_no_note(scenario_notes) -> None:
    # a warm driver: 5 ms is below the note's 10 ms
    assert scenario_notes(_program(5 * MS, "warm"), "before the GPU's first work") == []
    # the first call is short and the host's time before the GPU is its own work
    sc = Scenario(name="host_work")
    sc.op("prepare_inputs", 0, 200 * MS, category="python_function")
    sc.api("cudaMalloc", 200 * MS, 1 * MS)
    sc.launch(None, KERNEL, 202 * MS, 203 * MS, MS)
    assert scenario_notes(sc, "before the GPU's first work") == []


def _nsys_notes(sc: Scenario, tmp_path: Path, processes: list[str]) -> list[str]:
    """The start-up notes of ``sc`` exported as Nsight Systems would, with ``processes``
    also on the host's process list (a system-wide capture lists every process)."""
    path = write_nsys_sqlite(sc, tmp_path / f"{sc.name}.sqlite")
    with sqlite3.connect(path) as db:
        insert_rows(
            db,
            "current",
            "PROCESSES",
            [{"globalPid": 0, "pid": 1000 + i, "name": n} for i, n in enumerate(processes)],
        )
    loaded = load_trace(path)
    try:
        return [n for n in build_report(loaded)["notes"] if "before the GPU's first work" in n]
    finally:
        loaded.close()


def test_persistence_mode_is_not_advised_where_the_driver_stays_loaded(tmp_path: Path) -> None:
    """With nvidia-persistenced running (or a display server drawing through nvidia-drm),
    the first call is the process's own context: persistence mode cannot shorten it."""
    (plain,) = _nsys_notes(_program(250 * MS, "plain"), tmp_path, ["bash"])
    assert "persistence mode" in plain
    (daemon,) = _nsys_notes(_program(250 * MS, "daemon"), tmp_path, ["nvidia-persiste"])
    assert "persistence mode" not in daemon and "nvidia-persistenced runs" in daemon
    assert "keep one process running across the work" in daemon
    (display,) = _nsys_notes(
        _program(250 * MS, "display"), tmp_path, ["Xwayland", "nvidia-drm/timeline-1"]
    )
    assert "a display server runs on it (Xwayland)" in display
    # a display server alone may draw on another GPU: persistence is still advised
    (other,) = _nsys_notes(_program(250 * MS, "other_gpu"), tmp_path, ["Xwayland"])
    assert "persistence mode" in other
