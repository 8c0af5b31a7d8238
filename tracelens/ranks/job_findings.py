"""The cross-rank findings: a rank the others keep waiting for, and uneven GPU work.

They are finding dicts in the report's shape with a ``rank``, so renderers and the
``--fail-on`` gate treat them as any other; their share of time is of the median rank's
window.
"""

from __future__ import annotations

import re
from statistics import median
from typing import Any

from tracelens.core.findings import finding_id, severity_for
from tracelens.core.thresholds import Thresholds
from tracelens.core.units import fmt_ns
from tracelens.ranks.extract import RankExtract
from tracelens.ranks.stragglers import Group, Straggler

ANALYZER = "ranks"

# What the late rank's GPU was doing before the collectives it was late for.
_WHY = {
    # summed over those collectives, each from the rank's own previous recorded one: not
    # the whole capture's difference (the imbalance finding's), which it may come near
    "compute": "between its previous recorded collective and each of them it ran {compute} "
    "more GPU compute in all than the other ranks' median (load imbalance)",
    # the same sum where it comes to the whole capture's difference: said as that, since
    # windows from each rank's previous recorded collective differ between ranks whose
    # traces a filter thinned differently, and only the total is the same measure on each
    "compute_whole": "it ran {whole} more GPU compute than the other ranks' median over the "
    "whole trace (load imbalance; the imbalance finding names the operators)",
    "data_loading": "its GPU sat idle {idle} longer than the others' before them, waiting for "
    "its input pipeline (DataLoader)",
    "host_compute": "its GPU sat idle {idle} longer than the others' before them while its "
    "host ran code before the next launch",
    "synchronization": "its GPU sat idle {idle} longer than the others' before them while its "
    "host was blocked in a synchronization",
    "launch_overhead": "its GPU sat idle {idle} longer than the others' before them, waiting "
    "for kernel launches",
    "gpu_dependency": "its GPU sat idle {idle} longer than the others' before them, waiting on "
    "its own streams or events",
    "untraced": "its GPU sat idle {idle} longer than the others' before them, on host work "
    "the trace does not record",
    "unknown": "the trace does not show why: it did neither more GPU work nor idle longer "
    "than the others before them",
    # kept kernels' compute and the gaps between them are not the rank's (see job.py)
    "thinned": "why is not measured: the traces kept a sample of their launches, so the "
    "ranks' idle time before these collectives is not known, and the kernels they kept "
    "show no more compute on this rank",
}
# Said after a compute cause where the traces kept a sample of their launches.
_KEPT_ONLY = (
    ", counting the kernels the traces kept: they kept a sample of their launches, so what "
    "the dropped ones add on either rank is not known"
)
_ADVICE = {
    "compute": "Balance the work: give this rank the same share of the batch, sequence "
    "lengths or experts as the others (uneven sharding, padding, expert routing), and check "
    "the imbalance finding for the operators that differ.",
    "data_loading": "Feed this rank faster: more DataLoader workers (`num_workers`), "
    "`pin_memory=True`, `persistent_workers=True` and prefetching; check that its shard of "
    "the data is not larger or slower to read (storage, decoding) than the others'.",
    "host_compute": "Look at this rank's host side before the collectives on its timeline: "
    "per-rank Python work (logging, metrics, checkpoint or evaluation on one rank only) "
    "holds every other rank in the collective; move it off the step or spread it.",
    "synchronization": "Remove the blocking synchronization on this rank (`.item()`, "
    "`.cpu()`, printing tensors) before the collectives; the others wait for it each time.",
    "launch_overhead": "This rank launches kernels slower than the others: check its host "
    "for contention (CPU affinity, other processes on its cores) and capture the step in "
    "CUDA graphs.",
    "gpu_dependency": "This rank's GPU waits on its own work (another stream, an event): "
    "check what it runs that the others do not.",
    "untraced": "This rank's host does work the trace does not record: profile it with "
    "Python stacks (`with_stack=True`) or a sampling profiler to see what it is.",
    "unknown": "Compare this rank's timeline with a punctual rank's just before the "
    "collectives it reaches last.",
    "thinned": "Record this rank and a punctual one again with every launch kept (a step "
    "or two is enough) and compare what each runs before the collectives this rank reaches "
    "last: more compute there is load imbalance, an idle GPU names its own cause.",
}


