"""A job's ranks on one timeline: every rank's lanes shifted onto the reference clock.

Each rank keeps its own database and timeline tables, on its own clock (ns since its own
first event). The job report's clock offsets say how a rank's recorded times read on the
reference rank's clock (``offset_ns``: subtract it). The aligned timeline's origin is the
earliest event of any of the job's ranks on that clock (whichever are shown), so a rank's
time ``local`` is ``aligned + shift`` with ``shift = t0 + offset - rank_t0`` (never
positive). A rank whose offset no method found (``none``) is drawn from the reference
rank's first event: its recorded clock may not be comparable at all.

A window of the aligned view is answered rank by rank: the same window shifted into the
rank's clock, at the same width and unclamped (``timeline_window(exact=True)``), so every
rank's per-pixel buckets fall on one pixel grid; its events' times are shifted back. Lane
ids are made unique across ranks (``rank * LANE_STRIDE + lane``), names and kinds merged
into one list. A request is bounded: at most :data:`MAX_ALIGNED_RANKS` ranks, and the
host lanes of at most :data:`MAX_HOST_RANKS` of them (``host_ranks``; the others' GPU
lanes only), so its size is (GPU lanes x ranks + a few ranks' host lanes) x pixels
however large the job.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import Any

import duckdb

from web.timeline_range import range_summary
from web.timeline_search import MAX_MATCHES, search_events
from web.timeline_store import timeline_window

# Lane ids of one rank's timeline stay far below this (a lane per stream and flame-chart row).
LANE_STRIDE = 1_000_000
# Ranks one aligned request may hold: past this, the page asks for a chosen few.
MAX_ALIGNED_RANKS = 64
# Ranks read at once for one request: opening a rank's database costs tens of ms (DuckDB
# reads its catalog), and its queries release the GIL, so a cold 64-rank view opens them
# side by side.
RANKS_AT_ONCE = 8
# Ranks whose host lanes one aligned request may hold: a rank has a few GPU lanes but often
# dozens of host lanes (threads, flame-chart rows), each up to a window's width of pixels.
MAX_HOST_RANKS = 4

# A rank's cursor and timeline metadata, closed by the caller's context.
OpenRank = Callable[[int], tuple[duckdb.DuckDBPyConnection, dict[str, Any]]]


class BadRanksError(ValueError):
    """A ``ranks`` list that does not parse, names ranks the job lacks, or is too long."""


@dataclass(frozen=True)
class RankClock:
    rank: int
    offset_ns: int  # the job report's: this rank's times minus it read on the reference clock
    method: str  # how the offset was found (collectives, base time, none, reference)
    shift_ns: int  # this rank's timeline time = aligned time + shift_ns

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "offset_ns": self.offset_ns,
            "method": self.method,
            "shift_ns": self.shift_ns,
        }


@dataclass(frozen=True)
class AlignedClock:
    t0_ns: int  # the earliest event of any of the job's ranks, on the reference clock
    span_ns: int
    ranks: dict[int, RankClock]

    def aligned(self, rank: int, absolute_ns: int) -> int:
        """A time recorded by ``rank`` (absolute, its own clock) on the aligned timeline."""
        return absolute_ns - self.ranks[rank].offset_ns - self.t0_ns


def aligned_clock(report: dict[str, Any], metas: dict[int, dict[str, Any]]) -> AlignedClock:
    """The aligned timeline of a job from its report's offsets and each rank's timeline
    metadata (``t0_ns``, ``span_ns``)."""
    offsets = {int(o["rank"]): o for o in report["clock"]["offsets"]}

    def method(rank: int) -> str:
        return str(offsets.get(rank, {}).get("method") or "none")

    starts = {
        r: int(m["t0_ns"]) - int(offsets.get(r, {}).get("offset_ns") or 0) for r, m in metas.items()
    }
    # A rank no method aligned keeps its recorded clock, which may be another scale
    # altogether (ns since boot beside epoch times): placed by it, it would move the origin
    # and stretch the span by years. It starts where the reference rank starts instead.
    ref = int(report["clock"].get("reference_rank", min(metas)))
    synced = [r for r in metas if method(r) != "none" or r == ref]
    ref_start = starts[ref] if ref in starts else min(starts[r] for r in synced or metas)
    for r in metas:
        if r not in synced:
            starts[r] = ref_start
    t0 = min(starts.values())
    end = max(starts[r] + int(m["span_ns"]) for r, m in metas.items())
    return AlignedClock(
        t0_ns=t0,
        span_ns=max(1, end - t0),
        ranks={
            # the offset as applied: the recorded one, or the placement of an unaligned rank
            r: RankClock(r, int(metas[r]["t0_ns"]) - starts[r], method(r), t0 - starts[r])
            for r in sorted(metas)
        },
    )


def parse_ranks(spec: str | None, job_ranks: list[int], *, limit: bool = True) -> list[int]:
    """``all`` (the first :data:`MAX_ALIGNED_RANKS` of the job) or a comma-separated list
    of ranks and ranges (``0,3,64-127``: a range takes the job's ranks within it, so a
    job of sparse ranks can be paged through); an empty or absent spec is no rank."""
    if spec is None or not spec.strip():
        return []
    if spec.strip() == "all":
        return job_ranks[:MAX_ALIGNED_RANKS] if limit else list(job_ranks)
    have = set(job_ranks)
    chosen: set[int] = set()
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)\s*-\s*(\d+)", part)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if hi < lo:
                raise BadRanksError(f"ranks: the range {part!r} ends before it starts")
            within = [r for r in job_ranks if lo <= r <= hi]
            if not within:
                raise BadRanksError(
                    f"the job has no rank in {lo}-{hi} (its ranks: {compact_ranks(job_ranks)})"
                )
            chosen.update(within)
        elif part.isdigit():
            if int(part) not in have:
                raise BadRanksError(
                    f"the job has no rank {int(part)} (its ranks: {compact_ranks(job_ranks)})"
                )
            chosen.add(int(part))
        else:
            raise BadRanksError(
                f"ranks: 'all' or a comma-separated list of ranks and ranges (0,3,64-127), "
                f"not {spec!r}"
            )
    if limit and len(chosen) > MAX_ALIGNED_RANKS:
        raise BadRanksError(f"at most {MAX_ALIGNED_RANKS} ranks at once, not {len(chosen)}")
    return sorted(chosen)


def compact_ranks(ranks: list[int]) -> str:
    """``ranks`` as the picker and messages write them: runs of consecutive ranks as
    ranges (``0-63,65``), so a job of a thousand ranks is one short line."""
    out: list[str] = []
    ordered = sorted(set(ranks))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


@contextmanager
def _opened(open_rank: OpenRank, rank: int) -> Iterator[tuple[Any, dict[str, Any]]]:
    cur, meta = open_rank(rank)
    try:
        yield cur, meta
    finally:
        cur.close()


def aligned_window(
    open_rank: OpenRank,
    clock: AlignedClock,
    ranks: list[int],
    host_ranks: set[int],
    start_ns: int | None,
    end_ns: int | None,
    width_px: int,
) -> dict[str, Any]:
    """The window ``[start_ns, end_ns)`` of the aligned timeline for ``ranks``: each rank's
    GPU lanes, and its host lanes (and memory counters) where it is in ``host_ranks``."""
    host_ranks = host_ranks & set(ranks)
    if len(host_ranks) > MAX_HOST_RANKS:
        raise BadRanksError(
            f"host lanes of at most {MAX_HOST_RANKS} ranks at once, not {len(host_ranks)}"
        )
    span = clock.span_ns
    start = 0 if start_ns is None else max(0, int(start_ns))
    end = span if end_ns is None else min(span, int(end_ns))
    if end <= start:
        end = min(span, start + 1)
        start = max(0, end - 1)
    names: dict[str, int] = {}
    kinds: dict[str, int] = {}

    def merged(table: dict[str, int], values: list[str]) -> list[int]:
        return [table.setdefault(v, len(table)) for v in values]

    def one(rank: int) -> tuple[dict[str, Any], int]:
        """The rank's answer for the window shifted into its clock, and its host lanes."""
        rc = clock.ranks[rank]
        with _opened(open_rank, rank) as (cur, meta):
            host = rank in host_ranks
            gpu = {lane["id"] for lane in meta["lanes"] if not lane["thread"]}
            w = timeline_window(
                cur,
                start + rc.shift_ns,
                end + rc.shift_ns,
                width_px,
                meta,
                exact=True,
                only_lanes=None if host else gpu,
                counters=host,
            )
            return w, len(meta["lanes"]) - len(gpu)

    lanes: list[dict[str, Any]] = []
    counters: list[dict[str, Any]] = []
    rank_rows: list[dict[str, Any]] = []
    ns_per_px = (end - start) / max(1, width_px)
    with ThreadPoolExecutor(max_workers=max(1, min(RANKS_AT_ONCE, len(ranks)))) as pool:
        answers = list(pool.map(one, ranks))
    for rank, (w, host_lanes) in zip(ranks, answers, strict=True):
        rc = clock.ranks[rank]
        host = rank in host_ranks
        ns_per_px = w["ns_per_px"]
        name_ix = merged(names, w["names"])
        kind_ix = merged(kinds, w["kinds"])
        shift = rc.shift_ns
        for lane in w["lanes"]:
            lanes.append(
                {
                    **lane,
                    "id": rank * LANE_STRIDE + lane["id"],
                    "local_id": lane["id"],
                    "rank": rank,
                    "events": [
                        [s - shift, e - shift, name_ix[n], kind_ix[k], ref]
                        for s, e, n, k, ref in lane["events"]
                    ],
                    "buckets": None
                    if lane["buckets"] is None
                    else [[px, n, busy, name_ix[t]] for px, n, busy, t in lane["buckets"]],
                }
            )
        for c in w["counters"]:
            counters.append({**c, "rank": rank, "label": f"rank {rank} · {c['label']}"})
        rank_rows.append({**rc.as_dict(), "host": host, "host_lanes": host_lanes})
    return {
        "t0_ns": clock.t0_ns,
        "span_ns": span,
        "start_ns": start,
        "end_ns": end,
        "width_px": max(1, width_px),
        "ns_per_px": ns_per_px,
        "lanes": lanes,
        "names": list(names),
        "kinds": list(kinds),
        "counters": counters,
        "ranks": rank_rows,
    }


