"""Graph replays whose kernels are recorded end to start, 1 ns apart, say their in-replay
idle time is not measured (ROCm's traces of vLLM and SGLang replays on an MI300X); a
replay whose gaps vary, as measured ones do, says nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracelens.core.tracedb import TraceDB
from tracelens.report.replay_gaps_unmeasured import replay_gaps_unmeasured_notes
from tracelens.testing.scenario import DeviceSpec, Scenario

US = 1_000


def _replay(gap_ns: list[int]) -> Scenario:
    sc = Scenario(name="replay_gaps")
    kernels, t = [], 100 * US
    for i, gap in enumerate(gap_ns):
        kernels.append((f"k{i % 4}", t, 10 * US))
        t += 10 * US + gap
    sc.graph_launch(kernels, 50 * US, call="hipGraphLaunch")
    return sc


def test_a_replay_recorded_1_ns_apart_is_noted(scenario_db) -> None:
    db: TraceDB = scenario_db(_replay([1] * 29 + [270 * US, 1]))
    (note,) = replay_gaps_unmeasured_notes(db)
    assert note.startswith("the 31 kernels of the graph replays are recorded 29 of 30 times")
    assert "busy % over the replays is an upper bound" in note


@pytest.mark.parametrize("gaps", [[1, 2_000, 3, 1_500] * 8, [1] * 10])
def test_measured_or_few_gaps_are_not(scenario_db, gaps: list[int]) -> None:
    assert replay_gaps_unmeasured_notes(scenario_db(_replay(gaps))) == []


@pytest.mark.corpus
def test_rocm_engine_replays_are_noted(corpus: Path) -> None:
    from corpus_cache import corpus_db

    for name, kernels in (
        ("vllm_decode_full/graph_execution.json.gz", "the 421 kernels"),
        ("sglang_decode/sglang_Qwen3-8B_decode.json.gz", "the 544 kernels"),
    ):
        (note,) = replay_gaps_unmeasured_notes(corpus_db(corpus, name, kind="engines"))
        assert note.startswith(kernels) and "too regular to be measured" in note, name


def _eager(gap_ns: list[int], gpu: str = "AMD Instinct MI300X") -> Scenario:
    sc = Scenario(name="eager_gaps", devices=[DeviceSpec(0, gpu, 304, 192 << 30, 9, 4)])
    t = 100 * US
    for i, gap in enumerate(gap_ns):
        sc.launch(None, f"k{i % 4}", t - 5 * US, t, 10 * US)
        t += 10 * US + gap
    return sc


def test_eager_kernels_recorded_end_to_start_are_noted(scenario_db) -> None:
    """Without replays, queued kernels recorded 0-1 ns apart and none a measured switch
    apart (ROCm's eager Qwen trace): the note says busy % is an upper bound. Gaps of
    0.5-2 µs, as CUDA's traces measure a kernel switch, say nothing."""
    (note,) = replay_gaps_unmeasured_notes(scenario_db(_eager([1] * 28 + [0, 300 * US, 1])))
    assert note.startswith("29 of the 30 kernels that follow another on its stream")
    assert "busy % is an upper bound" in note
    assert replay_gaps_unmeasured_notes(scenario_db(_eager([1, 900, 1_500, 1] * 8))) == []
    # an NVIDIA GPU's trace measures the switch: kernels that touch there are generated
    touching = _eager([1] * 28 + [0, 300 * US, 1], gpu="NVIDIA A100-SXM4-80GB")
    assert replay_gaps_unmeasured_notes(scenario_db(touching)) == []


@pytest.mark.corpus
def test_rocm_eager_kernels_are_noted_and_nvidia_not(corpus: Path) -> None:
    from corpus_cache import corpus_db

    (note,) = replay_gaps_unmeasured_notes(
        corpus_db(corpus, "mi300_qwen_inference.json.gz", kind="engines")
    )
    assert note.startswith("1,458 of the 1,515 kernels that follow another")
    for name in ("v100_train_single_rank_ns.pt.trace.json.gz", "a100_alexnet_inference.json.gz"):
        assert replay_gaps_unmeasured_notes(corpus_db(corpus, name)) == [], name
