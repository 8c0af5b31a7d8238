"""Synchronization stalls: where the host blocks on the GPU, which code caused it, what it costs.

Blocking calls are the explicit synchronizes (device, stream, event), synchronous copies
(``cudaMemcpy``) and device-to-pageable-host ``cudaMemcpyAsync`` (which cannot return before
the data lands). Each call is attributed to the operators enclosing it on its thread: the
outermost operator (not the ``ProfilerStep`` wrapper, not a Python frame) is the *site*, and
the operator chain gives the *pattern*: a scalar read (``.item()``, ``print(t)``), a
``bool(tensor)`` check, a data-dependent shape (``nonzero``, ``masked_select``, ...), a
blocking tensor copy (``.cpu()``, ``.to()`` without ``non_blocking``), or an explicit
``torch.cuda.synchronize()`` / stream / event synchronize.

Impact is GPU idle time the blocking really caused: the derived gaps judged
``synchronization`` (blocking calls on the thread that launched the next work were in
progress for at least half of the gap, before that work was issued; see
:mod:`ingest.derive_gaps`), each given to the call that blocked longest inside it, with the
blocked time inside the gap (``gaps.blocked_ns``) as what comes back. These are the gaps
idle_gpu sums under that cause; this analyzer splits them by the code that caused them. A
sync that returns as the GPU drains and leaves the gap to other host code costs that gap
nothing here (idle_gpu files it under the host code). A gap that ends with the blocking
call's own copy (``sync_gaps.own_work``: a synchronous copy starting its transfer, staging
pageable memory first) held no other work back: the finding says the time is that copy's
latency instead of work issued late. Host blocked time is evidence, not
impact: a blocked host does not by itself cost GPU time. ``cudaStreamWaitEvent`` /
``hipStreamWaitEvent`` order GPU work and never block the host, so they are not blocking
calls; HIP's synchronize and synchronous copy calls are.

The calls with their site and pattern, and the gaps each caused, are the derived tables
``blocking_calls`` and ``sync_gaps`` (:mod:`tracelens.derived.blocking_calls`).
"""

from __future__ import annotations

from ingest.derive_gaps import SYNC_MIN_GAP_FRACTION
from tracelens.analyzers.contract import finding
from tracelens.analyzers.idle_gpu import idle_finding_id
from tracelens.analyzers.known_host_reads import known_host_read_advice
from tracelens.core.findings import Finding, TimeRange
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.core.workload import Workload, workload_of, wsl_host
from tracelens.derived import require
from tracelens.derived.blocking_calls import BLOCKING_CALLS, SYNC_GAPS

ANALYZER = "sync_stalls"

