"""A rank's communication findings, reconciled with what the job as a whole shows.

A rank alone can only estimate how much of a collective kernel is waiting for its peers:
the kernel's time beyond its bytes at the best rate the rank reached. Small collectives
break that estimate — they take their latency whatever their size, which it reads as
waiting. With every rank of the job on one clock, waiting is measured instead: how long
after a rank the last one arrived. So, per rank:

- the peer-waiting finding keeps at most the measured waiting, and is dropped when the
  measurement is under half the estimate (its title would be wrong); what it gives up is
  the collectives' own time, returned to the exposed-communication finding;
- waiting for a named straggler is the straggler finding's, taken from the peer-waiting
  finding first, then from the exposed-communication finding;
- what coalescing small collectives would give back is the storm finding's, taken from
  the exposed-communication finding;
- a rank that arrives last among the recorded ranks of a larger job cannot be the one its
  peers wait for and also be early: what it waits for are ranks not recorded, and its
  peer-waiting advice says so instead of leaving open which peers are late.

No millisecond is then counted by two findings. Measured waiting replaces the estimate
only where every collective of the rank is paired with every other rank's and the job's
ranks are all here: a collective with an absent rank may be waiting for it.
"""

from __future__ import annotations

from typing import Any

from tracelens.core.units import fmt_ns
from tracelens.ranks.grouping import of_rank, problem_key

_FOR_STRAGGLER = (
    " In this job, {cut} of it is waiting for a straggler rank, which that rank's finding "
    "counts; the rest is left here."
)
_FOR_STORM = (
    " In this job, {cut} of it is what coalescing small collectives gives back, which the "
    "small-collective finding counts; the rest is left here."
)


def reconcile(
    rank: int,
    findings: list[dict[str, Any]],
    measured_wait_ns: int | None,
    straggler_wait_ns: int,
    coalesced_ns: int,
    last_among_recorded: bool = False,
) -> tuple[list[dict[str, Any]], tuple[int, int] | None]:
    """``rank``'s own findings (each given its ``rank``) as the job counts them, and, when a
    peer-waiting finding was dropped, its (estimated, measured) waiting for the note.
    ``measured_wait_ns`` is None where waiting cannot be measured (see the module).
    ``last_among_recorded``: the job names this rank the straggler among only some of its
    ranks."""
    mine = [of_rank(f, rank) for f in findings]
    if last_among_recorded:
        mine = [_waits_for_unrecorded(f) if _is_waiting(f) else f for f in mine]
    note = None
    released = 0
    if measured_wait_ns is not None:
        kept = []
        for f in mine:
            if not _is_waiting(f) or f["impact_ns"] <= measured_wait_ns:
                kept.append(f)
                continue
            released += int(f["impact_ns"]) - measured_wait_ns
            if 2 * measured_wait_ns < f["impact_ns"]:
                note = (int(f["impact_ns"]), measured_wait_ns)
                continue
            kept.append(
                _cut(
                    f,
                    int(f["impact_ns"]) - measured_wait_ns,
                    " On the job's aligned clocks this rank waited {left} in its collectives; "
                    "the other {cut} is the collectives' own time, counted with its exposed "
                    "communication.",
                )
            )
        mine = kept
    out = []
    left = straggler_wait_ns
    # the peer-waiting finding holds straggler waiting first; the transfer finding the rest
    for f in sorted(mine, key=lambda f: not _is_waiting(f)):
        if f["analyzer"] == "communication" and not _is_waiting(f):
            f = _grow(f, released)
            f, _ = _less(f, coalesced_ns, _FOR_STORM)
        f, left = _less(f, left, _FOR_STRAGGLER)
        out.append(f)
    return out, note


def _waits_for_unrecorded(f: dict[str, Any]) -> dict[str, Any]:
    """The peer-waiting finding of a rank the recorded ranks wait for: its own waiting is
    for ranks outside the recording, so the advice looks there, not at its recorded peers."""
    lib = "RCCL" if "RCCL" in f["title"] else "NCCL"
    return {
        **f,
        "advice": "Among the recorded ranks this rank arrives last (see its straggler "
        f"finding), yet its {lib} kernels still wait inside collectives: in those it shares "
        "with the recorded ranks it waits for ranks these traces do not include, and in "
        "those only it records (a filter may have dropped the others' side) for any rank, "
        "recorded or not. Record every rank of the job (or at least every member of these "
        "collectives) for the same steps to find the slowest, and compare per-rank step "
        "times there before rebalancing work on this one.",
    }


def _is_waiting(f: dict[str, Any]) -> bool:
    return f["analyzer"] == "communication" and "exposed_waiting_ns" in f["evidence"]


def _grow(f: dict[str, Any], ns: int) -> dict[str, Any]:
    """The exposed-communication finding with ``ns`` of estimated waiting given back to it,
    never beyond all its exposed time."""
    room = int(f["evidence"].get("exposed_ns", f["impact_ns"])) - int(f["impact_ns"])
    add = max(0, min(ns, room))
    if add == 0:
        return f
    scale = (f["impact_ns"] + add) / f["impact_ns"] if f["impact_ns"] else 1.0
    return {
        **f,
        "impact_ns": int(f["impact_ns"]) + add,
        "impact_pct": round(float(f["impact_pct"]) * scale, 3),
        "subject_ns": max(int(f["subject_ns"]), int(f["impact_ns"]) + add),
        "impact_basis": f["impact_basis"] + f" In this job, {fmt_ns(add)} this rank alone "
        "read as waiting for peers is counted here: the aligned clocks show the peers were "
        "there.",
    }


