"""Planted multi-rank jobs: N ranks' Chrome traces with known clocks, waits and causes.

Every step, each rank runs one compute kernel and then an all-reduce; an all-reduce ends
at the same true instant on every rank (1 ms after the last rank arrives). Each rank's
file records times on its own clock (true time + ``offsets_ns[rank]``), as separate hosts
would. ``slow_rank`` spends ``loader_ns`` in its DataLoader before each step's compute,
so it arrives last every step and the others wait for it; ``heavy_rank`` instead runs a
compute kernel ``heavy_extra_ns`` longer (uneven expert work). ``small_allreduces`` adds
that many 16 KB all-reduces (``record_param_comms`` with their size, as Kineto records
them) after each step's compute, each 30 µs and hidden by no compute, as unbucketed
gradients would be; the steps are then ``ProfilerStep#`` annotated and the big
all-reduce carries its size (128 MiB) too. ``corr_stride`` spaces the correlation ids that
many times as far apart, as a trace that kept a sample of its launches has them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COMPUTE_NS = 3_000_000
ALLREDUCE_TAIL_NS = 1_000_000
_NUMBER = re.compile(r'"(ts|dur)": "([0-9]+\.[0-9]{3})"')
COMPUTE_KERNEL = "void expert_gemm_kernel<bf16>(int)"
SMALL_NS = 30_000
SMALL_EVERY_NS = 40_000
ALLREDUCE_KERNEL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long)"


@dataclass
class PlantedJob:
    files: list[Path]
    offsets_ns: dict[int, int]
    steps: int
    expected: dict[str, Any] = field(default_factory=dict)


def write_job(
    folder: Path,
    ranks: int = 4,
    steps: int = 10,
    slow_rank: int | None = 2,
    loader_ns: int = 2_000_000,
    heavy_rank: int | None = None,
    heavy_extra_ns: int = 1_500_000,
    offsets_ns: dict[int, int] | None = None,
    small_allreduces: int = 0,
    corr_stride: int = 1,
) -> PlantedJob:
    """Write ``rank-{r}.json`` for each rank into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    offs = offsets_ns if offsets_ns is not None else {r: r * 1_234_567_000 for r in range(ranks)}
    base = 1_700_000_000_000_000_000  # epoch-scale times, as Kineto writes them
    events: dict[int, list[dict[str, Any]]] = {r: [] for r in range(ranks)}
    held_back = 0
    t = base
    for s in range(steps):
        step_start = t
        arrive: dict[int, int] = {}
        for r in range(ranks):
            start = t + 100_000
            if r == slow_rank:
                _x(events[r], "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                   "user_annotation", t + 50_000, loader_ns, offs[r], r)  # fmt: skip
                start += loader_ns
            dur = COMPUTE_NS + (heavy_extra_ns if r == heavy_rank else 0)
            # correlation ids numbered densely, as a recording's runtime calls are: this
            # step's launch, its small all-reduces, then its closing all-reduce
            corr = (s * (small_allreduces + 2) + 1) * corr_stride
            _x(events[r], "aten::mm", "cpu_op", start - 40_000, 30_000, offs[r], r,
               {"External id": corr})  # fmt: skip
            _x(events[r], "cudaLaunchKernel", "cuda_runtime", start - 30_000, 10_000, offs[r],
               r, {"correlation": corr, "External id": corr})  # fmt: skip
            _x(events[r], COMPUTE_KERNEL, "kernel", start, dur, offs[r], r,
               {"correlation": corr, "External id": corr, "device": r, "stream": 7,
                "grid": [1024, 1, 1], "block": [256, 1, 1]})  # fmt: skip
            arrive[r] = start + dur + 50_000
            for i in range(small_allreduces):
                at = arrive[r] + i * SMALL_EVERY_NS
                small = corr + (1 + i) * corr_stride
                _comm(events[r], at, 4096, ranks, offs[r], r, small)
                _x(events[r], ALLREDUCE_KERNEL, "kernel", at, SMALL_NS, offs[r], r,
                   {"correlation": small, "device": r, "stream": 13})  # fmt: skip
            arrive[r] += small_allreduces * SMALL_EVERY_NS
        order = sorted(arrive.values())
        end = order[-1] + ALLREDUCE_TAIL_NS
        held_back += order[-1] - order[-2]
        t = end + 100_000  # the next step starts as soon as the all-reduce is done
        for r in range(ranks):
            corr = (s + 1) * (small_allreduces + 2) * corr_stride
            if small_allreduces:
                _comm(events[r], arrive[r], 64 * 1024 * 1024, ranks, offs[r], r, None)
                _x(events[r], f"ProfilerStep#{s}", "user_annotation", step_start,
                   t - step_start - 50_000, offs[r], r)  # fmt: skip
            _x(events[r], "nccl:all_reduce", "cpu_op", arrive[r] - 40_000, 30_000, offs[r], r,
               {"External id": corr})  # fmt: skip
            _x(events[r], "cudaLaunchKernel", "cuda_runtime", arrive[r] - 30_000, 10_000,
               offs[r], r, {"correlation": corr, "External id": corr})  # fmt: skip
            _x(events[r], ALLREDUCE_KERNEL, "kernel", arrive[r], end - arrive[r], offs[r], r,
               {"correlation": corr, "External id": corr, "device": r, "stream": 13})  # fmt: skip
    files = []
    for r in range(ranks):
        doc = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "nccl", "rank": r, "world_size": ranks},
            "deviceProperties": [
                {
                    "id": d,
                    "name": "NVIDIA H100 80GB HBM3",
                    "computeMajor": 9,
                    "computeMinor": 0,
                    "numSms": 132,
                    "totalGlobalMem": 85_000_000_000,
                    "warpSize": 32,
                }
                for d in range(ranks)
            ],
            "traceEvents": events[r],
        }
        p = folder / f"rank-{r}.json"
        # times as JSON numbers with their exact three decimals (a float would round them)
        p.write_text(_NUMBER.sub(r'"\1": \2', json.dumps(doc)))
        files.append(p)
    return PlantedJob(
        files=files,
        offsets_ns={r: offs[r] - offs[0] for r in range(ranks)},
        steps=steps,
        expected={"held_back_ns": held_back, "slow_rank": slow_rank, "heavy_rank": heavy_rank},
    )


