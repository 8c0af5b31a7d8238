"""Communication analyzer: planted half-exposed all-reduce with exact numbers; corpus ranks."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus_cache import corpus_db

from tracelens.analyzers import communication
from tracelens.core.findings import finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.testing.planted_device import exposed_allreduce, exposed_gather_scatter
from tracelens.testing.planted_host import uneven_steps


def test_planted_exposed_allreduce(scenario_db) -> None:
    sc = exposed_allreduce()
    exp = sc.expected
    (f,) = communication.analyze(scenario_db(sc), Thresholds())
    ev = f.evidence
    assert f.id == finding_id("communication", 0)
    assert ev["comm_ns"] == exp["comm_ns"]
    assert ev["overlapped_ns"] == exp["overlapped_ns"]
    assert f.impact_ns == ev["exposed_ns"] == exp["exposed_ns"]
    (c,) = ev["collectives"]
    assert c["collective"] == exp["collective"]
    assert c["count"] == exp["count"]
    assert c["median_bytes"] == exp["median_bytes"]
    assert c["group_size"] == 4
    assert c["median_algbw_gbps"] == pytest.approx(exp["algbw_gbps"])
    assert c["median_busbw_gbps"] == pytest.approx(exp["busbw_gbps"])


def test_no_nccl_no_finding(scenario_db) -> None:
    assert communication.analyze(scenario_db(uneven_steps()), Thresholds()) == []


@pytest.mark.parametrize(("rank", "device"), [(0, 0), (1, 1)])
def test_corpus_sampled_ranks_expose_most_communication(
    corpus: Path, rank: int, device: int
) -> None:
    db = corpus_db(corpus, f"sampled_2rank/rank-{rank}.json.gz")
    # the exposed-communication finding; its peer-waiting part is a finding of its own
    found = {f.id: f for f in communication.analyze(db, Thresholds())}
    assert set(found) == {
        finding_id("communication", device),
        finding_id("communication", device, "peer_waiting"),
    }
    f = found[finding_id("communication", device)]
    ev = f.evidence
    assert ev["device_id"] == device
    # 10 NCCL kernels per rank; compute hides at most a fifth of their time.
    assert ev["overlap_pct"] < 25
    assert 0 < f.impact_ns < ev["comm_ns"]
    names = {c["collective"] for c in ev["collectives"]}
    assert {"all_to_all", "all_reduce"} <= names
    # Shampoo's all-gather (under `Optimizer.step#Shampoo.step`) gathers 1 GiB across 64
    # ranks from 16 MiB shards: it moves its output, 1 GiB, per rank (nccl-tests' algbw),
    # at 17-25 GB/s; counted from the input shard it read 0.26-0.40 GB/s
    ag = next(c for c in ev["collectives"] if c["collective"] == "_all_gather_base")
    assert ag["min_bytes"] == ag["max_bytes"] == 2**30 and ag["group_size"] == 64
    assert 15 < ag["median_algbw_gbps"] <= ag["largest_algbw_gbps"] < 30
    if rank == 0:
        # rank 0's four all-to-alls are a 3 KiB split exchange, two 400 MiB payloads and
        # one of 10.9 MiB: no typical call, so the summary gives the range and the largest
        # call's bandwidth (the interpolated median was 205 MiB, a size no call had)
        a2a = next(c for c in ev["collectives"] if c["collective"] == "all_to_all")
        assert a2a["max_bytes"] == 400 * 2**20 and a2a["min_bytes"] < 4096
        assert a2a["median_bytes"] != 215_408_640  # a real call's size
        assert "`all_to_all` ×4 (182 ms), " in f.summary and "the largest at" in f.summary
        assert "400 MiB" in f.summary and "205" not in f.summary
        # the all-reduces (108 ms) and all-gathers (106 ms) hold as much time between them:
        # naming the all-to-all alone hid half the communication; and the bandwidth, taken
        # over kernels that also wait for the peers, is said to be a lower bound
        assert "`all_reduce` ×4 (108 ms)" in f.summary
        assert "`_all_gather_base` ×2 (106 ms)" in f.summary
        assert "a lower bound" in f.summary


def test_corpus_single_rank_ddp_has_no_nccl_kernels(corpus: Path) -> None:
    db = corpus_db(corpus, "v100_train_single_rank_ns.pt.trace.json.gz")
    assert communication.analyze(db, Thresholds()) == []


def test_planted_gather_scatter_bytes_as_nccl_tests_count_them(scenario_db) -> None:
    """An all-gather moves its output per rank (a group's worth of input shards), a
    reduce-scatter its input: both 100 MB here at 50 GB/s, not the all-gather's 25 MB
    shard at 12.5 GB/s. Kineto's ``nccl:_all_gather_base`` range records only the shard;
    the enclosing ``c10d::_allgather_base_`` operator gives the output and the group."""
    sc = exposed_gather_scatter()
    exp = sc.expected
    (f,) = communication.analyze(scenario_db(sc), Thresholds())
    by_name = {c["collective"]: c for c in f.evidence["collectives"]}
    assert set(by_name) == {"_all_gather_base", "reduce_scatter"}
    for c in by_name.values():
        assert c["count"] == 4
        assert c["median_bytes"] == c["max_bytes"] == exp["bytes"]
        assert c["group_size"] == exp["group_size"]
        assert c["median_algbw_gbps"] == pytest.approx(exp["algbw_gbps"])
        assert c["largest_algbw_gbps"] == pytest.approx(exp["algbw_gbps"])
        assert c["median_busbw_gbps"] == pytest.approx(exp["busbw_gbps"])
