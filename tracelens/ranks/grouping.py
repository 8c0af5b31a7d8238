"""One finding for what several ranks share.

Data-parallel ranks run the same code, so most of their findings repeat: the same
problem on eight ranks, each with its own device and numbers. Listed eight times, it would crowd out
the cross-rank findings and read as eight times the time it is: the ranks run at once,
so removing the cause everywhere gives the job back about what one rank gets back. A
shared finding is therefore listed once, with the ranks it is on, the evidence of the
rank where it costs most, and the median of the ranks' impacts as its impact; every
rank's own impact stays in ``impact_ns_by_rank``.

Findings are the same problem when their analyzer and their title with every number
blanked out agree ("GPU 3: 30 ms of NCCL communication not hidden" and "GPU 1: 28 ms of
..."): titles name the subject (kernel, operator, cause, device) and numbers are the
only part that differs between ranks. The shared finding's id is built from that, so it
stays the same whichever rank costs most.
"""

from __future__ import annotations

import re
from statistics import median
from typing import Any

from tracelens.core.findings import finding_id
from tracelens.core.units import fmt_ns

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def ranks_label(ranks: list[int]) -> str:
    """``[0, 1, 2, 3, 5]`` → ``"ranks 0-3, 5"``; one rank → ``"rank 4"``."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    parts: list[str] = []
    start = prev = ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return "ranks " + ", ".join(parts)


# What a job adds to a finding: the rank it is of, the ranks a shared one is on, their
# impacts. Without them a job's finding is a single trace's.
JOB_KEYS = ("rank", "ranks", "impact_ns_by_rank")


def as_trace_finding(f: dict[str, Any]) -> dict[str, Any]:
    """A job's finding as a single trace's report has it (the job's keys set apart)."""
    return {k: v for k, v in f.items() if k not in JOB_KEYS}


def finding_scope(f: dict[str, Any]) -> str:
    """Which ranks a job's finding is of: ``"rank 2"``, ``"ranks 0-3 (rank 0 shown)"``,
    or ``"job"`` for a finding across ranks."""
    if f.get("analyzer") == "ranks" and len(f.get("ranks") or []) <= 1:
        return "job"
    ranks = f.get("ranks") or ([f["rank"]] if f.get("rank") is not None else [])
    if not ranks:
        return "job"
    shown = f" (rank {f['rank']} shown)" if len(ranks) > 1 and f.get("rank") is not None else ""
    return ranks_label(ranks) + shown


def of_rank(f: dict[str, Any], rank: int) -> dict[str, Any]:
    """A rank's own finding in the job: its single-trace id and its rank make its id, as
    every rank may have the same finding and a job's ids must each name one."""
    return {
        **f,
        "id": f"{f['id']}-r{rank}",
        "supersedes": [f"{s}-r{rank}" for s in f.get("supersedes") or []],
        "rank": rank,
    }


def group_shared(
    findings: list[dict[str, Any]], job_ranks: int, world: int | None = None
) -> list[dict[str, Any]]:
    """``findings`` (each with its ``rank``) with those of one id on several ranks merged.
    ``job_ranks``: the ranks recorded; ``world``: the job's size where the traces record
    it (2 of a 128-rank job's ranks are "2 of the 2 recorded of the job's 128 ranks", not
    "2 of the job's 2 ranks")."""
    of = (
        f"of the {job_ranks} recorded of the job's {world} ranks"
        if world and world > job_ranks
        else f"of the job's {job_ranks} ranks"
    )
    renamed: dict[str, str] = {}  # a rank's finding id -> its shared finding's
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for f in findings:
        by_key.setdefault(problem_key(f), []).append(f)
    out: list[dict[str, Any]] = []
    for key, same in by_key.items():
        if len(same) == 1 or len({f["rank"] for f in same}) < len(same):
            # alone, or several of one rank (one per device): each stays as it is
            out.extend({**f, "ranks": [f["rank"]]} for f in same)
            continue
        # an uncosted finding (impact 0 on every rank) is shown where its time is largest
        same.sort(key=lambda f: (-int(f["impact_ns"]), -int(f.get("subject_ns") or 0), f["rank"]))
        rep = same[0]
        ranks = sorted(f["rank"] for f in same)
        by_rank = {str(f["rank"]): int(f["impact_ns"]) for f in same}
        impact = int(median(by_rank.values()))
        scale = impact / rep["impact_ns"] if rep["impact_ns"] else 0.0
        costed = any(f.get("costed", True) for f in same)
        sizes = by_rank.values() if costed else [int(f.get("subject_ns") or 0) for f in same]
        lo, hi = min(sizes), max(sizes)
        spread = "" if lo == hi else f" (from {fmt_ns(lo)} to {fmt_ns(hi)})"
        shared_id = finding_id(key[0], "ranks", key[1])
        renamed.update((f["id"], shared_id) for f in same)
        out.append(
            {
                **rep,
                "id": shared_id,
                "supersedes": sorted({x for f in same for x in f.get("supersedes") or []}),
                "ranks": ranks,
                "impact_ns": impact,
                "impact_pct": round(float(rep["impact_pct"]) * scale, 3),
                "impact_ns_by_rank": by_rank,
                "impact_basis": rep["impact_basis"]
                + f" Found on {len(ranks)} {of}{spread}"
                + (
                    "; they run at once, so removing it everywhere gives the job back about "
                    "the median rank's share, which is the impact here; the evidence is "
                    f"rank {rep['rank']}'s, where it costs most."
                    if costed
                    else f"; the evidence is rank {rep['rank']}'s, where it is largest."
                ),
            }
        )
    # what a finding supersedes may itself have become a shared finding
    for f in out:
        if f.get("supersedes"):
            f["supersedes"] = sorted({renamed.get(x, x) for x in f["supersedes"]} - {f["id"]})
    return out


def problem_key(f: dict[str, Any]) -> tuple[str, str]:
    """Which problem a finding is: its analyzer and its title with the numbers blanked."""
    return (str(f["analyzer"]), _NUMBER.sub("#", str(f["title"])))