def _cut(f: dict[str, Any], cut: int, why: str) -> dict[str, Any]:
    left = int(f["impact_ns"]) - cut
    scale = left / f["impact_ns"] if f["impact_ns"] else 0.0
    return {
        **f,
        "impact_ns": left,
        "impact_pct": round(float(f["impact_pct"]) * scale, 3),
        "impact_basis": f["impact_basis"] + why.format(cut=fmt_ns(cut), left=fmt_ns(left)),
    }


def _less(f: dict[str, Any], ns: int, why: str) -> tuple[dict[str, Any], int]:
    """A communication finding ``f`` without up to ``ns`` that a job finding counts (``why``
    says which), and what is left of ``ns``."""
    if f["analyzer"] != "communication" or ns <= 0 or f["impact_ns"] <= 0:
        return f, ns
    cut = min(int(f["impact_ns"]), ns)
    return _cut(f, cut, why), ns - cut


def dropped_waiting_notes(dropped: dict[int, tuple[int, int]]) -> list[str]:
    """One note per (estimate, measurement) for the ranks whose peer-waiting finding the
    job's clocks contradict."""
    from tracelens.ranks.grouping import ranks_label

    by_values: dict[tuple[str, str], list[int]] = {}
    for rank, (est, measured) in sorted(dropped.items()):
        by_values.setdefault((fmt_ns(est), fmt_ns(measured)), []).append(rank)
    return [
        f"{ranks_label(ranks)}: the {est} a rank alone estimates as waiting for peers (its "
        "collectives' time beyond their bytes at its best rate) is measured on the aligned "
        f"clocks as {measured}; the rest is the collectives' own time (latency, for small "
        "ones), counted with the exposed communication, and the peer-waiting finding is left "
        "out"
        for (est, measured), ranks in by_values.items()
    ]


def waiting_by_rank(
    findings: list[dict[str, Any]],
    reports: dict[int, dict[str, Any]],
    last_among_recorded: frozenset[int] = frozenset(),
    straggler_wait_ns: dict[int, int] | None = None,
) -> list[dict[str, Any]]:
    """``findings`` with each shared peer-waiting finding's summary naming every rank's own
    exposed waiting (``reports``: each rank's report), where the rank shown is not the one
    that waits longest. The shown rank is the one whose waiting is left largest once the
    job's other findings take their share (a straggler's), which need not be the one that
    waits longest: without the figures, a reader takes the shown rank's for the worst. A
    rank in ``last_among_recorded`` (the straggler among only some of the job's ranks) that
    still waits is named too where another rank's finding is shown: its waiting is for
    ranks the traces do not include, and so is the shown rank's beyond what it waits for
    that straggler (``straggler_wait_ns``, on the aligned clocks)."""
    out = []
    for f in findings:
        if not _is_waiting(f) or len(f.get("ranks") or []) < 2 or f.get("rank") is None:
            out.append(f)
            continue
        key = problem_key(f)
        own: dict[int, int] = {}
        for r in f["ranks"]:
            for g in (reports.get(int(r)) or {}).get("findings") or []:
                if _is_waiting(g) and problem_key(g) == key:
                    own[int(r)] = int(g["evidence"]["exposed_waiting_ns"])
        if not own:
            out.append(f)
            continue
        worst = max(own, key=lambda r: (own[r], -r))
        shown = int(f["rank"])
        late = sorted(r for r in own if r in last_among_recorded and r != shown and own[r])
        longer = worst != shown and own[worst] > own.get(shown, 0)
        if not longer and not late:
            out.append(f)
            continue
        by = ", ".join(f"rank {r} {fmt_ns(ns)}" for r, ns in sorted(own.items()))
        said = (
            f" Exposed waiting for peers by rank: {by}; rank {worst} waits longest, and rank "
            f"{shown} is shown as the one whose waiting is left largest once the job's other "
            "findings take their share (see the impact)."
            if longer
            else f" Exposed waiting for peers by rank: {by}."
        )
        shown_f = {**f, "summary": f["summary"] + said}
        if late and shown not in last_among_recorded:
            # the shown rank's own advice sends a reader to analyze the ranks together,
            # which this job is: who is late among them is its straggler finding, and the
            # rest of the waiting is for ranks the job's traces do not include
            lib = "RCCL" if "RCCL" in f["title"] else "NCCL"
            straggler = late[0]
            for_it = min((straggler_wait_ns or {}).get(shown, 0), own.get(shown, 0))
            mine = (
                f"Of rank {shown}'s {fmt_ns(own[shown])}, up to {fmt_ns(for_it)} is waiting "
                f"for rank {straggler} in the collectives both traces keep, where rank "
                f"{straggler} arrives last (its straggler finding counts that time and says "
                "why); the rest"
                if for_it
                else f"Rank {straggler} arrives last at the collectives the recorded ranks "
                f"share (its straggler finding); rank {shown}'s waiting"
            )
            shown_f["advice"] = (
                f"{mine}, and rank {straggler}'s own {fmt_ns(own[straggler])} inside its "
                f"{lib} kernels, is in collectives only one of these traces keeps (the "
                "other's copy was not recorded) or waits for ranks the traces do not include: "
                "which rank was late there is not known. Record every rank of the job (or at "
                "least every member of these collectives) for the same steps to find the "
                "slowest there."
            )
        else:
            shown_f["summary"] += "".join(
                f" Rank {r} arrives last among the recorded ranks (its straggler finding), "
                f"so its {fmt_ns(own[r])} is waiting for ranks these traces do not include, "
                "or, in collectives only it records, for any rank."
                for r in late
            )
        out.append(shown_f)
    return out
