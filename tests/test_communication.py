"""Communication analyzer: planted half-exposed all-reduce with exact numbers; corpus ranks."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus_cache import corpus_db

from tracelens.analyzers import communication
from tracelens.core.findings import finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.core.workload import Workload
from tracelens.testing.planted_device import exposed_allreduce, exposed_gather_scatter
from tracelens.testing.planted_host import uneven_steps
from tracelens.testing.workloads import pytorch_workload


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
    # the trace kept a sample of its launches: listed, not costed (exposed is no bound)
    assert f.impact_ns == 0 and f.costed is False and 0 < f.subject_ns < ev["comm_ns"]
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
        assert "`all_to_all` ×4 (182 ms), " in f.summary
        # the largest message's rate is said to be that, not the best rate
        assert "the largest message at 6.681 GB/s" in f.summary
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


def _training() -> Workload:
    """A PyTorch training run's workload, as the advice reads it."""
    return pytorch_workload()


def _kernel(coll: str, launch: int | None, start: int, end: int, stream: int = 84) -> dict:
    return {
        "coll": coll,
        "api_start": launch,
        "start_ns": start,
        "end_ns": end,
        "stream_id": stream,
    }


def test_collectives_queued_behind_another_kind_on_their_stream() -> None:
    """One process group's collectives share one NCCL stream and run in the order issued:
    an all-reduce launched while an all-to-all still runs there starts only after it. In a
    filtered trace the kernel it queued behind may be missing: a start long after the
    launch on a stream recorded idle is counted apart, and only there."""
    ms = 1_000_000
    kernels = [
        _kernel("all_to_all", 0, ms // 2, 40 * ms),
        _kernel("all_reduce", 10 * ms, 40 * ms + 5_000, 50 * ms),  # behind the all-to-all
        _kernel("all_reduce", 60 * ms, 100 * ms, 110 * ms),  # late, stream idle as recorded
        _kernel("_all_gather_base", 200 * ms, 200 * ms + 10_000, 260 * ms, stream=203),
    ]
    (a2a, ar) = communication.queued_behind(kernels, filtered=True)
    assert (ar["collective"], ar["stream_id"], ar["shares_with"]) == (
        "all_reduce",
        84,
        ["all_to_all"],
    )
    assert (ar["kernels"], ar["queued"], ar["queued_ns"], ar["behind"]) == (
        2,
        1,
        30 * ms,
        ["all_to_all"],
    )
    assert (ar["unexplained"], ar["unexplained_ns"]) == (1, [40 * ms])
    assert a2a["queued"] == 0 and a2a["unexplained"] == 0
    # unfiltered, a late start on an idle stream waits for an event, not the stream
    (_, ar) = communication.queued_behind(kernels, filtered=False)
    assert ar["queued"] == 1 and ar["unexplained"] == 0


def _coll(name: str, kernel_ns: int, exposed_ns: int, **kw: object) -> dict:
    return {
        "collective": name,
        "count": 2,
        "kernel_ns": kernel_ns,
        "exposed_ns": exposed_ns,
        "median_bytes": kw.get("bytes"),
        "min_bytes": kw.get("bytes"),
        "max_bytes": kw.get("bytes"),
        "group_size": kw.get("group_size"),
        "best_algbw_gbps": kw.get("best"),
        "best_busbw_gbps": kw.get("bus"),
    }


def test_ddp_all_reduce_advice_follows_the_stream_it_queues_on() -> None:
    """DDP's all-reduces that queue behind all-to-alls on one stream get a process group of
    their own, not a smaller bucket cap; under TorchRec the bf16 setting is
    `DefaultDataParallelWrapper`'s (`DistributedModelParallel` has no `register_comm_hook`),
    elsewhere DDP's comm hook; an all-reduce compute hides gets no advice at all."""
    wl = _training()
    ms = 1_000_000
    queued = [
        {
            "collective": "all_reduce",
            "stream_id": 84,
            "shares_with": ["all_to_all"],
            "kernels": 4,
            "queued": 2,
            "queued_ns": 100 * ms,
            "behind": ["all_to_all"],
            "unexplained": 0,
            "unexplained_ns": [],
        }
    ]
    colls = [_coll("all_to_all", 180 * ms, 160 * ms), _coll("all_reduce", 100 * ms, 60 * ms)]
    advice = communication._advice(
        20.0, colls, wl, ddp_reducer=True, queued=queued, torchrec=True, fp32_all_reduce=True
    )
    assert "they run on NCCL stream 84 with the `all_to_all`s" in advice
    assert "2 were launched while the `all_to_all`s still ran there" in advice
    assert "A smaller `bucket_cap_mb` does not start them sooner" in advice
    assert "a process group of DDP's own" in advice
    assert 'DefaultDataParallelWrapper(allreduce_comm_precision="bf16"' in advice
    assert "register_comm_hook(None" not in advice
    plain = communication._advice(
        20.0, colls, wl, ddp_reducer=True, queued=[], torchrec=False, fp32_all_reduce=True
    )
    assert "register_comm_hook(None, bf16_compress_hook)" in plain
    assert "DefaultDataParallelWrapper" not in plain and "process group" not in plain
    # 85 % hidden: 6.6 ms of 300 ms exposed is no share to advise on, unless the
    # all-reduces queued long behind the all-to-alls (100 ms, a third of the exposed time):
    # queuing is not exposed kernel time, but it is what a group of their own gives back
    hidden = [_coll("all_to_all", 230 * ms, 290 * ms), _coll("all_reduce", 44 * ms, 6_600_000)]
    advice = communication._advice(
        20.0, hidden, wl, ddp_reducer=True, queued=queued, torchrec=True, fp32_all_reduce=True
    )
    assert "For the all-reduces: DDP's reducer already issues" in advice
    assert "a process group of DDP's own" in advice
    assert "For the all-reduce share" not in advice
    short = [{**queued[0], "queued_ns": 10 * ms}]
    advice = communication._advice(
        20.0, hidden, wl, ddp_reducer=True, queued=short, torchrec=True, fp32_all_reduce=True
    )
    assert "all-reduce" not in advice and "DefaultDataParallelWrapper" not in advice


def test_long_queuing_names_the_collective_in_the_summary() -> None:
    """A collective that queued behind another kind for at least the share of the exposed
    time the summary names a collective at is listed there with its queuing, however
    little of its own kernel time is exposed; a short queue is not."""
    ms = 1_000_000
    colls = [
        {**_coll("all_to_all", 230 * ms, 190 * ms), "count": 4},
        {**_coll("_all_gather_base", 105 * ms, 105 * ms), "count": 2},
        {**_coll("all_reduce", 44 * ms, 6_600_000), "count": 4},
    ]
    row = {
        "collective": "all_reduce",
        "stream_id": 84,
        "shares_with": ["all_to_all"],
        "kernels": 4,
        "queued": 2,
        "queued_ns": 99_926_000,
        "behind": ["all_to_all"],
        "unexplained": 0,
        "unexplained_ns": [],
    }
    queues = communication.long_queues([row], colls)
    assert set(queues) == {"all_reduce"}
    text = communication._collectives_text(colls, False, queues)
    assert (
        "`all_reduce` ×4 (44 ms; 2 of them queued 99.9 ms behind the `all_to_all`s on NCCL "
        "stream 84 before starting)" in text
    )
    assert communication.long_queues([{**row, "queued_ns": 30 * ms}], colls) == {}
    assert "all_reduce" not in communication._collectives_text(colls, False, {})


def test_queued_behind_lists_each_wait() -> None:
    """Each kernel that queued behind another kind on its stream is listed with the kernel
    it waited for; in a filtered trace one that started late with nothing recorded before
    it is listed without one."""
    ms = 1_000_000

    def k(coll: str, launch: int, start: int, end: int) -> dict:
        return {
            "coll": coll,
            "stream_id": 84,
            "api_start": launch * ms,
            "start_ns": start * ms,
            "end_ns": end * ms,
        }

    kernels = [
        k("all_to_all", 230, 234, 276),
        k("all_reduce", 241, 299, 307),
        k("all_reduce", 446, 513, 530),
    ]
    rows = {r["collective"]: r for r in communication.queued_behind(kernels, filtered=True)}
    ar = rows["all_reduce"]
    assert (ar["queued"], ar["queued_ns"], ar["unexplained"]) == (1, 35 * ms, 1)
    assert ar["waits"] == [
        {
            "launch_ns": 241 * ms,
            "start_ns": 299 * ms,
            "behind": "all_to_all",
            "behind_start_ns": 234 * ms,
            "behind_end_ns": 276 * ms,
        },
        {
            "launch_ns": 446 * ms,
            "start_ns": 513 * ms,
            "behind": None,
            "behind_start_ns": None,
            "behind_end_ns": None,
        },
    ]


def test_shampoo_gather_advice_and_a_network_rate_not_called_slow() -> None:
    """Distributed Shampoo's all-gather gets `DDPShampooConfig` advice; its ~25 GB/s bus
    bandwidth is one network port's rate, which a trace cannot tell from slow NVLink, so
    it is not called far below the interconnect. A rate under any network port's is."""
    wl = _training()
    ms = 1_000_000
    gather = _coll(
        "_all_gather_base", 106 * ms, 106 * ms, bytes=2**30, group_size=64, best=25.3, bus=24.9
    )
    colls = [_coll("all_to_all", 180 * ms, 160 * ms, best=6.7), gather]
    advice = communication._advice(20.0, colls, wl, shampoo_gather=True)
    assert "distributed Shampoo's" in advice
    # both spellings: facebookresearch/optimizers' current config and the older one
    assert (
        "`distributed_config=DDPDistributedConfig(communication_dtype=torch.bfloat16, "
        "num_trainers_per_group=<GPUs per node>)`" in advice
    )
    assert (
        "`distributed_config=DDPShampooConfig(communication_dtype=CommunicationDType.BF16, "
        "num_trainers_per_group=<GPUs per node>)`" in advice
    )
    assert "`num_trainers_per_group` is 64 here; the GPUs per node keep" in advice
    assert "the trace cannot tell" in advice
    assert "1 GiB each over 64 ranks" in advice
    assert "far below it, check topology" not in advice
    assert "`_all_gather_base`'s 24.9 GB/s bus bandwidth" in advice
    assert "does not say whether these ranks share a node" in advice
    # with the host's GPUs known, a 64-rank group spans hosts: its rate is the network's
    advice = communication._advice(20.0, colls, wl, shampoo_gather=True, gpus=8)
    assert (
        "`num_trainers_per_group` is 64 here (the gather spans ~8 nodes of 8 GPUs, the trace "
        "listing 8 on this host); 8 keeps it inside a node" in advice
    )
    assert "num_trainers_per_group=8)`" in advice
    assert "is an inter-node rate: its group of 64 ranks spans at least 8 hosts" in advice
    assert "does not say whether these ranks share a node" not in advice
    # a group within one host already stays inside it
    inside = communication._advice(
        20.0, [colls[0], {**gather, "group_size": 4}], wl, shampoo_gather=True, gpus=8
    )
    assert "within one node of 8 GPUs" in inside and "inter-node" not in inside
    # without Shampoo's step around it, no Shampoo advice
    assert "Shampoo" not in communication._advice(20.0, colls, wl)
    slow = [_coll("all_to_all", 180 * ms, 160 * ms, best=3.0)]
    assert "far below it, check topology" in communication._advice(20.0, slow, wl)


def test_median_bandwidth_of_two_calls_is_their_midpoint(corpus: Path) -> None:
    """Rank 1's two Shampoo all-gathers ran 1 GiB at 17.27 and 25.12 GB/s: their median is
    21.2 GB/s, not the lower one; the best is 25.12."""
    db = corpus_db(corpus, "sampled_2rank/rank-1.json.gz")
    (f,) = [f for f in communication.analyze(db, Thresholds()) if "collectives" in f.evidence]
    ag = next(c for c in f.evidence["collectives"] if c["collective"] == "_all_gather_base")
    assert ag["median_algbw_gbps"] == pytest.approx((17.273 + 25.12) / 2, abs=0.01)
    assert ag["best_algbw_gbps"] == pytest.approx(25.12, abs=0.01)


def test_hot_communication_advice_follows_what_runs() -> None:
    """FSDP prefetch is named only where FSDP runs, DDP's bucketing only where its reducer
    does; an all-gather in Shampoo's step points to Shampoo's config."""
    from tracelens.core.kernel_kinds import communication_advice

    assert "FSDP" not in communication_advice(ddp=True)
    # each for its own collectives: bucketing overlaps the all-reduces, not an all-to-all
    # the same `record_param_comms` operator launches
    assert "DDP's gradient bucketing, for its all-reduces" in communication_advice(ddp=True)
    assert "FSDP prefetch, for its all-gathers" in communication_advice(fsdp=True)
    assert "FSDP prefetch" in communication_advice(fsdp=True)
    plain = communication_advice()
    assert "DDP" not in plain and "FSDP" not in plain and "async collectives" in plain
    shampoo = communication_advice(ddp=True, shampoo=True)
    assert "distributed Shampoo's all-gather" in shampoo and "num_trainers_per_group" in shampoo
    assert "FSDP" not in shampoo and "bucketing" not in shampoo
