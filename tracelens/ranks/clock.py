"""One clock for all ranks, from the collectives they share.

Ranks' clocks differ (hosts' clocks, or a profiler's per-process base). A collective
finishes at nearly the same instant on every rank that takes part: whoever arrives last
starts the transfer, and all finish together. So the offset of a rank's clock against the
reference rank's is the shift that makes the most of its collectives' ends coincide with
the reference's.

Collectives are paired by kind and nearby ordinal (within ``NEIGHBOURS`` of the same
position, so a few collectives missing from a sampled or filtered trace do not shift
every later pair); the offset is the one most pairs agree on within ``TOLERANCE_NS``,
refined as their median; the residual is the median distance of the agreeing pairs from
it. A long collective's ranks can finish further apart than that (a ring's last steps end
in turn), so a pair whose ends agree within ``END_SPREAD`` of its shorter kernel's
duration is matched too, without moving the offset.

A rank without shared collectives falls back on Kineto's ``baseTimeNanoseconds``: newer
profilers write times relative to that realtime instant, so two ranks' times meet on the
hosts' realtime clocks (NTP-synchronised: milliseconds, not microseconds, so it is the
weaker method and the report names it). Times already on the epoch scale need no base.
Without either, a rank keeps its recorded clock, and the report says so.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from statistics import median

from tracelens.ranks.extract import Collective

NEIGHBOURS = 3
TOLERANCE_NS = 200_000  # ends of one collective agree this closely on aligned clocks
# ... or, for a long collective, within this share of its (shorter) kernel's duration
END_SPREAD = 0.02


@dataclass(frozen=True)
class Alignment:
    offset_ns: int  # subtract from this rank's times to read them on the reference clock
    residual_ns: int | None  # median |end difference| of the matched pairs after the shift
    matched: int  # collectives paired with the reference rank's
    method: str  # "collectives" | "base time" | "none" (| "reference")
    pairs: tuple[tuple[int, int], ...] = ()  # (index in this rank, index in reference)


def align(rank: list[Collective], reference: list[Collective]) -> Alignment:
    """``rank``'s clock against ``reference``'s, from their collectives' ends."""
    cands = _candidates(rank, reference)
    if not cands:
        return Alignment(0, None, 0, "none")
    diffs = sorted(d for d, _, _ in cands)
    best_lo, best_n = 0, 0
    for lo in range(len(diffs)):
        hi = bisect_right(diffs, diffs[lo] + 2 * TOLERANCE_NS)
        if hi - lo > best_n:
            best_lo, best_n = lo, hi - lo
    centre = int(median(diffs[best_lo : best_lo + best_n]))
    # one-to-one pairs, closest to the agreed shift first
    used_r: set[int] = set()
    used_ref: set[int] = set()
    pairs: list[tuple[int, int]] = []
    devs: list[int] = []
    for d, i, j in sorted(cands, key=lambda c: (abs(c[0] - centre), c[1], c[2])):
        if abs(d - centre) > TOLERANCE_NS:
            break
        if i in used_r or j in used_ref:
            continue
        used_r.add(i)
        used_ref.add(j)
        pairs.append((i, j))
        devs.append(d)
    offset = int(median(devs))
    residual = int(median(abs(d - offset) for d in devs))
    # A long collective's ranks finish up to a pipeline step apart (a 1 GiB all-gather over
    # 64 ranks: 0.33 ms of its 42.5 ms), beyond what the offset is fitted to: such pairs
    # join the groups without moving the offset they did not help to find.
    for d, i, j in sorted(cands, key=lambda c: (abs(c[0] - offset), c[1], c[2])):
        if i in used_r or j in used_ref:
            continue
        shorter = min(_duration(rank[i]), _duration(reference[j]))
        if abs(d - offset) <= max(TOLERANCE_NS, int(END_SPREAD * shorter)):
            used_r.add(i)
            used_ref.add(j)
            pairs.append((i, j))
    return Alignment(offset, residual, len(pairs), "collectives", tuple(sorted(pairs)))


def _duration(c: Collective) -> int:
    return c.end_ns - c.start_ns


def _candidates(rank: list[Collective], ref: list[Collective]) -> list[tuple[int, int, int]]:
    """(end difference, index in rank, index in ref) for same-kind collectives whose
    ordinals are within NEIGHBOURS of each other."""
    by_kind: dict[str, list[int]] = {}
    for j, c in enumerate(ref):
        by_kind.setdefault(c.kind, []).append(j)
    ords = {k: [ref[j].ordinal for j in idx] for k, idx in by_kind.items()}
    out: list[tuple[int, int, int]] = []
    for i, c in enumerate(rank):
        idx = by_kind.get(c.kind)
        if not idx:
            continue
        o = ords[c.kind]
        lo = bisect_left(o, c.ordinal - NEIGHBOURS)
        hi = bisect_right(o, c.ordinal + NEIGHBOURS)
        out.extend((c.end_ns - ref[j].end_ns, i, j) for j in idx[lo:hi])
    return out


# Times past this (about 1973 in ns since 1970) are realtime already, not relative.
_EPOCH_NS = 10**17


def from_base_times(
    rank_base: int | None, rank_t0: int | None, ref_base: int | None, ref_t0: int | None
) -> Alignment | None:
    """The offset the two ranks' recorded base times give, or None where they give none."""
    shift_rank = _realtime_shift(rank_base, rank_t0)
    shift_ref = _realtime_shift(ref_base, ref_t0)
    if shift_rank is None or shift_ref is None:
        return None
    return Alignment(shift_ref - shift_rank, None, 0, "base time")


def _realtime_shift(base: int | None, t0: int | None) -> int | None:
    """What to add to a rank's times to read them on the realtime clock."""
    if t0 is not None and t0 >= _EPOCH_NS:
        return 0
    return base
