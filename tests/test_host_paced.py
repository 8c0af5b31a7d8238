"""Kernel time the host paces gives nothing back: a kernel the GPU finished before the
host had issued the next launch only lengthens the idle gap after it when it is faster."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus_cache import corpus_db

from tracelens.analyzers import run_all
from tracelens.analyzers.contract import finding
from tracelens.analyzers.host_paced import host_paced_share, leave_out_host_paced
from tracelens.core.findings import Finding, Severity
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.testing.scenario import Scenario

US = 1_000


def _paced_and_queued() -> Scenario:
    """Twenty 100 us steps. Each launches `host_paced_k` (20 us), then the host computes
    40 us with the GPU idle, then launches `queued_k` and at once `tail_k`: `queued_k`
    ends with `tail_k` already queued behind it, `tail_k` ends with nothing queued until
    the next step's launch 10 us later."""
    sc = Scenario(name="planted_host_paced")
    for i in range(20):
        t = i * 100 * US
        sc.launch(None, "host_paced_k", t, t + 10 * US, 20 * US)
        sc.op("prepare_next", t + 25 * US, 40 * US, category="python_function")
        sc.launch(None, "queued_k", t + 70 * US, t + 78 * US, 10 * US, api_dur_ns=2 * US)
        sc.launch(None, "tail_k", t + 72 * US, t + 88 * US, 2 * US, api_dur_ns=2 * US)
    return sc


def _kernel_finding(db: TraceDB, kernel: str, impact_ns: int) -> Finding:
    return finding(
        "occupancy",
        (kernel,),
        impact_ns,
        db,
        Thresholds(),
        title=f"`{kernel}` leaves compute units idle",
        impact_basis="Planted.",
        summary="",
        evidence={"kernel": kernel, "device_id": 0},
        advice="",
    )


def test_a_kernel_the_host_paces_gives_nothing_back(scenario_db) -> None:
    db = scenario_db(_paced_and_queued())
    t = Thresholds()
    paced = _kernel_finding(db, "host_paced_k", 200 * US)
    queued = _kernel_finding(db, "queued_k", 100 * US)
    tail = _kernel_finding(db, "tail_k", 20 * US)
    assert host_paced_share(db, paced, t) == (1.0, 20 * 20 * US)
    assert host_paced_share(db, queued, t) == (0.0, 0)
    # the last step's tail ends the trace: no gap after it, so 19 of its 20 launches
    share, ns = host_paced_share(db, tail, t) or (0.0, 0)
    assert ns == 19 * 2 * US and share == pytest.approx(19 / 20)
    before = queued.impact_pct
    leave_out_host_paced([paced, queued, tail], db, t)
    assert paced.impact_ns == 0 and paced.impact_pct == 0.0
    assert "until the host's next launch arrived" in paced.impact_basis
    assert "next launch arrived" not in queued.impact_basis
    # `queued_k` is followed by queued work, so the one-step rule keeps its 100 us; but
    # every step's next launch comes 100 us after the last, whatever the GPU does: with
    # the host's launches held, halving it ends only the last step sooner: its 10 us
    # kernel by 5 us, to the nanosecond (the replay counts from the first item's start)
    assert queued.impact_ns == 5_000 and queued.impact_pct < before
    assert "Replayed with the host's launches held" in queued.impact_basis
    assert "up to 100 µs once the host keeps the GPU fed" in queued.impact_basis
    assert tail.impact_ns <= 1 * US  # 5% of 20 us left, then the replay's cap


def test_other_findings_and_gpu_bound_traces_are_untouched(scenario_db) -> None:
    """Idle time is not kernel time; and where the GPU paces the run (each kernel queued
    well before the previous one ends), the replay ends it as much sooner as the finding
    says, so its impact stands."""
    db = scenario_db(_paced_and_queued())
    idle = _kernel_finding(db, "host_paced_k", 200 * US)
    idle.analyzer = "idle_gpu"
    leave_out_host_paced([idle], db, Thresholds(host_paced_min_pct=99.0))
    assert idle.impact_ns == 200 * US

    sc = Scenario(name="gpu_bound")
    for i in range(20):
        # all launched up front, each running 100 us back to back
        sc.launch(None, "busy_k", i * 5 * US, 1_000 * US + i * 100 * US, 100 * US)
    db = scenario_db(sc)
    busy = _kernel_finding(db, "busy_k", 1_000 * US)
    leave_out_host_paced([busy], db, Thresholds())
    assert busy.impact_ns == 1_000 * US
    assert "Replayed" not in busy.impact_basis


