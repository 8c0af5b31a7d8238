"""Communication/compute overlap as running sums equals the pairwise definition.

The communication analyzer measures, per device, how much of the merged NCCL time compute
kernels cover, and per NCCL kernel its time not covered by compute; both come from sorts
and ASOF joins over running sums of the merged compute intervals. These tests check them
against the definition computed directly in Python on random kernels: overlapping, nested,
touching, zero-length, on two devices.
"""

from __future__ import annotations

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.schema import create_schema
from tracelens.analyzers.communication import _OVERLAP, collective_kernels
from tracelens.core.restriction import merge_intervals
from tracelens.core.tracedb import TraceDB

Kernel = tuple[int, bool, int, int]  # device, is NCCL, start, end


def _overlap(a: tuple[int, int], spans: list[tuple[int, int]]) -> int:
    return sum(max(0, min(a[1], e) - max(a[0], s)) for s, e in spans)


_kernels = st.lists(
    st.tuples(
        st.sampled_from([0, 3]),
        st.booleans(),
        st.integers(0, 400),
        st.integers(0, 60),
    ).map(lambda k: (k[0], k[1], k[2] * 5, k[2] * 5 + k[3] * 5)),
    min_size=1,
    max_size=40,
)


def _db(kernels: list[Kernel]) -> TraceDB:
    con = duckdb.connect()
    create_schema(con)
    con.executemany(
        "INSERT INTO kernels (device_id, stream_id, name, start_ns, end_ns, correlation_id)"
        " VALUES (?, 7, ?, ?, ?, ?)",
        [
            (d, "ncclKernel_AllReduce_RING_LL_Sum_float" if nccl else f"gemm_{i % 3}", s, e, i)
            for i, (d, nccl, s, e) in enumerate(kernels)
        ],
    )
    return TraceDB(con)


@settings(max_examples=60, deadline=None)
@given(_kernels)
def test_exposed_communication_per_device_matches_the_definition(kernels: list[Kernel]) -> None:
    db = _db(kernels)
    got = {
        int(r["device_id"]): (int(r["comm_ns"]), int(r["overlap_ns"])) for r in db.dicts(_OVERLAP)
    }
    want = {}
    for dev in sorted({k[0] for k in kernels if k[1]}):
        comm = merge_intervals([(s, e) for d, nccl, s, e in kernels if d == dev and nccl])
        compute = merge_intervals([(s, e) for d, nccl, s, e in kernels if d == dev and not nccl])
        want[dev] = (sum(e - s for s, e in comm), sum(_overlap(c, compute) for c in comm))
    assert got == want


@settings(max_examples=60, deadline=None)
@given(_kernels)
def test_each_collective_kernels_exposed_time_matches_the_definition(kernels: list[Kernel]) -> None:
    db = _db(kernels)
    for dev in sorted({k[0] for k in kernels if k[1]}):
        compute = merge_intervals([(s, e) for d, nccl, s, e in kernels if d == dev and not nccl])
        want = sorted(
            (s, e, (e - s) - _overlap((s, e), compute))
            for d, nccl, s, e in kernels
            if d == dev and nccl
        )
        got = sorted(
            (k["start_ns"], k["end_ns"], k["exposed"]) for k in collective_kernels(db, dev)
        )
        assert got == want
