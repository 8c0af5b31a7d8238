"""A shared communication finding's queuing advice, from the rank that records it.

A shared finding shows the rank where it costs most, and its advice is that rank's. The
advice for a process group of DDP's own rests on all-reduces seen queued behind other
collectives on one NCCL stream; in a trace filtered after recording, the kernels they
queued behind may be missing on the rank shown (its all-reduces then only start long
after their launch, with nothing recorded on the stream: "unexplained") while another
rank kept its copies. NCCL runs a process group's collectives in the same order on every
rank, so the rank that records the queuing is the evidence, and the shown rank's
unexplained waits are checked against it on the job's aligned clock: a wait that spans
the end of a collective the other rank's all-reduce queued behind lines up with it.
"""

from __future__ import annotations

from typing import Any

from tracelens.analyzers.communication import all_reduce_queue_row, ddp_queue_text
from tracelens.core.units import fmt_ns
from tracelens.ranks.clock import Alignment
from tracelens.ranks.extract import RankExtract
from tracelens.ranks.grouping import problem_key


def _ms(ns: int) -> str:
    """A time on a trace's clock, to the tenth of a millisecond (``fmt_ns`` rounds a
    second-long trace's times to three digits, too coarse to set two ranks side by side)."""
    return f"{ns / 1e6:,.1f} ms"


def _strength(row: dict[str, Any] | None) -> tuple[int, int]:
    return (int(row["queued"]), int(row["queued_ns"])) if row else (0, 0)


def _row_of(f: dict[str, Any]) -> dict[str, Any] | None:
    return all_reduce_queue_row((f.get("evidence") or {}).get("queued_behind") or [])


def cite_queuing(
    findings: list[dict[str, Any]],
    extracts: list[RankExtract],
    alignments: dict[int, Alignment],
) -> list[dict[str, Any]]:
    """``findings`` with each shared communication finding's process-group advice resting
    on the rank whose trace records most all-reduces queued behind other collectives,
    where that is not the rank shown."""
    by_rank = {e.rank: e for e in extracts}
    out = []
    for f in findings:
        out.append(_cited(f, by_rank, alignments) if _applies(f) else f)
    return out


def _applies(f: dict[str, Any]) -> bool:
    return (
        f.get("analyzer") == "communication"
        and len(f.get("ranks") or []) > 1
        and f.get("rank") is not None
        and "queued_behind" in (f.get("evidence") or {})
    )


def _cited(
    f: dict[str, Any], by_rank: dict[int, RankExtract], alignments: dict[int, Alignment]
) -> dict[str, Any]:
    shown = int(f["rank"])
    mine = _row_of(f)
    if mine is None:
        return f
    old = ddp_queue_text(mine)
    if old not in f["advice"]:
        return f
    key = problem_key(f)
    best: tuple[int, dict[str, Any]] | None = None
    for r in f["ranks"]:
        e = by_rank.get(int(r))
        if e is None or int(r) == shown:
            continue
        for g in e.report["findings"]:
            if g.get("analyzer") == "communication" and problem_key(g) == key:
                row = _row_of(g)
                if _strength(row) > _strength(best[1] if best else None):
                    best = (int(r), row) if row is not None else best
    if best is None or _strength(best[1]) <= _strength(mine):
        return f
    rank, row = best
    new = ddp_queue_text(row, rank=rank)
    if shown in alignments and rank in alignments and shown in by_rank:
        new += _line_up(shown, mine, rank, row, by_rank[shown], alignments)
    return {**f, "advice": f["advice"].replace(old, new)}


def _line_up(
    shown: int,
    mine: dict[str, Any],
    rank: int,
    row: dict[str, Any],
    e: RankExtract,
    alignments: dict[int, Alignment],
) -> str:
    """The shown rank's unexplained waits that span the end of a collective the other
    rank's all-reduce queued behind, read on the shown rank's clock from its trace
    start."""
    # a time on ``rank``'s clock read on ``shown``'s: through the reference clock
    shift = alignments[shown].offset_ns - alignments[rank].offset_ns
    t0 = int(e.report["trace"].get("t0_ns") or e.t0_ns or 0)
    behind = [w for w in row.get("waits") or [] if w.get("behind_end_ns") is not None]
    seen = []
    for w in mine.get("waits") or []:
        if w.get("behind") is not None:
            continue
        for q in behind:
            end = int(q["behind_end_ns"]) + shift
            if int(w["launch_ns"]) < end <= int(w["start_ns"]):
                seen.append(
                    f"its all-reduce launched at {_ms(int(w['launch_ns']) - t0)} started "
                    f"at {_ms(int(w['start_ns']) - t0)}, "
                    f"{fmt_ns(int(w['start_ns']) - end)} after rank {rank}'s "
                    f"`{q['behind']}` of {_ms(int(q['behind_start_ns']) + shift - t0)} to "
                    f"{_ms(end - t0)} ended"
                )
                break
    if not seen:
        return ""
    return (
        f" Rank {shown}'s own all-reduces there that started long after their launch with "
        "nothing recorded on the stream (its copies of what they queued behind were filtered "
        "out) "
        "line up with them, as NCCL runs a group's collectives in the same order on every "
        f"rank: on rank {shown}'s clock (from its trace start, ranks aligned), "
        + "; ".join(seen)
        + "."
    )