_TITLES = {
    "bool_check": "`bool(tensor)` / `if tensor:` checks",
    "scalar_read": "scalar reads (`.item()`, `float(t)`, `print(t)`)",
    "data_dependent_shape": "ops with data-dependent output shapes",
    "tensor_copy": "blocking tensor copies (`.cpu()`, `.to()` without `non_blocking`)",
    "device_synchronize": "device synchronizes (`cudaDeviceSynchronize`, "
    "`torch.cuda.synchronize()`)",
    "stream_synchronize": "stream synchronizes",
    "event_synchronize": "event synchronizes",
    "sync_copy": "synchronous memory copies",
}


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    if not db.scalar("SELECT count(*) FROM api_calls"):
        return []
    require(db, BLOCKING_CALLS, SYNC_GAPS)
    groups = db.dicts(
        """
        WITH idle AS (
            SELECT call_id, count(*) AS gaps, sum(end_ns - start_ns) AS idle_ns,
                   sum(recoverable_ns) AS recoverable_ns,
                   coalesce(sum(recoverable_ns) FILTER (WHERE own_work), 0) AS own_ns
            FROM sync_gaps GROUP BY call_id
        )
        SELECT pattern, site, count(*) AS calls, sum(end_ns - start_ns) AS blocked_ns,
               sum(greatest(0, least(end_ns, ?) - greatest(start_ns, ?))) AS window_ns,
               coalesce(sum(idle.gaps), 0) AS gaps, coalesce(sum(idle.idle_ns), 0) AS idle_ns,
               coalesce(sum(idle.recoverable_ns), 0) AS recoverable_ns,
               coalesce(sum(idle.own_ns), 0) AS own_ns,
               mode(annotation) AS annotation, mode(frame) AS frame, mode(chain) AS chain,
               list(DISTINCT name ORDER BY name) AS api_names
        FROM blocking_calls LEFT JOIN idle USING (call_id)
        GROUP BY pattern, site ORDER BY recoverable_ns DESC, blocked_ns DESC, pattern, site
        """,
        [db.window[1], db.window[0]],
    )
    t0 = db.t0_ns
    w = workload_of(db)
    wsl_managed = _wsl_managed_allocations(db, w)
    findings: list[Finding] = []
    for g in groups:
        idle_ns, blocked_ns = int(g["idle_ns"]), int(g["blocked_ns"])
        impact = int(g["recoverable_ns"])
        # a call that began before the window (a first copy before the GPU's first work)
        # blocks the host partly outside it: the share of the window is of the part inside
        in_window_ns = int(g["window_ns"])
        blocked_pct = db.pct_of_window(in_window_ns)
        n = int(g["calls"])
        # A blocked host alone costs no GPU time; it matters when it recurs (every step).
        repeated_block = blocked_pct >= t.sync_min_blocked_pct and n >= t.sync_min_calls
        if db.pct_of_window(idle_ns) < t.sync_min_idle_pct and not repeated_block:
            continue
        pattern, site = g["pattern"], g["site"]
        # the caveat is for advice that narrows a synchronize; without GPU records any
        # wait's time may hold the launches' managed-memory migrations
        managed = wsl_managed if pattern in _NARROWED else 0
        migrating = 0 if db.devices else wsl_managed
        calls = db.dicts(
            """SELECT c.call_id, c.name, c.start_ns, c.end_ns,
                      coalesce(sum(s.end_ns - s.start_ns), 0) AS idle_ns
               FROM blocking_calls c LEFT JOIN sync_gaps s USING (call_id)
               WHERE c.pattern = ? AND c.site = ?
               GROUP BY c.call_id, c.name, c.start_ns, c.end_ns
               ORDER BY idle_ns DESC, c.end_ns - c.start_ns DESC, c.start_ns LIMIT ?""",
            [pattern, site, t.sync_top_calls],
        )
        gap_ranges = db.dicts(
            """SELECT s.device_id, s.start_ns, s.end_ns FROM sync_gaps s
               JOIN blocking_calls c USING (call_id) WHERE c.pattern = ? AND c.site = ?
               ORDER BY s.end_ns - s.start_ns DESC, s.start_ns LIMIT ?""",
            [pattern, site, t.sync_top_calls],
        )
        devices = [
            r[0]
            for r in db.rows(
                """SELECT DISTINCT s.device_id FROM sync_gaps s JOIN blocking_calls c
                   USING (call_id) WHERE c.pattern = ? AND c.site = ? ORDER BY 1""",
                [pattern, site],
            )
        ]
        # a program without framework operators (CUDA C) has only its own host code
        outside = "code outside any operator" if w.is_pytorch else "the program's host code"
        site_text = outside if site == "(no operator)" else f"`{site}`"
        where = site_text + (f" in `{g['annotation']}`" if g["annotation"] else "")
        findings.append(
            finding(
                ANALYZER,
                (pattern, site),
                impact,
                db,
                t,
                subject_ns=blocked_ns,
                title=f"{_title_text(pattern, w)} in {site_text}: "
                f"host blocked {fmt_ns(blocked_ns)}"
                + (f", GPU idle {fmt_ns(idle_ns)} meanwhile" if db.devices and idle_ns else "")
                + ("" if db.devices else " on GPU work the trace does not record"),
                impact_basis=(
                    _for_each(int(g["gaps"])) + " judged 'synchronization' "
                    "where these calls blocked longest (blocking calls on the launching thread "
                    f"took at least {SYNC_MIN_GAP_FRACTION:.0%} of the gap before the next work "
                    "was issued; the same gaps idle_gpu sums under that cause): the time the "
                    "thread was blocked inside the gap. "
                    + (
                        "Here each gap ends with the call's own copy: the GPU idled until the "
                        "copy the call issued could start (its launch latency and, from "
                        "pageable memory, the staging of the data through a pinned buffer), "
                        "not while other work was held back behind the call; fewer such calls "
                        "remove it."
                        if 2 * int(g["own_ns"]) >= impact > 0
                        else "Without the blocking call the next work would have been issued "
                        "that much earlier."
                    )
                    if db.devices
                    else "The trace records no GPU work, so no idle gap can be judged and none "
                    "of the blocked time is counted as GPU time to give back."
                ),
                summary=f"{n:,} blocking call{'s' if n != 1 else ''} "
                f"({', '.join(g['api_names'])}) from {where} "
                f"blocked the host {fmt_ns(blocked_ns)} ("
                + (
                    f"{blocked_pct:.1f}% of the window"
                    if in_window_ns == blocked_ns
                    else f"{fmt_ns(in_window_ns)} of it inside the window: "
                    f"{blocked_pct:.1f}% of the window"
                )
                + ")"
                + (
                    f"; in {_gaps(int(g['gaps']))} the GPU sat idle {fmt_ns(idle_ns)} while the "
                    f"host was blocked there {fmt_ns(impact)}."
                    if db.devices
                    else "; the trace records no GPU work, so GPU idle time is unknown."
                ),
                evidence={
                    "pattern": pattern,
                    "site": site,
                    "annotation": g["annotation"],
                    "python_frame": g["frame"],
                    "operator_chain": g["chain"] or None,
                    "api_calls": list(g["api_names"]),
                    "call_count": n,
                    "blocked_ns": blocked_ns,
                    "blocked_pct_of_window": round(blocked_pct, 3),
                    "idle_after_gaps": int(g["gaps"]),
                    "idle_after_ns": idle_ns,
                    "recoverable_ns": impact,
                    **({"own_copy_staging_ns": int(g["own_ns"])} if int(g["own_ns"]) else {}),
                    **(
                        {"wsl_managed_allocations": managed or migrating}
                        if managed or migrating
                        else {}
                    ),
                    "longest_calls": [
                        {
                            "api": c["name"],
                            "start_offset_ns": int(c["start_ns"] - t0),
                            "blocked_ns": int(c["end_ns"] - c["start_ns"]),
                            "gpu_idle_after_ns": int(c["idle_ns"]),
                        }
                        for c in calls
                    ],
                },
                advice=(
                    ""
                    if db.devices
                    else f"The host waited {fmt_ns(blocked_ns)} on the GPU in these calls, but "
                    "the trace records none of the GPU's work: the waits are most likely the "
                    "kernels' own run time (a GPU-bound program), not idle time a change here "
                    "gives back. "
                    + _launch_migrations(migrating)
                    + "Record again with kernel tracing on before acting on them. "
                )
                # a library's own read: what removes it is about the library, not the
                # training-loop habits the generic advice lists
                + (known_host_read_advice(g["frame"]) or _advice(pattern, where, w))
                + _managed_caveat(managed),
                supersedes=[idle_finding_id(d, "synchronization") for d in devices],
                time_ranges=[
                    TimeRange(
                        int(r["start_ns"]), int(r["end_ns"]), r["device_id"], "idle after sync"
                    )
                    for r in gap_ranges
                ],
            )
        )
    return findings


