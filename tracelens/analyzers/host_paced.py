"""Kernel time the host paces: what a faster kernel cannot give back.

A kernel finding (an operator beyond its roofline, a grid that leaves compute units idle)
costs the kernels' time as if the run would end that much
sooner with faster kernels. That holds where the GPU paces the run: the next work was
queued when the kernel ended, so it starts earlier. Where the GPU then sat idle until the
host issued the next launch, a shorter kernel only lengthens that wait: on an MI300X
running BERT one kernel at a time (GPU busy 11 %), none of `attn_fwd`'s 114 µs is
followed by queued work, so widening its grid gives back nothing until the host keeps
the GPU fed.

A kernel is *host-paced* when an idle gap of its device starts as it ends, the gap is at
least ``idle_kernel_switch_ns`` long (shorter is the GPU's own kernel-to-kernel time), its
cause is not the host waiting on the GPU (``synchronization``: there a shorter kernel
returns the host sooner), and the next work came as soon as the host issued it: its
launch call ended after the gap began, or it started within ``idle_launch_latency_ns`` of
that call's end (issued just before the GPU went idle, it arrived one launch latency
later, as on BERT's MI300X VF where every kernel starts 14-19 µs after its call). A
finding's impact is scaled by the share of its kernels' time that is not host-paced, from
``host_paced_min_pct`` of it up; on GPU-bound traces the shares are 98-100 % and nothing
changes.

Fusion findings are not scaled here: fusing a run of kernels also removes launches, which
is what a host-paced run needs. The fusion analyzer caps its own estimate with the same
replay, adding back each removed launch's host time (:func:`fusion._replayed`).

That is one step of the critical path, not all of it: a kernel followed by queued work
whose chain later ends in a host-paced gap is still counted. The rest of it comes from a
replay of the device's work with the host's launches held (:mod:`launch_replay`): where
the finding's kernels at their ideal end the run less early than the scaled impact says
(a ResNet-50 whose steps wait 70 ms on a `num_workers=0` loader: FP16 convolutions give
back 15 ms of their estimated 107), the impact is that replay's saving, and the basis
says what comes back only once the host keeps the GPU fed. The replay needs the finding's
kernels whole (their time at least its subject's): otherwise the scaling stands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tracelens.analyzers.finding_kernels import finding_kernels
from tracelens.analyzers.launch_replay import host_waits_recorded, replay_saving
from tracelens.analyzers.recording_caveats import profiler_pacing_caveat
from tracelens.core.clipped import clipped
from tracelens.core.findings import Finding
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.core.workload import workload_of

# The analyzers whose impact is kernel time a faster kernel would save (not fusion: see
# the module docstring).
KERNEL_TIME_ANALYZERS = ("hot_ops", "occupancy")

# Each kernel with whether it is host-paced (see the module docstring); ``{sel}`` selects
# the subject's kernels as (device_id, start_ns, end_ns).
_PACED_SQL = """
WITH k AS ({sel}),
g AS (
    SELECT device_id, start_ns FROM gaps
    WHERE end_ns - start_ns >= ? AND cause IS DISTINCT FROM 'synchronization'
      AND (launch_end_ns > start_ns OR end_ns - launch_end_ns <= ?)
)
SELECT coalesce(sum(k.end_ns - k.start_ns), 0) AS ns,
       coalesce(sum(k.end_ns - k.start_ns) FILTER (WHERE g.start_ns IS NOT NULL), 0)
           AS host_paced_ns
FROM k LEFT JOIN g ON g.device_id = k.device_id AND g.start_ns = k.end_ns
"""


def host_paced_share(db: TraceDB, f: Finding, t: Thresholds) -> tuple[float, int] | None:
    """The share of a finding's kernels' time that is host-paced, and that time (ns)."""
    subject = finding_kernels(db, f)
    if subject is None:
        return None
    sel, params = subject
    ns, paced = db.rows(
        _PACED_SQL.format(sel=sel),
        [*params, t.idle_kernel_switch_ns, t.idle_launch_latency_ns],
    )[0]
    if not ns:
        return None
    return float(paced) / float(ns), int(paced)


def leave_out_host_paced(findings: list[Finding], db: TraceDB, t: Thresholds) -> None:
    """Scale each kernel-time finding's impact to the share of its kernels' time the host
    does not pace, and say so in its basis."""
    if not db.scalar("SELECT count(*) FROM gaps WHERE launch_end_ns IS NOT NULL"):
        return
    for f in findings:
        if f.analyzer not in KERNEL_TIME_ANALYZERS or f.impact_ns <= 0:
            continue
        got = host_paced_share(db, f, t)
        if got is None:
            continue
        share, paced_ns = got
        if 100.0 * share < t.host_paced_min_pct:
            continue
        kept = int(f.impact_ns * (1.0 - share))
        f.impact_basis += (
            f" {100 * share:.0f}% of these kernels' time ({fmt_ns(paced_ns)}) is in launches "
            "after which the GPU sat idle until the host's next launch arrived: a faster "
            "kernel there only lengthens that idle time and gives nothing back until the host "
            "keeps the GPU fed (the idle-GPU findings). This is the rest "
            f"({fmt_ns(kept)} of {fmt_ns(f.impact_ns)})."
        )
        if f.impact_ns:
            f.impact_pct *= kept / f.impact_ns
        f.impact_ns = kept
    capped = [
        c
        for f in findings
        if f.analyzer in KERNEL_TIME_ANALYZERS and f.impact_ns > 0
        if (c := _cap_by_replay(db, f, t)) is not None
    ]
    if len(capped) >= 2:
        _shared_saving(db, capped, t)


# A replay's saving below this share of the impact caps it: closer, the two agree within
# what the replay's own simplifications (one queue per device) can tell.
_REPLAY_CAP_SHARE = 0.8


@dataclass(frozen=True)
class _Capped:
    """A finding its replay capped: its kernels (a selection of device, start, end), their
    time, its estimate before the cap and the replay's saving."""

    finding: Finding
    sel: str
    params: list[Any]
    kernel_ns: int
    estimate_ns: int
    saving_ns: int


