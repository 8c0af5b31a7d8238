"""A large, realistic Kineto-style trace written as a stream, for benchmarks.

Each training step has a data-loader range, a pageable input copy, a forward/backward
pass of operators each launching a kernel through ``cudaLaunchKernel`` (with correlation
and external ids, launch configuration and Kineto's usual args), a synchronizing
``.item()`` and an optimizer. Events are generated and written one step at a time, so a
multi-million-event file costs the writer almost no memory.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterator
from pathlib import Path

from tracelens.testing.chrome_writer import write_events

_KERNELS = [
    ("aten::mm", "ampere_sgemm_128x64_tn", 180_000, (64, 32, 1), (256, 1, 1)),
    (
        "aten::addmm",
        "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4",
        95_000,
        (96, 8, 1),
        (128, 1, 1),
    ),
    (
        "aten::add_",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add"
        "<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3>)",
        6_000,
        (4096, 1, 1),
        (128, 1, 1),
    ),
    (
        "aten::relu",
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous "
        "namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
        "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::"
        "operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, ...)",
        4_000,
        (4096, 1, 1),
        (128, 1, 1),
    ),
    (
        "aten::_softmax",
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10,"
        " false, false>(float*, float const*, int, int, int, bool const*, int, bool)",
        12_000,
        (512, 1, 1),
        (128, 1, 1),
    ),
    (
        "aten::native_layer_norm",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_"
        "kernel<float, float>(int, float, float const*, float const*, float const*, float*, "
        "float*, float*)",
        9_000,
        (2048, 1, 1),
        (256, 1, 1),
    ),
]


class _Micros:
    """Microsecond text with ``decimals`` digits after the point, as profilers write them.

    Kineto writes 3 (whole nanoseconds); some writers print 16 (a float's digits). Digits
    past the third are drawn from their own generator, so the 3-decimal trace does not
    change with this option and the longer ones hold sub-nanosecond digits that round
    either way.
    """

    def __init__(self, decimals: int, seed: int) -> None:
        self.extra = max(0, decimals - 3)
        self.rng = random.Random(seed ^ 0x5EED)

    def __call__(self, ns: int) -> str:
        whole, frac = divmod(ns, 1000)
        if not self.extra:
            return f"{whole}.{frac:03d}"
        tail = self.rng.randrange(10**self.extra)
        return f"{whole}.{frac:03d}{tail:0{self.extra}d}"


def _x(
    us: _Micros, cat: str, name: str, pid: int | str, tid: int | str, ts: int, dur: int, args: dict
) -> str:
    return (
        f'{{"ph": "X", "cat": "{cat}", "name": {json.dumps(name)}, "pid": {json.dumps(pid)}, '
        f'"tid": {json.dumps(tid)}, "ts": {us(ts)}, "dur": {us(dur)}, '
        f'"args": {json.dumps(args)}}}'
    )


def iter_large_events(
    target_events: int, seed: int = 7, decimals: int = 3, steps: int | None = None
) -> Iterator[str]:
    """The events, one profiler step at a time.

    A step holds 200 operators unless ``steps`` asks for that many steps in all: a real
    profiler window records a handful of steps however long each is, and a tool whose
    cost grows with events × steps (Holistic Trace Analysis looks up each event's step)
    is only measured fairly on a realistic count.
    """
    rng = random.Random(seed)
    us = _Micros(decimals, seed)
    pid, tid, dev, stream = 31337, 31337, 0, 7
    t = 1_712_000_000_000_000_000  # ns
    ext = corr = 1
    emitted = 0
    step = 0
    # each operator is 3 events; a step adds 8 around them
    ops_per_step = 200 if steps is None else max(1, (target_events // max(1, steps) - 8) // 3)
    while emitted < target_events:
        step_start = t
        step_events: list[str] = []
        step_events.append(
            _x(
                us,
                "user_annotation",
                "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                pid,
                tid,
                t,
                1_500_000,
                {"External id": ext},
            )
        )
        ext += 1
        t += 1_500_000
        gpu_t = t + 40_000
        nbytes = 8 * 1024 * 1024
        step_events.append(
            _x(
                us,
                "cpu_op",
                "aten::copy_",
                pid,
                tid,
                t,
                60_000,
                {"External id": ext, "Input Dims": [[64, 3, 224, 224]], "Input type": ["float"]},
            )
        )
        step_events.append(
            _x(
                us,
                "cuda_runtime",
                "cudaMemcpyAsync",
                pid,
                tid,
                t + 5_000,
                50_000,
                {"External id": ext, "cbid": 41, "correlation": corr},
            )
        )
        step_events.append(
            _x(
                us,
                "gpu_memcpy",
                "Memcpy HtoD (Pageable -> Device)",
                dev,
                stream,
                gpu_t,
                700_000,
                {
                    "External id": ext,
                    "device": dev,
                    "context": 1,
                    "stream": stream,
                    "correlation": corr,
                    "bytes": nbytes,
                    "memory bandwidth (GB/s)": 11.98,
                },
            )
        )
        ext += 1
        corr += 1
        gpu_t += 700_000
        t += 60_000
        for _ in range(ops_per_step):
            op, kname, base, grid, block = _KERNELS[rng.randrange(len(_KERNELS))]
            op_dur = rng.randint(12_000, 40_000)
            k_dur = max(1_000, int(base * rng.uniform(0.8, 1.25)))
            step_events.append(
                _x(
                    us,
                    "cpu_op",
                    op,
                    pid,
                    tid,
                    t,
                    op_dur,
                    {
                        "External id": ext,
                        "Input Dims": [[64, 1024], [1024, 1024]],
                        "Input type": ["float", "float"],
                        "Sequence number": ext,
                        "Fwd thread id": 0,
                        "Ev Idx": ext,
                    },
                )
            )
            launch_t = t + op_dur // 3
            step_events.append(
                _x(
                    us,
                    "cuda_runtime",
                    "cudaLaunchKernel",
                    pid,
                    tid,
                    launch_t,
                    7_000,
                    {"External id": ext, "cbid": 211, "correlation": corr},
                )
            )
            k_start = max(gpu_t, launch_t + 9_000)
            step_events.append(
                _x(
                    us,
                    "kernel",
                    kname,
                    dev,
                    stream,
                    k_start,
                    k_dur,
                    {
                        "External id": ext,
                        "queued": 0,
                        "device": dev,
                        "context": 1,
                        "stream": stream,
                        "correlation": corr,
                        "registers per thread": 64,
                        "shared memory": 16384,
                        "blocks per SM": 2.5,
                        "warps per SM": 10.0,
                        "grid": list(grid),
                        "block": list(block),
                        "est. achieved occupancy %": 50,
                    },
                )
            )
            gpu_t = k_start + k_dur
            ext += 1
            corr += 1
            t += op_dur + rng.randint(1_000, 5_000)
        sync_end = max(t, gpu_t) + 10_000
        step_events.append(
            _x(us, "cpu_op", "aten::item", pid, tid, t, sync_end - t + 5_000, {"External id": ext})
        )
        step_events.append(
            _x(
                us,
                "cuda_runtime",
                "cudaStreamSynchronize",
                pid,
                tid,
                t + 2_000,
                sync_end - t - 2_000,
                {"External id": ext, "cbid": 131, "correlation": corr},
            )
        )
        ext += 1
        corr += 1
        t = sync_end + 20_000
        step_events.append(
            _x(
                us,
                "user_annotation",
                f"ProfilerStep#{step}",
                pid,
                tid,
                step_start,
                t - step_start,
                {"External id": ext},
            )
        )
        ext += 1
        step += 1
        emitted += len(step_events)
        yield from step_events


def write_large_trace(
    path: str | Path, target_events: int = 2_000_000, decimals: int = 3, steps: int | None = None
) -> Path:
    """Write about ``target_events`` events (gzip when the name ends in ``.gz``), their
    times in microseconds with ``decimals`` digits after the point (at least 3), in
    ``steps`` profiler steps (default: 200 operators per step)."""
    p = Path(path)
    header = {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": 0,
                "name": "NVIDIA A100-SXM4-80GB",
                "totalGlobalMem": 85899345920,
                "computeMajor": 8,
                "computeMinor": 0,
                "numSms": 108,
            }
        ],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
    }
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "wt", encoding="utf-8") as out:
        write_events(out, iter_large_events(target_events, decimals=decimals, steps=steps), header)
    return p