# Waiting ranks shown per collective in a straggler's ranges: the longest waits. Every
# rank's would grow the ranges with the world size (5 x 1,024 for a 1,024-rank job); the
# evidence's totals still count every rank.
WAITS_SHOWN = 8


def straggler_findings(
    late: list[Straggler],
    found: list[Group],
    window_ns: int,
    t: Thresholds,
    world: int | None = None,
    compute_ns: dict[int, int] | None = None,
    thinned: bool = False,
) -> list[dict[str, Any]]:
    """A finding for each rank last often enough that chance does not explain it.

    ``compute_ns``: each rank's compute-kernel time over its whole trace; where the late
    rank's extra compute before its collectives comes to its extra over the whole trace
    (within :data:`SAME_AS_WHOLE`), the summary says the latter.

    ``thinned``: the traces kept a sample of their launches; a compute cause says it
    counts the kept kernels.

    ``world``: the job's size, where the traces record it. When only some of its ranks are
    here, "last" is last among them: the title says so, since the rank may itself be
    waiting (its own communication finding shows its kernels waiting) for ranks not recorded.
    """
    if not found:
        return []
    n = len(found[0].members)
    among = f" among the {n} of {world} ranks recorded" if world and world > n else ""
    floor = max(0.3, min(0.9, 1.5 / n))  # 2 ranks: last in 75 %; chance is 50 %
    out = []
    for s in late:
        if s.late < 2 or s.late / s.groups < floor or s.held_back_ns <= 0:
            continue
        mine = sorted((g for g in found if g.last == s.rank), key=lambda g: -g.lead_ns)
        pct = 100.0 * s.held_back_ns / window_ns
        whole = _whole_excess(s.rank, compute_ns or {})
        cause = s.cause
        if (
            cause == "compute"
            and whole
            and abs(s.excess_compute_ns - whole) <= SAME_AS_WHOLE * whole
        ):
            cause = "compute_whole"
        why = _WHY.get(cause, _WHY["unknown"]).format(
            compute=fmt_ns(s.excess_compute_ns),
            idle=fmt_ns(s.excess_idle_ns),
            whole=fmt_ns(whole or 0),
        ) + (_KEPT_ONLY if thinned and cause.startswith("compute") else "")
        out.append(
            {
                "id": finding_id(ANALYZER, "straggler", s.rank),
                "analyzer": ANALYZER,
                "title": f"Rank {s.rank} arrives last{among} at {s.late} of {s.groups} "
                f"collectives: {'they wait' if among else 'the job waits'} "
                f"{fmt_ns(s.held_back_ns)} for it",
                "severity": severity_for(pct, t).label,
                "impact_ns": s.held_back_ns,
                "impact_pct": round(pct, 3),
                "subject_ns": s.held_back_ns,
                "costed": True,
                # the job's findings are shares of the median rank's window (its analysed window)
                "impact_share_of": "the median rank's analysed window",
                "impact_basis": "Each collective it reaches last could start when the "
                "second-to-last rank arrived: that lead on the aligned clock, summed over "
                "those collectives.",
                "summary": f"The other ranks waited {fmt_ns(s.others_wait_ns)} in total inside "
                f"those collectives; {why}."
                + (
                    " Ranks not recorded may arrive later still, and this rank may be "
                    "waiting for them."
                    if among
                    else ""
                ),
                "evidence": {
                    "rank": s.rank,
                    "last_in": s.late,
                    "shared_collectives": s.groups,
                    "held_back_ns": s.held_back_ns,
                    "others_wait_ns": s.others_wait_ns,
                    "cause": s.cause,
                    "excess_compute_ns": s.excess_compute_ns,
                    "excess_idle_ns": s.excess_idle_ns,
                    "idle_cause": s.idle_cause,
                    "worst": [
                        {
                            "collective": g.kind,
                            "ordinal": g.members[s.rank].ordinal,
                            "lead_ns": g.lead_ns,
                            "skew_ns": g.skew_ns,
                            "start_ns": g.members[s.rank].start_ns,
                        }
                        for g in mine[:5]
                    ],
                },
                "advice": _ADVICE.get(s.cause, _ADVICE["unknown"]),
                "time_ranges": _straggler_ranges(s.rank, mine[:5]),
                "supersedes": [],
                "rank": s.rank,
            }
        )
    return out


