"""Loads one trace with AMD TraceLens and prints seconds and peak RSS as JSON.

Run with the interpreter of a throwaway virtual environment that has AMD TraceLens
installed from its public source (``bench_ingest.py --amd-python`` does this); it is never
a tracelens dependency. TraceLens builds its operator tree (``TreePerfAnalyzer.from_file``);
its full report links kernels to operators through ``ac2g`` flow events, so it runs only on
traces that have them (``report_s`` is null otherwise: a load-only comparison).
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path


def _has_flows(trace: Path) -> bool:
    import gzip

    opener = gzip.open if trace.suffix == ".gz" else open
    with opener(trace, "rb") as f:
        while block := f.read(8 * 1024 * 1024):
            if b'"ac2g"' in block:
                return True
    return False


def main() -> None:
    trace = Path(sys.argv[1]).resolve()
    flows = _has_flows(trace)
    t0 = time.perf_counter()
    from TraceLens.TreePerf import tree_perf

    tree_perf.TreePerfAnalyzer.from_file(str(trace))
    loaded = time.perf_counter()
    report_s = None
    if flows:
        from TraceLens.Reporting.generate_perf_report_pytorch import (
            generate_perf_report_pytorch,
        )

        with tempfile.TemporaryDirectory(prefix="amdtl-bench-") as out:
            start = time.perf_counter()
            try:
                generate_perf_report_pytorch(str(trace), output_csvs_dir=out)
                report_s = time.perf_counter() - start
            except Exception as exc:  # the peer's own failures are reported, not fatal
                print(f"report failed: {exc}", file=sys.stderr)
    print(
        json.dumps(
            {
                "load_s": loaded - t0,
                "report_s": report_s,
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


if __name__ == "__main__":
    main()
