"""Start-up cost of the command line: a tiny trace, so nearly all of it is imports and set-up.

    python benchmarks/bench_startup.py [--runs 10] [--trace PATH]

Runs each command ``--runs`` times in a fresh interpreter and prints the median and best
wall time, the median and best CPU time (user + system: steadier than wall time on a
shared machine) and the peak resident set size (the kernel's ``ru_maxrss`` of that
process, what ``/usr/bin/time -v`` calls "Maximum resident set size"). Without
``--trace`` it writes a trace of two kernel launches. Targets: ``tracelens analyze`` on a
tiny trace in at most 0.25 s and 80 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tiny_trace(path: Path) -> Path:
    """Two kernels, each launched by a runtime call on one host thread."""
    events = []
    for i, ts in enumerate((1000, 1200), 1):
        common = {"correlation": i, "External id": i}
        events.append(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": ts, "dur": 5, "args": common}
        )  # fmt: skip
        events.append(
            {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7,
             "ts": ts + 10, "dur": 100, "args": {**common, "device": 0, "stream": 7}}
        )  # fmt: skip
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def measure(argv: list[str], runs: int, env: dict[str, str]) -> dict[str, float]:
    """Median/best wall seconds, median CPU seconds and peak RSS (MB) over ``runs`` runs.

    One run more than asked comes first and is not counted: it compiles the bytecode an
    installed package would already have.
    """
    walls, cpus, rss = [], [], []
    for _ in range(runs + 1):
        t = time.perf_counter()
        with open(os.devnull, "wb") as sink:
            proc = subprocess.Popen(argv, stdout=sink, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        walls.append(time.perf_counter() - t)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(argv)} failed")
        cpus.append(usage.ru_utime + usage.ru_stime)
        rss.append(usage.ru_maxrss / 1024)  # KiB on Linux
    walls, cpus, rss = walls[1:], cpus[1:], rss[1:]
    return {
        "wall_median_s": round(statistics.median(walls), 3),
        "wall_best_s": round(min(walls), 3),
        "cpu_median_s": round(statistics.median(cpus), 3),
        "cpu_best_s": round(min(cpus), 3),
        "rss_max_mb": round(max(rss), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--trace", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = args.trace or tiny_trace(Path(tmp) / "tiny.json")
        # Bytecode is cached as in an installed package (even where the environment turns
        # caching off), under a throwaway prefix so no source tree gets __pycache__ folders.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(Path(tmp) / "pycache"))
        py = sys.executable
        cases = {
            "python -c pass": [py, "-c", "pass"],
            "import tracelens.cli": [py, "-c", "import tracelens.cli"],
            "tracelens --help": [py, "-m", "tracelens.cli", "--help"],
            "analyze --format json": [py, "-m", "tracelens.cli", "analyze", str(trace), "--format",
                                      "json"],
            "analyze (text)": [py, "-m", "tracelens.cli", "analyze", str(trace)],
        }  # fmt: skip
        for name, argv in cases.items():
            print(f"{name:24s} {json.dumps(measure(argv, args.runs, env))}", flush=True)


if __name__ == "__main__":
    main()