def _cap_by_replay(db: TraceDB, f: Finding, t: Thresholds) -> _Capped | None:
    """Cap a kernel-time finding's impact at how much sooner a replay with the host's
    launches held ends the device's work with its kernels at the ideal (see the module)."""
    subject = finding_kernels(db, f)
    if subject is None:
        return None
    sel, params = subject
    if not host_waits_recorded(db, sel, params):
        return None
    kernel_ns = int(db.scalar(f"SELECT sum(end_ns - start_ns) FROM ({sel})", params) or 0)
    # the selection must hold the finding's kernels whole: an impact larger than their
    # time, or a subject larger, means it names only some of them
    if kernel_ns <= 0 or f.impact_ns > kernel_ns or (f.subject_ns or 0) > kernel_ns * 1.05:
        return None
    estimate = f.impact_ns
    saving = replay_saving(db, sel, params, 1.0 - f.impact_ns / kernel_ns, t.idle_drain_min_wait_ns)
    if saving >= _REPLAY_CAP_SHARE * f.impact_ns:
        return None
    f.impact_basis += (
        " Replayed with the host's launches held where they were (each blocking call "
        "returning as soon as the GPU work before it is done), these kernels at that speed "
        f"end the run only {fmt_ns(saving)} sooner: elsewhere the GPU waits on the host "
        "(the idle-GPU findings), and a faster kernel only waits longer for the next "
        f"launch. That is what comes back in this run; up to {fmt_ns(f.impact_ns)} once "
        "the host keeps the GPU fed." + profiler_pacing_caveat(workload_of(db), saving)
    )
    if f.impact_ns:
        f.impact_pct *= saving / f.impact_ns
    f.impact_ns = saving
    return _Capped(f, sel, list(params), kernel_ns, estimate, saving)


def _shared_saving(db: TraceDB, capped: list[_Capped], t: Thresholds) -> None:
    """Replayed savings of several findings do not add up where their kernels wait on the
    same launches (ResNet-50's backward convolutions: input and weight gradients each end
    the run 15 ms sooner at FP16 speed, both together not 30 ms): replay them together,
    each at its own ideal speed's average, and say so where the sum overstates it."""
    sel = " UNION ".join(f"SELECT device_id, start_ns, end_ns FROM ({c.sel})" for c in capped)
    params = [p for c in capped for p in c.params]
    kernel_ns = int(db.scalar(f"SELECT sum(end_ns - start_ns) FROM ({sel})", params) or 0)
    estimate = sum(c.estimate_ns for c in capped)
    if kernel_ns <= 0 or estimate > kernel_ns:
        return  # the findings' kernels overlap: no one speed for them together
    joint = replay_saving(db, sel, params, 1.0 - estimate / kernel_ns, t.idle_drain_min_wait_ns)
    total = sum(c.saving_ns for c in capped)
    if joint >= _SHARED_SHARE * total:
        return
    giving = [c for c in capped if c.saving_ns > 0]
    for c in giving if len(giving) >= 2 else []:
        others = [_subject_name(o.finding) for o in giving if o is not c]
        c.finding.impact_basis += (
            f" Not in addition to {_listed(others)}: their kernels wait on the same "
            f"launches, and with all of them at that speed the run ends {fmt_ns(joint)} "
            f"sooner, not {fmt_ns(total)}."
        )


def _subject_name(f: Finding) -> str:
    """The operator or kernel a finding is about, as the title names it."""
    op = f.evidence.get("operator")
    if not op:
        named = re.search(r"`([^`]+)`", f.title)
        op = clipped(named.group(1), 48) if named else None
    if op:
        return f"`{op}`'s"
    return "the FP32 GEMM/convolution finding's" if "FP32" in f.title else "the occupancy finding's"


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# Savings replayed together at least this share of their sum add up closely enough.
_SHARED_SHARE = 0.9
