"""Runs of one workload recorded one after another: a series with planted changes.

``series_run`` is a small training loop whose GEMM takes ``gemm_us`` (so its median step
time is ``1,300 + gemm_us`` µs), optionally waiting 1,000 µs per step on a data loader
with the GPU idle (a ``data_loading`` finding), recorded at ``recorded_s`` seconds after a
fixed epoch. :data:`SERIES` lists a series of twelve such runs with a one-run outlier (run
5) and a sustained step-time regression from run 8, and a data-loading finding that
appears at run 3 and is resolved from run 7.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelens.testing.scenario import Scenario

US = 1_000
HOST_GAP_US = 1_000
ADDS, ADD_US, SLACK_US = 10, 20, 100
EPOCH_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z


def step_us(gemm_us: int) -> int:
    return HOST_GAP_US + gemm_us + ADDS * ADD_US + SLACK_US


def series_run(gemm_us: int, loader: bool, recorded_s: int, steps: int = 6) -> Scenario:
    sc = Scenario(name="planted_series", base_ns=EPOCH_NS + recorded_s * 10**9)
    step_ns = step_us(gemm_us) * US
    for k in range(steps):
        s = k * step_ns
        sc.range(f"ProfilerStep#{k}", s, step_ns)
        if loader:
            sc.range(
                "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                s,
                HOST_GAP_US * US,
            )
        mm = sc.op("aten::mm", s + (HOST_GAP_US - 15) * US, 12 * US, [[4096, 4096], [4096, 4096]])
        sc.launch(
            mm,
            "ampere_sgemm_128x64_tn",
            s + (HOST_GAP_US - 10) * US,
            s + HOST_GAP_US * US,
            gemm_us * US,
            api_dur_ns=8 * US,
        )
        t_gpu = s + (HOST_GAP_US + gemm_us) * US
        for i in range(ADDS):
            add = sc.op("aten::add_", s + (HOST_GAP_US + 20 + i * 10) * US, 6 * US, [[1024]])
            sc.launch(
                add,
                "vectorized_elementwise_kernel<add>",
                s + (HOST_GAP_US + 21 + i * 10) * US,
                t_gpu,
                ADD_US * US,
                api_dur_ns=4 * US,
            )
            t_gpu += ADD_US * US
    sc.expected = {"step_median_ns": step_ns}
    return sc


@dataclass(frozen=True)
class PlantedRun:
    label: str
    gemm_us: int
    loader: bool
    recorded_s: int


# Small jitter everywhere (a real band), run 5 an outlier, runs 8 on 1,500 µs slower.
_GEMM_US = [5000, 5012, 4990, 5006, 4995, 7000, 5004, 4998, 6500, 6510, 6492, 6505]
SERIES = [
    PlantedRun(f"c{i:02d}", gemm, 3 <= i < 7, recorded_s=3600 * i)
    for i, gemm in enumerate(_GEMM_US)
]
OUTLIER_RUN = 5
REGRESSION_RUN = 8
LOADER_FIRST, LOADER_RESOLVED = 3, 7
