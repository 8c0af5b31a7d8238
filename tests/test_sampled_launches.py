"""A trace that kept a sample of its launches (filtered after recording, its kernels
thinned with them) says so, and claims nothing an idle gap or a run of kernels decides.

CUDA and HIP number every runtime call a process makes (the correlation id linking a
launch to its kernel). The two sampled ranks of the corpus keep 1 in ~220 of them, and
across a 17.9 ms "idle" gap the ids jump by 9,123: the GPU ran the dropped launches'
kernels there. Unfiltered PyTorch traces keep 6-20 % (the profiler leaves out calls such as
cudaGetDevice that take ids too); ROCm and Nsight traces all of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ingest import load_trace
from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import workload_of


def _launch_only_trace(tmp_path: Path, stride: int) -> Path:
    """A trace of 150 launches and nothing else at runtime (as a filter keeps them), its
    correlation ids ``stride`` times as far apart as the writer numbers them (2 apart)."""
    import gzip

    from tracelens.testing import write_chrome_trace
    from tracelens.testing.scenario import Scenario

    sc = Scenario("launches")
    for i in range(150):
        s = i * 100_000
        op = sc.op("aten::add_", s, 99_000, [[1024], [1024]])
        sc.launch(op, "vectorized_elementwise_kernel", s + 80_000, s + 90_000, 40_000)
    path = write_chrome_trace(sc, tmp_path / f"stride{stride}.pt.trace.json.gz")
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    for e in trace["traceEvents"]:
        args = e.get("args") or {}
        if "correlation" in args:
            args["correlation"] = int(args["correlation"]) * stride
    with gzip.open(path, "wt") as f:
        json.dump(trace, f)
    return path


@pytest.mark.parametrize(("stride", "sampled"), [(1, None), (10, None), (150, (150, 44_701))])
def test_a_trace_that_thinned_its_launches_says_so(
    tmp_path: Path, stride: int, sampled: tuple[int, int] | None
) -> None:
    """Correlation ids number every runtime call a process makes; a filtered trace whose
    kept calls are 1 in 300 of them dropped launches with their kernels (the sampled
    two-rank corpus traces keep 1 in ~220). 1 in 20 is within what unfiltered traces keep
    (the profiler leaves out calls that take ids too): filtered, not thinned."""
    loaded = load_trace(_launch_only_trace(tmp_path, stride))
    try:
        w = workload_of(TraceDB(loaded.con))
    finally:
        loaded.close()
    assert w.filtered
    assert w.sampled_calls == sampled
    thinned = [n for n in w.recording_notes if "runtime calls its correlation ids" in n]
    assert bool(thinned) == (sampled is not None)
    if sampled:
        assert thinned[0].startswith("it keeps 150 of the ~44,701 runtime calls")


def _report(path: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "tracelens.cli", "analyze", str(path), "--format", "json", "-q"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(json.loads(out))


def test_a_thinned_trace_costs_no_idle_gap_and_finds_no_runs(tmp_path: Path) -> None:
    """The same host-bound trace, as recorded and thinned: as recorded, the GPU idles
    between launches while the host is inside `aten::add_` (costed) and the elementwise
    kernels run back to back between operators (a fusion run); thinned, both are listed
    idle time not measured and no run, since dropped kernels may fill every gap."""
    whole = _report(_launch_only_trace(tmp_path, 1))
    (busy,) = [f for f in whole["findings"] if f["analyzer"] == "idle_gpu"]
    assert busy["costed"] and busy["impact_ns"] == 8_940_000
    assert "the host was busy" in busy["title"]
    assert [f for f in whole["findings"] if f["analyzer"] == "fusion"]

    thinned = _report(_launch_only_trace(tmp_path, 150))
    (busy,) = [f for f in thinned["findings"] if f["analyzer"] == "idle_gpu"]
    assert not busy["costed"] and busy["impact_ns"] == 0 and busy["subject_ns"] == 8_940_000
    assert busy["impact_basis"].startswith(
        "Not costed: this trace keeps 150 of the ~44,701 runtime calls"
    )
    assert not [f for f in thinned["findings"] if f["analyzer"] == "fusion"]
    assert any("launches were dropped with their kernels" in n for n in thinned["notes"])
