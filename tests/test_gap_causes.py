"""Idle-gap causes come from evidence: planted cases for each rule, in both input formats,
and what an expert says about the real traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from corpus_cache import corpus_db

from ingest import load_trace
from ingest.derive_gaps import derive_gaps
from ingest.duckdb_connect import connect
from ingest.schema import create_schema
from tracelens.analyzers import idle_gpu, launch_overhead, sync_stalls
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.testing import write_chrome_trace
from tracelens.testing.nsys_writer import write_nsys_sqlite
from tracelens.testing.planted_gaps import (
    SMALL_KERNEL,
    US,
    cuda_c_program,
    host_naming,
    queued_short_gaps,
    slow_graph_dispatch,
    stream_wait_event,
)
from tracelens.testing.planted_host import launch_bound
from tracelens.testing.scenario import ApiCall, Kernel, Scenario

FORMATS = ["chrome", "nsys"]


@pytest.fixture
def load(tmp_path: Path):
    opened = []

    def _load(sc, fmt: str) -> TraceDB:
        if fmt == "chrome":
            path = write_chrome_trace(sc, tmp_path / f"{sc.name}.pt.trace.json.gz")
        else:
            path = write_nsys_sqlite(sc, tmp_path / f"{sc.name}.sqlite")
        loaded = load_trace(path)
        opened.append(loaded)
        return TraceDB(loaded.con)

    yield _load
    for loaded in opened:
        loaded.close()


def _causes(db: TraceDB) -> list[tuple]:
    return db.rows(
        "SELECT cause, count(*), sum(end_ns - start_ns) FROM gaps GROUP BY cause ORDER BY cause"
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_short_gaps_with_the_next_kernel_queued_are_gpu_side(load, fmt: str) -> None:
    sc = queued_short_gaps()
    db = load(sc, fmt)
    assert _causes(db) == [("gpu_dependency", sc.expected["gaps"], sc.expected["gap_ns"])]
    assert launch_overhead.analyze(db, Thresholds()) == []
    # idle_gpu shows what decided it: every gap had its next kernel queued before it began
    (f,) = idle_gpu.analyze(db, Thresholds(idle_min_cause_pct=0.0))
    assert f.evidence["cause"] == "gpu_dependency"
    assert f.evidence["queued_before_gap"] == sc.expected["gaps"]
    assert f.evidence["queued_during_gap"] == 0
    assert "launch" not in f.title


@pytest.mark.parametrize("fmt", FORMATS)
def test_host_launching_back_to_back_is_launch_overhead(load, fmt: str) -> None:
    sc = launch_bound(kernels=100)
    db = load(sc, fmt)
    assert _causes(db) == [("launch_overhead", 99, 99 * 5_000)]
    (f,) = launch_overhead.analyze(db, Thresholds())
    # each launch call starts 1 us after the GPU ran dry, 3 us after the previous call ended
    assert f.evidence["launch_issued_after_gap_start"] == 99
    assert f.evidence["launch_issue_delay_p50_ns"] == 1_000
    (idle,) = idle_gpu.analyze(db, Thresholds())
    assert idle.evidence["launch_after_gap_start"] == 99
    assert idle.evidence["host_activity"][0]["detail"] == "aten::add"


@pytest.mark.parametrize(("fmt", "amd"), [("chrome", False), ("nsys", False), ("chrome", True)])
def test_gap_inside_a_graph_launch_is_the_launch_not_work_outside_graphs(
    load, fmt: str, amd: bool
) -> None:
    """Graphs already replay and the GPU ran dry mid-graph, while the graph launch call was
    still running: an expert names the graph's own launch (and on AMD the runtime
    dispatching its nodes), never "capture more of the step in each graph", which would
    only lengthen that launch."""
    sc = slow_graph_dispatch(amd=amd)
    exp = sc.expected
    db = load(sc, fmt)
    (f,) = [
        f for f in idle_gpu.analyze(db, Thresholds()) if f.evidence["cause"] == "launch_overhead"
    ]
    ev = f.evidence
    assert (ev["in_graph_launch_gaps"], ev["in_graph_launch_ns"]) == (
        exp["in_graph_gaps"],
        exp["in_graph_ns"],
    )
    assert ev["in_graph_launch_ns"] == ev["gap_ns"]
    assert (ev["graph_launch_call"], ev["graph_launch_call_ns"]) == (exp["call"], exp["call_ns"])
    assert ev["graph_launch_kernels"] == exp["kernels_per_launch"]
    assert ev["graph_launches"] == exp["in_graph_gaps"]
    assert f"graph launch still running (`{exp['call']}`)" in f.title
    assert "capture more of the step" not in f.advice
    if amd:
        assert "HIP runtime dispatches" in f.advice and "cudaGraphUpload" not in f.advice
    else:
        assert "cudaGraphUpload" in f.advice and "ROCm" not in f.advice


def test_one_stall_inside_one_graph_launch_is_not_a_slow_dispatch(load) -> None:
    """One replay whose only in-launch gap is one 100 us stall: the graph's kernels
    otherwise ran back to back, so the advice places the stall (the kernel after it, its
    neighbours) and asks for more replays instead of a smaller graph."""
    sc = slow_graph_dispatch(replays=1, amd=True)
    db = load(sc, "chrome")
    (f,) = [
        f for f in idle_gpu.analyze(db, Thresholds()) if f.evidence["cause"] == "launch_overhead"
    ]
    ev = f.evidence
    assert ev["in_graph_launch_gaps"] == 1 and ev["in_graph_launch_longest_ns"] == 100 * US
    assert ev["in_graph_launch_longest_node"] == 21  # 20 kernels ran before the stall
    assert ev["in_graph_launch_longest_prev"] == ev["in_graph_launch_longest_next"] == SMALL_KERNEL
    assert "one stall between graph kernels 20 and 21 of 40" in f.advice
    assert "record several steps" in f.advice
    assert "larger nodes" not in f.advice and "capture more of the step" not in f.advice


def test_launch_gaps_between_graphs_keep_the_capture_advice(tmp_path: Path) -> None:
    """The opposite case: graphs replay, and the GPU ran dry while the host launched single
    kernels between them. That is launch overhead outside the graphs, and capturing more of
    the step is the advice; no graph-launch evidence is claimed."""
    sc = launch_bound(kernels=60)
    corr = sc.next_id()
    end = max(k.start_ns + k.dur_ns for k in sc.kernels)
    sc.api_calls.append(ApiCall("cudaGraphLaunch", end + 50 * US, 10 * US, sc.pid, sc.tid, corr))
    sc.kernels.append(Kernel(SMALL_KERNEL, end + 70 * US, 20 * US, corr))
    path = write_chrome_trace(sc, tmp_path / "mixed.pt.trace.json.gz")
    loaded = load_trace(path)
    try:
        db = TraceDB(loaded.con)
        (f,) = [
            f
            for f in idle_gpu.analyze(db, Thresholds())
            if f.evidence["cause"] == "launch_overhead"
        ]
        assert "in_graph_launch_gaps" not in f.evidence
        assert "capture more of the step in each graph" in f.advice
    finally:
        loaded.close()


@pytest.mark.parametrize("fmt", FORMATS)
def test_stream_wait_event_is_a_gpu_wait_never_a_host_sync(load, fmt: str) -> None:
    sc = stream_wait_event()
    db = load(sc, fmt)
    got = db.rows("SELECT start_ns - ?, end_ns - ?, cause FROM gaps ORDER BY start_ns", [
        db.t0_ns, db.t0_ns])  # fmt: skip
    assert got == sc.expected["causes"]
    assert db.scalar("SELECT sum(blocked_ns) FROM gaps") == 0
    assert sync_stalls.analyze(db, Thresholds()) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_cuda_c_program_sync_copies_and_no_pytorch_advice(load, fmt: str) -> None:
    sc = cuda_c_program()
    exp = sc.expected
    db = load(sc, fmt)
    assert _causes(db) == [
        ("launch_overhead", exp["launch_gaps"], exp["launch_gap_ns"]),
        ("synchronization", exp["sync_gaps"], exp["sync_gap_ns"]),
    ]
    assert db.rows("SELECT DISTINCT detail FROM gaps WHERE cause = 'synchronization'") == [
        ("cudaMemcpy",)
    ]
    idle = {f.evidence["cause"]: f for f in idle_gpu.analyze(db, Thresholds())}
    sync = idle["synchronization"]
    assert sync.evidence["blocked_in_gaps_ns"] == exp["sync_blocked_ns"]
    stalls = sync_stalls.analyze(db, Thresholds())
    (copy,) = [f for f in stalls if f.impact_ns]
    assert copy.evidence["pattern"] == "sync_copy"
    assert copy.impact_ns == exp["sync_blocked_ns"]
    assert copy.evidence["idle_after_ns"] == exp["sync_gap_ns"]
    findings = list(idle.values()) + stalls + launch_overhead.analyze(db, Thresholds())
    for f in findings:
        text = f.title + f.summary + f.advice
        for torch_word in ("torch", "DataLoader", ".item()", "non_blocking", "Python"):
            assert torch_word not in text, (f.analyzer, torch_word)
    assert "cudaMemcpyAsync" in copy.advice


@pytest.mark.parametrize("fmt", FORMATS)
def test_host_is_named_by_innermost_useful_code(load, fmt: str) -> None:
    sc = host_naming()
    db = load(sc, fmt)
    got = db.rows(
        "SELECT start_ns - ?, end_ns - ?, cause, detail FROM gaps ORDER BY start_ns",
        [db.t0_ns, db.t0_ns],
    )
    if fmt == "nsys":
        # emit_nvtx-style ranges carry the names; Python functions are not NVTX ranges in
        # an Nsight export, so the first gap is named by what nsys has
        assert got[1] == sc.expected["gaps"][1]
        return
    assert got == sc.expected["gaps"]
    (f,) = [f for f in idle_gpu.analyze(db, Thresholds()) if f.evidence["cause"] == "host_compute"]
    assert "model.py(40): postprocess" in f.title


# --- the real traces --------------------------------------------------------------------


def test_corpus_mi300_qwen_hip_names(corpus: Path) -> None:
    """Qwen1.5-0.5B inference on an MI300X (ROCm). Its runtime calls are HIP:
    ``hipLaunchKernel``/``hipExtModuleLaunchKernel``/``hipModuleLaunchKernel`` launches,
    one ``hipDeviceSynchronize`` and a synchronous ``hipMemcpyWithStream``. The GPU is 91 %
    busy; most of its ~1,500 small gaps have the next kernel already queued (GPU-side), the
    idle time that matters is Python/``transformers`` host code between layers, and the one
    gap where the host really sat in a HIP blocking call is a synchronization."""
    db = corpus_db(corpus, "mi300_qwen_inference.json.gz", kind="engines")
    causes = dict(db.rows("SELECT cause, count(*) FROM gaps GROUP BY cause"))
    assert causes["gpu_dependency"] > 1_000
    sync = db.rows("SELECT detail, blocked_ns FROM gaps WHERE cause = 'synchronization'")
    assert len(sync) == 1 and sync[0][0].startswith("hip")
    top = db.rows(
        "SELECT cause, detail FROM gaps ORDER BY end_ns - start_ns DESC, start_ns LIMIT 3"
    )
    assert all(c == "host_compute" for c, _ in top)
    assert not any("<module>" in d or "_bootstrap" in d for _, d in top)
    for f in idle_gpu.analyze(db, Thresholds()) + sync_stalls.analyze(db, Thresholds()):
        assert "cudaDeviceSynchronize" not in f.advice and "CUDA graph" not in f.advice


def test_corpus_sglang_gpu_waits_behind_stream_wait_event(corpus: Path) -> None:
    """SGLang decode on an MI300X: the GPU idles 463 ms of a 473 ms window in one gap. The
    host issued ``hipStreamWaitEvent`` and four kernels within 250 us of that gap's start,
    then sat 463 ms in ``hipMemcpyWithStream`` waiting for them; they ran only when the
    awaited event fired. The GPU held queued work the whole time: a GPU-side wait, not a
    host sync and not host code."""
    db = corpus_db(corpus, "sglang_decode/sglang_Qwen3-8B_decode.json.gz", kind="engines")
    cause, ns, blocked = db.rows(
        "SELECT cause, end_ns - start_ns, blocked_ns FROM gaps ORDER BY 2 DESC LIMIT 1"
    )[0]
    assert cause == "gpu_dependency" and ns > 460_000_000 and blocked == 0
    # the wait opens the capture (4 µs of GPU work before it): reported, not ranked
    (start,) = [
        f for f in idle_gpu.analyze(db, Thresholds()) if f.evidence.get("kind") == "capture_start"
    ]
    assert start.impact_ns == 0 and start.evidence["duration_ns"] == ns
    assert start.evidence["gpu_busy_before_ns"] < 10_000
    assert "cuda" not in start.advice.lower()


def test_corpus_sampled_2rank_gpu_waits_on_nccl(corpus: Path) -> None:
    """Two of 128 ranks of a sampled distributed training run (A100s, NCCL SendRecv). A
    quarter of rank 0's window is idle with the next work already queued; the largest such
    waits end with NCCL SendRecv kernels. An earlier reading called them waits on the peer
    rank, but a collective waits for its peers by running (its kernel spins), and through
    270 of these waits (a 56.6 ms one at 374.8 ms before an FBGEMM kernel, say) nothing ran
    on the GPU at all: what the queued work waited on is not in this trace. In a trace that
    kept 2,329 of about 238 k operators, either GPU records were dropped too (a collective's
    spinning kernel) or another process used the GPU, so the advice says neither the cause
    nor the length of these waits is sure until an unfiltered capture shows the GPU's work,
    and no time is claimed for them."""
    db = corpus_db(corpus, "sampled_2rank/rank-0.json.gz")
    (dep,) = [
        f for f in idle_gpu.analyze(db, Thresholds()) if f.evidence["cause"] == "gpu_dependency"
    ]
    # a third of the window, listed with its evidence but not costed (see the test above)
    assert dep.subject_ns > 0.3 * db.window_ns and dep.impact_ns == 0 and not dep.costed
    assert dep.evidence["next_work"][0]["detail"].startswith("ncclKernel_SendRecv")
    assert "Optimizer" not in dep.advice or "collective" in dep.advice
    kinds = {k["kind"]: k for k in dep.evidence["gpu_side_kinds"]}
    assert dep.evidence["gpu_side_kinds"][0]["kind"] == "unrecorded_producer"
    assert kinds["unrecorded_producer"]["n"] == 270
    assert "work this trace does not record" in dep.title
    assert "dropped GPU records too" in dep.advice and "length is sure" in dep.advice
    # not the single-process reading (work issued before the profiler started)
    assert "before the profiler started" not in dep.advice


def test_corpus_alexnet_inference_gets_no_training_advice(corpus: Path) -> None:
    """AlexNet inference: no optimizer, no DataLoader. The idle time is host code in the
    first cuDNN convolutions; nothing may advise optimizers."""
    db = corpus_db(corpus, "a100_alexnet_inference.json.gz")
    idle = idle_gpu.analyze(db, Thresholds())
    top = max(idle, key=lambda f: f.impact_ns)
    assert top.evidence["cause"] == "host_compute"
    assert "aten::cudnn_convolution" in top.title
    for f in idle + launch_overhead.analyze(db, Thresholds()):
        assert "optimizer" not in f.advice.lower()


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("rel", "kind"),
    [
        # the GPU's own ~1 µs switch between back-to-back queued kernels: nothing waits
        ("torch/v100_train_single_rank_ns.pt.trace.json.gz", "kernel_switch"),
        # the one kernel's first launch loads its module (1.09 ms cuLibraryLoadData)
        ("nsys/rtx3060_vecadd_nsys2025.5.sqlite", "first_launch"),
        # a tiny model on an MI300X: each kernel issued as the GPU ran dry, ~20 µs later
        ("engines/mi300_bert_small.json.gz", "launch_latency"),
        # Qwen on an MI300X, eager, in the refill after a sync: each launch call returned
        # 0.4-15 µs before the queue emptied and its kernel started 18-25 µs after the
        # return. The host was barely ahead: launch latency, not the HIP runtime's or the
        # GPU's dispatch (an earlier reading said "queued on the only stream, started
        # late"), and never "another stream, event or collective"
        ("engines/mi300_qwen_inference.json.gz", "launch_latency"),
    ],
)
def test_gpu_side_waits_say_what_they_were(corpus: Path, rel: str, kind: str) -> None:
    """'Queued work waited on the GPU' is not one thing: an expert tells apart the GPU's
    own kernel-to-kernel gaps, a first launch's lazy loading, a wait the host blocked in
    too, and launch latency, and gives each its own fix."""
    from ingest import load_trace
    from tracelens.report import build_report

    loaded = load_trace(corpus / rel)
    try:
        report = build_report(loaded)
    finally:
        loaded.close()
    dep = [
        f
        for f in report["findings"]
        if f["analyzer"] == "idle_gpu" and f["evidence"]["cause"] == "gpu_dependency"
    ]
    assert dep, [f["title"] for f in report["findings"]]
    assert dep[0]["evidence"]["gpu_side_kinds"][0]["kind"] == kind
    assert "another stream" not in dep[0]["title"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_wait_on_work_outside_the_trace_is_told_from_one_on_recorded_work(load, fmt: str) -> None:
    """The 300 us wait behind ``cudaStreamWaitEvent`` with nothing running on any GPU waited
    on work the trace does not record; the same wait while another GPU runs the producer,
    with the host blocked in a synchronous copy, is the host blocked behind a recorded
    dependency."""

    def kinds(sc) -> list[str]:
        db = load(sc, fmt)
        (f,) = [
            f
            for f in idle_gpu.analyze(db, Thresholds())
            if f.evidence.get("cause") == "gpu_dependency" and f.evidence.get("device_id") == 0
        ]
        return [k["kind"] for k in f.evidence["gpu_side_kinds"]]

    alone = stream_wait_event()
    assert kinds(alone)[0] == "unrecorded_producer"

    recorded = stream_wait_event()
    recorded.name += "_recorded"
    recorded.launch(None, SMALL_KERNEL, 40 * US, 120 * US, 250 * US, device_id=1)
    recorded.api("cudaMemcpy", 60 * US, 330 * US)
    assert kinds(recorded)[0] == "host_blocked"


def _wait_on_unrecorded_work(before_ns: int):
    """GPU work of ``before_ns``, then a 50 ms wait behind ``cudaStreamWaitEvent`` on an
    event nothing in the trace records, then the step's kernels."""
    from tracelens.testing.scenario import Scenario

    sc = Scenario(name=f"planted_unrecorded_wait_{before_ns}")
    t = 0
    while t < before_ns:
        sc.launch(None, SMALL_KERNEL, t, t + 2 * US, 5 * US, api_dur_ns=1 * US)
        t += 5 * US
    sc.api("cudaStreamWaitEvent", t + 10 * US, 2 * US)
    start = t + 2 * US + 50_000 * US
    sc.launch(None, SMALL_KERNEL, t + 20 * US, start, 100 * US, api_dur_ns=5 * US)
    for i in range(1, 20):
        sc.launch(None, SMALL_KERNEL, t + 30 * US + i * US, start + i * 100 * US, 100 * US)
    return sc


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_wait_that_opens_the_capture_is_not_time_to_give_back(load, fmt: str) -> None:
    """A wait on unrecorded work with (almost) no GPU work before it is how the capture
    started (the producer was issued before recording): an info finding with its evidence
    and "record a steady state". The same wait after 10 ms of GPU work is a real mid-trace
    wait and keeps its time."""
    opening = load(_wait_on_unrecorded_work(5 * US), fmt)
    found = idle_gpu.analyze(opening, Thresholds())
    (start,) = [f for f in found if f.evidence.get("kind") == "capture_start"]
    assert start.impact_ns == 0 and 49_000 * US < start.evidence["duration_ns"] < 51_000 * US
    assert "steady state" in start.advice
    assert all(f.impact_ns < 1_000 * US for f in found)

    later = load(_wait_on_unrecorded_work(10_000 * US), fmt)
    found = idle_gpu.analyze(later, Thresholds())
    assert not [f for f in found if f.evidence.get("kind") == "capture_start"]
    (dep,) = [f for f in found if f.evidence.get("cause") == "gpu_dependency"]
    assert dep.impact_ns > 49_000 * US
    assert dep.evidence["gpu_side_kinds"][0]["kind"] == "unrecorded_producer"


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("rel", "cause", "min_ns"),
    [
        # the data loader in the training process: mid-trace, host-bound
        ("torch/v100_resnet50_legacy2021.pt.trace.json.gz", "data_loading", 200_000_000),
        # synchronous pageable copies between launched work
        ("nsys/rtx3060_vecadd_nsys2025.5.sqlite", "gpu_dependency", 1_000_000),
    ],
)
def test_genuine_idle_keeps_its_time(corpus: Path, rel: str, cause: str, min_ns: int) -> None:
    """Idle between launched work is the program's: the capture-start and host-phase rules
    leave it whole (the whole window is judged). Only a kernel's first launch waiting for
    its module (vecadd's one kernel: 1.09 ms of cuLibraryLoadData) is left out of the
    impact, once per process and no steady-state cost; the evidence keeps every gap."""
    loaded = load_trace(corpus / rel)
    try:
        db = TraceDB(loaded.con)
        found = idle_gpu.analyze(db, Thresholds())
        total = int(db.scalar("SELECT sum(end_ns - start_ns) FROM gaps WHERE cause = ?", [cause]))
    finally:
        loaded.close()
    assert not [f for f in found if f.evidence.get("kind") in ("capture_start", "host_uvm_phases")]
    (f,) = [f for f in found if f.evidence.get("cause") == cause]
    assert f.evidence["gap_ns"] == total >= min_ns
    one_off = sum(
        k["ns"] for k in f.evidence.get("gpu_side_kinds", []) if k["kind"] == "first_launch"
    )
    assert f.impact_ns == total - one_off
    if "vecadd" in rel:
        assert one_off == total and "not counted" in f.impact_basis