# A late rank's extra compute before its collectives this close to its extra over the
# whole trace is that one difference.
SAME_AS_WHOLE = 0.05


def _whole_excess(rank: int, compute_ns: dict[int, int]) -> int | None:
    """``rank``'s compute time over the other ranks' median, over the whole traces."""
    others = [v for r, v in compute_ns.items() if r != rank]
    if rank not in compute_ns or not others:
        return None
    extra = compute_ns[rank] - int(median(others))
    return extra if extra > 0 else None


def _straggler_ranges(late: int, worst: list[Group]) -> list[dict[str, Any]]:
    """For each of the collectives it was latest for: what the late rank did since its
    previous collective, then the :data:`WAITS_SHOWN` longest waits of the other ranks
    inside it until the late rank came (by rank). Each range names the rank on whose own
    clock it is (``rank``): the late rank's are what held the job, the others' what it cost
    them."""
    out: list[dict[str, Any]] = []
    for g in worst:
        mine = g.members[late]
        longest = sorted(
            (r for r in g.members if r != late and g.waits[r] > 0), key=lambda r: (-g.waits[r], r)
        )
        waited = set(longest[:WAITS_SHOWN])
        out.append(
            {
                "start_ns": mine.since_ns,
                "end_ns": mine.start_ns,
                "device_id": mine.device_id,
                "label": f"rank {late} before {g.kind}",
                "rank": late,
            }
        )
        out += [
            {
                "start_ns": c.start_ns,
                "end_ns": c.start_ns + g.waits[r],
                "device_id": c.device_id,
                "label": f"rank {r} waits in {g.kind} for rank {late}",
                "rank": r,
            }
            for r, c in sorted(g.members.items())
            if r in waited
        ]
    return out


# Operators whose per-rank work follows how embedding tables are sharded (TorchRec and
# FBGEMM's table-batched embeddings, PyTorch's own embedding bags), or how tokens are
# routed to experts: uneven work there is a sharding or routing plan, not a batch split.
_EMBEDDING_OPS = re.compile(
    r"embedding|SplitLookup|split_embedding|TableBatched|permute_pooled_embs|KeyedJaggedTensor",
    re.IGNORECASE,
)
_EXPERT_OPS = re.compile(r"moe|expert|grouped_gemm|topk_softmax", re.IGNORECASE)


def imbalance_advice(diffs: list[tuple[int, str]]) -> str:
    """Advice for the operators that make up most of the extra work (``diffs``: extra ns
    and operator, largest first)."""
    extra = sum(d for d, _ in diffs) or 1
    embedding = sum(d for d, op in diffs if _EMBEDDING_OPS.search(op))
    experts = sum(d for d, op in diffs if _EXPERT_OPS.search(op))
    if 2 * embedding > extra:
        return (
            "Most of the extra work is embedding lookups and their updates, so the ranks hold "
            "uneven shares of the embedding tables: revisit the sharding plan (TorchRec's "
            "planner: table-wise, row-wise or column-wise sharding, with each table's rows, "
            "dimension and pooling factor as its cost) so every rank looks up a similar "
            "number of rows, and check the ids per rank of the batches recorded here."
        )
    if 2 * experts > extra:
        return (
            "Most of the extra work is in the experts: more tokens are routed to this rank's "
            "experts than to the others'. Check the router's balance (load-balancing loss, "
            "capacity factor, token dropping) and the placement of hot experts."
        )
    return (
        "Give every rank the same work: check the sharding of the batch, sequence lengths "
        "(padding) or, for mixture-of-experts models, the tokens routed to this rank's "
        "experts (capacity factor, load-balancing loss)."
    )


