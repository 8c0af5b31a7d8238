"""A trace with no GPU work says why, where the trace tells.

"No GPU work recorded" alone leaves the user to guess whether the program ran on the CPU,
the profiler traced the CPU only, or its GPU tracing failed; each is recorded differently
(:mod:`ingest.chrome.no_gpu_note`) and needs a different fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracelens.cli import main


def _trace(tmp_path: Path, events: list[dict], **top: object) -> Path:
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, **top, "traceEvents": events}))
    return path


def _op(name: str, ts: int, dur: int) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def _call(name: str, ts: int, corr: int) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts,
            "dur": 5, "args": {"correlation": corr}}  # fmt: skip


def _notes(path: Path) -> list[str]:
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["findings"] == []
    return report["notes"]


_A100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0}


def test_cpu_only_run_says_no_gpu_was_visible(tmp_path: Path) -> None:
    path = _trace(tmp_path, [_op("aten::linear", 10, 50), _op("aten::relu", 70, 5)],
                  deviceProperties=[])  # fmt: skip
    notes = _notes(path)
    # the headline first, then why
    assert notes[0] == "no GPU work recorded in this trace"
    assert notes[1].startswith(
        "the trace holds 2 operator calls and no CUDA or HIP runtime call, and the profiler "
        "listed no GPU (its `deviceProperties` is empty, as in a CPU-only build of PyTorch or "
        "where no GPU is visible): the run was on the CPU"
    )
    assert "ProfilerActivity.CUDA" in notes[1] and "CUDA or ROCm build" in notes[1]


def test_trace_without_a_device_list_concludes_nothing(tmp_path: Path) -> None:
    """Traces before PyTorch 1.9, and builds that wrote deviceProperties only with CUDA
    tracing, carry none: its absence says nothing about where the run was."""
    notes = _notes(_trace(tmp_path, [_op("aten::linear", 10, 50)]))
    assert "does not list the profiler's devices" in notes[1]
    assert "whether the run used a GPU is not known" in notes[1]
    assert "the run was on the CPU" not in notes[1]


def test_an_empty_trace_concludes_nothing(tmp_path: Path) -> None:
    notes = _notes(_trace(tmp_path, [], deviceProperties=[]))
    assert notes[1] == "the trace holds no operator call and no runtime call"


def test_gpu_listed_but_not_traced_says_cpu_activities_only(tmp_path: Path) -> None:
    path = _trace(tmp_path, [_op("aten::linear", 10, 50)], deviceProperties=[_A100])
    notes = _notes(path)
    assert notes[1].startswith(
        "the trace holds 1 operator call and no CUDA or HIP runtime call, though the profiler "
        "listed 1 GPU: the profiled code ran on the CPU, or the profiler traced the CPU only"
    )


def test_launches_without_gpu_activity_blame_the_gpu_tracing(tmp_path: Path) -> None:
    events = [_op("aten::mm", 10, 50), _call("cudaLaunchKernel", 20, 1),
              _call("cudaLaunchKernel", 40, 2), _call("cudaDeviceSynchronize", 60, 3)]  # fmt: skip
    notes = _notes(_trace(tmp_path, events, deviceProperties=[_A100]))
    assert notes[1].startswith(
        "the host recorded 2 calls that give the GPU work (launches, copies, memsets) and "
        "the GPU nothing: the profiler's GPU tracing (CUPTI on NVIDIA, roctracer on AMD) "
        "delivered no activity"
    )
    assert "not known" in notes[1]


def test_copy_calls_without_gpu_activity_blame_the_gpu_tracing(tmp_path: Path) -> None:
    """Copies are GPU work too: their calls without activity records are the same failure."""
    events = [_op("aten::copy_", 10, 50), _call("cudaMemcpyAsync", 20, 1),
              _call("cudaLaunchKernel_ptsz", 40, 2)]  # fmt: skip
    notes = _notes(_trace(tmp_path, events, deviceProperties=[_A100]))
    assert notes[1].startswith("the host recorded 2 calls that give the GPU work")


def test_runtime_calls_without_launches_gave_the_gpu_no_work(tmp_path: Path) -> None:
    events = [_op("aten::empty", 10, 50), _call("cudaMalloc", 20, 1)]
    notes = _notes(_trace(tmp_path, events, deviceProperties=[_A100]))
    assert notes[1] == (
        "the host recorded 1 CUDA or HIP runtime call, none of them a launch, copy or "
        "memset: the recorded span gave the GPU no work"
    )


def test_gpu_work_gets_no_such_note(tmp_path: Path) -> None:
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 30, "dur": 10,
              "args": {"correlation": 1, "device": 0, "stream": 7}}  # fmt: skip
    path = _trace(tmp_path, [_call("cudaLaunchKernel", 20, 1), kernel], deviceProperties=[_A100])
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    notes = json.loads(result.output)["notes"]
    assert not any("no GPU" in n or "the GPU nothing" in n for n in notes)


def test_a_real_cpu_only_recording(tmp_path: Path) -> None:
    """Training steps recorded by the PyTorch profiler on a machine without a GPU (the CPU
    build): operator calls, ``ProfilerStep#N`` ranges, no runtime call, an empty device
    list. The note says the run was on the CPU; whatever the findings (its first step is
    slow, some first calls too), none may blame CUDA, cuDNN or an idle GPU, and the basis
    of host time is the run's time, not "times the share the GPU sat idle"."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: this recording would hold GPU work")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.Linear(256, 10)
    )
    opt = torch.optim.Adam(model.parameters())
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for i in range(8):
            with record_function(f"ProfilerStep#{i}"):
                x, y = torch.randn(32, 128), torch.randint(0, 10, (32,))
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                opt.zero_grad()
    path = tmp_path / "cpu.pt.trace.json"
    prof.export_chrome_trace(str(path))
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    notes = report["notes"]
    assert notes[0] == "no GPU work recorded in this trace"
    assert "no CUDA or HIP runtime call, and the profiler listed no GPU" in notes[1]
    assert "the run was on the CPU" in notes[1]
    steps = [f for f in report["findings"] if f["analyzer"] == "steps"]
    assert steps, "eight recorded steps make a steps finding"
    assert "The run was on the CPU." in steps[0]["summary"]
    for f in report["findings"]:
        text = " ".join(str(f.get(k) or "") for k in ("title", "summary", "impact_basis", "advice"))
        for wrong in (
            "cuDNN",
            "CUDA/",
            "GPU sat idle",
            "span a median",
            "Idle GPU",
            "driver",
            ".item()",
            "kernels at varying",
        ):
            assert wrong not in text, (f["analyzer"], wrong, text)
        if f["analyzer"] == "variance" and f["evidence"]["kind"] == "operator":
            assert "host time is the run's time" in f["impact_basis"]


