"""The host code naming an idle gap, against its definition, on random and degenerate nestings.

On the launching thread, for each source (operators, annotation ranges) and nesting depth,
the latest interval started at or before the host span's start and the latest started at or
before its end are the candidates; of those covering at least HOST_MIN_SPAN_FRACTION of the
span, the greatest by (start, -end, depth) names the gap, an operator before a range with
the same three (wrappers such as ProfilerStep#N never count). derive_gaps settles most gaps
with the latest interval before the span's midpoint or the innermost one around it, and
bounds the depths it looks up for the rest; all must give what the definition gives,
computed here in Python, including partial overlaps, zero-length intervals, intervals
stacked on the same instants, wrappers inside the nesting and host spans of zero length.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

import ingest.derive_gaps as derive_gaps_module
from ingest import load_trace
from ingest.derive_gaps import HOST_MIN_SPAN_FRACTION, UNTRACED_HOST, WRAPPER_PATTERN
from tracelens.testing import Scenario, write_chrome_trace

US = 1_000
THREADS = ((4242, 4242), (4242, 4243))
WRAPPERS = ("ProfilerStep#3", "<string>(1): <module>", "threading.py(1016): _bootstrap")

Interval = tuple[int, int, str, int, int]  # source, depth, name, start, end


def _expected(intervals: list[Interval], a: int, b: int) -> str | None:
    """The name the definition gives the span [a, b]."""
    candidates = []
    for level in {(src, depth) for src, depth, *_ in intervals}:
        at_level = [r for r in intervals if (r[0], r[1]) == level]
        for p in (a, b):
            started = [r for r in at_level if r[3] <= p]
            if started:
                latest = max(r[3] for r in started)
                # one: the nesting gives intervals starting together distinct depths
                (found,) = [r for r in started if r[3] == latest]
                candidates.append(found)
    covering = [
        r for r in candidates if min(r[4], b) - max(r[3], a) >= HOST_MIN_SPAN_FRACTION * (b - a)
    ]
    if not covering:
        return None
    # an operator and a range with the same start, end and depth: the operator
    return max(covering, key=lambda r: (r[3], -r[4], r[1], -r[0]))[2]


def _interval(rng: random.Random, sc: Scenario, name: str, start: int, dur: int) -> None:
    """An operator or an annotation range, at random."""
    if rng.random() < 0.5:
        sc.op(name, start, dur)
    else:
        sc.range(name, start, dur)


def _scenario(rng: random.Random, seed: int) -> Scenario:
    sc = Scenario(name=f"gap-host-{seed}")
    step = rng.choice([1, 5]) * US  # a coarse grid makes shared instants common
    for thread in THREADS:
        sc.pid, sc.tid = thread
        for i in range(rng.randint(10, 45)):
            start = rng.randrange(0, 60) * step
            dur = rng.choice([0, 0, rng.randrange(1, 6), rng.randrange(1, 60)]) * step
            # several intervals on the same instants stack one inside the other
            for c in range(rng.choice([1, 1, 1, 2, 6])):
                name = rng.choice(WRAPPERS) if rng.random() < 0.1 else f"h{i}.{c}"
                _interval(rng, sc, name, start, dur)
        # Towers later on: intervals nested properly, many deep, sharing instants, with
        # short ones inside them.
        for t in range(rng.randint(0, 3)):
            lo = 120 + 70 * t + rng.randrange(0, 10)
            hi = lo + rng.randrange(20, 60)
            for level in range(rng.randint(3, 20)):
                name = rng.choice(WRAPPERS) if rng.random() < 0.1 else f"t{t}.{level}"
                _interval(rng, sc, name, lo * step, (hi - lo) * step)
                lo += rng.choice([0, 0, 1, 3, 6])
                hi -= rng.choice([0, 0, 1, 3, 6])
                if hi < lo:
                    break
                if rng.random() < 0.3:  # a short one inside, before the next level
                    _interval(rng, sc, f"t{t}.{level}s", (lo + 1) * step, rng.choice([0, step]))
    # Launches in time order, each kernel as its call returns: the GPU idles between them
    # while the host runs the intervals above (or launches late, or early: a queued gap).
    gpu_end = 0
    span_us = 330 * step // US
    for j, at in enumerate(sorted(rng.sample(range(span_us), rng.randint(6, span_us // 4)))):
        sc.pid, sc.tid = rng.choice(THREADS)
        api = rng.choice([1, 2]) * US
        gpu_start = max(at * US + api, gpu_end + rng.choice([0, 1, 3]) * US)
        dur = rng.choice([1, 1, 2, 3]) * US
        sc.launch(None, f"k{j}", at * US, gpu_start, dur, api_dur_ns=api)
        gpu_end = gpu_start + dur
    return sc


@pytest.mark.parametrize("seed", range(40))
def test_gap_host_code_matches_its_definition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    loaded = load_trace(write_chrome_trace(_scenario(rng, seed), tmp_path / "t.json"))
    try:
        con = loaded.con
        host = con.execute(
            f"""
            SELECT 0, pid, tid, depth, name, start_ns, end_ns FROM cpu_ops
            WHERE depth IS NOT NULL AND NOT regexp_matches(name, '{WRAPPER_PATTERN}')
            UNION ALL
            SELECT 1, pid, tid, depth, name, start_ns, end_ns FROM ranges
            WHERE device_id IS NULL AND depth IS NOT NULL
              AND NOT regexp_matches(name, '{WRAPPER_PATTERN}')
            """
        ).fetchall()
        # The trace's size picks the shortcuts or the lookup at every depth: both, in turn.
        for per_depth_max in (0.0, math.inf):
            monkeypatch.setattr(
                derive_gaps_module, "_PER_DEPTH_MAX_LOOKUPS_PER_INTERVAL", per_depth_max
            )
            derive_gaps_module.derive_gaps(con)
            gaps = con.execute(
                """
                SELECT g.cause, g.detail, a.pid, a.tid, g.start_ns, greatest(
                       g.start_ns, least(coalesce(g.launch_start_ns, g.end_ns), g.end_ns))
                FROM gaps g
                JOIN kernels k ON k.device_id = g.device_id AND k.start_ns = g.end_ns
                JOIN api_calls a USING (correlation_id)
                WHERE g.cause IN ('launch_overhead', 'host_compute', 'untraced')
                """
            ).fetchall()
            assert gaps, "no gap whose host code is looked up"
            for cause, detail, pid, tid, a, b in gaps:
                own = [(s, d, n, st, en) for s, p, t, d, n, st, en in host if (p, t) == (pid, tid)]
                want = _expected(own, a, b)
                got = None if detail == UNTRACED_HOST or cause == "untraced" else detail
                assert got == want, (per_depth_max, cause, detail, a, b)
    finally:
        loaded.close()


def test_hundreds_of_intervals_stacked_on_the_same_instants(tmp_path: Path) -> None:
    # 300 ranges around the whole trace stack 300 deep; each gap's host span [100, 900) us
    # of its 1 ms has a tower of shrinking ranges on top (level j spans [10 + 3j, 990 - 3j])
    # and a short range at the midpoint, which covers too little. The innermost range
    # covering half the span names the gap: tower level min(levels - 1, 96), else r299.
    sc = Scenario(name="stacked-gaps")
    for i in range(300):
        sc.range(f"r{i}", 0, 8_000 * US)
    want = {}
    for i, levels in enumerate([0, 5, 60, 150, 0, 5, 60, 150]):
        base = i * 1_000 * US
        for j in range(levels):
            sc.range(f"w{i}.{j}", base + (10 + 3 * j) * US, (980 - 6 * j) * US)
        sc.range(f"small{i}", base + 495 * US, 10 * US)
        # the kernel launched at 900 us runs until 100 us into the next millisecond
        sc.launch(None, f"k{i}", base + 900 * US, base + 905 * US, 195 * US, api_dur_ns=5 * US)
        want[f"k{i}"] = f"w{i}.{min(levels - 1, 96)}" if levels else "r299"
    loaded = load_trace(write_chrome_trace(sc, tmp_path / "t.json"))
    try:
        got = dict(
            loaded.con.execute(
                """
                SELECT k.name, g.detail FROM gaps g
                JOIN kernels k ON k.device_id = g.device_id AND k.start_ns = g.end_ns
                WHERE g.cause = 'host_compute'
                """
            ).fetchall()
        )
    finally:
        loaded.close()
    # the gap of each millisecond but the first ends as its kernel starts
    assert got == {k: v for k, v in want.items() if k != "k0"}