def _comm(
    out: list[dict[str, Any]],
    at_ns: int,
    nelems: int,
    ranks: int,
    off: int,
    r: int,
    corr: int | None,
) -> None:
    """An all-reduce call of ``nelems`` bf16 elements around a launch at ``at_ns - 25 µs``
    (which it adds for ``corr``; None: the caller launches it)."""
    _x(out, "record_param_comms", "cpu_op", at_ns - 35_000, 30_000, off, r,
       {"Collective name": "allreduce", "In msg nelems": nelems, "dtype": "BFloat16",
        "Group size": ranks})  # fmt: skip
    if corr is not None:
        _x(out, "cudaLaunchKernel", "cuda_runtime", at_ns - 25_000, 10_000, off, r,
           {"correlation": corr})  # fmt: skip


def _x(
    out: list[dict[str, Any]],
    name: str,
    cat: str,
    start_ns: int,
    dur_ns: int,
    offset_ns: int,
    rank: int,
    args: dict[str, Any] | None = None,
) -> None:
    ts = start_ns + offset_ns
    out.append(
        {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": 1000 + rank if cat != "kernel" else rank,
            "tid": 1 if cat != "kernel" else (args or {}).get("stream", 7),
            # microseconds with three decimals, exactly as Kineto writes them
            "ts": f"{ts // 1000}.{ts % 1000:03d}",
            "dur": f"{dur_ns // 1000}.{dur_ns % 1000:03d}",
            "args": args or {},
        }
    )
