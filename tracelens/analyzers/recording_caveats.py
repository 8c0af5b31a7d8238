"""What a capture's own recording adds to the time a host-side finding blames.

The PyTorch profiler's Python stacks (``with_stack=True``) and allocator events
(``profile_memory=True``) run on the host for every operator: a few microseconds a call,
which a launch-bound or host-bound program pays in full. A finding that blames host time
in such a capture says so, so the gain is confirmed in a capture without them before code
is rewritten for it; one whose saving a replay capped because the host paces the GPU says
that part of that pacing is the profiler's. The options are said as what the capture
recorded, which the events show whether or not the trace lists its options (the 2021
profiler's does not).
"""

from __future__ import annotations

from tracelens.core.workload import Workload

_RECORDED = {"with_stack": "Python stacks", "profile_memory": "allocator events"}


def _recorded(w: Workload) -> tuple[str, int]:
    """``Python stacks and allocator events (`with_stack=True`, `profile_memory=True`)``
    and how many options that names; empty where the trace records neither."""
    options = w.profiler_host_overhead
    if not options:
        return "", 0
    what = " and ".join(_RECORDED[o] for o in options)
    flags = ", ".join(f"`{o}=True`" for o in options)
    return f"{what} ({flags})", len(options)


def profiler_overhead_caveat(w: Workload) -> str:
    """A sentence (with its leading space) for a host-side finding; empty where the trace
    does not record such options."""
    recorded, n = _recorded(w)
    if not n:
        return ""
    return (
        f" The capture recorded {recorded}, which add{'s' if n == 1 else ''} the "
        "profiler's own host time to every operator (several microseconds a call with "
        "Python stacks): part of this host time is the profiler's, so confirm the gain in a "
        "capture without them."
    )


def profiler_pacing_caveat(w: Workload, saving_ns: int) -> str:
    """A sentence (with its leading space) for a GPU-side finding whose saving a replay
    capped because the host paces the GPU: part of that pacing is the profiler's own host
    time, so without it somewhat more comes back. Empty where the trace records no such
    option, or where the replay gave nothing back (the host then paces the GPU elsewhere,
    a data loader, say, which the profiler does not make)."""
    recorded, n = _recorded(w)
    if not n or saving_ns <= 0:
        return ""
    return (
        f" Part of the host time that paces the GPU here is the profiler's own, as the "
        f"capture recorded {recorded}: without it somewhat more of this comes back in this "
        "run."
    )


def profiler_launch_caveat(w: Workload) -> str:
    """A sentence (with its leading space) for a saving that adds removed launches' host
    time to a replay's: both include the profiler's own host time, in opposite ways."""
    recorded, n = _recorded(w)
    if not n:
        return ""
    return (
        f" Both parts include the profiler's own host time, as the capture recorded "
        f"{recorded}: without it the host paces the GPU less, so the replayed part grows, "
        "and each removed launch costs less, so that part shrinks."
    )