@pytest.mark.parametrize("order", [[0, 1, 2], [2, 1, 0], [1, 2, 0]])
def test_activities_starting_and_ending_together_name_the_first_launched(order) -> None:
    """Two kernels and a memset end an idle stretch at one instant, inserted in any order:
    the gap names the first launched, with its launch call."""
    con = connect()
    create_schema(con)
    calls = [(10, 100, "cudaLaunchKernel"), (11, 300, "cudaLaunchKernel"), (12, 200, "x")]
    con.executemany(
        "INSERT INTO api_calls (pid, tid, name, kind, start_ns, end_ns, correlation_id) "
        "VALUES (1, 1, ?, 'runtime', ?, ?, ?)",
        [[name, start, start + 50, corr] for corr, start, name in calls],
    )
    con.execute(
        "INSERT INTO kernels (device_id, name, start_ns, end_ns, correlation_id) "
        "VALUES (0, 'first', 0, 10, 9)"
    )
    late = [
        ("kernels", "zz_launched_first", 10),
        ("kernels", "aa_launched_second", 11),
        ("memsets", None, 12),
    ]
    for i in order:
        table, name, corr = late[i]
        if table == "kernels":
            con.execute(
                "INSERT INTO kernels (device_id, name, start_ns, end_ns, correlation_id) "
                "VALUES (0, ?, 1000, 1500, ?)",
                [name, corr],
            )
        else:
            con.execute(
                "INSERT INTO memsets (device_id, bytes, start_ns, end_ns, correlation_id) "
                "VALUES (0, 8, 1000, 1500, ?)",
                [corr],
            )
    derive_gaps(con)
    assert con.execute("SELECT start_ns, end_ns, detail, launch_start_ns FROM gaps").fetchall() == [
        (10, 1000, "zz_launched_first", 100)
    ]