def aligned_search(
    open_rank: OpenRank, clock: AlignedClock, ranks: list[int], query: str, regex: bool
) -> dict[str, Any]:
    """Matches of every rank in ``ranks`` on the aligned clock, as
    ``[start_ns, end_ns, lane, kind, ref, rank]`` (lanes as the aligned window names them),
    the first :data:`MAX_MATCHES` in time order; ``count`` is every rank's matches."""
    count = 0
    matches: list[list[Any]] = []
    for rank in ranks:
        shift = clock.ranks[rank].shift_ns
        with _opened(open_rank, rank) as (cur, _):
            found = search_events(cur, query, regex)
        count += found["count"]
        # Each rank's matches come in (start, lane) order, which one shift and one lane
        # offset keep: merged into the first MAX_MATCHES so far, so a request holds about
        # two ranks' matches at a time, not every rank's (64 x 10,000) to be sorted and cut.
        mine = (
            [s - shift, e - shift, rank * LANE_STRIDE + lane, kind, ref, rank]
            for s, e, lane, kind, ref in found["matches"]
        )
        matches = list(islice(heapq.merge(matches, mine, key=_time_order), MAX_MATCHES))
    return {"query": query, "regex": regex, "count": count, "matches": matches}


def _time_order(match: list[Any]) -> tuple[int, int]:
    return match[0], match[2]


def aligned_range(
    open_rank: OpenRank, clock: AlignedClock, ranks: list[int], start_ns: int, end_ns: int
) -> dict[str, Any]:
    """Kernel time and busy share of a stretch of the aligned clock, per rank and device."""
    devices: list[dict[str, Any]] = []
    start, end = max(0, start_ns), max(start_ns + 1, end_ns)
    for rank in ranks:
        shift = clock.ranks[rank].shift_ns
        if end + shift <= 0:  # the stretch ends before the rank's first event
            continue
        with _opened(open_rank, rank) as (cur, meta):
            # the stretch in the rank's clock, from its first event at the earliest
            found = range_summary(cur, meta, max(0, start + shift), end + shift)
        devices += [{**d, "rank": rank} for d in found["devices"]]
    for d in devices:  # of the stretch asked for, whether or not the rank covers all of it
        d["busy_pct"] = round(100.0 * d["busy_ns"] / (end - start), 2)
    return {
        "start_ns": start,
        "end_ns": end,
        "length_ns": end - start,
        "kernels": sum(d["kernels"] for d in devices),
        "kernel_ns": sum(d["kernel_ns"] for d in devices),
        "devices": devices,
    }
