"""The evidence of ``sync_stalls`` findings (:mod:`tracelens.analyzers.sync_stalls`)."""

from __future__ import annotations

from tracelens.analyzers.evidence_keys.model import (
    COUNT,
    NS,
    PCT,
    ROWS,
    TEXT,
    TEXTS,
    AnalyzerEvidence,
    Key,
)

EVIDENCE = AnalyzerEvidence(
    "sync_stalls",
    "Blocking calls grouped by what blocked (pattern) and the code that made them (site), "
    "with the synchronization gaps they caused (derived tables blocking_calls, sync_gaps)",
    keys=(
        Key(
            "pattern",
            TEXT,
            "What blocked, from the enclosing operators and the call",
            choices=(
                "bool_check",
                "scalar_read",
                "data_dependent_shape",
                "tensor_copy",
                "device_synchronize",
                "stream_synchronize",
                "event_synchronize",
                "sync_copy",
            ),
        ),
        Key(
            "site",
            TEXT,
            "Outermost enclosing operator (or range), else annotation, else `(no operator)`",
        ),
        Key(
            "annotation",
            TEXT,
            "The innermost host annotation range the calls were in (most often)",
            null="no annotation range encloses them",
        ),
        Key(
            "python_frame",
            TEXT,
            "The innermost Python function the calls were in (most often)",
            null="the trace records no Python functions there",
        ),
        Key(
            "operator_chain",
            TEXT,
            "The enclosing operators (ranges where none are recorded), outermost first, "
            "joined by ' > ' (most often)",
            null="no operator encloses them",
        ),
        Key("api_calls", TEXTS, "The blocking runtime calls, by name"),
        Key("call_count", COUNT, "Blocking calls in the group"),
        Key("blocked_ns", NS, "Host time in them"),
        Key("blocked_pct_of_window", PCT, "`blocked_ns` as a share of the analysed window"),
        Key(
            "idle_after_gaps",
            COUNT,
            "Gaps judged `synchronization` in which these calls blocked longest",
        ),
        Key("idle_after_ns", NS, "Those gaps' summed duration"),
        Key(
            "recoverable_ns",
            NS,
            "Time the thread was blocked inside those gaps before the next work was "
            "issued: the impact",
        ),
        Key(
            "own_copy_staging_ns",
            NS,
            "Of that, the gaps that end with the call's own copy: a synchronous copy staging "
            "pageable host memory before its transfer starts",
            when="some of the gaps end with the blocking call's own copy",
        ),
        Key(
            "wsl_managed_allocations",
            COUNT,
            "The program's managed-memory allocation calls (`cudaMallocManaged`, "
            "`cuMemAllocManaged`) on a WSL2 host, where managed memory has no concurrent "
            "CPU/GPU access: the advice then warns that narrowing a synchronize can make the "
            "program fault (the host may touch managed memory after a launch only once a "
            "synchronize leaves the GPU idle, or its stream's for a stream-attached buffer), "
            "and, where the trace records no GPU work, that the waits may include each "
            "launch's migration of host-touched managed memory to the GPU",
            when="the host is WSL2, the program allocates managed memory, and the calls "
            "synchronize a device, stream or event, or the trace records no GPU work",
        ),
        Key(
            "longest_calls",
            ROWS,
            "The calls that left the GPU idle longest, then blocked longest "
            "(`sync_top_calls` of them)",
            fields=(
                Key("api", TEXT, "The runtime call"),
                Key("start_offset_ns", NS, "Its start, from trace.t0_ns"),
                Key("blocked_ns", NS, "Its duration"),
                Key("gpu_idle_after_ns", NS, "Summed duration of the gaps it is given"),
            ),
        ),
    ),
)
