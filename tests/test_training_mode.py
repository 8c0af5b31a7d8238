"""An inference benchmark that left its model in training mode runs dropout kernels.

Eval mode makes dropout return its input, so no dropout kernel runs; ``no_grad`` and
``inference_mode`` do not change that. A dropout kernel in a trace with neither a backward
pass nor an optimizer step means ``model.eval()`` was not called: the benchmark measured
a different computation from the one it serves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest import load_trace
from tracelens.report import build_report
from tracelens.testing import write_chrome_trace
from tracelens.testing.planted_dropout import DROPOUT_KERNEL_NS, dropout_in_inference
from tracelens.testing.reports import report_of_file
from tracelens.testing.scenario import Scenario


def _report(tmp_path: Path, sc: Scenario) -> dict:
    return report_of_file(write_chrome_trace(sc, tmp_path / "t.json"))


def _training_mode(tmp_path: Path, sc: Scenario) -> list[dict]:
    return [f for f in _report(tmp_path, sc)["findings"] if f["analyzer"] == "training_mode"]


def _training_mode_notes(report: dict) -> list[str]:
    return [n for n in report["notes"] if n.startswith("the model ran in training mode")]


def test_dropout_in_an_inference_trace_says_the_model_is_in_training_mode(
    tmp_path: Path,
) -> None:
    report = _report(tmp_path, dropout_in_inference())
    (f,) = [f for f in report["findings"] if f["analyzer"] == "training_mode"]
    # A minor finding by its time, so the report's header says it too: every other
    # timing measured the model in training mode.
    (note,) = _training_mode_notes(report)
    assert "4 kernels (120 µs)" in note and "model.eval()" in note and f["id"] in note
    # proportionate: only dropout's outputs differ here, the other layers time as in eval
    assert "no BatchNorm ran" in note and f["evidence"]["batch_norm_calls"] == 0
    assert f["title"].startswith("Dropout runs in an inference trace: the model is in training")
    assert f["evidence"]["dropout_kernels"] == 4
    assert f["evidence"]["dropout_kernel_ns"] == 4 * DROPOUT_KERNEL_NS == f["impact_ns"]
    assert "model.eval()" in f["advice"] and "inference_mode" in f["advice"]
    assert len(f["time_ranges"]) == 4


def test_batch_norm_in_training_mode_is_named(tmp_path: Path) -> None:
    """With BatchNorm in the model, training mode changes its work too (batch statistics):
    the note says so, counting the outermost calls only."""
    report = _report(tmp_path, dropout_in_inference(batch_norm=True))
    (f,) = [f for f in report["findings"] if f["analyzer"] == "training_mode"]
    assert f["evidence"]["batch_norm_calls"] == 4
    (note,) = _training_mode_notes(report)
    assert "its 4 BatchNorm calls normalized with each batch's statistics" in note
    assert "no BatchNorm ran" not in note


def test_training_and_dropout_free_inference_say_nothing(tmp_path: Path) -> None:
    for sc in (dropout_in_inference(training=True), dropout_in_inference(dropout=False)):
        report = _report(tmp_path, sc)
        assert [f for f in report["findings"] if f["analyzer"] == "training_mode"] == []
        assert _training_mode_notes(report) == []


@pytest.mark.corpus
def test_the_a100_alexnet_benchmark_ran_in_training_mode(corpus: Path) -> None:
    """Expert reading: AlexNet has two dropout layers, and the inference capture runs
    `aten::native_dropout` four times (two passes), each launching a dropout kernel: the
    benchmark never called ``model.eval()``. Small in time (34 µs), so a minor finding by
    its rank, but its outputs were not the model's: the report's header says so, beside
    the CUDA-context note, where a reader looks before the findings."""
    loaded = load_trace(corpus / "torch/a100_alexnet_inference.json.gz")
    try:
        report = build_report(loaded)
    finally:
        loaded.close()
    (f,) = [f for f in report["findings"] if f["analyzer"] == "training_mode"]
    assert f["evidence"]["dropout_kernels"] == 4
    assert f["evidence"]["operators"][0]["operator"] == "aten::native_dropout"
    assert _training_mode_notes(report)[0].endswith(f"(finding training_mode · {f['id']})")
