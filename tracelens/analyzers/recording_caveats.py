"""What a capture's own recording adds to the time a host-side finding blames.

The PyTorch profiler's Python stacks (``with_stack=True``) and allocator events
(``profile_memory=True``) run on the host for every operator: a few microseconds a call,
which a launch-bound or host-bound program pays in full. A finding that blames host time
in such a capture says so, so the gain is confirmed in a capture without them before code
is rewritten for it.
"""

from __future__ import annotations

from tracelens.core.workload import Workload


def profiler_overhead_caveat(w: Workload) -> str:
    """A sentence (with its leading space) for a host-side finding; empty where the trace
    does not record such options."""
    options = w.profiler_host_overhead
    if not options:
        return ""
    named = " and ".join(f"`{o}=True`" for o in options)
    verb = "adds" if len(options) == 1 else "add"
    return (
        f" The capture ran with {named}, which {verb} the profiler's own host time to every "
        "operator (several microseconds a call with Python stacks): part of this host time "
        "is the profiler's, so confirm the gain in a capture without them."
    )


def profiler_pacing_caveat(w: Workload) -> str:
    """A sentence (with its leading space) for a GPU-side finding whose saving a replay
    capped because the host paces the GPU: that host time includes the profiler's own, so
    without it more would come back. Empty where the trace records no such option."""
    options = w.profiler_host_overhead
    if not options:
        return ""
    named = " and ".join(f"`{o}=True`" for o in options)
    return (
        f" The capture ran with {named}, which add{'s' if len(options) == 1 else ''} the "
        "profiler's own host time to every operator: without "
        f"{'it' if len(options) == 1 else 'them'} the host paces the GPU less, so this "
        "run's figure is a floor."
    )