@pytest.mark.corpus
def test_mi300x_bert_kernel_findings_give_back_what_the_host_lets_them(corpus: Path) -> None:
    """BERT-small inference on an MI300X VF: the GPU is busy 11 % of 3.5 ms, idle because
    the host issues one kernel at a time. Every `attn_fwd` launch ends with nothing
    queued (the next kernel was issued after it finished), so its 16-workgroup grid, a
    real fact, gives back nothing while the host paces the run; an earlier reading
    ranked it third at 108 µs, medium. The host findings lead, and no kernel finding is
    above low."""
    db = corpus_db(corpus, "mi300_bert_small.json.gz", "engines")
    findings = run_all(db, Thresholds())
    assert [f.analyzer for f in findings[:2]] == ["idle_gpu", "idle_gpu"]
    (attn,) = [
        f for f in findings if f.analyzer == "occupancy" and f.evidence.get("kernel") == "attn_fwd"
    ]
    assert attn.impact_ns == 0 and attn.severity == Severity.INFO
    assert "100% of these kernels' time" in attn.impact_basis
    kernel_findings = [f for f in findings if f.analyzer in ("hot_ops", "occupancy", "fusion")]
    assert kernel_findings and all(f.severity <= Severity.LOW for f in kernel_findings)
    # Every kernel here starts 14-19 µs after its launch call returns: a gap the next
    # kernel closes one launch latency after its call is host-paced too, so of the GEMMs'
    # 88 µs beyond their roofline 81% is left out.
    (addmm,) = [f for f in findings if f.evidence.get("operator") == "aten::addmm"]
    assert "81% of these kernels' time" in addmm.impact_basis and addmm.impact_ns < 20_000


@pytest.mark.corpus
def test_gpu_bound_corpus_trace_keeps_its_kernel_costs(corpus: Path) -> None:
    """MI300X Qwen inference keeps the GPU 91 % busy: 99 % of its kernel time is followed
    by queued work, under the 5 % that host pacing must reach to change a figure, except
    for `aten::addmm`, whose calls in the forward's first milliseconds (the host catching
    up after the harness's sync) precede host gaps: 6 % of its time."""
    db = corpus_db(corpus, "mi300_qwen_inference.json.gz", "engines")
    findings = run_all(db, Thresholds())
    kernel_findings = [f for f in findings if f.analyzer in ("hot_ops", "occupancy", "fusion")]
    assert kernel_findings
    assert not [
        f
        for f in kernel_findings
        if "next launch arrived" in f.impact_basis and "aten::addmm" not in f.title
    ]


def test_savings_on_the_same_launches_do_not_add_up(scenario_db) -> None:
    """Two operators' kernels alternate in one GPU-bound stretch (10 of each, 100 us
    apiece, queued at once), and the last work is a host launch the stretch overran by
    ~200 us. Halving either operator's kernels ends the run 200 us sooner; halving both,
    still 200 us (not 400): the host's launch bounds it. Each finding keeps its own saving and says
    it is not in addition to the other's (a ResNet-50's backward convolutions: 15 ms each,
    15 ms together)."""
    sc = Scenario(name="planted_shared_saving")
    # a first kernel, then the host busy with the GPU idle (the host paces this run)
    sc.launch(None, "first_k", 100 * US, 110 * US, 10 * US)
    sc.op("prepare", 130 * US, 860 * US, category="python_function")
    for i in range(10):
        sc.launch(None, "a_k", 1_000 * US + i * 10 * US, 1_050 * US + i * 200 * US, 100 * US)
        sc.launch(None, "b_k", 1_005 * US + i * 10 * US, 1_150 * US + i * 200 * US, 100 * US)
    sc.op("prepare_last", 1_200 * US, 1_580 * US, category="python_function")
    sc.launch(None, "last_k", 2_800 * US, 3_050 * US, 10 * US)
    db = scenario_db(sc)
    a = _kernel_finding(db, "a_k", 500 * US)
    b = _kernel_finding(db, "b_k", 500 * US)
    leave_out_host_paced([a, b], db, Thresholds())
    assert 150 * US < a.impact_ns < 260 * US and 150 * US < b.impact_ns < 260 * US
    for f, other in ((a, "b_k"), (b, "a_k")):
        assert f"Not in addition to `{other}`'s: their kernels wait on the same launches" in (
            f.impact_basis
        )
    alone = _kernel_finding(db, "a_k", 500 * US)
    leave_out_host_paced([alone], db, Thresholds())
    assert "Not in addition" not in alone.impact_basis