def _queued_late(second_stream: bool):
    """Twenty kernels on one stream, each launched well before the previous ends, each
    starting 20 µs after it (no launch arrives during a gap); with ``second_stream`` a
    kernel on another stream of the device runs meanwhile."""
    from tracelens.testing.scenario import Scenario

    sc = Scenario(name=f"planted_queued_late_{int(second_stream)}")
    for i in range(20):
        start = 1_000 * US + i * 120 * US
        sc.launch(None, SMALL_KERNEL, 10 * US + i * 40 * US, start, 100 * US, api_dur_ns=5 * US)
    if second_stream:
        sc.launch(None, SMALL_KERNEL, 5 * US, 1_000 * US, 2_000 * US, stream_id=9)
    return sc


@pytest.mark.parametrize("fmt", FORMATS)
def test_queued_kernels_late_on_the_only_stream_wait_on_nothing_recorded(load, fmt: str) -> None:
    """A queued kernel that starts late on the device's only stream, in a trace with no
    other device, collective or stream-wait call, had nothing recorded to wait on: the
    finding says so and advises fewer kernels, not cross-stream ordering. With a second
    stream on the device, a dependency between them stays possible and is what it says."""

    def gpu_side(sc) -> Any:
        db = load(sc, fmt)
        (f,) = [
            f
            for f in idle_gpu.analyze(db, Thresholds())
            if f.evidence.get("cause") == "gpu_dependency"
        ]
        return f

    alone = gpu_side(_queued_late(second_stream=False))
    assert alone.evidence["gpu_side_kinds"][0]["kind"] == "one_stream"
    assert "only stream" in alone.title
    assert "StreamWaitEvent" not in alone.advice
    assert "fewer, larger kernels" in alone.advice.lower()

    shared = gpu_side(_queued_late(second_stream=True))
    assert shared.evidence["gpu_side_kinds"][0]["kind"] == "dependency"
    assert "StreamWaitEvent" in shared.advice