def imbalance_finding(
    extracts: list[RankExtract],
    window_ns: int,
    t: Thresholds,
    late: list[Straggler],
    thinned: bool = False,
) -> dict[str, Any] | None:
    """The rank with the most GPU compute, when it is well above the other ranks' median
    (the straggler finding's measure too, so the two name one figure: with two ranks the
    median of all would be their midpoint, half the difference). ``thinned``: the traces
    kept a sample of their launches, and the title and summary say the kept kernels'."""
    if len(extracts) < 2:
        return None
    top = max(extracts, key=lambda e: (e.compute_ns, -e.rank))
    med = median(e.compute_ns for e in extracts if e.rank != top.rank)
    extra = top.compute_ns - med
    if med <= 0 or extra < window_ns * t.severity_low_pct / 100 or top.compute_ns < 1.1 * med:
        return None
    others = [e for e in extracts if e.rank != top.rank]
    than = f"rank {others[0].rank}" if len(others) == 1 else "the other ranks' median"
    diffs = []
    for op in set(top.op_ns) | {o for e in others for o in e.op_ns}:
        d = top.op_ns.get(op, 0) - median(e.op_ns.get(op, 0) for e in others)
        if d > 0:
            diffs.append((int(d), op))
    diffs.sort(key=lambda x: (-x[0], x[1]))
    ops = ", ".join(f"`{op}` +{fmt_ns(d)}" for d, op in diffs[:3])
    straggles = any(s.rank == top.rank and s.cause == "compute" for s in late)
    return {
        "id": finding_id(ANALYZER, "imbalance", top.rank),
        "analyzer": ANALYZER,
        "title": (
            f"Rank {top.rank}'s kept kernels run {fmt_ns(int(extra))} more GPU compute than "
            f"{than}'s ({100.0 * extra / med:.0f}% more; sampled traces)"
            if thinned
            else f"Rank {top.rank} runs {fmt_ns(int(extra))} more GPU compute than {than} "
            f"({100.0 * extra / med:.0f}% more)"
        ),
        "severity": "info",
        "impact_ns": 0,
        "impact_pct": 0.0,
        "subject_ns": int(extra),
        # what it costs is the straggler's time: listed by its size with the findings whose
        # savings are not estimated here, not among those that give back little
        "costed": False,
        # the job's findings are shares of the median rank's window (its analysed window)
        "impact_share_of": "the median rank's analysed window",
        "impact_basis": "Informational: uneven work costs time only where the others wait "
        "for it in a collective"
        + ("; the straggler finding counts that time." if straggles else "."),
        "summary": f"Compute-kernel time per rank: {than} {fmt_ns(int(med))}, rank "
        f"{top.rank} {fmt_ns(top.compute_ns)}."
        + (f" The operators that differ most: {ops}." if ops else "")
        + (
            " These count the kernels the traces kept: they kept a sample of their "
            "launches, so what the dropped ones add on either rank is not known."
            if thinned
            else ""
        ),
        "evidence": {
            "rank": top.rank,
            "compute_ns": top.compute_ns,
            "median_compute_ns": int(med),
            "compute_ns_by_rank": {str(e.rank): e.compute_ns for e in extracts},
            "operators": [{"operator": op, "extra_ns": d} for d, op in diffs[:10]],
        },
        "advice": imbalance_advice(diffs),
        "time_ranges": [],
        "supersedes": [],
        "rank": top.rank,
    }
