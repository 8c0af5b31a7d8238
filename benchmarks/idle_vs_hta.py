"""Idle-time split: Holistic Trace Analysis (HTA) next to tracelens, on the corpus torch traces.

HTA (https://github.com/facebookresearch/HolisticTraceAnalysis) splits each *stream's* idle
time into ``host_wait`` (the kernel's runtime call started after the stream's previous
kernel ended: the CPU did not enqueue in time), ``kernel_wait`` (queued, and the gap is
below ``consecutive_kernel_delay``) and ``other`` (queued, longer: waiting on something
else). tracelens judges each *device* gap; its host-side causes (data loading,
synchronization, launch overhead, host compute, untraced host code) against its GPU-side
one (``gpu_dependency``: the next work was queued). Stream sums count time when another
stream ran, so the absolute figures differ; the shares are what compares.

HTA is not a dependency of tracelens. Run it with an HTA interpreter; the tracelens side
runs in a subprocess of the tracelens interpreter:

    python3 -m venv /tmp/hta && /tmp/hta/bin/pip install holistictraceanalysis
    /tmp/hta/bin/python benchmarks/idle_vs_hta.py --tracelens-python .venv/bin/python \
        [CORPUS_DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOST_SIDE = ("data_loading", "synchronization", "launch_overhead", "host_compute", "untraced")

_TRACELENS_SIDE = """
import json, sys
from ingest import load_trace
loaded = load_trace(sys.argv[1])
rows = loaded.con.execute(
    "SELECT cause, sum(end_ns - start_ns) FROM gaps GROUP BY cause").fetchall()
print(json.dumps({c: int(ns) for c, ns in rows}))
"""


def tracelens_split(python: str, path: Path) -> dict[str, int]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run(
        [python, "-c", _TRACELENS_SIDE, str(path)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def hta_split(path: Path) -> dict[str, float]:
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as d:
        # HTA reads a folder of rank files; a link keeps the corpus file where it is.
        name = path.name if path.name.endswith(".json.gz") else path.name + ".json.gz"
        os.symlink(path, Path(d) / name)
        analysis = TraceAnalysis(trace_files={0: name}, trace_dir=d)
        df = analysis.get_idle_time_breakdown(ranks=[0], visualize=False)[0]
    return {str(k): float(v) for k, v in df.groupby("idle_category")["idle_time"].sum().items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus", nargs="?", default=str(REPO.parent / "shared" / "corpus"))
    ap.add_argument("--tracelens-python", default=shutil.which("python3") or sys.executable)
    args = ap.parse_args()
    traces = sorted((Path(args.corpus) / "torch").rglob("*.json.gz"))
    print(
        f"{'trace':<42} {'HTA host_wait':>14} {'kernel_wait':>12} {'other':>10}"
        f" | {'tracelens host-side':>20} {'GPU-side':>10}"
    )
    for path in traces:
        tl = tracelens_split(args.tracelens_python, path)
        host = sum(v for k, v in tl.items() if k in HOST_SIDE)
        gpu = tl.get("gpu_dependency", 0)
        total = host + gpu or 1
        try:
            h = hta_split(path)
        except Exception as exc:  # HTA rejects some traces; say which and go on
            print(f"{path.name:<42} HTA failed: {exc!s:.60}")
            continue
        hta_total = sum(h.values()) or 1.0
        print(
            f"{path.relative_to(args.corpus)!s:<42}"
            f" {100 * h.get('host_wait', 0) / hta_total:>13.1f}%"
            f" {100 * h.get('kernel_wait', 0) / hta_total:>11.1f}%"
            f" {100 * h.get('other', 0) / hta_total:>9.1f}%"
            f" | {100 * host / total:>19.1f}% {100 * gpu / total:>9.1f}%"
            f"   (tracelens idle {host + gpu:,} ns: {tl})"
        )


if __name__ == "__main__":
    main()
