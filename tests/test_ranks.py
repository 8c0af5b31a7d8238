"""A job of several ranks read together: aligned clocks, stragglers and their cause,
imbalance, and the CLI that takes a folder or several files."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ingest import TraceInputError
from ingest.loader import rank_files
from tracelens.cli import main
from tracelens.ranks.extract import Collective
from tracelens.ranks.grouping import ranks_label
from tracelens.ranks.job import analyze_job
from tracelens.ranks.job_findings import WAITS_SHOWN, _straggler_ranges
from tracelens.ranks.stragglers import Group
from tracelens.testing.planted_ranks import write_job


def _job(folder: Path) -> dict:
    return analyze_job(rank_files([folder]))


def test_slow_data_loader_rank_is_the_straggler_on_aligned_clocks(tmp_path: Path) -> None:
    """Four ranks whose clocks are 1.23 s apart; rank 2 reads its batch in the training
    process for 2 ms each step, so every all-reduce waits for it."""
    planted = write_job(tmp_path / "job", ranks=4, slow_rank=2)
    job = _job(tmp_path / "job")
    offsets = {o["rank"]: o["offset_ns"] for o in job["clock"]["offsets"]}
    for r, expected in planted.offsets_ns.items():
        assert abs(offsets[r] - expected) <= 2_000, (r, offsets[r], expected)
    assert [s["rank"] for s in job["stragglers"]] == [2]
    (s,) = job["stragglers"]
    assert s["last_in"] == s["of"] == 10
    assert s["held_back_ns"] == planted.expected["held_back_ns"] == 20_000_000
    assert s["others_wait_ns"] == 3 * 20_000_000  # three ranks wait 2 ms, ten times
    assert s["cause"] == "data_loading"
    top = job["findings"][0]
    assert top["analyzer"] == "ranks" and top["rank"] == 2 and top["impact_ns"] == 20_000_000
    assert "DataLoader" in top["summary"] and "num_workers" in top["advice"]
    # the waiting ranks' communication findings keep only what is not the straggler's,
    # and the four ranks' exposed-communication findings are one, on ranks 0-3
    (comm,) = [f for f in job["findings"] if f["analyzer"] == "communication"]
    assert comm["ranks"] == [0, 1, 2, 3] and comm["impact_ns"] == 10_000_000
    assert comm["impact_ns_by_rank"] == {str(r): 10_000_000 for r in range(4)}
    assert "straggler" in comm["impact_basis"] and "4 of the job's 4 ranks" in comm["impact_basis"]
    # the host-compute gaps are the waiting ranks' only: rank 2's gap is its DataLoader
    (host,) = [f for f in job["findings"] if "host ran code" in f["title"]]
    assert host["ranks"] == [0, 1, 3]
    ids = [f["id"] for f in job["findings"]]
    assert len(ids) == len(set(ids)), "every job finding has its own id (permalinks)"
    assert job["collectives"]["shared"] == 10
    assert [r["rank"] for r in job["ranks"]] == [0, 1, 2, 3]


def test_ranks_label() -> None:
    assert ranks_label([4]) == "rank 4"
    assert ranks_label([0, 1, 2, 3, 5, 7, 8]) == "ranks 0-3, 5, 7-8"


def test_heavier_expert_rank_is_late_because_of_compute(tmp_path: Path) -> None:
    write_job(tmp_path / "job", ranks=4, slow_rank=None, heavy_rank=1)
    job = _job(tmp_path / "job")
    (s,) = job["stragglers"]
    assert (s["rank"], s["cause"], s["excess_compute_ns"]) == (1, "compute", 15_000_000)
    (imb,) = [f for f in job["findings"] if f["title"].startswith("Rank 1 runs")]
    assert imb["evidence"]["operators"][0] == {"operator": "aten::mm", "extra_ns": 15_000_000}
    assert imb["impact_ns"] == 0 and "straggler finding counts" in imb["impact_basis"]


def test_ranks_that_thinned_their_launches(tmp_path: Path) -> None:
    """The same jobs (50 steps: 100 launches a rank), their correlation ids 400 apart
    (traces that kept a sample of their launches). Who arrives last is measured (the
    collectives' kernels are kept); why is only as far as the kept kernels show it: a
    heavier rank's kept compute is said to be the kept kernels', an idle cause (the slow
    loader) is not measured at all; and no rank's communication is costed, since what ran
    beside it may have been dropped."""
    write_job(tmp_path / "heavy", ranks=4, steps=50, slow_rank=None, heavy_rank=1, corr_stride=400)
    job = _job(tmp_path / "heavy")
    (s,) = job["stragglers"]
    assert (s["rank"], s["cause"]) == (1, "compute")
    (late,) = [f for f in job["findings"] if f["title"].startswith("Rank 1 arrives last")]
    assert late["costed"] and late["impact_ns"] > 0
    assert "counting the kernels the traces kept" in late["summary"]
    (imb,) = [f for f in job["findings"] if f["title"].startswith("Rank 1's kept kernels")]
    assert imb["title"].endswith("(50% more; sampled traces)")
    comm = [f for f in job["findings"] if f["analyzer"] == "communication"]
    assert comm and all(f["costed"] is False and f["impact_ns"] == 0 for f in comm)
    assert all("where it is largest" in f["impact_basis"] for f in comm if len(f["ranks"]) > 1)

    write_job(tmp_path / "loader", ranks=4, steps=50, slow_rank=2, corr_stride=400)
    job = _job(tmp_path / "loader")
    (s,) = job["stragglers"]
    assert (s["rank"], s["cause"], s["idle_cause"]) == (2, "thinned", None)
    (late,) = [f for f in job["findings"] if f["title"].startswith("Rank 2 arrives last")]
    assert "why is not measured" in late["summary"] and "DataLoader" not in late["summary"]
    assert late["advice"].startswith("Record this rank and a punctual one again")


def test_balanced_job_has_no_straggler(tmp_path: Path) -> None:
    write_job(tmp_path / "job", ranks=3, slow_rank=None)
    job = _job(tmp_path / "job")
    assert not [f for f in job["findings"] if f["analyzer"] == "ranks"]
    assert all(k["max_ns"] == 0 for k in job["collectives"]["skew"])


def test_ranks_from_files_and_duplicates(tmp_path: Path) -> None:
    planted = write_job(tmp_path / "job", ranks=2)
    first, second = planted.files
    assert rank_files([second, first]) == [(0, first), (1, second)]
    dup = tmp_path / "copy" / "rank-0-again.json"
    dup.parent.mkdir()
    shutil.copy(planted.files[0], dup)
    with pytest.raises(TraceInputError, match="claims rank 0"):
        rank_files([*planted.files, dup])


def test_cli_takes_a_folder_or_several_files(tmp_path: Path) -> None:
    planted = write_job(tmp_path / "job", ranks=3, slow_rank=1)
    runner = CliRunner()
    by_folder = runner.invoke(main, ["analyze", str(tmp_path / "job"), "--format", "json"])
    assert by_folder.exit_code == 0, by_folder.output
    by_files = runner.invoke(main, ["analyze", *map(str, planted.files), "--format", "json"])
    assert by_files.exit_code == 0, by_files.output
    a, b = json.loads(by_folder.output), json.loads(by_files.output)
    assert a["schema"] == "tracelens.job/1" and a["findings"] == b["findings"]
    text = runner.invoke(main, ["analyze", str(tmp_path / "job")])
    assert text.exit_code == 0 and "Rank 1 arrives last" in text.output
    md = runner.invoke(main, ["analyze", str(tmp_path / "job"), "--format", "markdown"])
    assert md.exit_code == 0 and "| rank |" in md.output
    one = runner.invoke(main, ["analyze", str(tmp_path / "job"), "--rank", "1", "--format", "json"])
    assert one.exit_code == 0 and json.loads(one.output)["trace"]["rank"] == 1
    gate = runner.invoke(main, ["analyze", str(tmp_path / "job"), "--fail-on", "low", "-q"])
    assert gate.exit_code == 1
    html = runner.invoke(main, ["analyze", str(tmp_path / "job"), "--format", "html"])
    assert html.exit_code == 2 and "HTML output takes one trace" in html.output
    db = runner.invoke(main, ["analyze", str(tmp_path / "job"), "--db", str(tmp_path / "x.db")])
    assert db.exit_code == 2 and "--rank R" in db.output


@pytest.mark.corpus
def test_corpus_two_sampled_ranks(corpus: Path) -> None:
    """Two of a 128-rank job's ranks, sampled (only some events kept).

    Expert reading: the two files' recorded clocks already agree (the shared collectives'
    kernels end within tens of µs of each other), so the offset is near zero; five of the
    ten collectives are the same exchange on both ranks (the others pair each rank with
    ranks not in the files): an all-to-all, two all-reduces and both of Shampoo's
    all-gathers. NCCL runs them all as `ncclKernel_SendRecv_*` kernels, so they are named
    by the calls that launched them (`all_to_all`, `all_reduce`, `_all_gather_base`, as
    each rank's report names them), not "SendRecv". The step-551 all-gather (rank 0
    585.321-627.817 ms, rank 1 585.405-628.149 ms: same sizes, same stream) ends 0.33 ms
    apart on the two ranks, a 1 GiB ring's last steps ending in turn: beyond the 0.2 ms the
    offset is fitted to, but well within its 42.5 ms, so it is matched too. Rank 1 reaches
    all five last, having run more GPU compute between its previous recorded collective and
    them than rank 0 (61.9 ms in all; over the capture 272 ms against 210 ms, 61.7 ms: the
    same difference, said as that one, since the windows before each collective differ
    between ranks whose traces the filter thinned differently). With 126
    ranks absent, "last" is among these two only, and the report says so, in the
    straggler's own title too.
    Rank 1's NCCL kernels still wait 150 ms inside collectives: in the five it shares with
    rank 0 it is last, so there it waits for ranks not recorded; about 100 ms of it is in
    collectives only rank 1 records (the sampling dropped rank 0's side), where it may wait
    for anyone. So its peer-waiting finding must not call it early (that contradicted the
    straggler finding beside it) but say both and send the reader to the absent ranks. The
    arrival skews of two shared collectives are listed as they are (112 µs and 1.32 ms),
    not as a "p50" that is the lower of them. The peer-waiting finding shown is rank 1's
    (95 ms, the most left once the straggler finding takes rank 0's 32 ms of waiting for
    rank 1), so its summary also names rank 0's own 114 ms, the longest. (Since neither is
    costed in these sampled traces, rank 0's, the longer, is shown, and the summary says
    rank 1's 95 ms is for ranks not recorded.)
    The process-group advice of the shared exposed-communication finding (rank 0 shown)
    rests on rank 1, whose trace records 2 all-reduces queued behind all-to-alls on stream
    84; rank 0's copies of those all-to-alls were filtered out, and its all-reduces that
    start long after their launch line up with them on the aligned clock (launched at
    987.3 ms, started 1,048.8 ms from rank 0's trace start: 1.72 ms after rank 1's
    backward all-to-all ended).
    The imbalance finding and the straggler's summary both measure against the other rank
    (61.7 ms more), not against the two ranks' midpoint (which halved it); the extra work
    is FBGEMM's embedding lookups and their fused optimizer (+43.5 and +18.6 ms), so the
    advice is the embedding tables' sharding plan, not the batch split or expert routing.
    Both traces kept 0.45 % of their launches (short elementwise kernels among them, so
    not a duration filter): the 61.7 ms is the kept kernels', and both findings say so and
    that what was dropped is not known (a sixth review); who arrives last is measured.
    """
    job = _job(corpus / "torch/sampled_2rank")
    # the job's JSON reads its findings in the text's order: the un-costed idle time first
    lead = job["findings"][job["reading_order"][0]]
    assert lead["analyzer"] == "idle_gpu" and lead["subject_ns"] > 390_000_000
    assert sorted(job["reading_order"]) == list(range(len(job["findings"])))
    (o,) = [o for o in job["clock"]["offsets"] if o["rank"] == 1]
    assert abs(o["offset_ns"]) < 100_000 and o["matched_collectives"] == 5
    assert o["residual_ns"] is not None and o["residual_ns"] < 100_000
    assert job["collectives"]["shared"] == 5
    skew = {k["collective"]: k["count"] for k in job["collectives"]["skew"]}
    assert skew == {"all_to_all": 1, "all_reduce": 2, "_all_gather_base": 2}
    ag = next(k for k in job["collectives"]["skew"] if k["collective"] == "_all_gather_base")
    assert ag["values_ns"][0] < 200_000 and ag["values_ns"][1] > 1_000_000
    # a true median of two: their midpoint, not the lower one
    assert ag["p50_ns"] == sum(ag["values_ns"]) // 2
    (s,) = job["stragglers"]
    assert (s["rank"], s["last_in"], s["of"], s["cause"]) == (1, 5, 5, "compute")
    assert any("2 of the job's 128 ranks" in n for n in job["notes"])
    # each rank's recording caveats reach the job's notes: both thinned their launches,
    # so no idle figure of either is measured (the job's table still lists them)
    assert any(n.startswith("rank 0: it keeps 1,204 of the ~259,691") for n in job["notes"])
    assert any(n.startswith("rank 1: it keeps 1,154 of the ~258,363") for n in job["notes"])
    assert job["world_size"] == 128
    assert [r["compute_ns"] for r in job["ranks"]] == [210_320_000, 271_973_000]
    titles = [f["title"] for f in job["findings"] if f["analyzer"] == "ranks"]
    assert any(
        t.startswith("Rank 1 arrives last among the 2 of 128 ranks recorded at 5 of 5")
        for t in titles
    ), titles
    (late,) = [f for f in job["findings"] if f["title"].startswith("Rank 1 arrives last")]
    assert [w["collective"] for w in late["evidence"]["worst"]] == [
        "all_reduce",
        "all_to_all",
        "all_reduce",
        "_all_gather_base",
        "_all_gather_base",
    ]
    # each collective's stretch since the rank's previous recorded one sums to 61.9 ms,
    # within 5 % of the whole capture's difference (the imbalance finding's 61.7 ms): said
    # as that, one measure the same on both ranks
    assert late["evidence"]["excess_compute_ns"] == pytest.approx(61_900_000, rel=0.01)
    assert (
        "it ran 61.7 ms more GPU compute than the other ranks' median over the whole trace"
        in late["summary"]
    )
    assert "counting the kernels the traces kept" in late["summary"]
    assert "between its previous recorded collective" not in late["summary"]
    assert "more GPU work before them" not in late["summary"]
    assert (
        "Rank 1's kept kernels run 61.7 ms more GPU compute than rank 0's (29% more; "
        "sampled traces)" in titles
    )
    (imb,) = [f for f in job["findings"] if f["title"].startswith("Rank 1's kept kernels")]
    assert "what the dropped ones add on either rank is not known" in imb["summary"]
    assert "sharding plan" in imb["advice"] and "embedding tables" in imb["advice"]
    # neither rank's waiting is costed (the traces kept a sample of their launches): the
    # shared finding shows rank 0's, the longer, names both, and says rank 1, last among
    # the recorded ranks, waits for ranks not recorded; its advice is the job's, not one
    # rank's "analyze the ranks together"
    (wait,) = [
        f
        for f in job["findings"]
        if f["analyzer"] == "communication" and "exposed_waiting_ns" in f["evidence"]
    ]
    assert wait["ranks"] == [0, 1] and wait["rank"] == 0 and wait["costed"] is False
    assert "the evidence is rank 0's, where it is largest" in wait["impact_basis"]
    assert "before its peers" not in wait["advice"]
    assert "Analyze the ranks' traces together" not in wait["advice"]
    # a seventh review: say how much of rank 0's waiting is the straggler's (32 ms, on the
    # aligned clocks) and that the rest, with rank 1's own, is for ranks not recorded
    assert wait["advice"].startswith(
        "Of rank 0's 114 ms, up to 32 ms is waiting for rank 1 in the collectives both traces keep"
    )
    # most of the rest is in collectives only one trace keeps (5 of rank 0's 10), where
    # either rank may be the late one (an eighth review)
    assert (
        "and rank 1's own 95 ms inside its NCCL kernels, is in collectives only one of "
        in (wait["advice"])
    )
    assert "which rank was late there is not known" in wait["advice"]
    assert "may be waiting on it" not in wait["advice"]
    assert "before rebalancing" not in wait["advice"]  # the straggler finding says balance
    assert "Exposed waiting for peers by rank: rank 0 114 ms, rank 1 95 ms." in wait["summary"]
    assert wait["title"].endswith("(sampled trace)")
    assert "Found on 2 of the 2 recorded of the job's 128 ranks" in wait["impact_basis"]
    assert "leaves out the collectives the trace dropped" in wait["impact_basis"]
    assert "measured" not in wait["impact_basis"]  # an estimate from bytes and best rate
    # the separate-group advice rests on the rank that records the queuing
    (exposed,) = [
        f
        for f in job["findings"]
        if f["analyzer"] == "communication" and "queued_behind" in f["evidence"]
    ]
    assert exposed["rank"] == 0 and exposed["ranks"] == [0, 1]
    advice = exposed["advice"]
    assert "but rank 1's trace shows they run on NCCL stream 84 with the `all_to_all`s" in advice
    assert "2 were launched while the `all_to_all`s still ran there" in advice
    assert "Rank 0's own all-reduces there that started long after their launch" in advice
    assert (
        "its all-reduce launched at 987.3 ms started at 1,048.8 ms, 1.72 ms after rank 1's "
        "`all_to_all` of 956.3 ms to 1,047.1 ms ended" in advice
    )
    assert "2 started 54.6 ms to 61.6 ms after their launch" not in advice
    text = CliRunner().invoke(main, ["analyze", str(corpus / "torch/sampled_2rank")]).output
    assert "_all_gather_base arrival skew (2 shared): values 112 µs, 1.32 ms" in text
    assert "p50 112 µs" not in text
    # a seventh review: ranked by impact alone a 39 µs pinned-memory hint led the job's
    # findings, above 391 ms of idle time and 337 ms of exposed communication that cannot
    # be costed here; the job view orders them as a single trace's report does
    lead = text.index("First, where most of the GPU time goes (not costed")
    ranked = text.index("Findings, ranked by the time they would give back")
    minor = text.index("Minor findings (little or no time to give back)")
    assert lead < text.index("GPU 0 idle 391 ms") < ranked < text.index("Rank 1 arrives last")
    assert minor < text.index("16 host-to-device copies from pageable")


def test_base_times_align_ranks_without_shared_collectives(tmp_path: Path) -> None:
    """Kineto writes times relative to ``baseTimeNanoseconds``. Two ranks whose profilers
    started 0.777 s apart, on hosts with synchronised realtime clocks and no collective
    kernel recorded: the base times give the offset, and the report names the method."""
    from decimal import Decimal

    planted = write_job(tmp_path / "raw", ranks=2, slow_rank=None)
    base = 1_700_000_000_000_000_000
    out = tmp_path / "job"
    out.mkdir()
    bases = {r: base - 5_000_000_000 + r * 777_000_000 for r in range(2)}
    for r, path in enumerate(planted.files):
        doc = json.loads(path.read_text(), parse_float=Decimal)
        doc["baseTimeNanoseconds"] = bases[r]
        events = []
        for ev in doc["traceEvents"]:
            if ev["name"].startswith("nccl"):
                continue  # no collective to align on
            true_ns = int(ev["ts"] * 1000) - planted.offsets_ns[r]
            ev["ts"] = Decimal(true_ns - bases[r]) / 1000
            events.append(ev)
        doc["traceEvents"] = events
        (out / path.name).write_text(json.dumps(doc, default=lambda d: f"{d:.3f}"))
        text = (out / path.name).read_text()
        (out / path.name).write_text(re.sub(r'"(ts|dur)": "([0-9.]+)"', r'"\1": \2', text))
    job = _job(out)
    (o,) = [o for o in job["clock"]["offsets"] if o["rank"] == 1]
    assert (o["method"], o["offset_ns"]) == ("base time", bases[0] - bases[1])
    assert job["clock"]["method"] == "base times"
    assert any("baseTimeNanoseconds" in n for n in job["notes"])


def test_a_storm_of_small_all_reduces_on_every_rank(tmp_path: Path) -> None:
    """Four balanced ranks each run 100 all-reduces of 16 KB per step after their compute,
    30 µs each and hidden by nothing, besides one 128 MiB all-reduce. A rank alone reads the
    small ones' time beyond 16 KB at its best rate as waiting for peers; the aligned clocks
    show every rank arrives together, so it is their latency, and coalescing them into
    25 MiB buckets gives back nearly all of their 30 ms."""
    write_job(tmp_path / "job", ranks=4, slow_rank=None, small_allreduces=100)
    job = _job(tmp_path / "job")
    top = job["findings"][0]
    assert top["title"].startswith("Ranks 0-3 each issue about 100 collectives of under 1 MiB")
    assert top["ranks"] == [0, 1, 2, 3] and "bucket_cap_mb" in top["advice"]
    ev = top["evidence"]
    assert (ev["count"], ev["steps"], ev["kernel_ns"], ev["exposed_ns"]) == (
        1000,
        10,
        30_000_000,
        30_000_000,
    )
    # one bucket per step at one small collective's latency, plus 8 MB at the 128 MiB
    # all-reduce's rate (128 MiB in 1 ms)
    rate = 64 * 1024 * 1024 * 2 / 1_000_000
    assert top["impact_ns"] == 30_000_000 - 10 * 30_000 - int(8_192_000 / rate)
    assert not [f for f in job["findings"] if "waiting for peer" in f["title"]]
    assert any("measured on the aligned clocks as 0 ns" in n for n in job["notes"])
    (comm,) = [f for f in job["findings"] if "not hidden by compute" in f["title"]]
    # the exposed communication (40 ms a rank) less what the storm finding counts
    assert comm["impact_ns"] == 40_000_000 - top["impact_ns"]


def test_no_storm_without_small_collectives(tmp_path: Path) -> None:
    write_job(tmp_path / "job", ranks=3, slow_rank=None)
    job = _job(tmp_path / "job")
    assert not [f for f in job["findings"] if "collectives of under" in f["title"]]


def test_straggler_ranges_keep_the_longest_waits_per_collective(tmp_path: Path) -> None:
    """With twelve ranks, each collective the straggler held up names the late rank's time
    before it and the longest waits only, so the ranges do not grow with the world size."""
    write_job(tmp_path / "job", ranks=12, slow_rank=5)
    job = _job(tmp_path / "job")
    late = next(
        f for f in job["findings"] if f["analyzer"] == "ranks" and "arrives last" in f["title"]
    )
    ranges = late["time_ranges"]
    own = [i for i, r in enumerate(ranges) if r["rank"] == 5]
    assert len(own) == len(late["evidence"]["worst"]) == 5
    for a, b in zip(own, [*own[1:], len(ranges)], strict=True):
        waits = ranges[a + 1 : b]  # this collective's waiting ranks, after the late one's
        assert len(waits) == WAITS_SHOWN < 11, waits
        assert len({w["rank"] for w in waits}) == WAITS_SHOWN
        assert 5 not in {w["rank"] for w in waits}
    assert len(ranges) == 5 * (1 + WAITS_SHOWN)


def test_straggler_ranges_name_the_ranks_that_waited_longest() -> None:
    members = {
        r: Collective("allreduce", 0, r, 1_000 + 10 * r, 50_000, 0, 0, 0, None) for r in range(12)
    }
    # rank 11 arrives last; the others' waits grow with their rank's distance from 3
    waits = {r: 0 if r == 11 else 100 + 10 * abs(r - 3) for r in range(12)}
    g = Group("allreduce", members, {}, 11, 0, 0, waits)
    got = [r["rank"] for r in _straggler_ranges(11, [g])]
    longest = sorted(range(11), key=lambda r: (-waits[r], r))[:WAITS_SHOWN]
    assert got[0] == 11 and sorted(got[1:]) == sorted(longest)


@pytest.mark.parametrize(
    ("diffs", "says"),
    [
        (
            [(43_500_000, "CppNode<SplitLookupFunction_rowwise_adagrad_Op>"), (1_500_000, "mm")],
            "sharding plan",
        ),
        ([(9_000_000, "vllm::moe_forward"), (2_000_000, "aten::mm")], "to this rank's experts"),
        ([(9_000_000, "aten::mm"), (8_000_000, "aten::embedding")], "sharding of the batch"),
    ],
)
def test_imbalance_advice_follows_the_operators_that_differ(
    diffs: list[tuple[int, str]], says: str
) -> None:
    """Uneven embedding lookups are a sharding plan's, uneven expert GEMMs a router's; only
    where neither holds most of the extra work is the batch split the suspect."""
    from tracelens.ranks.job_findings import imbalance_advice

    assert says in imbalance_advice(diffs)


def test_a_long_collective_ending_apart_is_still_matched() -> None:
    """Four short collectives end within 20 µs on both ranks' aligned clocks; a 42.5 ms
    1 GiB all-gather ends 0.33 ms apart (a ring's last steps end in turn), beyond the
    0.2 ms the offset is fitted to. It is matched, and the offset stays the short ones'."""
    from tracelens.ranks.clock import align

    def coll(kind: str, ordinal: int, start: int, end: int) -> Collective:
        return Collective(kind, ordinal, 0, start, end, 0, 0, 0, None)

    ms = 1_000_000
    offset = 5 * ms
    ref = [coll("all_reduce", i, 10 * ms * i, 10 * ms * i + ms) for i in range(4)]
    ref.append(coll("_all_gather_base", 0, 50 * ms, 92_500_000))
    other = [
        coll(c.kind, c.ordinal, c.start_ns + offset, c.end_ns + offset + 20_000 * (i % 2))
        for i, c in enumerate(ref[:4])
    ]
    other.append(coll("_all_gather_base", 0, 50 * ms + offset, 92_500_000 + offset + 330_000))
    a = align(other, ref)
    assert a.matched == 5 and (4, 4) in a.pairs
    assert abs(a.offset_ns - offset) <= 20_000
    # a short collective ending as far apart is a different one: not matched
    other[0] = coll("all_reduce", 0, offset, ms + offset + 330_000)
    assert (0, 0) not in align(other, ref).pairs


def _comm_finding(rank: int, row: dict) -> dict:
    from tracelens.analyzers.communication import ddp_queue_text

    return {
        "analyzer": "communication",
        "title": f"GPU {rank}: 300 ms of NCCL communication not hidden by compute",
        "rank": rank,
        "ranks": [0, 1],
        "evidence": {"queued_behind": [row]},
        "advice": "DDP's reducer already issues them" + ddp_queue_text(row) + " Under TorchRec",
    }


def test_queuing_advice_rests_on_the_rank_that_records_it() -> None:
    """Rank 0's filter dropped the all-to-all its all-reduce queued behind (launched at 10
    ms, started at 70 ms, nothing recorded before it); rank 1, 20 us ahead on the aligned
    clock, records its all-reduce queued behind an all-to-all of 20-68 ms. The shared
    finding (rank 0 shown) cites rank 1's queuing and says rank 0's wait lines up: the
    all-to-all ends inside it, 2 ms before its start."""
    from tracelens.ranks.clock import Alignment
    from tracelens.ranks.extract import RankExtract
    from tracelens.ranks.queueing import cite_queuing

    ms = 1_000_000
    base = {"collective": "all_reduce", "stream_id": 84, "shares_with": ["all_to_all"]}
    mine = {
        **base,
        "kernels": 4,
        "queued": 0,
        "queued_ns": 0,
        "behind": [],
        "unexplained": 1,
        "unexplained_ns": [60 * ms],
        "waits": [
            {
                "launch_ns": 10 * ms,
                "start_ns": 70 * ms,
                "behind": None,
                "behind_start_ns": None,
                "behind_end_ns": None,
            }
        ],
    }
    off = 20_000  # rank 1's clock reads 20 us more
    theirs = {
        **base,
        "kernels": 4,
        "queued": 1,
        "queued_ns": 58 * ms,
        "behind": ["all_to_all"],
        "unexplained": 0,
        "unexplained_ns": [],
        "waits": [
            {
                "launch_ns": 10 * ms + off,
                "start_ns": 70 * ms + off,
                "behind": "all_to_all",
                "behind_start_ns": 20 * ms + off,
                "behind_end_ns": 68 * ms + off,
            }
        ],
    }
    shown, other = _comm_finding(0, mine), _comm_finding(1, theirs)
    extracts = [
        RankExtract(0, Path("r0"), {"findings": [shown], "trace": {"t0_ns": 0}}),
        RankExtract(1, Path("r1"), {"findings": [other], "trace": {"t0_ns": 0}}),
    ]
    aligned = {0: Alignment(0, 0, 5, "reference"), 1: Alignment(off, 0, 5, "collectives")}
    (f,) = cite_queuing([shown], extracts, aligned)
    assert "but rank 1's trace shows they run on NCCL stream 84" in f["advice"]
    assert "1 was launched while the `all_to_all`s still ran there" in f["advice"]
    assert (
        "its all-reduce launched at 10.0 ms started at 70.0 ms, 2 ms after rank 1's "
        "`all_to_all` of 20.0 ms to 68.0 ms ended" in f["advice"]
    )
    assert f["advice"].endswith(" Under TorchRec")
    # the rank shown that records the queuing itself keeps its own advice
    assert cite_queuing([other], extracts, aligned) == [other]


def test_shared_peer_waiting_names_each_ranks_waiting() -> None:
    """The shown rank (most left after a straggler's share) is not the one that waits
    longest: the summary says every rank's own waiting."""
    from tracelens.ranks.counted_once import waiting_by_rank

    def f(rank: int, ns: int) -> dict:
        return {
            "analyzer": "communication",
            "title": f"GPU {rank}: {ns} ms of exposed NCCL time is waiting for peer ranks",
            "rank": rank,
            "ranks": [0, 1],
            "summary": "NCCL kernels wait.",
            "evidence": {"exposed_waiting_ns": ns * 1_000_000},
        }

    reports = {0: {"findings": [f(0, 114)]}, 1: {"findings": [f(1, 95)]}}
    (shared,) = waiting_by_rank([f(1, 95)], reports)
    assert shared["summary"] == (
        "NCCL kernels wait. Exposed waiting for peers by rank: rank 0 114 ms, rank 1 95 ms; "
        "rank 0 waits longest, and rank 1 is shown as the one whose waiting is left largest "
        "once the job's other findings take their share (see the impact)."
    )
    assert waiting_by_rank([f(0, 114)], reports) == [f(0, 114)]


def test_skew_of_two_is_listed_and_its_median_is_the_midpoint() -> None:
    from tracelens.ranks.stragglers import skew_by_kind, skew_text

    def g(skew: int) -> Group:
        return Group("all_reduce", {}, {}, 1, skew, 0, {})

    (two,) = skew_by_kind([g(112_000), g(1_320_000)])
    assert two["p50_ns"] == 716_000 and two["values_ns"] == [112_000, 1_320_000]
    assert skew_text(two) == "values 112 µs, 1.32 ms"
    (three,) = skew_by_kind([g(1_000), g(3_000), g(2_000)])
    assert "values_ns" not in three and three["p50_ns"] == 2_000
    assert skew_text(three).startswith("p50 2 µs")


def test_job_findings_read_in_sections_like_a_reports() -> None:
    """The job view's sections follow the single-trace renderers': the findings worth
    acting on, the un-costed by their time (first where one holds at least twice the
    largest impact), then the minor ones."""
    from tracelens.report.render.job_text import headed_sections

    def f(title: str, severity: str, impact: int, subject: int, costed: bool = True) -> dict:
        return {"title": title, "severity": severity, "impact_ns": impact,
                "subject_ns": subject, "costed": costed}  # fmt: skip

    hint = f("pinned", "info", 39_000, 65_000)
    late = f("straggler", "low", 32_000_000, 32_000_000)
    idle = f("idle", "info", 0, 391_000_000, costed=False)
    comm = f("comm", "info", 0, 337_000_000, costed=False)
    order = headed_sections([hint, late, comm, idle])
    assert [(h.split(",")[0], [x["title"] for x in fs]) for h, fs in order] == [
        ("First", ["idle", "comm"]),
        ("Findings", ["straggler"]),
        ("Minor findings (little or no time to give back)", ["pinned"]),
    ]
    big = f("straggler", "high", 400_000_000, 400_000_000)
    assert [h.split(",")[0].split(":")[0] for h, _ in headed_sections([big, idle])] == [
        "Findings",
        "Not costed",
    ]
