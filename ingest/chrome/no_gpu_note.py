"""Why a PyTorch profiler trace holds no GPU work, said where it can be told from the trace.

A trace with no kernel, copy or memset is most often recorded wrongly rather than of a
program that never used its GPU, and "no GPU work" alone leaves the user to guess which.
Three recordings look different in the file:

- launch calls recorded (``cudaLaunchKernel``, ``hipLaunchKernel``, ...) but no GPU
  activity: the program used the GPU and the profiler's device side (CUPTI, roctracer)
  delivered nothing;
- no runtime call at all while the profiler listed GPUs (``deviceProperties``): the GPU
  was there, and either the profiled code ran on the CPU or the profiler traced the CPU
  only (``activities=[ProfilerActivity.CPU]``);
- no runtime call and no GPU listed: the profiler saw no GPU, so the run was on the CPU
  (a machine or container without a visible GPU, or ``CUDA_VISIBLE_DEVICES`` empty).
"""

from __future__ import annotations

import duckdb

from ingest.derive_gaps import LAUNCH_CALLS
from ingest.schema import sql_list

# ProfilerActivity.CUDA also selects ROCm's tracer in a ROCm build of PyTorch.
_RECORD_GPU = "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"


def no_gpu_note(con: duckdb.DuckDBPyConnection, listed_gpus: int | None) -> str | None:
    """The note for a trace that recorded no GPU work (None where it recorded some);
    ``listed_gpus`` is the length of the trace's ``deviceProperties`` (None without one:
    traces before PyTorch 1.9 have none)."""
    work, launches, calls, ops = con.execute(
        f"""SELECT (SELECT count(*) FROM kernels) + (SELECT count(*) FROM memcpys)
                     + (SELECT count(*) FROM memsets),
                   (SELECT count(*) FROM api_calls WHERE name IN ({sql_list(LAUNCH_CALLS)})),
                   (SELECT count(*) FROM api_calls), (SELECT count(*) FROM cpu_ops)"""
    ).fetchone()  # type: ignore[misc]
    if work:
        return None
    if launches:
        return (
            f"the host recorded {_n(launches, 'kernel launch call')} and the GPU nothing: the "
            "profiler's GPU tracing (CUPTI on NVIDIA, roctracer on AMD) delivered no activity, "
            "as when another profiler holds it or the run ends before its buffers are "
            "flushed; the GPU's time is not known from this trace"
        )
    if calls:
        return (
            f"the host recorded {_n(calls, 'CUDA or HIP runtime call')} and no kernel launch: "
            "the recorded span gave the GPU no work"
        )
    host = f"{_n(ops, 'operator call')} and no CUDA or HIP runtime call"
    if listed_gpus:
        return (
            f"the trace holds {host}, though the profiler listed "
            f"{_n(listed_gpus, 'GPU')}: the profiled code ran on the CPU, or the profiler "
            f"traced the CPU only; to see the GPU, record with `{_RECORD_GPU}`"
        )
    listed = "(its `deviceProperties` is empty)" if listed_gpus == 0 else ""
    return (
        f"the trace holds {host}, and the profiler listed no GPU{' ' + listed if listed else ''}"
        ": the run was on the CPU, where no GPU was visible (a machine or container "
        "without one, or `CUDA_VISIBLE_DEVICES` empty); to see the GPU, record where it is "
        f"visible, with `{_RECORD_GPU}`"
    )


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