def _zero_grad_between_steps(in_zero_grad: bool):
    """Two kernels 1 ms apart; between them the host runs 40 ``aten::zero_`` calls inside
    ``Optimizer.zero_grad`` (a user annotation, as PyTorch 2 records it), or one long
    ``aten::zero_`` outside it."""
    from tracelens.testing.scenario import Scenario

    sc = Scenario(name=f"planted_zero_grad_{int(in_zero_grad)}")
    sc.launch(None, SMALL_KERNEL, 0, 10 * US, 100 * US, api_dur_ns=5 * US)
    if in_zero_grad:
        sc.range("Optimizer.zero_grad#SGD.zero_grad", 100 * US, 820 * US)
        for i in range(40):
            sc.op("aten::zero_", 110 * US + i * 20 * US, 18 * US)
    else:  # one long fill of the model's own buffer
        sc.op("aten::zero_", 100 * US, 820 * US)
    step = sc.op("aten::add_", 930 * US, 20 * US)
    sc.launch(step, SMALL_KERNEL, 935 * US, 945 * US, 100 * US, api_dur_ns=5 * US)
    return sc


def test_zero_grad_fills_are_told_to_set_to_none(load) -> None:
    """Host time in `optimizer.zero_grad()` filling gradients (`aten::zero_`) is one fill
    per parameter: the advice says `zero_grad(set_to_none=True)`. The same fills outside it
    (a model's own buffers) are not the optimizer's and get no such advice."""

    def host(sc) -> Any:
        db = load(sc, "chrome")
        (f,) = [
            f for f in idle_gpu.analyze(db, Thresholds()) if f.evidence["cause"] == "host_compute"
        ]
        return f

    told = host(_zero_grad_between_steps(in_zero_grad=True))
    assert "`Optimizer.zero_grad#SGD.zero_grad`" in told.title  # the range names the gap
    assert "zero_grad(set_to_none=True)" in told.advice and "40 `aten::zero_`" in told.advice
    plain = host(_zero_grad_between_steps(in_zero_grad=False))
    assert "`aten::zero_`" in plain.title and "zero_grad" not in plain.advice