def test_cpu_only_variance_and_step_advice(tmp_path: Path) -> None:
    """Hand-made: a slow first step and erratic operators on the CPU alone."""
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1,
               "tid": 1, "ts": 1000 * i + (0 if i == 0 else 5000), "dur": 5800 if i == 0 else 800}
              for i in range(6)]  # fmt: skip
    for i in range(6):
        start = 1000 * i + (0 if i == 0 else 5000) + 10
        for j in range(4):
            slow = i in (0, 3) and j == 0
            events.append(_op("aten::addmm", start + j * 150, 4000 if slow and i == 0 else
                              (600 if slow else 100)))  # fmt: skip
    path = _trace(tmp_path, events, deviceProperties=[])  # a CPU-only build lists none
    notes = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    report = json.loads(notes.output)
    (steps,) = [f for f in report["findings"] if f["analyzer"] == "steps"]
    # no per-step measure grew (no syncs, no loader on a CPU run): said, not an empty list
    assert "none of what is measured per step (host syncs, data loading)" in steps["advice"]
    assert "it has:" not in steps["advice"]
    assert "first-call dispatch" in steps["advice"] and "cuDNN" not in steps["advice"]


def test_findings_call_the_run_cpu_only_where_the_recording_shows_it(tmp_path: Path) -> None:
    """A GPU run whose GPU tracing failed records no GPU activity either: its findings
    must not say the run was on the CPU, nor weigh host time by a GPU idle share."""
    steps = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1,
              "tid": 1, "ts": 1000 * i + (0 if i == 0 else 5000), "dur": 5800 if i == 0 else 800}
             for i in range(6)]  # fmt: skip
    events = list(steps)
    for i in range(6):
        start = 1000 * i + (0 if i == 0 else 5000) + 10
        events.append(_call("cudaLaunchKernel", start + 1, i + 1))
        for j in range(4):
            slow = i in (0, 3) and j == 0
            events.append(_op("aten::addmm", start + j * 150, 4000 if slow and i == 0 else
                              (600 if slow else 100)))  # fmt: skip
    result = CliRunner().invoke(
        main, ["analyze", str(_trace(tmp_path, events, deviceProperties=[_A100])),
               "--format", "json"],
    )  # fmt: skip
    report = json.loads(result.output)
    assert report["notes"][1].startswith("the host recorded 6 calls that give the GPU work")
    (step,) = [f for f in report["findings"] if f["analyzer"] == "steps"]
    assert "The trace records no GPU activity." in step["summary"]
    assert "ran on the CPU" not in step["summary"] and "run was on the CPU" not in step["summary"]
    for f in report["findings"]:
        assert "the run was on the CPU" not in f["impact_basis"]
        assert "GPU sat idle" not in f["impact_basis"]