def _for_each(n: int) -> str:
    return "For the 1 gap" if n == 1 else f"For each of the {n:,} gaps"


def _gaps(n: int) -> str:
    return "1 gap" if n == 1 else f"{n:,} gaps"


def _title_text(pattern: str, w: Workload) -> str:
    text = _TITLES[pattern]
    if not w.is_pytorch:
        text = {
            "device_synchronize": "device synchronizes (`hipDeviceSynchronize`)"
            if w.amd
            else "device synchronizes (`cudaDeviceSynchronize`)",
        }.get(pattern, text)
    elif w.amd and pattern == "device_synchronize":
        text = "device synchronizes (`hipDeviceSynchronize`, `torch.cuda.synchronize()`)"
    return text[0].upper() + text[1:]


# The waits whose advice narrows or removes a synchronize.
_NARROWED = ("device_synchronize", "stream_synchronize", "event_synchronize")


def _wsl_managed_allocations(db: TraceDB, w: Workload) -> int:
    """The program's managed-memory allocations where the host is WSL2: there managed
    memory has no concurrent CPU/GPU access (as on Windows), so after a kernel launch the
    host may touch it only once a synchronize has left the GPU idle, unless it is attached
    to a stream (then that stream's synchronize suffices)."""
    if w.amd or not wsl_host(db):
        return 0
    return int(
        db.scalar(
            "SELECT count(*) FROM api_calls WHERE name IN ('cudaMallocManaged', "
            "'cuMemAllocManaged')"
        )
        or 0
    )


def _managed_caveat(managed: int) -> str:
    if not managed:
        return ""
    # Without concurrentManagedAccess the GPU owns every managed page from a kernel launch
    # until the host learns the GPU is idle: a finished kernel does not hand pages back, and
    # neither does a synchronize that leaves other work queued. A stream-attached buffer is
    # the exception: it belongs to its stream only.
    return (
        " Caveat: this host is WSL2, where managed memory has no concurrent CPU/GPU access, "
        f"and the program allocates it ({managed:,} `cudaMallocManaged` "
        f"{'call' if managed == 1 else 'calls'}): after any kernel launch the host may not "
        "touch a managed allocation until a synchronize guarantees the GPU is idle, even if "
        "the kernel has already finished. A device-wide synchronize does; so does a "
        "`cudaStreamSynchronize` or `cudaEventSynchronize` when that stream or event is the "
        "last work queued on the GPU; and a buffer attached to a stream "
        "(`cudaStreamAttachMemAsync`) needs only that stream's synchronize. So narrowing or "
        "moving a synchronize, or queuing the next kernel before the host is done with a "
        "managed buffer, can make the program fault: before each host access keep a "
        "synchronize that leaves the GPU idle, or attach the buffers the host touches to "
        "their streams first."
    )


