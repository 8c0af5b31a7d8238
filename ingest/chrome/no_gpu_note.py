"""Why a PyTorch profiler trace holds no GPU work, said where it can be told from the trace.

A trace with no kernel, copy or memset is most often recorded wrongly rather than of a
program that never used its GPU, and "no GPU work" alone leaves the user to guess which.
The recordings look different in the file, and each is kept as the ``no_gpu_recording``
trace fact (the analyzers word CPU-only findings from it):

- ``gpu_untraced``: calls that give the GPU work (launches, copies, memsets) recorded but
  no GPU activity: the program used the GPU and the profiler's device side (CUPTI,
  roctracer) delivered nothing;
- ``no_gpu_work``: runtime calls, none giving the GPU work;
- ``cpu_traced``: no runtime call while the profiler listed GPUs (``deviceProperties``):
  the GPU was there, and either the profiled code ran on the CPU or the profiler traced
  the CPU only (``activities=[ProfilerActivity.CPU]``);
- ``cpu_run``: no runtime call and an empty ``deviceProperties``: Kineto lists nothing in
  a CPU-only build of PyTorch, or where no GPU is visible; the run was on the CPU;
- ``unknown``: no runtime call and no ``deviceProperties`` at all (PyTorch before 1.9,
  builds that wrote it only with CUDA tracing), or nothing recorded: nothing to conclude.
"""

from __future__ import annotations

import duckdb

# ProfilerActivity.CUDA also selects ROCm's tracer in a ROCm build of PyTorch.
_RECORD_GPU = "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
# Calls that give the GPU work: launches, copies, memsets, prefetches (CUDA, HIP and the
# driver API, with their _ptsz/_v2/Async variants).
_GPU_WORK_CALL = "regexp_matches(name, '(?i)(launch|memcpy|memset|prefetch|graphlaunch)')"


def no_gpu_recording(
    con: duckdb.DuckDBPyConnection, listed_gpus: int | None
) -> tuple[str, str] | None:
    """``(kind, note)`` for a trace that recorded no GPU work (None where it recorded some);
    ``listed_gpus`` is the length of the trace's ``deviceProperties`` (None without one)."""
    work, gpu_calls, calls, ops = con.execute(
        f"""SELECT (SELECT count(*) FROM kernels) + (SELECT count(*) FROM memcpys)
                     + (SELECT count(*) FROM memsets),
                   (SELECT count(*) FROM api_calls WHERE {_GPU_WORK_CALL}),
                   (SELECT count(*) FROM api_calls), (SELECT count(*) FROM cpu_ops)"""
    ).fetchone()  # type: ignore[misc]
    if work:
        return None
    if gpu_calls:
        return "gpu_untraced", (
            f"the host recorded {_n(gpu_calls, 'call')} that give the GPU work (launches, "
            "copies, memsets) and the GPU nothing: the profiler's GPU tracing (CUPTI on "
            "NVIDIA, roctracer on AMD) delivered no activity, as when another profiler holds "
            "it or the run ends before its buffers are flushed; the GPU's time is not known "
            "from this trace"
        )
    if calls:
        return "no_gpu_work", (
            f"the host recorded {_n(calls, 'CUDA or HIP runtime call')}, none of them a "
            "launch, copy or memset: the recorded span gave the GPU no work"
        )
    if not ops:
        return "unknown", "the trace holds no operator call and no runtime call"
    host = f"{_n(ops, 'operator call')} and no CUDA or HIP runtime call"
    if listed_gpus:
        return "cpu_traced", (
            f"the trace holds {host}, though the profiler listed {_n(listed_gpus, 'GPU')}: "
            "the profiled code ran on the CPU, or the profiler traced the CPU only; to see "
            f"the GPU, record with `{_RECORD_GPU}`"
        )
    if listed_gpus == 0:
        return "cpu_run", (
            f"the trace holds {host}, and the profiler listed no GPU (its `deviceProperties` "
            "is empty, as in a CPU-only build of PyTorch or where no GPU is visible): the run "
            "was on the CPU; to see a GPU, run a CUDA or ROCm build of PyTorch where the GPU "
            f"is visible and record with `{_RECORD_GPU}`"
        )
    return "unknown", (
        f"the trace holds {host} and does not list the profiler's devices (no "
        "`deviceProperties`: PyTorch before 1.9, or a build that wrote it only with CUDA "
        "tracing), so whether the run used a GPU is not known; to see the GPU, record with "
        f"`{_RECORD_GPU}`"
    )


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
