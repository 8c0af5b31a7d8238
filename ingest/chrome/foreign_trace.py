"""A Chrome trace written by something other than the PyTorch profiler, refused by name.

The Chrome trace format is shared: TensorFlow's and JAX's profilers (XLA), browsers and
other tools write it too, with categories of their own (or none). Read as a PyTorch trace
such a file routes nothing and would be reported as a run that "recorded no GPU work",
a CPU-only run, which a JAX training trace full of GPU kernels is not. When no event of
the trace has a category the PyTorch profiler writes, the read stops with an error that
says what the file is and how to record the program so tracelens can read it: Nsight
Systems traces any CUDA program, whatever its framework.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb

from ingest.chrome.event_sql import ROUTES
from ingest.errors import TraceInputError

# Every category the PyTorch profiler (Kineto, and the 2021 profiler's spellings) writes,
# lower-cased as the census counts them: the ones routed to tables, and the ones that
# carry no table's rows (its own span, flows, overhead, allocator instants).
PYTORCH_CATEGORIES = frozenset().union(*(cats for cats, _ in ROUTES)) - {"ph:M"} | {
    "trace",
    "ac2g",
    "fwdbwd",
    "overhead",
    "cpu_instant_event",
    "cuda_profiler_range",
    "python",
    "memory",
    "user",
    "async",
    # other backends' runtimes and Kineto's own records
    "xpu_runtime",
    "xpu_driver",
    "mtia_runtime",
    "mtia_ccp_events",
    "mtia_counters",
    "mtia_insight",
    "privateuse1_runtime",
    "privateuse1_driver",
    "collective_comm",
    "hpu_op",
    "glow_runtime",
    "external_correlation",
}
# The legacy autograd profiler's export (``torch.autograd.profiler.profile`` and
# ``prof.function_events.export_chrome_trace``, PyTorch before Kineto) writes no
# categories and names its processes so, as strings
_LEGACY_PIDS = (b'"CPU functions"', b'"CUDA functions"')

_NSYS = (
    "run it under Nsight Systems (`nsys profile --trace=cuda,nvtx -o run python train.py`, "
    "then `nsys export --type sqlite run.nsys-rep`) and analyze the .sqlite export"
)


def foreign_trace_error(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    categories: dict[str, int],
    head: Callable[[], bytes] = lambda: b"",
) -> TraceInputError | None:
    """The error for a trace none of whose events the PyTorch profiler could have written
    (None for a PyTorch trace, and for one with no events but metadata: nothing to judge);
    ``head`` gives the trace's first bytes, read only for such a trace."""
    events = {c: n for c, n in categories.items() if c != "ph:M"}
    if not events or PYTORCH_CATEGORIES & events.keys():
        return None
    first = head()
    if any(p in first for p in _LEGACY_PIDS):
        return TraceInputError(
            path,
            "a trace from PyTorch's legacy autograd profiler (`torch.autograd.profiler`, "
            'processes "CPU functions" / "CUDA functions", no event categories), which '
            "records no runtime calls or launch links to read: record with "
            "`torch.profiler.profile(activities=[ProfilerActivity.CPU, "
            "ProfilerActivity.CUDA])` and its `export_chrome_trace`",
        )
    # XProf names a device by itself (/device:GPU:0) or after its host (myhost /device:GPU:0)
    xla = con.execute(
        """SELECT list(DISTINCT process_name ORDER BY process_name) FROM threads
           WHERE process_name LIKE '%/device:%' OR process_name LIKE '%/host:%'"""
    ).fetchone()[0]  # type: ignore[index]
    if xla and any("/device:TPU" in n for n in xla):
        names = ", ".join(f"`{n}`" for n in xla[:3])
        return TraceInputError(
            path,
            f"a TensorFlow or JAX (XLA) profiler trace of a TPU (processes {names}), not a "
            "PyTorch profiler trace; tracelens analyzes NVIDIA and AMD GPUs",
        )
    if xla:
        names = ", ".join(f"`{n}`" for n in xla[:3])
        return TraceInputError(
            path,
            f"a TensorFlow or JAX (XLA) profiler trace (processes {names}), not a PyTorch "
            "profiler trace; tracelens reads PyTorch profiler traces and Nsight Systems "
            f"exports: to analyze this program, {_NSYS}",
        )
    total = sum(events.values())
    top = sorted(events.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    seen = ", ".join(f"{'no category' if c.startswith('ph:') else repr(c)} ({n:,})" for c, n in top)
    return TraceInputError(
        path,
        f"not a PyTorch profiler trace: none of its {total:,} events has a category the "
        f"PyTorch profiler writes (`kernel`, `cpu_op`, `cuda_runtime`, ...; here: {seen}); "
        f"to analyze a program the PyTorch profiler does not record, {_NSYS}",
    )
