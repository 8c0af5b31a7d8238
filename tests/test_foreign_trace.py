"""Chrome traces the PyTorch profiler did not write are refused by name, not analysed.

Read as PyTorch traces they routed nothing and were reported as runs that "recorded no
GPU work" (with the CPU-only note: "the run was on the CPU"), which a JAX training trace
full of GPU kernels is not (:mod:`ingest.chrome.foreign_trace`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ingest import load_trace
from ingest.errors import TraceInputError
from tracelens.cli import main


def _xla_trace(path: Path) -> Path:
    """The shape of a JAX / TensorFlow profiler trace: processes named after XLA devices,
    no categories, HLO ops on a GPU stream thread."""
    events: list[dict] = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "pid": 1, "tid": 2, "name": "thread_name",
         "args": {"name": "Stream #14(Compute)"}},
        {"ph": "M", "pid": 701, "name": "process_name", "args": {"name": "/host:CPU"}},
    ]  # fmt: skip
    for i in range(50):
        events.append({"ph": "X", "pid": 701, "tid": 5, "ts": 1000 + 50 * i, "dur": 3.2,
                       "name": "ThunkExecutor::Execute"})  # fmt: skip
        hlo = {"hlo_op": f"fusion.{i % 7}", "hlo_module": "jit_step"}
        events.append({"ph": "X", "pid": 1, "tid": 2, "ts": 1005 + 50 * i, "dur": 40.5,
                       "name": f"fusion_{i % 7}", "args": hlo})  # fmt: skip
    path.write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": events}))
    return path


def test_xla_trace_is_named_and_sent_to_nsight(tmp_path: Path) -> None:
    path = _xla_trace(tmp_path / "jax.trace.json")
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert str(path) in lines[0]
    assert (
        "a TensorFlow or JAX (XLA) profiler trace (processes `/device:GPU:0`, `/host:CPU`)"
        in (lines[0])
    )
    assert "nsys export --type sqlite" in lines[0]
    assert "no GPU work" not in result.output and "Traceback" not in result.output


def test_other_chrome_traces_list_their_categories(tmp_path: Path) -> None:
    path = tmp_path / "browser.json"
    events = [
        {"ph": "X", "cat": "blink", "name": "Layout", "pid": 1, "tid": 1, "ts": 1, "dur": 5},
        {"ph": "X", "cat": "blink", "name": "Paint", "pid": 1, "tid": 1, "ts": 9, "dur": 5},
        {"ph": "X", "cat": "v8", "name": "Compile", "pid": 1, "tid": 1, "ts": 20, "dur": 5},
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(TraceInputError) as err:
        load_trace(path)
    text = str(err.value)
    assert "not a PyTorch profiler trace: none of its 3 events has a category" in text
    assert "here: 'blink' (2), 'v8' (1)" in text


@pytest.mark.parametrize(
    "events",
    [
        # the profiler's own span alone: started and stopped with nothing in between
        [{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": 1, "tid": 1,
          "ts": 1, "dur": 100}],
        # metadata only: nothing to judge
        [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "python"}}],
        # one annotation is a PyTorch category, whatever else the file holds
        [{"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 1,
          "dur": 9},
         {"ph": "X", "cat": "blink", "name": "Layout", "pid": 1, "tid": 1, "ts": 1, "dur": 5}],
    ],
)  # fmt: skip
def test_pytorch_traces_without_work_are_still_read(tmp_path: Path, events: list[dict]) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert "no GPU work recorded in this trace" in json.loads(result.output)["notes"]


def test_xprof_device_names_after_their_host_are_xla_too(tmp_path: Path) -> None:
    path = _xla_trace(tmp_path / "jax.trace.json")
    path.write_text(path.read_text().replace('"/device:GPU:0"', '"myhost /device:GPU:0"'))
    with pytest.raises(TraceInputError) as err:
        load_trace(path)
    assert "(XLA) profiler trace (processes `/host:CPU`, `myhost /device:GPU:0`)" in str(err.value)


def test_a_tpu_trace_is_not_sent_to_nsight(tmp_path: Path) -> None:
    path = _xla_trace(tmp_path / "tpu.trace.json")
    path.write_text(path.read_text().replace('"/device:GPU:0"', '"/device:TPU:0"'))
    with pytest.raises(TraceInputError) as err:
        load_trace(path)
    text = str(err.value)
    assert "profiler trace of a TPU" in text and "NVIDIA and AMD GPUs" in text
    assert "nsys" not in text


def test_the_legacy_autograd_profilers_export_is_named(tmp_path: Path) -> None:
    """``torch.autograd.profiler.profile(...).export_chrome_trace``: no categories, string
    pids; refused as what it is, not as a program the PyTorch profiler cannot record."""
    path = tmp_path / "legacy.json"
    events = [
        {"name": "aten::mm", "ph": "X", "ts": 191.5, "dur": 604.7, "tid": 1,
         "pid": "CPU functions", "args": {}},
        {"name": "volta_sgemm_128x64_nn", "ph": "X", "ts": 200.1, "dur": 500.2, "tid": 0,
         "pid": "CUDA functions", "args": {}},
    ]  # fmt: skip
    path.write_text(json.dumps(events))
    with pytest.raises(TraceInputError) as err:
        load_trace(path)
    text = str(err.value)
    assert "PyTorch's legacy autograd profiler" in text
    assert "torch.profiler.profile(activities=" in text
    assert "does not record" not in text


@pytest.mark.parametrize("cat", ["xpu_runtime", "privateuse1_runtime", "mtia_runtime"])
def test_other_backends_runtime_records_are_pytorch(tmp_path: Path, cat: str) -> None:
    path = tmp_path / "t.json"
    event = {"ph": "X", "cat": cat, "name": "urEnqueueKernelLaunch", "pid": 1, "tid": 1,
             "ts": 1, "dur": 5}  # fmt: skip
    path.write_text(json.dumps({"traceEvents": [event]}))
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
