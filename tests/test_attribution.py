"""Kernel -> launching operator, with and without external ids."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus_cache import corpus_db

from ingest import load_trace
from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.kernel_ops import KERNEL_OPS, UNATTRIBUTED
from tracelens.testing import Scenario, write_chrome_trace

US = 1_000


def _attributed(sc: Scenario, tmp_path: Path) -> dict[str, str]:
    path = write_chrome_trace(sc, tmp_path / "t.json")
    loaded = load_trace(path)
    try:
        db = TraceDB(loaded.con)
        require(db, KERNEL_OPS)
        return dict(db.rows("SELECT kernel_name, op_name FROM kernel_ops"))
    finally:
        loaded.close()


def test_external_ids_name_the_innermost_operator(tmp_path: Path) -> None:
    sc = Scenario(name="ext")
    outer = sc.op("aten::linear", 0, 100 * US)
    inner = sc.op("aten::addmm", 10 * US, 50 * US)
    sc.launch(inner, "gemm_a", 20 * US, 30 * US, 10 * US)
    sc.launch(outer, "bias_b", 80 * US, 90 * US, 5 * US)
    assert _attributed(sc, tmp_path) == {"gemm_a": "aten::addmm", "bias_b": "aten::linear"}


def test_an_external_id_of_an_operator_not_running_at_the_call_is_not_trusted(
    tmp_path: Path,
) -> None:
    # The profiler numbers operators per session, so a launch call can carry the id of an
    # operator recorded seconds away (an A100 AlexNet capture: a weight-init kernel given to
    # an activation 12.7 s later). The call goes to the operator running when it was made.
    sc = Scenario(name="ext-apart")
    init = sc.op("aten::uniform_", 0, 100 * US)
    later = sc.op("aten::clamp_min_", 12_000_000 * US, 100 * US)
    sc.launch(later, "distribution_kernel", 20 * US, 30 * US, 10 * US, api_dur_ns=2 * US)
    sc.launch(later, "relu_kernel", 12_000_010 * US, 12_000_020 * US, 10 * US)
    sc.launch(init, "fill_kernel", 60 * US, 70 * US, 10 * US, api_dur_ns=2 * US)
    assert _attributed(sc, tmp_path) == {
        "distribution_kernel": "aten::uniform_",
        "relu_kernel": "aten::clamp_min_",
        "fill_kernel": "aten::uniform_",
    }


def test_ranges_stand_in_for_operators_without_external_ids(tmp_path: Path) -> None:
    # As in an Nsight export of a PyTorch run with emit_nvtx: operator names are NVTX ranges.
    sc = Scenario(name="nvtx")
    sc.range("ProfilerStep#0", 0, 300 * US)
    sc.range("llm.decode[a,b]", 0, 300 * US)
    sc.range("aten::linear", 10 * US, 100 * US)
    sc.range("aten::addmm", 20 * US, 30 * US)
    sc.launch(None, "gemm_a", 25 * US, 40 * US, 10 * US, api_dur_ns=2 * US)
    # launched by aten::linear after its child aten::addmm finished
    sc.launch(None, "bias_b", 80 * US, 90 * US, 5 * US, api_dur_ns=2 * US)
    # launched inside the step and the LLM annotation, but outside any operator
    sc.launch(None, "stray_c", 200 * US, 210 * US, 5 * US, api_dur_ns=2 * US)
    assert _attributed(sc, tmp_path) == {
        "gemm_a": "aten::addmm",
        "bias_b": "aten::linear",
        "stray_c": UNATTRIBUTED,
    }


def test_operators_opening_at_the_same_instant_give_the_innermost(tmp_path: Path) -> None:
    # Nested ranges that start together: the one enclosing the call most tightly launched
    # it, and a call after the shortest ended belongs to the next one out.
    sc = Scenario(name="same-start")
    sc.range("aten::linear", 0, 100 * US)
    sc.range("aten::addmm", 0, 50 * US)
    sc.range("aten::mm", 0, 30 * US)
    sc.launch(None, "gemm_a", 10 * US, 40 * US, 10 * US, api_dur_ns=2 * US)
    sc.launch(None, "gemm_b", 35 * US, 60 * US, 10 * US, api_dur_ns=2 * US)
    sc.launch(None, "bias_c", 70 * US, 80 * US, 5 * US, api_dur_ns=2 * US)
    assert _attributed(sc, tmp_path) == {
        "gemm_a": "aten::mm",
        "gemm_b": "aten::addmm",
        "bias_c": "aten::linear",
    }


def test_hundreds_of_operators_stacked_on_the_same_instants(tmp_path: Path) -> None:
    # 300 ranges over the same span stack 300 deep; each call goes to the deepest that
    # encloses it (the last one opened). Looking every call up at every depth made such
    # a trace quadratic; the first lookup now settles it.
    sc = Scenario(name="stacked")
    for i in range(300):
        sc.range(f"r{i}", 0, 100 * US)
    sc.range("late", 20 * US, 40 * US)
    sc.launch(None, "k_in_late", 25 * US, 50 * US, 5 * US, api_dur_ns=2 * US)
    sc.launch(None, "k_after_late", 60 * US, 70 * US, 5 * US, api_dur_ns=2 * US)
    assert _attributed(sc, tmp_path) == {"k_in_late": "late", "k_after_late": "r299"}


@pytest.mark.corpus
def test_corpus_alexnet_weight_init_kernel_is_its_uniform_(corpus: Path) -> None:
    """A100 AlexNet inference: the one `distribution_elementwise` kernel (71 µs, weight
    initialisation) was launched inside `aten::uniform_`, by a call carrying the external
    id of an `aten::clamp_min_` recorded 12.7 s later. An expert reads it as the init's."""
    db = corpus_db(corpus, "a100_alexnet_inference.json.gz")
    require(db, KERNEL_OPS)
    rows = db.rows(
        "SELECT op_name FROM kernel_ops WHERE kernel_name LIKE '%distribution_elementwise%'"
    )
    assert rows == [("aten::uniform_",)]