def _launch_migrations(managed: int) -> str:
    """Where managed memory has no concurrent access the GPU cannot fault pages in, so the
    driver moves what the host touched to the GPU at each launch, before the kernel runs:
    with no kernel records, a wait's time cannot be told apart from those moves."""
    if not managed:
        return ""
    return (
        "Without concurrent managed access (this WSL2 host; the program makes "
        f"{managed:,} `cudaMallocManaged` {'call' if managed == 1 else 'calls'}), each "
        "launch first migrates the managed memory the host touched to the GPU, so the waits "
        "may include those migrations too. "
    )


def _advice(pattern: str, where: str, w: Workload) -> str:
    api = "hip" if w.amd else "cuda"
    if not w.is_pytorch:
        if pattern == "device_synchronize":
            return (
                f"A `{api}DeviceSynchronize` in {where} waits for every stream. Synchronize "
                f"only on what the host needs (`{api}StreamSynchronize` or "
                f"`{api}EventSynchronize` on an event recorded after it), order GPU work "
                f"with `{api}StreamWaitEvent`, and keep it out of loops."
            )
        if pattern in ("stream_synchronize", "event_synchronize"):
            return (
                f"{where[:1].upper() + where[1:]} blocks the host on the GPU. Order dependent "
                "GPU work with "
                f"`{api}StreamWaitEvent` instead, and wait on the host only where it reads "
                "the results, after queuing the next work."
            )
        return (
            f"{where[:1].upper() + where[1:]} uses a synchronous copy (`{api}Memcpy`), which "
            "from pageable memory "
            f"also stages the data through the CPU while the GPU waits. Use `{api}MemcpyAsync` "
            f"on a stream from pinned buffers (`{api}HostAlloc`/`{api}HostRegister`), and "
            "synchronize on an event only when the data is needed."
        )
    return _torch_advice(pattern, where, api)


def _torch_advice(pattern: str, where: str, api: str) -> str:
    if pattern in ("scalar_read", "bool_check"):
        return (
            f"{where} reads a GPU value on the host, which waits for every queued kernel. Keep "
            "the value on the GPU (accumulate losses/metrics in a tensor and call `.item()` "
            "every N steps), replace `if t:` / `while flag.item():` control flow with "
            "`torch.where` or masking, and never `print` a CUDA tensor inside the loop. For "
            "decoding loops, check stop conditions every few tokens or on a side stream copy "
            "into pinned memory (`non_blocking=True`) read one step later."
        )
    if pattern == "data_dependent_shape":
        return (
            f"{where} produces a tensor whose size depends on the data, so the host must wait "
            "for the GPU to know it. Use fixed-size alternatives: masks with `torch.where` "
            "instead of `masked_select`/boolean indexing, `torch.nonzero_static` / "
            "`size=` arguments where available, or pad to a known maximum."
        )
    if pattern == "tensor_copy":
        return (
            f"{where} copies between host and device synchronously. Copy into pinned memory "
            "with `.to(device, non_blocking=True)` (`pin_memory=True` in the DataLoader; "
            "`torch.empty(..., pin_memory=True)` for outputs) and synchronize once, on a "
            "`torch.cuda.Event`, only where the host really needs the data; move `.cpu()`/"
            "`.tolist()` of results out of the hot loop."
        )
    if pattern == "device_synchronize":
        return (
            f"A device synchronize (`torch.cuda.synchronize()`, `{api}DeviceSynchronize`) in "
            f"{where} drains every stream. Drop it from the hot "
            "loop (it is only needed for timing and before reading host copies); time with "
            "`torch.cuda.Event(enable_timing=True)` or the profiler instead."
        )
    if pattern == "event_synchronize":
        return (
            f"{where} waits on a CUDA event on the host. Prefer `stream.wait_event(e)` "
            "(GPU-side ordering) and read event timings (`elapsed_time`) after the loop."
        )
    if pattern == "stream_synchronize":
        return (
            f"{where} blocks the host on a stream. If only other GPU work depends on it, "
            "order it on the GPU with `torch.cuda.current_stream().wait_stream(s)`; otherwise "
            "move the synchronize later so more work is queued before the host waits."
        )
    return (
        f"{where} uses a synchronous copy (`{api}Memcpy`). Use `{api}MemcpyAsync` on a stream "
        "with pinned host buffers, and synchronize on an event only when the data is needed."
    )
