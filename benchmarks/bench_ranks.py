"""A job of many large ranks: time and peak memory of ``analyze_job``, and its answer.

    python benchmarks/bench_ranks.py [--ranks 64] [--mb 100] [--in-flight 2] [--cache DIR]

Writes (once, cached under ``--cache``) ``--ranks`` Kineto traces of about ``--mb`` MB
each: every step each rank runs ``OPS`` small operators (an operator, its launch and its
kernel), one compute kernel and an all-reduce that ends at the same true instant on
every rank; each rank's file is on its own clock (rank × 1.234567 s ahead); rank
``ranks // 3`` reads its batch for 2 ms in the training process before each step. Then,
in a fresh process, ``analyze_job`` ingests and analyses every rank, ``--in-flight`` at
a time, and the benchmark prints the wall time, MB/s of JSON, peak RSS, and whether the
job found the slow rank, its cause and every clock offset (to 2 µs).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

OPS = 20
OFFSET_NS = 1_234_567_000
LOADER_NS = 2_000_000
SMALL_NS = 20_000
COMPUTE_NS = 3_000_000
TAIL_NS = 1_000_000
BASE = 1_700_000_000_000_000_000


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _step_ns(slow: bool) -> int:
    """Where the all-reduce starts on a rank, from the step's start."""
    return 100_000 + (LOADER_NS if slow else 0) + OPS * (SMALL_NS + 5_000) + COMPUTE_NS + 50_000


def _header(rank: int, ranks: int) -> str:
    props = {
        "id": rank,
        "name": "NVIDIA H100 80GB HBM3",
        "computeMajor": 9,
        "computeMinor": 0,
        "numSms": 132,
        "totalGlobalMem": 85_000_000_000,
        "warpSize": 32,
    }
    dist = {"backend": "nccl", "rank": rank, "world_size": ranks}
    head = json.dumps({"schemaVersion": 1, "distributedInfo": dist, "deviceProperties": [props]})
    return head[:-1] + ', "traceEvents": [\n'


def _launch(corr: int) -> str:
    return f'"External id": {corr}, "correlation": {corr}'


def _kernel(corr: int, dev: int, stream: int, threads: int = 0) -> str:
    shape = f', "grid": [1024, 1, 1], "block": [{threads}, 1, 1]' if threads else ""
    return f'{_launch(corr)}, "device": {dev}, "stream": {stream}{shape}'


def write_rank(path: Path, rank: int, ranks: int, steps: int, slow_rank: int) -> None:
    """One rank's trace, written as a stream (no event list in memory)."""
    period = _step_ns(True) + TAIL_NS + 100_000
    off = rank * OFFSET_NS
    pid, dev = 1000 + rank, rank
    corr = 0
    with path.open("w") as out:
        out.write(_header(rank, ranks))
        first = True

        def ev(name: str, cat: str, start: int, dur: int, tid: int, args: str) -> None:
            nonlocal first
            p = dev if cat == "kernel" else pid
            sep = "" if first else ",\n"
            out.write(
                f'{sep}{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": {p}, '
                f'"tid": {tid}, "ts": {_us(start + off)}, "dur": {_us(dur)}, "args": {{{args}}}}}'
            )
            first = False

        def op(name: str, corr: int, at: int) -> None:
            ev(name, "cpu_op", at - 15_000, 12_000, 1, f'"External id": {corr}')
            ev("cudaLaunchKernel", "cuda_runtime", at - 10_000, 5_000, 1, _launch(corr))

        loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
        for s in range(steps):
            t = BASE + s * period
            if rank == slow_rank:
                ev(loader, "user_annotation", t + 50_000, LOADER_NS, 1, "")
                t += LOADER_NS
            t += 100_000
            for _ in range(OPS):
                corr += 1
                op("aten::add", corr, t)
                elementwise = "void at::native::vectorized_elementwise_kernel<4>(int)"
                ev(elementwise, "kernel", t, SMALL_NS, 7, _kernel(corr, dev, 7, 128))
                t += SMALL_NS + 5_000
            corr += 1
            op("aten::mm", corr, t)
            gemm = "void expert_gemm_kernel<bf16>(int)"
            ev(gemm, "kernel", t, COMPUTE_NS, 7, _kernel(corr, dev, 7, 256))
            arrive = t + COMPUTE_NS + 50_000
            end = BASE + s * period + _step_ns(True) + TAIL_NS
            corr += 1
            op("nccl:all_reduce", corr, arrive)
            nccl = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long)"
            ev(nccl, "kernel", arrive, end - arrive, 13, _kernel(corr, dev, 13))
        out.write("\n]}\n")


def _steps_for(mb: int) -> int:
    # measured: one step of this shape is about 13.3 KB of JSON
    return max(10, mb * 1_000_000 // 13_300)


def ensure_job(cache: Path, ranks: int, mb: int) -> tuple[Path, int]:
    folder = cache / f"job_{ranks}x{mb}mb"
    slow = ranks // 3
    todo = [r for r in range(ranks) if not (folder / f"rank-{r}.json").exists()]
    if todo:
        folder.mkdir(parents=True, exist_ok=True)
        steps = _steps_for(mb)
        with ProcessPoolExecutor(max_workers=2) as pool:
            for _ in pool.map(_write_one, [(folder, r, ranks, steps, slow) for r in todo]):
                pass
    return folder, slow


def _write_one(args: tuple[Path, int, int, int, int]) -> None:
    folder, r, ranks, steps, slow = args
    tmp = folder / f".rank-{r}.json.part"
    write_rank(tmp, r, ranks, steps, slow)
    tmp.rename(folder / f"rank-{r}.json")


def _child(folder: str, in_flight: int, slow: int) -> None:
    from ingest.loader import rank_files
    from tracelens.ranks.job import analyze_job

    files = rank_files([Path(folder)])
    t0 = time.perf_counter()
    job = analyze_job(files, in_flight=in_flight)
    wall = time.perf_counter() - t0
    offsets = {o["rank"]: o["offset_ns"] for o in job["clock"]["offsets"]}
    late = job["stragglers"][0] if job["stragglers"] else None
    print(
        json.dumps(
            {
                "wall_s": wall,
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "ranks": len(files),
                "json_mb": sum(p.stat().st_size for _, p in files) / 1e6,
                "straggler": late and (late["rank"], late["cause"]),
                "straggler_right": bool(late)
                and (late["rank"], late["cause"]) == (slow, "data_loading"),
                "offsets_right": all(abs(offsets[r] - r * OFFSET_NS) <= 2_000 for r in offsets),
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--mb", type=int, default=100, help="approximate JSON size of each rank")
    ap.add_argument("--in-flight", type=int, default=2)
    ap.add_argument("--cache", type=Path, default=Path(".bench-cache"))
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(a.child[0], int(a.child[1]), int(a.child[2]))
        return
    t0 = time.perf_counter()
    folder, slow = ensure_job(a.cache, a.ranks, a.mb)
    print(f"job: {folder} ({time.perf_counter() - t0:.0f} s to write or find)", flush=True)
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(folder), str(a.in_flight), str(slow)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"{r['ranks']} ranks, {r['json_mb']:,.0f} MB of JSON, {a.in_flight} in flight: "
        f"{r['wall_s']:.1f} s ({r['json_mb'] / r['wall_s']:.0f} MB/s), peak RSS "
        f"{r['peak_rss_mb']:,.0f} MB; straggler {r['straggler']} "
        f"({'right' if r['straggler_right'] else 'WRONG'}), clock offsets "
        f"{'right' if r['offsets_right'] else 'WRONG'}"
    )


if __name__ == "__main__":
    main()