def _flush_between_passes(name: str, frees: bool = False):
    """Two passes of one kernel; between them the host spends 600 µs in a range ``name``
    (a harness's cache flush, or the model's own code) and then 300 µs in the next pass's
    operator before it launches. ``frees``: the flush ends with a `cudaFree` (the caching
    allocator's pool handed back to the driver) and the next pass spends 250 µs of its
    operator in `cudaMalloc`."""
    from tracelens.testing.scenario import Scenario

    sc = Scenario(name="planted_flush")
    sc.launch(None, SMALL_KERNEL, 0, 10 * US, 100 * US, api_dur_ns=5 * US)
    sc.range(name, 110 * US, 600 * US)
    sc.op("aten::fill_", 120 * US, 500 * US if frees else 580 * US)
    if frees:
        sc.api("cudaFree", 630 * US, 60 * US)
    step = sc.op("aten::conv2d", 710 * US, 300 * US)
    if frees:
        sc.api("cudaMalloc", 720 * US, 250 * US)
    sc.launch(step, SMALL_KERNEL, 1000 * US, 1005 * US, 100 * US, api_dur_ns=5 * US)
    return sc


def test_allocations_refilling_a_pool_the_harness_freed_are_not_counted(load) -> None:
    """A flush that frees memory to the driver (`torch.cuda.empty_cache()` in the harness)
    makes the next pass allocate again: a program that keeps its pool never does, so those
    250 µs are the harness's with the flush, and the pass's other 50 µs of host time stay
    counted."""
    db = load(_flush_between_passes("[param|clear_cache]", frees=True), "chrome")
    (f,) = [f for f in idle_gpu.analyze(db, Thresholds()) if f.evidence["cause"] == "host_compute"]
    ev = f.evidence
    assert ev["harness_flush_ns"] == 600 * US and ev["harness_refill_ns"] == 250 * US
    assert f.impact_ns == ev["gap_ns"] - 850 * US > 0
    assert "in `cudaMalloc` growing the pool again after it freed memory" in f.title
    assert "not counted either" in f.impact_basis and "growing the memory pool" in f.advice
    # the same allocations after a flush that frees nothing are the pass's own
    db = load(_flush_between_passes("model.encoder", frees=True), "chrome")
    (own,) = [
        f for f in idle_gpu.analyze(db, Thresholds()) if f.evidence["cause"] == "host_compute"
    ]
    assert "harness_refill_ns" not in own.evidence and own.impact_ns == own.evidence["gap_ns"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_harness_cache_flush_between_passes_is_named_and_not_counted(load, fmt: str) -> None:
    """A cold-cache benchmark flushes caches between its measured passes on purpose
    (`[param|clear_cache]`): the GPU idles through it, but the program never pays it. The
    idle finding names the flush, leaves its 600 µs out of the impact and counts the rest,
    the next pass's own host time; a range of the model's own code keeps all of it."""

    def host(name: str) -> Any:
        db = load(_flush_between_passes(name), fmt)
        (f,) = [
            f for f in idle_gpu.analyze(db, Thresholds()) if f.evidence["cause"] == "host_compute"
        ]
        return f

    flushed = host("[param|clear_cache]")
    ev = flushed.evidence
    assert ev["harness_flush_range"] == "[param|clear_cache]"
    assert ev["harness_flush_ns"] == 600 * US
    assert flushed.impact_ns == ev["gap_ns"] - 600 * US > 0
    assert "cache flush `[param|clear_cache]` between passes, not counted" in flushed.title
    assert "not counted" in flushed.impact_basis and "not counted" in flushed.advice
    own = host("model.encoder")
    assert "harness_flush_ns" not in own.evidence and own.impact_ns == own.evidence["gap_ns"]
    assert "flush" not in own.title


def _sync_then_host_work(steps: int = 10) -> Scenario:
    """Each 1 ms step launches one 390 us kernel and synchronizes: the call returns 2 us
    after the kernel ends, then `aten::host_work` runs 395 us on the CPU and the next step
    launches 200 us after that. Every gap (600 us) is host compute that opened while the
    thread sat in `cudaDeviceSynchronize`: the sync let the queue empty."""
    sc = Scenario(name="planted_sync_then_host_work")
    for i in range(steps):
        t = i * 1_000 * US
        sc.launch(None, SMALL_KERNEL, t, t + 10 * US, 390 * US)
        sc.api("cudaDeviceSynchronize", t + 10 * US, 392 * US)
        sc.op("aten::host_work", t + 405 * US, 395 * US)
    return sc


def test_host_gaps_opened_by_a_sync_name_the_sync(load) -> None:
    """The host's work after a sync runs on an idle GPU because the sync drained the
    queue: the advice names the sync, not only the host work."""
    db = load(_sync_then_host_work(), "chrome")
    (f,) = [f for f in idle_gpu.analyze(db, Thresholds()) if f.evidence["cause"] == "host_compute"]
    after = f.evidence["after_blocking_call"]
    assert after["gaps"] == f.evidence["gap_count"] == 9  # the last step has no next launch
    assert after["ns"] == f.evidence["gap_ns"] and after["call"] == "cudaDeviceSynchronize"
    assert "All of these gaps" in f.advice and "after `cudaDeviceSynchronize`" in f.advice
    assert "let the queue empty" in f.advice
    assert "a sync (`cudaDeviceSynchronize`) let the queue run dry" in f.title


def test_host_gaps_without_a_sync_name_none(load) -> None:
    """The same steps without the sync: the host work alone opens the gaps."""
    sc = _sync_then_host_work()
    sc.api_calls = [a for a in sc.api_calls if a.name != "cudaDeviceSynchronize"]
    db = load(sc, "chrome")
    (f,) = [f for f in idle_gpu.analyze(db, Thresholds()) if f.evidence["cause"] == "host_compute"]
    assert "after_blocking_call" not in f.evidence and "let the queue empty" not in f.advice


def _drain_then_refill(
    *, gets_ahead: bool = True, long_gap_at: int | None = None, short_sync_at: int | None = None
) -> Scenario:
    """A 2 ms kernel, a `cudaDeviceSynchronize` that returns as it ends (the queue
    drained), then ten small kernels the host issues one per 120 us (100 us of
    `aten::host_work` each, the kernel 20 us): host and GPU in lockstep, a host gap before
    each. Then (``gets_ahead``) six 300 us kernels issued 10 us apart: the second waits
    295 us for the GPU, the host is ahead, and no gap follows. ``long_gap_at``: the ramp
    kernel before which the host works 2 ms instead of 100 us. ``short_sync_at``: the ramp
    kernel after which the host blocks 20 us in a `cudaStreamSynchronize` that returns as
    it ends: the queue was empty already."""
    sc = Scenario(name="planted_drain_then_refill")
    sc.launch(None, SMALL_KERNEL, 0, 10 * US, 2_000 * US)
    sc.api("cudaDeviceSynchronize", 20 * US, 1_992 * US)
    t = 2_015 * US
    for i in range(10):
        work = 2_000 * US if i == long_gap_at else 100 * US
        op = sc.op("aten::host_work", t, work)
        sc.launch(op, SMALL_KERNEL, t + work, t + work + 10 * US, 20 * US)
        if i == short_sync_at:
            sc.api("cudaStreamSynchronize", t + work + 12 * US, 20 * US)
        t += work + 20 * US
    if gets_ahead:
        gpu = t + 10 * US
        for _ in range(6):
            sc.launch(None, SMALL_KERNEL, t, max(t + 10 * US, gpu), 300 * US)
            gpu = max(t + 10 * US, gpu) + 300 * US
            t += 10 * US
    return sc


def _after_sync(load, sc: Scenario) -> tuple[dict[str, Any], Any]:
    db = load(sc, "chrome")
    (f,) = [f for f in idle_gpu.analyze(db, Thresholds()) if f.evidence["cause"] == "host_compute"]
    return f.evidence.get("after_blocking_call", {}), f


def test_the_refill_after_a_drain_is_the_syncs_until_the_host_gets_ahead(load) -> None:
    """The ten host gaps after the sync, not only the one it opened, are its ramp-up: the
    host gets ahead once the big kernels queue, so with a queue the sync had not emptied
    none of them would idle the GPU."""
    after, f = _after_sync(load, _drain_then_refill())
    assert after["gaps"] == f.evidence["gap_count"] == 10
    assert after["call"] == "cudaDeviceSynchronize"
    assert "a sync (`cudaDeviceSynchronize`) let the queue run dry" in f.title


def test_a_host_that_never_gets_ahead_keeps_its_gaps(load) -> None:
    """Without the big kernels the host never gets ahead: the program is bound by its host
    code, and only the gap the sync itself opened is the sync's."""
    after, f = _after_sync(load, _drain_then_refill(gets_ahead=False))
    assert f.evidence["gap_count"] == 10 and after["gaps"] == 1
    assert "a sync" not in f.title and "aten::host_work" in f.title


def test_a_long_host_phase_ends_the_refill(load) -> None:
    """2 ms of host work before the sixth small kernel is a phase of its own (longer than
    idle_ramp_max_gap_ns): the ramp-up counts the five gaps before it, not it or after."""
    after, f = _after_sync(load, _drain_then_refill(long_gap_at=5))
    assert f.evidence["gap_count"] == 10 and after["gaps"] == 5


def test_a_short_sync_on_an_empty_queue_drains_nothing(load) -> None:
    """A 20 us stream synchronize in the middle of the refill returns as its kernel ends,
    but the queue was empty already: it blocked no longer than a copy's own latency, so
    the refill stays the device synchronize's (Qwen's mask-check copy after the harness's
    sync)."""
    after, f = _after_sync(load, _drain_then_refill(short_sync_at=3))
    assert after["gaps"] == f.evidence["gap_count"] == 10
    assert after["call"] == "cudaDeviceSynchronize"


@pytest.mark.parametrize(
    ("frame", "harness"),
    [
        ("bench/run_benchmark.py(41): measure", True),
        ("moca/library/profiling/profile.py(34): run_torch_profiler", True),
        ("model/serve.py(88): step", False),
    ],
)
def test_a_harness_sync_drain_is_named_and_not_counted(load, frame: str, harness: bool) -> None:
    """The same drain and refill, the device synchronize made from a Python function: a
    benchmark's or profiler's own sync around the measured step is the harness's (the
    program without it keeps its queue full), named and left out of the impact with advice
    to record past it; the program's own sync stays its lever, counted in full."""
    sc = _drain_then_refill()
    sc.op(frame, 15 * US, 2_000 * US, category="python_function")
    after, f = _after_sync(load, sc)
    assert after["gaps"] == f.evidence["gap_count"] == 10
    if harness:
        assert f.evidence["harness_sync_ns"] == f.evidence["gap_ns"] and f.impact_ns == 0
        assert "the harness's sync (`cudaDeviceSynchronize`" in f.title
        assert "nothing in the program needs to change" in f.advice
    else:
        assert "harness_sync_ns" not in f.evidence and f.impact_ns == f.evidence["gap_ns"]
        assert "a sync (`cudaDeviceSynchronize` from `serve.py(88): step`)" in f.title
        assert "Removing the sync" in f.advice


def test_the_programs_own_sync_in_a_harness_refill_takes_the_gaps_after_it(load) -> None:
    """A harness's device synchronize drains the queue; during the refill the program makes
    a 20 us stream synchronize of its own that finds the queue empty already. The program
    syncs each pass itself, so each pass starts on an empty queue with or without the
    harness: the refill's gaps before its sync are the harness's (not counted), the ones
    after it the program's (counted), and the cause is the host slower than the GPU at the
    pass's start, which removing a sync that found the queue empty does not give back."""
    sc = _drain_then_refill(short_sync_at=3)
    sc.op("bench/run_benchmark.py(41): measure", 15 * US, 2_000 * US, category="python_function")
    after, f = _after_sync(load, sc)
    ev = f.evidence
    assert after["gaps"] == ev["gap_count"] == 10
    # gaps 1-4 follow the harness's sync; the program's sync comes after the fourth kernel
    assert 0 < ev["harness_sync_ns"] < ev["gap_ns"]
    assert f.impact_ns == ev["gap_ns"] - ev["harness_sync_ns"]
    assert after["call"] == "cudaStreamSynchronize"
    assert "the rest after the program's own `cudaStreamSynchronize`" in f.advice
    assert "which found the queue empty already" in f.advice
    assert "capture the pass in a graph or compile it" in f.advice
    assert "the host refilled a queue the harness's sync had emptied" in f.title
    assert "`cudaDeviceSynchronize` from `run_benchmark.py(41): measure`" in f.impact_basis


def _barely_ahead() -> Scenario:
    """Four rounds of: a 100 µs kernel whose successor's launch call returns 2 µs before
    it ends and starts 20 µs after the return (launch latency), then 400 µs of host code
    before the next launch (host busy)."""
    sc = Scenario(name="barely_ahead")
    t = 0
    for i in range(4):
        sc.launch(None, f"k{i}a", t, t + 10_000, 100_000, api_dur_ns=5_000)
        # returns at t + 108 µs, 2 µs before k{i}a ends; starts 20 µs after the return
        sc.launch(None, f"k{i}b", t + 103_000, t + 128_000, 100_000, api_dur_ns=5_000)
        op = sc.op("prepare_batch", t + 230_000, 400_000, category="python_function")
        t = op.start_ns + op.dur_ns + 5_000
    return sc


@pytest.mark.parametrize("fmt", FORMATS)
def test_launch_latency_beside_host_gaps_is_one_host_bound_problem(load, fmt: str) -> None:
    """Kernels launched just before the GPU ran dry, starting one launch latency after
    their calls returned, are launch latency (not a GPU-side dependency); beside longer
    host-busy gaps the advice reads them as the same host-bound problem."""
    db = load(_barely_ahead(), fmt)
    findings = {f.evidence["cause"]: f for f in idle_gpu.analyze(db, Thresholds())}
    dep = findings["gpu_dependency"]
    assert dep.evidence["gpu_side_kinds"][0]["kind"] == "launch_latency"
    assert dep.evidence["gpu_side_kinds"][0]["n"] == 4
    assert dep.title.endswith("arrived one launch latency later")
    assert "host_compute" in findings or "untraced" in findings
    assert "They are the short end of the" in dep.advice
    assert "one host-bound problem" in dep.advice
