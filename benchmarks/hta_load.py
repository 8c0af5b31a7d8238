"""Loads one trace with Holistic Trace Analysis and prints seconds and peak RSS as JSON.

Run with the interpreter of a throwaway virtual environment that has
``holistictraceanalysis`` installed (``bench_ingest.py --hta-python`` does this); it is
never a tracelens dependency.
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    trace = Path(sys.argv[1]).resolve()
    with tempfile.TemporaryDirectory(prefix="hta-bench-") as tmp:
        # HTA reads every trace in a folder; give it exactly this one.
        link = Path(tmp) / ("rank-0" + "".join(trace.suffixes[-2:]))
        link.symlink_to(trace)
        t0 = time.perf_counter()
        from hta.trace_analysis import TraceAnalysis

        analysis = TraceAnalysis(trace_dir=tmp)
        loaded = time.perf_counter()
        try:
            analysis.get_idle_time_breakdown(visualize=False)
        except Exception as exc:  # HTA's own failures are reported, not fatal
            print(f"idle breakdown failed: {exc}", file=sys.stderr)
        done = time.perf_counter()
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        json.dumps(
            {
                "load_s": loaded - t0,
                "idle_breakdown_s": done - loaded,
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


if __name__ == "__main__":
    main()
